// RawHttpConnection: a minimal blocking HTTP/1.1 keep-alive client over one TCP connection, for
// paths that must spend as little CPU as possible per request: the load generators (the ingest
// benchmark shares the machine with the sidecar it measures) and a follower's replication fetch
// (one thread per leader, a request per round; cpprestsdk's client costs several thread
// hand-offs per request). It speaks only what the sidecar answers: Content-Length bodies, no
// chunked encoding. Everything else goes through cpprestsdk.
//
// One connection per thread; not thread-safe. Reconnects on the next call after an error.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "shoal/common/status.h"
#include "shoal/common/tls.h"

typedef struct ssl_st SSL;

namespace shoal {

struct RawHttpOptions {
  // How long a connect, a send or a wait for the next bytes of the answer may take (0: no
  // limit); past it the call fails Unavailable and the connection is dropped.
  std::chrono::milliseconds timeout{0};
  // The largest answer body taken; a larger one fails the call (and drops the connection), so
  // that a peer's answer never decides how much memory is allocated.
  size_t max_body = size_t{1} << 30;
  // Header lines sent with every request, each ending in "\r\n" (e.g. an Authorization line).
  std::string headers;
  // The Content-Type sent with every request.
  std::string content_type = "application/json";
  // TLS to the server (its certificate checked against the CA and the server name, this
  // client's presented); the files are read again at each connect.
  TlsClientFiles tls;
};

class RawHttpConnection {
 public:
  // `host`: an IPv4 or IPv6 address or a name.
  RawHttpConnection(std::string host, uint16_t port, RawHttpOptions options = {})
      : host_(std::move(host)), port_(port), opts_(std::move(options)) {}
  ~RawHttpConnection();
  RawHttpConnection(const RawHttpConnection&) = delete;
  RawHttpConnection& operator=(const RawHttpConnection&) = delete;

  // Sends one request and reads the answer. `body` may be empty. Returns the status code.
  Result<int> Request(std::string_view method, std::string_view path, std::string_view body,
                      std::string* response_body);

 private:
  Status Connect();
  // The TLS handshake on the connected socket (opts_.tls on).
  Status StartTls();
  void Disconnect();
  // Sends or receives over TLS when it is on, else over the socket; as send(2) and recv(2).
  ssize_t Send(const char* data, size_t n);
  ssize_t Recv(char* buf, size_t n);
  // Unavailable naming `what` (and the timeout, when it ran out), after dropping the connection.
  Status Broken(const std::string& what);

  const std::string host_;
  const uint16_t port_;
  const RawHttpOptions opts_;
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::string head_;  // request head scratch
  std::string in_;    // unread bytes from the socket
};

}  // namespace shoal
