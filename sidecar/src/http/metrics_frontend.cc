#include "http/metrics_frontend.h"

#include "http/http_util.h"
#include "shoal/common/metrics.h"

namespace shoal::http {

MetricsFrontend::MetricsFrontend(std::string host, uint16_t port,
                                 std::vector<std::shared_ptr<prometheus::Collectable>> collectables,
                                 const std::atomic<bool>& ready)
    : host_(std::move(host)), port_(port), collectables_(std::move(collectables)), ready_(ready) {}

MetricsFrontend::~MetricsFrontend() { Close(); }

Status MetricsFrontend::Open() {
  listener_ = std::make_unique<web::http::experimental::listener::http_listener>(
      "http://" + host_ + ":" + std::to_string(port_));
  listener_->support([this](web::http::http_request req) {
    const auto path = PathSegments(req);
    const std::string p = path.size() == 1 ? path[0] : "";
    if (p == "metrics") {
      try {
        web::http::http_response resp(web::http::status_codes::OK);
        resp.set_body(metrics::Serialize(collectables_), "text/plain; version=0.0.4");
        req.reply(resp).then([](pplx::task<void> t) {
          try {
            t.get();
          } catch (...) {
          }
        });
      } catch (...) {
      }
    } else if (p == "healthz") {
      ReplyJson(req, 200, "{\"status\":\"ok\"}");
    } else if (p == "readyz") {
      const bool ok = ready_.load();
      ReplyJson(req, ok ? 200 : 503, ok ? "{\"status\":\"ok\"}" : "{\"status\":\"not ready\"}");
    } else {
      ReplyError(req, Status::NotFound("the metrics port serves /metrics, /healthz, /readyz"));
    }
  });
  return OpenListener(*listener_);
}

void MetricsFrontend::Close() {
  if (!listener_) return;
  try {
    listener_->close().wait();
  } catch (...) {
  }
  listener_.reset();
}

}  // namespace shoal::http
