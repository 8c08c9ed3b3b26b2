// Shoal as a peer: one shoal-sidecar (control::LocalSidecar) with --fsync interval, produced to
// the way `shoal bench ingest` does (pre-built JSON bodies over raw keep-alive sockets) and
// consumed through the data plane's GET + commit.
#include <algorithm>
#include <optional>

#include "peer_system.h"
#include "server_process.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/certificates.h"
#include "shoal/common/raw_http.h"
#include "shoal/common/wire.h"
#include "shoal/control/process.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::bench {

namespace {

constexpr char kTopic[] = "bench";
constexpr char kGroup[] = "bench";

class ShoalProducer final : public PeerProducer {
 public:
  ShoalProducer(const std::string& host, uint16_t port, const RawHttpOptions& options,
                const std::vector<BenchBatch>& batches)
      : conn_(host, port, options), path_(std::string("/v1/topics/") + kTopic + "/events") {
    for (const auto& batch : batches) {
      std::vector<client::OutgoingEvent> events;
      events.reserve(batch.size());
      for (const auto& e : batch) events.push_back({e.key, e.value, "", std::nullopt});
      bodies_.push_back(client::EncodeProduceBody(events));
      stamps_.push_back(harness::FindStamps(bodies_.back()));
      sizes_.push_back(batch.size());
    }
  }

  Status Send(uint64_t i, uint64_t stamp_ns) override {
    const size_t b = i % bodies_.size();
    if (stamp_ns) harness::StampAt(bodies_[b], stamps_[b], stamp_ns);
    return harness::PostProduceBody(conn_, path_, bodies_[b], sizes_[b], &answer_);
  }

 private:
  RawHttpConnection conn_;
  const std::string path_;
  std::vector<std::string> bodies_;
  std::vector<std::vector<size_t>> stamps_;
  std::vector<size_t> sizes_;
  std::string answer_;
};

class ShoalConsumer final : public PeerConsumer {
 public:
  ShoalConsumer(const std::string& host, uint16_t port, const RawHttpOptions& options)
      : conn_(host, port, options),
        events_path_(std::string("/v1/topics/") + kTopic + "/events?group=" + kGroup),
        commits_path_(std::string("/v1/topics/") + kTopic + "/commits") {}

  Result<size_t> Poll(size_t max, int wait_ms, std::vector<uint64_t>* stamps) override {
    auto code = conn_.Request(
        "GET", events_path_ + "&max=" + std::to_string(max) + "&wait_ms=" + std::to_string(wait_ms),
        "", &answer_);
    if (!code.ok()) return code.status();
    if (*code != 200) {
      return Status::Unavailable("consume answered " + std::to_string(*code) + ": " +
                                 answer_.substr(0, 200));
    }
    auto events = wire::ParseConsumeResponse(answer_);
    if (!events.ok()) return events.status();
    if (events->empty()) return size_t{0};
    // Commit what was read: per partition, the offset after the last event.
    std::vector<wire::CommitOffset> next;
    for (const auto& e : *events) {
      stamps->push_back(harness::ReadStamp(e.value));
      auto it = std::find_if(next.begin(), next.end(), [&](const wire::CommitOffset& c) {
        return c.partition.value() == e.partition;
      });
      if (it == next.end()) {
        next.push_back({PartitionId(e.partition), Offset(e.offset + 1)});
      } else {
        it->offset = std::max(it->offset, Offset(e.offset + 1));
      }
    }
    std::string body = std::string("{\"group\":\"") + kGroup + "\",\"offsets\":[";
    for (size_t i = 0; i < next.size(); ++i) {
      body += (i ? ",{\"partition\":" : "{\"partition\":") + std::to_string(next[i].partition.value()) +
              ",\"offset\":" + std::to_string(next[i].offset.value()) + "}";
    }
    body += "]}";
    auto committed = conn_.Request("POST", commits_path_, body, &answer_);
    if (!committed.ok()) return committed.status();
    if (*committed != 200) {
      return Status::Unavailable("commit answered " + std::to_string(*committed) + ": " +
                                 answer_.substr(0, 200));
    }
    return events->size();
  }

 private:
  RawHttpConnection conn_;
  const std::string events_path_, commits_path_;
  std::string answer_;
};

class ShoalSystem final : public PeerSystem {
 public:
  // `tls`: the sidecar TLS only, with a CA made for the run, and every client with a
  // certificate of it (as a topic's pods require; docs/security.md).
  ShoalSystem(std::string sidecar, bool tls) : binary_(std::move(sidecar)), tls_(tls) {}
  ~ShoalSystem() override { Stop(); }

  std::string name() const override { return tls_ ? "shoal-tls" : "shoal"; }

  Status Start(const PeerConfig& config) override {
    control::LocalSidecarOptions so;
    so.binary = binary_;
    so.topic = kTopic;
    so.partitions = config.partitions;
    so.data_dir = config.dir;
    so.fsync = "interval";
    so.extra_args = {"--log-level", "warn"};
    client_ = {};
    if (tls_) {
      auto pki = WriteLocalPki(config.dir + "/tls", kTopic, "bench");
      if (!pki.ok()) return pki.status();
      client_.tls = pki->client;
      so.extra_args.insert(so.extra_args.end(), pki->sidecar_args.begin(), pki->sidecar_args.end());
    }
    auto s = control::LocalSidecar::Start(so);
    if (!s.ok()) return s.status().Annotate("starting shoal-sidecar (" + binary_ + ")");
    sidecar_.emplace(std::move(s).value());
    RegisterServer(sidecar_->process.pid());
    return Status::Ok();
  }

  void Stop() override {
    if (!sidecar_) return;
    UnregisterServer(sidecar_->process.pid());
    sidecar_->process.Stop(std::chrono::seconds(10));
    sidecar_.reset();
  }

  Result<std::unique_ptr<PeerProducer>> NewProducer(
      const std::vector<BenchBatch>& batches) override {
    if (!sidecar_) return Status::FailedPrecondition("shoal is not started");
    return std::unique_ptr<PeerProducer>(
        std::make_unique<ShoalProducer>(sidecar_->host, sidecar_->port, client_, batches));
  }

  Result<std::unique_ptr<PeerConsumer>> NewConsumer(int) override {
    if (!sidecar_) return Status::FailedPrecondition("shoal is not started");
    return std::unique_ptr<PeerConsumer>(
        std::make_unique<ShoalConsumer>(sidecar_->host, sidecar_->port, client_));
  }

  std::string Describe() const override {
    return std::string("shoal-sidecar, --fsync interval (every 100 ms)") +
           (tls_ ? ", TLS with client certificates" : "");
  }

 private:
  const std::string binary_;
  const bool tls_;
  RawHttpOptions client_;  // its clients' options (TLS files)
  std::optional<control::LocalSidecar> sidecar_;
};

}  // namespace

std::unique_ptr<PeerSystem> NewShoalSystem(std::string sidecar, bool tls) {
  return std::make_unique<ShoalSystem>(std::move(sidecar), tls);
}

}  // namespace shoal::bench
