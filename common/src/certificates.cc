#include "shoal/common/certificates.h"

#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>

namespace shoal {
namespace {

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

Status Failed(const std::string& what) {
  char buf[256] = "";
  if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
  return Status::Internal(what + (buf[0] ? std::string(": ") + buf : ""));
}

Key NewKey() { return Key(EVP_EC_gen("P-256")); }

Cert ReadCert(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

Key ReadKey(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

Result<CertifiedKey> Pem(X509* cert, EVP_PKEY* key) {
  Bio c(BIO_new(BIO_s_mem())), k(BIO_new(BIO_s_mem()));
  if (!c || !k || PEM_write_bio_X509(c.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(k.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Failed("cannot write PEM");
  }
  auto text = [](BIO* b) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(b, &data);
    return std::string(data, static_cast<size_t>(n));
  };
  return CertifiedKey{text(c.get()), text(k.get())};
}

bool AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named `cn`, valid for `valid` from an hour ago, with a random serial.
Cert Skeleton(EVP_PKEY* key, const std::string& cn, std::chrono::hours valid) {
  Cert cert(X509_new());
  if (!cert) return nullptr;
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return nullptr;
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  ASN1_INTEGER* s = bn ? BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) : nullptr;
  BN_free(bn);
  if (s == nullptr || X509_set_version(cert.get(), 2) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(valid.count()) * 3600) ==
          nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return nullptr;
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return nullptr;
  }
  return cert;
}

}  // namespace

Result<CertifiedKey> MakeCa(const std::string& common_name, std::chrono::hours valid) {
  Key key = NewKey();
  if (!key) return Failed("cannot make a key");
  Cert cert = Skeleton(key.get(), common_name, valid);
  if (!cert || X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
      !AddExt(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExt(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash") ||
      X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return Failed("cannot make the CA certificate " + common_name);
  }
  return Pem(cert.get(), key.get());
}

Result<CertifiedKey> IssueCertificate(const CertifiedKey& ca, const std::string& common_name,
                                      const std::vector<std::string>& dns, bool server,
                                      std::chrono::hours valid) {
  Cert ca_cert = ReadCert(ca.cert_pem);
  Key ca_key = ReadKey(ca.key_pem);
  if (!ca_cert || !ca_key) return Status::InvalidArgument("the CA's certificate or key is not PEM");
  Key key = NewKey();
  if (!key) return Failed("cannot make a key");
  Cert cert = Skeleton(key.get(), common_name, valid);
  std::string san;
  for (const auto& d : dns) san += (san.empty() ? "DNS:" : ",DNS:") + d;
  if (!cert || X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) != 1 ||
      !AddExt(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExt(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExt(cert.get(), ca_cert.get(), NID_ext_key_usage,
              server ? "serverAuth,clientAuth" : "clientAuth") ||
      (!san.empty() && !AddExt(cert.get(), ca_cert.get(), NID_subject_alt_name, san)) ||
      X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) {
    return Failed("cannot issue a certificate for " + common_name);
  }
  return Pem(cert.get(), key.get());
}

Result<std::chrono::system_clock::time_point> NotAfter(const std::string& cert_pem) {
  Cert cert = ReadCert(cert_pem);
  if (!cert) return Status::InvalidArgument("not a PEM certificate");
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) != 1) {
    return Status::InvalidArgument("a certificate without a valid end");
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

bool SignedBy(const std::string& cert_pem, const std::string& ca_pem) {
  Cert cert = ReadCert(cert_pem), ca = ReadCert(ca_pem);
  if (!cert || !ca) return false;
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  return ca_key != nullptr && X509_verify(cert.get(), ca_key) == 1;
}

Result<LocalPki> WriteLocalPki(const std::string& dir, const std::string& topic,
                               const std::string& client) {
  const auto valid = std::chrono::hours(24);
  auto ca = MakeCa("shoal-local-ca", valid);
  if (!ca.ok()) return ca.status();
  auto server = IssueCertificate(*ca, PeerName(topic), {PeerName(topic)}, true, valid);
  if (!server.ok()) return server.status();
  auto caller = IssueCertificate(*ca, client, {}, false, valid);
  if (!caller.ok()) return caller.status();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& [name, text] :
       {std::pair<const char*, const std::string*>{"ca.crt", &ca->cert_pem},
        {"server.crt", &server->cert_pem},
        {"server.key", &server->key_pem},
        {"client.crt", &caller->cert_pem},
        {"client.key", &caller->key_pem}}) {
    std::ofstream f(dir + "/" + name);
    f << *text;
    if (!f) return Status::IoError("cannot write " + dir + "/" + name);
  }
  return LocalPki{{dir + "/ca.crt", dir + "/client.crt", dir + "/client.key", PeerName(topic)},
                  {"--tls-cert", dir + "/server.crt", "--tls-key", dir + "/server.key",
                   "--tls-client-ca", dir + "/ca.crt"}};
}

}  // namespace shoal
