#include "support/fake_kube/self_signed.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>

namespace shoal::testing {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(FILE* f) const { std::fclose(f); }
};

bool AddExtension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, const_cast<char*>(value)));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

}  // namespace

Status WriteSelfSignedCertificate(const std::string& cert_file, const std::string& key_file) {
  std::unique_ptr<EVP_PKEY, Free> key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal("cannot make a P-256 key");
  std::unique_ptr<X509, Free> cert(X509_new());
  if (!cert) return Status::Internal("cannot make a certificate");
  X509_set_version(cert.get(), 2);  // v3
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("shoal-test-cluster"), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), name);
  if (!AddExtension(cert.get(), NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost") ||
      !AddExtension(cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !AddExtension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign") ||
      !AddExtension(cert.get(), NID_ext_key_usage, "serverAuth")) {
    return Status::Internal("cannot add the certificate's extensions");
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return Status::Internal("cannot sign the certificate");
  }
  {
    std::unique_ptr<FILE, Free> f(std::fopen(key_file.c_str(), "w"));
    if (!f || ::chmod(key_file.c_str(), 0600) != 0 ||
        PEM_write_PrivateKey(f.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
      return Status::IoError("cannot write " + key_file);
    }
  }
  std::unique_ptr<FILE, Free> f(std::fopen(cert_file.c_str(), "w"));
  if (!f || PEM_write_X509(f.get(), cert.get()) != 1) {
    return Status::IoError("cannot write " + cert_file);
  }
  return Status::Ok();
}

}  // namespace shoal::testing
