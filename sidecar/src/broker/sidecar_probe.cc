#include "broker/sidecar_probe.h"

#include "shoal/common/metrics.h"

namespace shoal::broker {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;

SidecarProbe::SidecarProbe(std::string topic)
    : topic_(std::move(topic)),
      registry_(std::make_shared<prometheus::Registry>()),
      events_appended_(BuildCounter()
                           .Name("shoal_events_appended_total")
                           .Help("Events appended to a partition's log")
                           .Register(*registry_)),
      bytes_appended_(BuildCounter()
                          .Name("shoal_bytes_appended_total")
                          .Help("Bytes of records appended to a partition's log")
                          .Register(*registry_)),
      events_consumed_(BuildCounter()
                           .Name("shoal_events_consumed_total")
                           .Help("Events handed to consumers from a partition")
                           .Register(*registry_)),
      bytes_consumed_(BuildCounter()
                          .Name("shoal_bytes_consumed_total")
                          .Help("Bytes of records handed to consumers from a partition")
                          .Register(*registry_)),
      duplicates_(BuildCounter()
                      .Name("shoal_duplicate_events_total")
                      .Help("Idempotent-producer events answered as duplicates, not appended")
                      .Register(*registry_)),
      sequence_unknown_(
          BuildCounter()
              .Name("shoal_sequence_unknown_total")
              .Help("Produce calls refused because a (producer, seq) was older than the producer "
                    "state remembers (sequence_unknown)")
              .Register(*registry_)),
      producers_forgotten_(BuildCounter()
                               .Name("shoal_producers_forgotten_total")
                               .Help("Idempotent producers forgotten at the producer table's cap")
                               .Register(*registry_)),
      rejected_(BuildCounter()
                    .Name("shoal_requests_rejected_total")
                    .Help("Requests refused with a 4xx or 5xx answer, by reason")
                    .Register(*registry_)),
      requests_(BuildCounter()
                    .Name("shoal_http_requests_total")
                    .Help("HTTP requests answered, by endpoint and status code")
                    .Register(*registry_)),
      admin_changes_(BuildCounter()
                         .Name("shoal_sidecar_changes_total")
                         .Help("Map installs, prepares and seals on the admin plane, by outcome")
                         .Register(*registry_)),
      delivered_(BuildCounter()
                     .Name("shoal_events_delivered_total")
                     .Help("Events this sidecar handed to the consumers of a group, from its own "
                           "partitions or read through them from ancestors")
                     .Register(*registry_)),
      read_through_(BuildCounter()
                        .Name("shoal_events_read_through_total")
                        .Help("Events handed to a group's consumers from an ancestor's range "
                              "through a successor held here, by where the ancestor is "
                              "(local, peer)")
                        .Register(*registry_)),
      consumer_busy_(BuildCounter()
                         .Name("shoal_consumer_busy_seconds_total")
                         .Help("Seconds a group's consumers on this pod held a batch: from an "
                               "answer with events to their next consume request")
                         .Register(*registry_)),
      retention_skipped_(BuildCounter()
                             .Name("shoal_retention_skipped_events_total")
                             .Help("Events retention removed before a group committed them (the "
                                   "group goes on from the oldest event kept)")
                             .Register(*registry_)) {
  produce_latency_ = &BuildHistogram()
                          .Name("shoal_produce_latency_seconds")
                          .Help("Time from a produce request's arrival to its answer")
                          .Register(*registry_)
                          .Add({{"topic", topic_}}, metrics::LatencyBuckets());
  fsync_latency_ = &BuildHistogram()
                        .Name("shoal_fsync_latency_seconds")
                        .Help("Duration of one fdatasync of a partition log")
                        .Register(*registry_)
                        .Add({{"topic", topic_}}, metrics::LatencyBuckets());
  metrics::RegisterBuildInfo(*registry_, "sidecar");
}

PartitionProbe SidecarProbe::ForPartition(uint32_t partition) {
  const std::map<std::string, std::string> labels = {{"topic", topic_},
                                                     {"partition", std::to_string(partition)}};
  return PartitionProbe{&events_appended_.Add(labels), &bytes_appended_.Add(labels),
                        &events_consumed_.Add(labels), &bytes_consumed_.Add(labels),
                        &duplicates_.Add(labels),        &sequence_unknown_.Add(labels),
                        &producers_forgotten_.Add(labels)};
}

void SidecarProbe::Rejected(const std::string& reason) {
  rejected_.Add({{"topic", topic_}, {"reason", reason}}).Increment();
}

void SidecarProbe::AdminChange(const std::string& op, const std::string& outcome) {
  admin_changes_.Add({{"topic", topic_}, {"op", op}, {"outcome", outcome}}).Increment();
}

void SidecarProbe::Delivered(const std::string& group, size_t total, size_t through_local,
                             size_t through_peers) {
  if (total == 0) return;
  delivered_.Add({{"topic", topic_}, {"group", group}}).Increment(static_cast<double>(total));
  if (through_local > 0) {
    read_through_.Add({{"topic", topic_}, {"group", group}, {"from", "local"}})
        .Increment(static_cast<double>(through_local));
  }
  if (through_peers > 0) {
    read_through_.Add({{"topic", topic_}, {"group", group}, {"from", "peer"}})
        .Increment(static_cast<double>(through_peers));
  }
}

void SidecarProbe::ConsumerBusy(const std::string& group, double seconds) {
  if (seconds <= 0) return;
  consumer_busy_.Add({{"topic", topic_}, {"group", group}}).Increment(seconds);
}

void SidecarProbe::RetentionSkipped(const std::string& group, uint64_t events) {
  if (events == 0) return;
  retention_skipped_.Add({{"topic", topic_}, {"group", group}})
      .Increment(static_cast<double>(events));
}

void SidecarProbe::Request(const std::string& endpoint, int code) {
  requests_.Add({{"endpoint", endpoint}, {"code", std::to_string(code)}}).Increment();
}

}  // namespace shoal::broker
