#include "shoal/control/change_probe.h"

#include "shoal/common/metrics.h"

namespace shoal::control {

ChangeProbe::ChangeProbe(std::string topic)
    : topic_(std::move(topic)),
      registry_(std::make_shared<prometheus::Registry>()),
      changes_(prometheus::BuildCounter()
                   .Name("shoal_changes_total")
                   .Help("Partition map changes carried out, by kind and outcome")
                   .Register(*registry_)),
      pause_(prometheus::BuildHistogram()
                 .Name("shoal_change_write_pause_seconds")
                 .Help("Time from the first seal of a change to its successors taking writes")
                 .Register(*registry_)),
      duration_(prometheus::BuildHistogram()
                    .Name("shoal_change_duration_seconds")
                    .Help("Time from the first seal of a change to every pod holding its map")
                    .Register(*registry_)) {
  epoch_ = &prometheus::BuildGauge()
                .Name("shoal_control_epoch")
                .Help("Epoch of the last partition map the control plane installed")
                .Register(*registry_)
                .Add({{"topic", topic_}});
}

void ChangeProbe::Applied(const std::string& kind, double pause_seconds, double total_seconds,
                          uint64_t epoch) {
  changes_.Add({{"topic", topic_}, {"kind", kind}, {"outcome", "ok"}}).Increment();
  pause_.Add({{"topic", topic_}, {"kind", kind}}, metrics::LatencyBuckets()).Observe(pause_seconds);
  duration_.Add({{"topic", topic_}, {"kind", kind}}, metrics::LatencyBuckets())
      .Observe(total_seconds);
  epoch_->Set(static_cast<double>(epoch));
}

void ChangeProbe::Failed(const std::string& kind) {
  changes_.Add({{"topic", topic_}, {"kind", kind}, {"outcome", "failed"}}).Increment();
}

}  // namespace shoal::control
