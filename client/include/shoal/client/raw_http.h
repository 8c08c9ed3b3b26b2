// RawHttpConnection: a minimal blocking HTTP/1.1 keep-alive client over one TCP connection, for
// load generators that must spend as little CPU as possible per request (the ingest benchmark
// shares the machine with the sidecar it measures). It speaks only what the sidecar answers:
// Content-Length bodies, no chunked encoding. Everything else goes through ShoalClient
// (cpprestsdk).
//
// One connection per thread; not thread-safe. Reconnects on the next call after an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shoal/common/status.h"

namespace shoal::client {

class RawHttpConnection {
 public:
  RawHttpConnection(std::string host, uint16_t port) : host_(std::move(host)), port_(port) {}
  ~RawHttpConnection();
  RawHttpConnection(const RawHttpConnection&) = delete;
  RawHttpConnection& operator=(const RawHttpConnection&) = delete;

  // Sends one request and reads the answer. `body` may be empty. Returns the status code.
  Result<int> Request(std::string_view method, std::string_view path, std::string_view body,
                      std::string* response_body);

 private:
  Status Connect();
  void Disconnect();

  const std::string host_;
  const uint16_t port_;
  int fd_ = -1;
  std::string head_;  // request head scratch
  std::string in_;    // unread bytes from the socket
};

}  // namespace shoal::client
