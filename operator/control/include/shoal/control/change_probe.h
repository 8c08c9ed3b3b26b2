// ChangeProbe: the metrics of carried-out changes, declared once: changes by kind (split, merge,
// move) and outcome (ok, failed), the write pause histogram by kind, and the epoch of the last
// installed map. Registered on the operator's /metrics (and printed by `shoal torture`).
// Thread-safe once constructed; owned by whoever owns the executor.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

namespace shoal::control {

class ChangeProbe {
 public:
  // Every series carries the topic's label (one operator runs many topics' loops).
  explicit ChangeProbe(std::string topic);
  ChangeProbe(const ChangeProbe&) = delete;
  ChangeProbe& operator=(const ChangeProbe&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  void Applied(const std::string& kind, double pause_seconds, double total_seconds, uint64_t epoch);
  void Failed(const std::string& kind);

 private:
  const std::string topic_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& changes_;
  prometheus::Family<prometheus::Histogram>& pause_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Gauge* epoch_;
};

}  // namespace shoal::control
