// ControlFrontend: the control loop's own HTTP port: /metrics (its decisions, plan steps and
// changes, docs/metrics.md), /status (ControlLoop::StatusJson: epoch, partitions, pods, the plan
// in progress, the last decision and its reason), /healthz, /readyz. cpprestsdk listener.
// Open, then Close (or destroy). Thread-safe; the ControlLoop outlives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "shoal/common/status.h"
#include "shoal/control/control_loop.h"

namespace web::http::experimental::listener {
class http_listener;
}

namespace shoal::control {

class ControlFrontend {
 public:
  ControlFrontend(std::string host, uint16_t port, ControlLoop& loop);
  ~ControlFrontend();
  ControlFrontend(const ControlFrontend&) = delete;
  ControlFrontend& operator=(const ControlFrontend&) = delete;

  Status Open();
  void Close();

 private:
  const std::string host_;
  const uint16_t port_;
  ControlLoop& loop_;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
};

}  // namespace shoal::control
