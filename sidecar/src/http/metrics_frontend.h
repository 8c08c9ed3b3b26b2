// MetricsFrontend: /metrics (Prometheus text format), /healthz and /readyz on the metrics port.
// Lifecycle as DataFrontend. Thread-safe. Owned by main; collectables must outlive it.
#pragma once

#include <prometheus/collectable.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "http/guarded_listener.h"
#include "shoal/common/status.h"

namespace shoal::http {

class MetricsFrontend {
 public:
  MetricsFrontend(std::string host, uint16_t port,
                  std::vector<std::shared_ptr<prometheus::Collectable>> collectables,
                  const std::atomic<bool>& ready, ListenerLimits limits = {});
  ~MetricsFrontend();
  MetricsFrontend(const MetricsFrontend&) = delete;
  MetricsFrontend& operator=(const MetricsFrontend&) = delete;

  Status Open();
  void Close();
  uint16_t port() const { return listener_ ? listener_->port() : 0; }

 private:
  const std::string host_;
  const uint16_t port_;
  const std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  const std::atomic<bool>& ready_;
  const ListenerLimits limits_;
  std::unique_ptr<GuardedListener> listener_;
};

}  // namespace shoal::http
