// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include "shoal/control/control_frontend.h"

#include <cpprest/http_listener.h>

#include "shoal/common/json.h"
#include "shoal/common/metrics.h"

namespace shoal::control {

namespace {

void Reply(web::http::http_request& req, int code, const std::string& body,
           const std::string& type) {
  try {
    web::http::http_response resp(static_cast<web::http::status_code>(code));
    resp.set_body(body, type);
    req.reply(resp).then([](pplx::task<void> t) {
      try {
        t.get();
      } catch (...) {  // the client went away
      }
    });
  } catch (...) {
  }
}

}  // namespace

ControlFrontend::ControlFrontend(std::string host, uint16_t port, ControlLoop& loop)
    : host_(std::move(host)), port_(port), loop_(loop) {}

ControlFrontend::~ControlFrontend() { Close(); }

Status ControlFrontend::Open() {
  const std::string uri = "http://" + host_ + ":" + std::to_string(port_);
  try {
    listener_ = std::make_unique<web::http::experimental::listener::http_listener>(uri);
    listener_->support([this](web::http::http_request req) {
      const std::string path = req.relative_uri().path();
      if (req.method() != web::http::methods::GET) {
        Reply(req, 405, json::ErrorBody("method_not_allowed", "only GET is served here"),
              "application/json");
      } else if (path == "/metrics") {
        Reply(req, 200, metrics::Serialize({loop_.registry()}), "text/plain; version=0.0.4");
      } else if (path == "/status") {
        Reply(req, 200, loop_.StatusJson(), "application/json");
      } else if (path == "/healthz" || path == "/readyz") {
        Reply(req, 200, "{\"status\":\"ok\"}", "application/json");
      } else {
        Reply(req, 404,
              json::ErrorBody("not_found", "this port serves /metrics, /status, /healthz, /readyz"),
              "application/json");
      }
    });
    listener_->open().wait();
  } catch (const std::exception& e) {
    listener_.reset();
    return Status::Unavailable("cannot listen on " + uri + ": " + e.what());
  }
  return Status::Ok();
}

void ControlFrontend::Close() {
  if (!listener_) return;
  try {
    listener_->close().wait();
  } catch (...) {
  }
  listener_.reset();
}

}  // namespace shoal::control
