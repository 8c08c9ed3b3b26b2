// SidecarProbe: every metric the sidecar exports, declared once here (names per docs/metrics.md:
// shoal_ prefix, base units, counters end in _total). Values derived from state at scrape time
// (log sizes, offsets, consumer lag, epoch) are computed by Topic's collectable instead.
//
// Created by main before the topic opens; outlives every Partition. prometheus-cpp metrics are
// thread-safe, so the probe is too once constructed.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

namespace shoal::broker {

struct PartitionProbe {
  prometheus::Counter* events_appended;
  prometheus::Counter* bytes_appended;
  prometheus::Counter* events_consumed;
  prometheus::Counter* bytes_consumed;
  prometheus::Counter* duplicates;
  // Produce calls refused because the producer state could not decide a (producer, seq).
  prometheus::Counter* sequence_unknown;
  // Producers the producer table forgot at its kMaxProducers cap.
  prometheus::Counter* producers_forgotten;
};

class SidecarProbe {
 public:
  explicit SidecarProbe(std::string topic);
  SidecarProbe(const SidecarProbe&) = delete;
  SidecarProbe& operator=(const SidecarProbe&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  PartitionProbe ForPartition(uint32_t partition);

  void ObserveProduce(double seconds) { produce_latency_->Observe(seconds); }
  void ObserveFsync(double seconds) { fsync_latency_->Observe(seconds); }
  // reason: the error code of the answer (invalid_argument, too_large, not_found, ...).
  void Rejected(const std::string& reason);
  void Request(const std::string& endpoint, int code);
  // op: install, prepare, seal; outcome: ok, stale_epoch, error.
  void AdminChange(const std::string& op, const std::string& outcome);
  // One consume answer to `group`: `total` events, of which `through_local` were read through a
  // successor from an ancestor held here and `through_peers` from ancestors held by peers.
  void Delivered(const std::string& group, size_t total, size_t through_local,
                 size_t through_peers);
  // Seconds a group's consumers here held a batch: from an answer with events to their next
  // consume request (what they took divided by it is what they can take, busy or not).
  void ConsumerBusy(const std::string& group, double seconds);
  // Retention removed `events` that `group` had not committed: the group goes on past them.
  void RetentionSkipped(const std::string& group, uint64_t events);

 private:
  const std::string topic_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& events_appended_;
  prometheus::Family<prometheus::Counter>& bytes_appended_;
  prometheus::Family<prometheus::Counter>& events_consumed_;
  prometheus::Family<prometheus::Counter>& bytes_consumed_;
  prometheus::Family<prometheus::Counter>& duplicates_;
  prometheus::Family<prometheus::Counter>& sequence_unknown_;
  prometheus::Family<prometheus::Counter>& producers_forgotten_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& admin_changes_;
  prometheus::Family<prometheus::Counter>& delivered_;
  prometheus::Family<prometheus::Counter>& read_through_;
  prometheus::Family<prometheus::Counter>& consumer_busy_;
  prometheus::Family<prometheus::Counter>& retention_skipped_;
  prometheus::Histogram* produce_latency_;
  prometheus::Histogram* fsync_latency_;
};

}  // namespace shoal::broker
