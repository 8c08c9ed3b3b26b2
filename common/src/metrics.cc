#include "shoal/common/metrics.h"

#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

#include <map>

#include "shoal/common/version.h"

namespace shoal::metrics {

std::string Serialize(const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables) {
  // Families of one name from several registries (the operator's topics each have one) are
  // merged: the exposition format allows each name once.
  std::vector<prometheus::MetricFamily> families;
  std::map<std::string, size_t> index;
  for (const auto& c : collectables) {
    for (auto& f : c->Collect()) {
      auto [it, fresh] = index.emplace(f.name, families.size());
      if (fresh) {
        families.push_back(std::move(f));
      } else {
        auto& into = families[it->second].metric;
        into.insert(into.end(), std::make_move_iterator(f.metric.begin()),
                    std::make_move_iterator(f.metric.end()));
      }
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = prometheus::MetricType::Gauge;
  return f;
}

void AddGauge(prometheus::MetricFamily& family, std::map<std::string, std::string> labels,
              double value) {
  prometheus::ClientMetric m;
  for (auto& [k, v] : labels) m.label.push_back({k, v});
  m.gauge.value = value;
  family.metric.push_back(std::move(m));
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,    0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0};
  return kBuckets;
}

void RegisterBuildInfo(prometheus::Registry& registry, const std::string& component) {
  prometheus::BuildGauge()
      .Name("shoal_build_info")
      .Help("1, labelled with the version of the build that exports the series")
      .Register(registry)
      .Add({{"component", component}, {"version", Version()}})
      .Set(1);
}

}  // namespace shoal::metrics
