// GuardedListener: the sidecar's HTTP/1.1 listener, below the handlers, in place of cpprestsdk's.
//
// cpprestsdk's listener reads a request's headers without a cap or a time limit, keeps every
// connection it is offered and holds every answer until the client takes it: one client could
// grow a sidecar by the size of the header it sent, hold its descriptors with half-sent requests
// until the probes stopped answering, or pin memory with answers it never read. This listener
// reads each request with Boost.Beast and gives the handlers the same cpprestsdk http_request as
// before (its body complete), so that what it enforces holds before any handler runs:
//   - the request line and headers are at most max_header_bytes (431 beyond) and arrive within
//     header_timeout of their first byte (408); a connection between requests is closed after
//     idle_timeout;
//   - `admit` sees the headers before a byte of the body is read (the admin plane refuses a
//     request without its token there); the body is at most max_body_bytes (413; what the
//     client is still sending is read and dropped up to a discard limit, so that it gets its
//     answer instead of a reset) and arrives within body_timeout of its headers (400);
//   - at most max_connections per port: a connection over the cap closes the connection that
//     has waited longest for a request (never one whose request is in progress), so that half-
//     open connections never keep a client out; with every connection busy it is answered 503;
//   - the bodies being read and handled count in a request budget: a request whose body would
//     pass it is refused 503 before its body is read (Kafka's queued.max.request.bytes), so that
//     many slow bodies at once cannot hold the memory one may;
//   - an answer the client does not take within write_timeout closes its connection, and the
//     bytes of answers being written count in an answer budget, which the handlers consult
//     before they build a large answer (DataFrontend refuses a consume with 503 while it is
//     spent).
// Refusals are JSON ({"error","reason"}) and close the connection; `on_refused` counts them.
//
// Connections run on cpprestsdk's thread pool (as its own listener's did), one strand each; a
// handler is called on it and answers with req.reply from any thread. Thread-safe.
#pragma once

#include <cpprest/http_msg.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "shoal/common/status.h"

namespace shoal::http {

// Bytes held for requests or answers, against a limit: of answers written to clients that have
// not taken them yet (shared by a process's listeners), or of request bodies being read and
// handled.
class ByteBudget {
 public:
  explicit ByteBudget(size_t limit_bytes) : limit_(limit_bytes) {}
  // Spent: handlers refuse to build more large answers until clients take what is held.
  bool Spent() const { return held_.load(std::memory_order_relaxed) >= limit_; }
  size_t held() const { return held_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_; }
  void Take(size_t n) { held_.fetch_add(n, std::memory_order_relaxed); }
  // Takes n if it fits, or if nothing is held (so that one request over the whole budget is
  // still served, alone); false otherwise.
  bool TryTake(size_t n) {
    size_t held = held_.load(std::memory_order_relaxed);
    while (held == 0 || held + n <= limit_) {
      if (held_.compare_exchange_weak(held, held + n, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  void Give(size_t n) { held_.fetch_sub(n, std::memory_order_relaxed); }

 private:
  const size_t limit_;
  std::atomic<size_t> held_{0};
};

struct ListenerLimits {
  size_t max_header_bytes = 64 << 10;
  size_t max_body_bytes = 8 << 20;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds write_timeout{30000};
  size_t max_connections = 1024;
};

// TLS on a port: PEM files of its certificate (chain) and key and, for clients to prove who they
// are, the CA their certificates must be signed by. The files are read again when they change.
struct TlsFiles {
  std::string cert_file;  // empty: no TLS
  std::string key_file;
  std::string client_ca_file;  // empty: no client certificate asked for

  // A client CA given: every caller shows a certificate of it, and the port is TLS only.
  bool mutual() const { return !client_ca_file.empty(); }
};

// The request header that carries the common name of the TLS client's certificate to handlers
// (a client's own header of that name is removed).
inline constexpr const char* kPrincipalHeader = "X-Shoal-Principal";

struct ListenerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 0;  // 0: the system picks one (port())
  ListenerLimits limits;
  ByteBudget* answers = nullptr;   // null: answers are not counted
  ByteBudget* requests = nullptr;  // null: request bodies are not counted
  // With a certificate, the port speaks TLS to clients that start a TLS handshake and plain HTTP
  // to those that start with a request. With a client CA too (tls.mutual()), no plain HTTP: a
  // connection that starts with a request is answered 403 tls_required and closed (the pod's own
  // containers use the plain port bound to the pod's loopback instead).
  TlsFiles tls;
  // Called with a request whose headers are in and whose body is not read yet; a refusal is
  // answered (HttpCode of its status) without reading the body. Null: every request is admitted.
  std::function<Status(const web::http::http_request&)> admit;
  // Called for every refusal made here (431, 408, 413, 400, 503, and admit's), with its code and
  // its error name.
  std::function<void(int code, const std::string& error)> on_refused;
};

class GuardedListener {
 public:
  using Handler = std::function<void(web::http::http_request)>;

  GuardedListener(ListenerOptions options, Handler handler);
  ~GuardedListener();
  GuardedListener(const GuardedListener&) = delete;
  GuardedListener& operator=(const GuardedListener&) = delete;

  // Binds and starts accepting; the error says what could not be bound.
  Status Open();
  // Stops accepting, closes every connection and waits (bounded) for handlers being called to
  // return: no handler is called once Close returns. Answers given later go nowhere.
  void Close();
  // The port bound (the one chosen when options.port is 0); 0 before Open.
  uint16_t port() const { return bound_port_.load(); }
  // Connections open now.
  size_t connections() const;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::atomic<uint16_t> bound_port_{0};
};

}  // namespace shoal::http
