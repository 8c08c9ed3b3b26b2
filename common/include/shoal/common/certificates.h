// Certificates of a topic's own CA, made with OpenSSL: the CA (kept in the operator's Secret
// <topic>-ca, never mounted in a pod), the pods' certificate (named PeerName(topic), for server
// and client use), the operator's client certificate (OperatorName(topic)) and a client
// certificate for each principal the topic grants (client use only, so that none can pass for a
// pod). Keys are ECDSA P-256. See docs/security.md. Also for `shoal bench ingest --tls`, which
// makes a CA of its own.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "shoal/common/status.h"
#include "shoal/common/tls.h"

namespace shoal {

struct CertifiedKey {
  std::string cert_pem;
  std::string key_pem;
};

// A self-signed CA named `common_name`, valid for `valid`.
Result<CertifiedKey> MakeCa(const std::string& common_name, std::chrono::hours valid);

// A certificate of `ca` for `common_name`, with the DNS names `dns` (for a server's name check)
// and extended key usage clientAuth, plus serverAuth when `server`. Valid from an hour ago (clock
// skew) for `valid`.
Result<CertifiedKey> IssueCertificate(const CertifiedKey& ca, const std::string& common_name,
                                      const std::vector<std::string>& dns, bool server,
                                      std::chrono::hours valid);

// When a PEM certificate stops being valid, and whether `ca_pem` signed it.
Result<std::chrono::system_clock::time_point> NotAfter(const std::string& cert_pem);
bool SignedBy(const std::string& cert_pem, const std::string& ca_pem);

// A CA made for one run, a sidecar's certificate (the topic's peer name) and a client's named
// `client`, written under `dir` (ca.crt, server.crt, server.key, client.crt, client.key): a
// local sidecar that requires TLS, for the benchmarks.
struct LocalPki {
  TlsClientFiles client;                  // the client's files
  std::vector<std::string> sidecar_args;  // --tls-cert, --tls-key, --tls-client-ca
};
Result<LocalPki> WriteLocalPki(const std::string& dir, const std::string& topic,
                               const std::string& client);

}  // namespace shoal
