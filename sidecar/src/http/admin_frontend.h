// AdminFrontend: the admin plane on its own port. Every request needs `Authorization: Bearer
// <token>`; a missing or wrong token is answered 401 and changes nothing. The map-changing calls
// (install a map, which also retires partitions it no longer lists; prepare; seal; handoff of
// producer state and commits) carry the change protocol; GET /v1/admin/partitions reports every
// partition held here with its load sketch for split decisions. See docs/admin-api.md.
//
// Lifecycle as DataFrontend. Thread-safe. Owned by main.
#pragma once

#include <cpprest/http_listener.h>

#include <memory>
#include <string>

#include "broker/sidecar_probe.h"
#include "broker/topic.h"

namespace shoal::http {

struct AdminFrontendOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8081;
  std::string token;
};

class AdminFrontend {
 public:
  AdminFrontend(AdminFrontendOptions options, broker::Topic& topic, broker::SidecarProbe& probe);
  ~AdminFrontend();
  AdminFrontend(const AdminFrontend&) = delete;
  AdminFrontend& operator=(const AdminFrontend&) = delete;

  Status Open();
  void Close();

 private:
  void Handle(web::http::http_request req);
  bool Authorized(const web::http::http_request& req) const;

  const AdminFrontendOptions opts_;
  broker::Topic& topic_;
  broker::SidecarProbe& probe_;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
};

}  // namespace shoal::http
