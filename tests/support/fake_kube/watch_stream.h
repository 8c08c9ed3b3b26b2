// WatchStream: a blocking reader of one Kubernetes watch (or any chunked HTTP/1.1 answer) over
// its own TCP connection, for tests: it hands out the stream one line (one event) at a time as
// it arrives, with a deadline on every read, which cpprestsdk's client cannot do (its body
// stream has no timed read). Answers with Content-Length (errors) are read whole.
//
// Lifecycle: Open connects, sends the request and reads the head; the destructor closes the
// connection. One thread; not thread-safe. Owned by the test.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "shoal/common/status.h"

namespace shoal::testing {

class WatchStream {
 public:
  // GET `path_and_query` from host:port, with `Authorization: Bearer token` unless empty.
  static Result<std::unique_ptr<WatchStream>> Open(const std::string& host, uint16_t port,
                                                   const std::string& path_and_query,
                                                   const std::string& token,
                                                   std::chrono::milliseconds timeout);
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  int status() const { return status_; }

  enum class Next { kLine, kEnd, kTimeout };
  // The next line without its '\n' (kLine); kEnd once the server ended the stream and every
  // line was read; kTimeout when nothing complete arrived within `timeout`.
  Next Read(std::string* line, std::chrono::milliseconds timeout);
  // Reads until the end of the answer (a non-chunked one: the whole body).
  Result<std::string> ReadAll(std::chrono::milliseconds timeout);

 private:
  explicit WatchStream(int fd) : fd_(fd) {}
  // Reads more bytes into raw_ until the deadline; false on timeout, sets eof_ at the end.
  bool Fill(std::chrono::steady_clock::time_point deadline);
  // Moves complete chunks from raw_ to body_; sets done_ after the last chunk.
  void Decode();

  int fd_ = -1;
  int status_ = 0;
  bool chunked_ = false;
  size_t content_length_ = 0;
  bool has_length_ = false;  // without Content-Length or chunks the body ends at EOF
  bool eof_ = false;         // the socket is closed
  bool done_ = false;        // the body is complete
  std::string raw_;          // bytes read and not yet decoded
  std::string body_;         // decoded body not yet handed out
};

}  // namespace shoal::testing
