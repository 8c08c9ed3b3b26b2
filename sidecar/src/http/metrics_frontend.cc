#include "http/metrics_frontend.h"

#include "http/http_util.h"
#include "shoal/common/metrics.h"

namespace shoal::http {

MetricsFrontend::MetricsFrontend(std::string host, uint16_t port,
                                 std::vector<std::shared_ptr<prometheus::Collectable>> collectables,
                                 const std::atomic<bool>& ready, ListenerLimits limits)
    : host_(std::move(host)),
      port_(port),
      collectables_(std::move(collectables)),
      ready_(ready),
      limits_(limits) {}

MetricsFrontend::~MetricsFrontend() { Close(); }

Status MetricsFrontend::Open() {
  ListenerOptions lo;
  lo.host = host_;
  lo.port = port_;
  lo.limits = limits_;
  lo.limits.max_body_bytes = 64 << 10;  // nothing here takes a body
  listener_ = std::make_unique<GuardedListener>(std::move(lo), [this](web::http::http_request req) {
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
  return listener_->Open();
}

void MetricsFrontend::Close() {
  if (!listener_) return;
  listener_->Close();
  listener_.reset();
}

}  // namespace shoal::http
