// TLS on the client side of Shoal's HTTP calls: a sidecar calling its peers, the operator calling
// a topic's admin plane, a producer or consumer outside the topic's pods.
//
// A topic's pods are addressed by IP (their addresses come from the partition map), which no
// certificate issued before a pod starts can name. So a client checks the server's certificate
// against the topic's own CA and against one name that every pod of the topic carries
// (`server_name`: "shoal-peer.<topic>", see docs/security.md), sent as the TLS server name and
// the HTTP Host. Certificates are read from their files each time a connection is made, so a
// certificate rotated on disk serves the next connection without a restart.
#pragma once

#include <string>

#include "shoal/common/status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace shoal {

struct TlsClientFiles {
  std::string ca_file;      // PEM: the CA the server's certificate must chain to; empty: no TLS
  std::string cert_file;    // PEM: this client's certificate (chain); empty: none presented
  std::string key_file;     // PEM: its private key
  std::string server_name;  // the name the server's certificate must carry

  bool enabled() const { return !ca_file.empty(); }
  // Set together, or not at all: a message naming what is missing, or empty.
  std::string Problem() const;
};

// The name every pod of `topic` carries in its certificate (peers and the topic's clients check
// it) and is known by as a caller (the access check gives it every right, forwarding included).
std::string PeerName(const std::string& topic);
// The name of the operator's certificate for `topic`: with the peer name, the only callers the
// admin plane takes where TLS is required. (Names of principals a topic grants have no dot, so
// none can be one of these.)
std::string OperatorName(const std::string& topic);

// Loads the CA (verify peer), the client certificate and key into `ctx`, and sets TLS 1.2 as the
// least version. The server name is checked per connection (SSL_set1_host).
Status ConfigureTlsClient(SSL_CTX* ctx, const TlsClientFiles& files);

}  // namespace shoal
