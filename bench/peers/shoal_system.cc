// Shoal as a peer: one shoal-sidecar (control::LocalSidecar) with --fsync interval, or three with
// three copies of every partition (ShoalVariant::rf3), produced to
// the way `shoal bench ingest` does (pre-built bodies over raw keep-alive sockets, JSON or binary
// batches) and consumed through the data plane's GET, each carrying the commit of the batch
// before it.
#include <algorithm>
#include <memory>
#include <optional>

#include "peer_system.h"
#include "server_process.h"
#include "shoal/client/admin_client.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/certificates.h"
#include "shoal/common/raw_http.h"
#include "shoal/common/replication.h"
#include "shoal/common/wire.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/process.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::bench {

namespace {

constexpr char kTopic[] = "bench";
constexpr char kGroup[] = "bench";

struct PodAddress {
  std::string host;
  uint16_t port = 0;
};

// The events of `batches` regrouped by the pod that leads their partition (`pod_of`, by
// partition), in batches of the same size: each pod gets as many batches as its share of the
// events rounds to (its events taken in turn, from the start again when they run out), and the
// batches go out interleaved in proportion (each next one from the pod furthest behind its
// share), so that the pods take the load evenly over a cycle. `pod_of_batch` receives each
// batch's pod.
std::vector<BenchBatch> RegroupByPod(const std::vector<BenchBatch>& batches,
                                     const std::vector<size_t>& pod_of, size_t pods,
                                     std::vector<size_t>* pod_of_batch) {
  const size_t size = batches.empty() ? 0 : batches[0].size();
  std::vector<BenchBatch> by_pod(pods);
  for (const auto& b : batches) {
    for (const auto& e : b) by_pod[pod_of[e.partition]].push_back(e);
  }
  std::vector<size_t> count(pods, 0);  // batches per pod
  size_t total = 0;
  for (size_t p = 0; p < pods && size > 0; ++p) {
    count[p] = (by_pod[p].size() + size / 2) / size;
    total += count[p];
  }
  std::vector<BenchBatch> out;
  std::vector<size_t> made(pods, 0), next(pods, 0);
  for (size_t t = 0; t < total; ++t) {
    size_t pick = pods;
    double behind = 0;
    for (size_t p = 0; p < pods; ++p) {
      if (made[p] == count[p]) continue;
      const double d =
          static_cast<double>(count[p]) * static_cast<double>(t + 1) / static_cast<double>(total) -
          static_cast<double>(made[p]);
      if (pick == pods || d > behind) pick = p, behind = d;
    }
    BenchBatch batch;
    for (size_t k = 0; k < size; ++k) {
      batch.push_back(by_pod[pick][next[pick]]);
      next[pick] = (next[pick] + 1) % by_pod[pick].size();
    }
    out.push_back(std::move(batch));
    pod_of_batch->push_back(pick);
    ++made[pick];
  }
  return out;
}

class ShoalProducer final : public PeerProducer {
 public:
  // Each of `batches` to pods[pod_of_batch[i]] (empty: all to pods[0]).
  ShoalProducer(const std::vector<PodAddress>& pods, const std::vector<size_t>& pod_of_batch,
                const RawHttpOptions& options, const std::vector<BenchBatch>& batches, bool binary)
      : path_(std::string("/v1/topics/") + kTopic + "/events") {
    for (size_t p = 0; p < (pod_of_batch.empty() ? 1 : pods.size()); ++p) {
      conns_.push_back(std::make_unique<RawHttpConnection>(pods[p].host, pods[p].port, options));
    }
    for (size_t i = 0; i < batches.size(); ++i) {
      const auto& batch = batches[i];
      if (binary) {
        // The values as opaque bytes: the JSON text they hold is the application's business.
        std::vector<wire::ProduceEvent> events(batch.size());
        std::vector<const wire::ProduceEvent*> ptrs;
        for (size_t k = 0; k < batch.size(); ++k) {
          events[k] = {batch[k].key, batch[k].value, "", std::nullopt, true};
          ptrs.push_back(&events[k]);
        }
        bodies_.push_back(wire::EncodeBinaryProduceRequest(ptrs));
      } else {
        std::vector<client::OutgoingEvent> events;
        events.reserve(batch.size());
        for (const auto& e : batch) events.push_back({e.key, e.value, "", std::nullopt});
        bodies_.push_back(client::EncodeProduceBody(events));
      }
      stamps_.push_back(harness::FindStamps(bodies_.back()));
      sizes_.push_back(batch.size());
      conn_of_.push_back(pod_of_batch.empty() ? 0 : pod_of_batch[i]);
    }
  }

  Status Send(uint64_t i, uint64_t stamp_ns) override {
    const size_t b = i % bodies_.size();
    if (stamp_ns) harness::StampAt(bodies_[b], stamps_[b], stamp_ns);
    return harness::PostProduceBody(*conns_[conn_of_[b]], path_, bodies_[b], sizes_[b], &answer_);
  }

 private:
  std::vector<std::unique_ptr<RawHttpConnection>> conns_;
  const std::string path_;
  std::vector<std::string> bodies_;
  std::vector<std::vector<size_t>> stamps_;
  std::vector<size_t> sizes_;
  std::vector<size_t> conn_of_;  // each body's connection
  std::string answer_;
};

class ShoalConsumer final : public PeerConsumer {
 public:
  ShoalConsumer(const std::string& host, uint16_t port, const RawHttpOptions& options)
      : conn_(host, port, options),
        events_path_(std::string("/v1/topics/") + kTopic + "/events?group=" + kGroup) {}

  // Each poll carries the commit of the batch before it (commit=P:O,..., docs/data-plane.md):
  // one request per batch instead of a GET and a POST. The last batch of a run stays
  // uncommitted, which the benchmark does not look at.
  Result<size_t> Poll(size_t max, int wait_ms, std::vector<uint64_t>* stamps) override {
    std::string path =
        events_path_ + "&max=" + std::to_string(max) + "&wait_ms=" + std::to_string(wait_ms);
    if (!pending_.empty()) path += "&commit=" + wire::EncodeCommitParam(pending_);
    auto code = conn_.Request("GET", path, "", &answer_);
    if (!code.ok()) return code.status();
    if (*code != 200) {
      return Status::Unavailable("consume answered " + std::to_string(*code) + ": " +
                                 answer_.substr(0, 200));
    }
    pending_.clear();
    auto events = wire::ParseAnyConsumeResponse(answer_);
    if (!events.ok()) return events.status();
    // The next poll commits what was read: per partition, the offset after the last event.
    for (const auto& e : *events) {
      stamps->push_back(harness::ReadStamp(e.value));
      auto it = std::find_if(pending_.begin(), pending_.end(), [&](const wire::CommitOffset& c) {
        return c.partition.value() == e.partition;
      });
      if (it == pending_.end()) {
        pending_.push_back({PartitionId(e.partition), Offset(e.offset + 1)});
      } else {
        it->offset = std::max(it->offset, Offset(e.offset + 1));
      }
    }
    return events->size();
  }

 private:
  RawHttpConnection conn_;
  const std::string events_path_;
  std::string answer_;
  std::vector<wire::CommitOffset> pending_;  // the commit the next poll carries
};

class ShoalSystem final : public PeerSystem {
 public:
  ShoalSystem(std::string sidecar, ShoalVariant variant)
      : binary_(std::move(sidecar)), variant_(variant) {}
  ~ShoalSystem() override { Stop(); }

  std::string name() const override { return variant_.Name(); }

  Status Start(const PeerConfig& config) override {
    control::LocalSidecarOptions so;
    so.binary = binary_;
    so.topic = kTopic;
    so.partitions = config.partitions;
    so.data_dir = config.dir;
    so.fsync = "interval";
    client_ = {};
    if (variant_.binary) {
      // Answers in binary; the produce bodies too (commits stay JSON: docs/data-plane.md).
      client_.headers = "Accept: " + std::string(wire::kBinaryType) + "\r\n";
    }
    if (variant_.tls) {
      auto pki = WriteLocalPki(config.dir + "/tls", kTopic, "bench");
      if (!pki.ok()) return pki.status();
      client_.tls = pki->client;
      so.extra_args = pki->sidecar_args;
      // The pods' own certificate (for the peer name, client and server), which the admin
      // plane admits as a peer's.
      pod_tls_ = {pki->client.ca_file, config.dir + "/tls/server.crt",
                  config.dir + "/tls/server.key", pki->client.server_name};
    }
    if (variant_.rf3) return StartThreePods(so, config);
    so.extra_args.insert(so.extra_args.end(), {"--log-level", "warn"});
    auto s = control::LocalSidecar::Start(so);
    if (!s.ok()) return s.status().Annotate("starting shoal-sidecar (" + binary_ + ")");
    pods_.push_back(std::move(s).value());
    RegisterServer(pods_.back().process.pid());
    return Status::Ok();
  }

  void Stop() override {
    for (auto& pod : pods_) {
      UnregisterServer(pod.process.pid());
      pod.process.Stop(std::chrono::seconds(10));
    }
    pods_.clear();
  }

  Result<std::unique_ptr<PeerProducer>> NewProducer(
      const std::vector<BenchBatch>& batches) override {
    if (pods_.empty()) return Status::FailedPrecondition("shoal is not started");
    if (batches.empty()) return Status::InvalidArgument("a producer needs batches to send");
    // Without routing, the producers' connections go to the pods in turn, each to one.
    std::vector<PodAddress> pods;
    for (size_t k = 0; k < pods_.size(); ++k) {
      const auto& pod = pods_[(producers_ + k) % pods_.size()];
      pods.push_back({pod.host, pod.port});
    }
    ++producers_;
    RawHttpOptions options = client_;
    if (variant_.binary) options.content_type = std::string(wire::kBinaryType);
    if (!variant_.routed) {
      return std::unique_ptr<PeerProducer>(std::make_unique<ShoalProducer>(
          pods, std::vector<size_t>(), options, batches, variant_.binary));
    }
    std::vector<PodAddress> leaders;  // by index into pods_
    for (const auto& pod : pods_) leaders.push_back({pod.host, pod.port});
    std::vector<size_t> pod_of_batch;
    auto regrouped = RegroupByPod(batches, leader_of_, pods_.size(), &pod_of_batch);
    if (regrouped.empty()) {
      return Status::InvalidArgument("too few events to make one batch for any leader");
    }
    // Each connection starts at another place of the cycle: in step, they would all send to the
    // same pod at once.
    const auto shift = static_cast<std::ptrdiff_t>((producers_ - 1) % regrouped.size());
    std::rotate(regrouped.begin(), regrouped.begin() + shift, regrouped.end());
    std::rotate(pod_of_batch.begin(), pod_of_batch.begin() + shift, pod_of_batch.end());
    return std::unique_ptr<PeerProducer>(std::make_unique<ShoalProducer>(
        leaders, pod_of_batch, options, regrouped, variant_.binary));
  }

  Result<std::unique_ptr<PeerConsumer>> NewConsumer(int index) override {
    if (pods_.empty()) return Status::FailedPrecondition("shoal is not started");
    const auto& pod = pods_[static_cast<size_t>(index) % pods_.size()];
    return std::unique_ptr<PeerConsumer>(
        std::make_unique<ShoalConsumer>(pod.host, pod.port, client_));
  }

  std::string Describe() const override {
    return std::string("shoal-sidecar, --fsync interval (every 100 ms)") +
           (variant_.tls ? ", TLS with client certificates" : "") +
           (variant_.binary ? ", binary batches" : ", JSON batches") +
           (variant_.rf3 ? ", 3 pods, 3 copies, acks quorum" : "") +
           (variant_.routed ? ", each batch straight to its partitions' leader" : "");
  }

 private:
  // Three pods under config.dir, their partitions round robin, every partition with three
  // copies (replication::PlaceReplicas), the map installed as a coordinator would.
  Status StartThreePods(const control::LocalSidecarOptions& so, const PeerConfig& config) {
    constexpr int kPods = 3;
    const std::string token = "bench-admin-token";
    auto pods = control::StartPods(kPods, config.dir, so, token, "warn");
    if (!pods.ok()) return pods.status().Annotate("starting shoal-sidecar (" + binary_ + ")");
    pods_ = std::move(pods).value();
    for (const auto& pod : pods_) RegisterServer(pod.process.pid());
    std::vector<PodName> names;
    for (int i = 0; i < kPods; ++i) names.push_back(PodName("pod-" + std::to_string(i)));
    auto map = PartitionMap::Initial(kTopic, config.partitions, names);
    if (!map.ok()) return map.status();
    auto placed = replication::PlaceReplicas(control::WithPeers(*map, pods_), names, kPods);
    if (!placed.ok()) return placed.status();
    leader_of_.clear();
    for (uint32_t p = 0; p < config.partitions; ++p) {
      const PartitionInfo* info = placed->Find(PartitionId(p));
      if (!info) return Status::Internal("the placed map has no partition " + std::to_string(p));
      const auto it = std::find(names.begin(), names.end(), info->owner);
      if (it == names.end()) return Status::Internal("partition led by an unknown pod");
      leader_of_.push_back(static_cast<size_t>(it - names.begin()));
    }
    client::AdminClient admin(token, pod_tls_);
    control::ChangeExecutor executor(admin);
    return executor.InstallEverywhere(*placed);
  }

  const std::string binary_;
  const ShoalVariant variant_;
  RawHttpOptions client_;  // its clients' options (TLS files, the answers' format)
  TlsClientFiles pod_tls_;  // with tls: the pods' certificate, for the admin calls
  std::vector<control::LocalSidecar> pods_;
  std::vector<size_t> leader_of_;  // rf3: by partition, the index into pods_ of its leader
  size_t producers_ = 0;
};

}  // namespace

std::unique_ptr<PeerSystem> NewShoalSystem(std::string sidecar, ShoalVariant variant) {
  return std::make_unique<ShoalSystem>(std::move(sidecar), variant);
}

}  // namespace shoal::bench
