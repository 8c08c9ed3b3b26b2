// AdminFrontend: the admin plane on its own port. Every request needs `Authorization: Bearer
// <token>`; a missing or wrong token is answered 401 and changes nothing. The map-changing calls
// (install a map, which also retires partitions it no longer lists; prepare; seal; handoff of
// producer state and commits) carry the change protocol; GET /v1/admin/partitions reports every
// partition held here with its load sketch for split decisions. See docs/admin-api.md.
//
// Lifecycle as DataFrontend. Thread-safe. Owned by main.
#pragma once

#include <cpprest/http_msg.h>

#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "broker/sidecar_probe.h"
#include "broker/topic.h"
#include "http/guarded_listener.h"

namespace shoal::http {

struct AdminFrontendOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8081;
  std::string token;
  ListenerLimits http;  // its body limit is the admin plane's own (64 MiB: a handoff)
  ByteBudget* answers = nullptr;  // bodies are not counted: a request without the token is
                                  // refused before its body is read
  // TLS (GuardedListener). With a client CA the port is TLS only, and only the callers named in
  // `callers` (the topic's peers and its operator) are admitted, token or not.
  TlsFiles tls;
  std::vector<std::string> callers;
};

class AdminFrontend {
 public:
  AdminFrontend(AdminFrontendOptions options, broker::Topic& topic, broker::SidecarProbe& probe);
  ~AdminFrontend();
  AdminFrontend(const AdminFrontend&) = delete;
  AdminFrontend& operator=(const AdminFrontend&) = delete;

  Status Open();
  void Close();
  uint16_t port() const { return listener_ ? listener_->port() : 0; }
  // Wakes fetches of followers parked here: events were appended to a partition led here.
  void NotifyAppend();

 private:
  // A follower's fetch that found nothing new, held until something is appended or its wait
  // runs out (so that a follower's long-poll holds no thread).
  struct ParkedFetch {
    web::http::http_request request;
    broker::FetchRequest fetch;
    std::chrono::steady_clock::time_point deadline;
  };
  void HandleFetch(const web::http::http_request& req, const std::string& body);
  // Answers 200 with `body` (and counts it).
  void ReplyOk(const web::http::http_request& req, std::string body, const char* content_type);
  void ReplyFetch(const web::http::http_request& req, std::string body);
  void FetchPollLoop();

  void Handle(web::http::http_request req);
  bool Authorized(const web::http::http_request& req) const;

  const AdminFrontendOptions opts_;
  broker::Topic& topic_;
  broker::SidecarProbe& probe_;
  static constexpr size_t kMaxBodyBytes = size_t{64} << 20;
  std::unique_ptr<GuardedListener> listener_;

  std::mutex fetch_mu_;
  std::condition_variable fetch_cv_;
  std::list<ParkedFetch> parked_;  // guarded by fetch_mu_
  bool appended_ = false;          // guarded by fetch_mu_
  bool stopping_ = false;          // guarded by fetch_mu_
  std::thread fetch_poller_;
};

}  // namespace shoal::http
