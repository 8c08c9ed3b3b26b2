// MetricsFrontend: /metrics (Prometheus text format), /healthz and /readyz on the metrics port.
// Lifecycle as DataFrontend. Thread-safe. Owned by main; collectables must outlive it.
#pragma once

#include <cpprest/http_listener.h>
#include <prometheus/collectable.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::http {

class MetricsFrontend {
 public:
  MetricsFrontend(std::string host, uint16_t port,
                  std::vector<std::shared_ptr<prometheus::Collectable>> collectables,
                  const std::atomic<bool>& ready);
  ~MetricsFrontend();
  MetricsFrontend(const MetricsFrontend&) = delete;
  MetricsFrontend& operator=(const MetricsFrontend&) = delete;

  Status Open();
  void Close();

 private:
  const std::string host_;
  const uint16_t port_;
  const std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  const std::atomic<bool>& ready_;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
};

}  // namespace shoal::http
