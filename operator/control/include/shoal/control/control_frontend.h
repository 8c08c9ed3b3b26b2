// ControlFrontend: the control loop's own HTTP port: /metrics (its decisions, plan steps and
// changes, docs/metrics.md), /status (ControlLoop::StatusJson: epoch, partitions, pods, the plan
// in progress, the last decision and its reason), /healthz, /readyz, on a GetOnlyPort.
// Open, then Close (or destroy). Thread-safe; the ControlLoop outlives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "shoal/common/status.h"
#include "shoal/control/control_loop.h"
#include "shoal/control/get_only_port.h"

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
  GetOnlyPort port_;
};

}  // namespace shoal::control
