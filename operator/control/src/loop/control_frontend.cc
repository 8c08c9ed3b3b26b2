#include "shoal/control/control_frontend.h"

#include "shoal/common/json.h"
#include "shoal/common/metrics.h"

namespace shoal::control {

ControlFrontend::ControlFrontend(std::string host, uint16_t port, ControlLoop& loop)
    : port_(std::move(host), port, [&loop](const GetRequest& r) -> GetAnswer {
        if (r.path == "/metrics") {
          return {200, metrics::Serialize({loop.registry()}), "text/plain; version=0.0.4"};
        }
        if (r.path == "/status") return GetAnswer::Json(loop.StatusJson());
        if (r.path == "/healthz" || r.path == "/readyz")
          return GetAnswer::Json("{\"status\":\"ok\"}");
        return {
            404,
            json::ErrorBody("not_found", "this port serves /metrics, /status, /healthz, /readyz"),
            "application/json"};
      }) {}

ControlFrontend::~ControlFrontend() { Close(); }

Status ControlFrontend::Open() { return port_.Open(); }

void ControlFrontend::Close() { port_.Close(); }

}  // namespace shoal::control
