#include "shoal/common/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace shoal {

std::string TlsClientFiles::Problem() const {
  if (!enabled()) {
    if (!cert_file.empty() || !key_file.empty()) return "a client certificate needs the CA file";
    return "";
  }
  if (cert_file.empty() != key_file.empty()) return "a certificate and its key go together";
  if (server_name.empty()) return "TLS needs the server's name (shoal-peer.<topic>)";
  return "";
}

std::string PeerName(const std::string& topic) { return "shoal-peer." + topic; }
std::string OperatorName(const std::string& topic) { return "shoal-operator." + topic; }

namespace {
Status OpenSslError(const std::string& what) {
  std::string reason;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!reason.empty()) reason += "; ";
    reason += buf;
  }
  return Status::InvalidArgument(what + (reason.empty() ? "" : ": " + reason));
}
}  // namespace

Status ConfigureTlsClient(SSL_CTX* ctx, const TlsClientFiles& files) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Only the given CA: the system's CAs (which a client library may have loaded) vouch for no
  // topic's pods.
  X509_STORE* store = X509_STORE_new();
  if (store == nullptr) return OpenSslError("cannot make a certificate store");
  SSL_CTX_set_cert_store(ctx, store);
  if (SSL_CTX_load_verify_locations(ctx, files.ca_file.c_str(), nullptr) != 1) {
    return OpenSslError("cannot load the CA file " + files.ca_file);
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!files.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
      return OpenSslError("cannot load the certificate " + files.cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return OpenSslError("cannot load the key " + files.key_file);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return OpenSslError(files.key_file + " is not the key of " + files.cert_file);
    }
  }
  return Status::Ok();
}

}  // namespace shoal
