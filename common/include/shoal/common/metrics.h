// Metrics helpers shared by the sidecar and the operator (prometheus-cpp core, no civetweb):
// text exposition of a set of collectables, a collectable computed at scrape time, and the
// latency buckets every Shoal histogram uses. Names follow docs/metrics.md: shoal_ prefix, base
// units.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shoal::metrics {

// Serializes every collectable in the Prometheus text exposition format (version 0.0.4).
std::string Serialize(const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables);

// A collectable whose families are computed by a callback at each scrape: for values that are
// derived from state (consumer lag, log size) rather than counted as they happen. The callback
// runs on the scraping thread and must be thread-safe.
class CallbackCollectable : public prometheus::Collectable {
 public:
  using Fn = std::function<std::vector<prometheus::MetricFamily>()>;
  explicit CallbackCollectable(Fn fn) : fn_(std::move(fn)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return fn_(); }

 private:
  Fn fn_;
};

prometheus::MetricFamily GaugeFamily(std::string name, std::string help);
void AddGauge(prometheus::MetricFamily& family, std::map<std::string, std::string> labels,
              double value);

// shoal_build_info{component, version} = 1 in `registry`: which build a series comes from.
void RegisterBuildInfo(prometheus::Registry& registry, const std::string& component);

// Buckets from 50 us to 10 s, roughly x2.5 apart: produce, fsync and write-pause latencies.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

}  // namespace shoal::metrics
