// MetricsObserver against
//  - a real shoal-sidecar process (standalone, --topic orders --partitions 4) with a ManualClock:
//    first observation, exact rates over exactly 2 s of clock time, lag of a group that consumed
//    nothing, what a group's consumers took and how busy they were, a sealed partition after a
//    real split, a killed and a restarted sidecar, a wrong admin token;
//  - fake sidecars (a cpprestsdk listener serving canned answers): the load shape from the admin
//    plane's counters, a counter that went down, 404 vs. broken admin planes, malformed /metrics,
//    owners only, owners missing from the pods, a pod that never answers, PartitionsOf; what each
//    pod's consumers took and how busy they were (a table of Prometheus text fixtures).
// The bucket diff itself is tested as a pure function in admin_partitions_test.cc.
#include "shoal/control/metrics_observer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <cpprest/http_listener.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "shoal/client/admin_client.h"
#include "shoal/common/hash.h"
#include "shoal/control/change_executor.h"
#include "support/manual_clock.h"
#include "support/sidecar_process.h"
#include "support/topic_view.h"

namespace shoal::control {
namespace {

using namespace std::chrono_literals;
using shoal::testing::HttpRequestOptions;
using shoal::testing::ManualClock;
using shoal::testing::SidecarOptions;
using shoal::testing::SidecarProcess;

constexpr char kTopic[] = "orders";
constexpr char kToken[] = "observer-test-token";

std::string Address(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

bool Mentions(const std::vector<std::string>& missing, const std::string& partition_prefix,
              const std::string& text) {
  for (const auto& m : missing) {
    if (m.starts_with(partition_prefix) && m.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "\n  " + s;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Against a real sidecar.

class RealSidecarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SidecarOptions o;
    o.binary = SHOAL_SIDECAR_BIN;
    o.topic = kTopic;
    o.partitions = 4;
    o.fsync = "never";
    o.admin_token = kToken;
    sidecar_ = std::make_unique<SidecarProcess>(o);
    ASSERT_TRUE(sidecar_->Start().ok()) << sidecar_->Describe();
    admin_ = std::make_unique<client::AdminClient>(kToken);
    auto map = admin_->GetMap(Address(sidecar_->admin_port()));
    ASSERT_TRUE(map.ok()) << map.status().ToString();
    map_ = *map;
    ASSERT_EQ(map_.partitions().size(), 4u);

    // The standalone sidecar's pod name is whatever owns its partitions; the data plane's view
    // must agree with the admin plane's map.
    auto view = sidecar_->DataClient()->Get(std::string("/v1/topics/") + kTopic);
    ASSERT_TRUE(view.ok()) << view.Describe();
    auto parsed = shoal::testing::ParseTopicView(view.body);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const std::string owner = parsed->partitions.at(0).owner;
    for (const auto& p : map_.partitions()) ASSERT_EQ(p.owner.value(), owner);

    pod_.name = PodName(owner);
    pod_.ip = "127.0.0.1";
    pod_.address = {Address(sidecar_->port()), Address(sidecar_->admin_port())};
    pod_.metrics = Address(sidecar_->metrics_port());
    pod_.ready = true;
  }

  // Produces `per_key` events to each of `keys`; returns the number appended per partition, as
  // the sidecar's answer says.
  std::map<uint32_t, uint64_t> Produce(const std::vector<std::string>& keys, int per_key) {
    std::string body = "{\"events\":[";
    bool first = true;
    for (int i = 0; i < per_key; ++i) {
      for (const auto& k : keys) {
        body += std::string(first ? "" : ",") + "{\"key\":\"" + k +
                "\",\"value\":" + std::to_string(i) + "}";
        first = false;
      }
    }
    body += "]}";
    auto r = sidecar_->DataClient()->Post(std::string("/v1/topics/") + kTopic + "/events", body);
    EXPECT_TRUE(r.ok()) << r.Describe();
    std::map<uint32_t, uint64_t> per_partition;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array results;
    if (parser.parse(r.body).get(doc) || doc["results"].get(results)) {
      ADD_FAILURE() << "malformed produce answer: " << r.body;
      return per_partition;
    }
    for (auto res : results) {
      uint64_t p = 0;
      EXPECT_FALSE(res["partition"].get(p));
      ++per_partition[static_cast<uint32_t>(p)];
    }
    EXPECT_EQ(results.size(), keys.size() * per_key);
    return per_partition;
  }

  void Commit(const std::string& group, uint32_t partition, uint64_t offset) {
    auto r = sidecar_->DataClient()->Post(
        std::string("/v1/topics/") + kTopic + "/commits",
        "{\"group\":\"" + group + "\",\"offsets\":[{\"partition\":" + std::to_string(partition) +
            ",\"offset\":" + std::to_string(offset) + "}]}");
    ASSERT_TRUE(r.ok()) << r.Describe();
  }

  static std::vector<std::string> Keys(int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) keys.push_back("user_" + std::to_string(i));
    return keys;
  }

  ManualClock clock_;
  std::unique_ptr<SidecarProcess> sidecar_;
  std::unique_ptr<client::AdminClient> admin_;
  PartitionMap map_;
  PodInfo pod_;
};

TEST_F(RealSidecarTest, FirstObservationHasNoRatesOnlyMissing) {
  MetricsObserver observer(clock_, kToken);
  const Observation obs = observer.Observe(map_, {pod_});
  EXPECT_EQ(obs.epoch, map_.epoch());
  EXPECT_EQ(obs.at, clock_.SteadyNow());
  EXPECT_TRUE(obs.partitions.empty()) << "no earlier sample: no rate, and no invented 0";
  ASSERT_EQ(obs.missing.size(), 4u) << Join(obs.missing);
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_TRUE(Mentions(obs.missing, "partition " + std::to_string(p) + ":", "no earlier sample"))
        << Join(obs.missing);
  }
  EXPECT_FALSE(obs.complete());
}

TEST_F(RealSidecarTest, RateIsEventsOverClockTimeAndLagOfAnIdleGroup) {
  MetricsObserver observer(clock_, kToken);
  observer.Observe(map_, {pod_});

  // Something in every partition, with known counts per partition.
  const auto appended = Produce(Keys(40), 3);
  ASSERT_EQ(appended.size(), 4u) << "40 keys should reach all 4 partitions";
  // A group that consumed nothing: its commit is 0 everywhere, its lag the whole log.
  for (uint32_t p = 0; p < 4; ++p) Commit("idle", p, 0);
  // A group that consumed everything of partition 1 only: lag 0 there, the idle group's wins.
  Commit("done", 1, appended.at(1));

  clock_.AdvanceMs(2000);
  Observation obs = observer.Observe(map_, {pod_});
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
  EXPECT_EQ(obs.at, clock_.SteadyNow());
  ASSERT_EQ(obs.partitions.size(), 4u);
  for (uint32_t p = 0; p < 4; ++p) {
    SCOPED_TRACE("partition " + std::to_string(p));
    const PartitionLoad& load = obs.partitions.at(PartitionId(p));
    EXPECT_EQ(load.id, PartitionId(p));
    EXPECT_TRUE(load.active);
    EXPECT_EQ(load.rate, static_cast<double>(appended.at(p)) / 2.0);
    EXPECT_EQ(load.lag, appended.at(p));
    // The admin plane's /v1/admin/partitions may not exist on this sidecar yet (404: zeros);
    // where it does, the buckets of a partition that got events sum to 1.
    double sum = 0;
    for (double b : load.buckets) sum += b;
    EXPECT_TRUE(sum == 0 || std::abs(sum - 1.0) < 1e-9) << sum;
    EXPECT_GE(load.top_share, 0.0);
    EXPECT_LE(load.top_share, 1.0);
  }

  // Nothing new over another 4 s: rate exactly 0, lag unchanged.
  clock_.AdvanceMs(4000);
  obs = observer.Observe(map_, {pod_});
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
  ASSERT_EQ(obs.partitions.size(), 4u);
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(obs.partitions.at(PartitionId(p)).rate, 0.0) << p;
    EXPECT_EQ(obs.partitions.at(PartitionId(p)).lag, appended.at(p)) << p;
  }
}

// The load shape end to end, where the sidecar serves /v1/admin/partitions (skipped on a sidecar
// without it): buckets are the interval's events per sixteenth of the range, exactly, and a hot
// key tracked since before the interval is the top hash with its exact share.
TEST_F(RealSidecarTest, HotKeyIsTheTopHashAndBucketsFollowTheKeys) {
  MetricsObserver observer(clock_, kToken);
  auto admin = observer.PartitionsOf(pod_);
  if (!admin.ok() && admin.status().code() == Status::Code::kNotFound) {
    GTEST_SKIP() << "this sidecar has no /v1/admin/partitions yet";
  }
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();

  const auto warm = Produce({"hot"}, 10);  // tracked before the interval starts
  ASSERT_EQ(warm.size(), 1u);
  const uint32_t hot_partition = warm.begin()->first;
  observer.Observe(map_, {pod_});

  // The interval: 60 hot events and one for each of 24 other keys.
  std::vector<std::string> keys = Keys(24);
  std::map<uint32_t, std::array<uint64_t, kLoadBuckets>> want_counts;
  auto count = [&](const std::string& key, uint64_t n) {
    const PartitionInfo& p = map_.Route(KeyHash(key));
    const uint64_t b = (KeyHash(key) - p.range.lo) * kLoadBuckets / p.range.Width();
    want_counts[p.id.value()][b] += n;
  };
  const auto hot = Produce({"hot"}, 60);
  ASSERT_EQ(hot.at(hot_partition), 60u);
  count("hot", 60);
  const auto others = Produce(keys, 1);
  for (const auto& k : keys) count(k, 1);
  clock_.AdvanceMs(2000);
  const Observation obs = observer.Observe(map_, {pod_});
  ASSERT_TRUE(obs.complete()) << Join(obs.missing);

  const uint64_t others_in_hot = others.count(hot_partition) ? others.at(hot_partition) : 0;
  const PartitionLoad& load = obs.partitions.at(PartitionId(hot_partition));
  EXPECT_EQ(load.rate, (60.0 + others_in_hot) / 2.0);
  EXPECT_EQ(load.top_hash, KeyHash("hot"));
  EXPECT_DOUBLE_EQ(load.top_share, 60.0 / (60.0 + others_in_hot));
  for (const auto& [id, counts] : want_counts) {
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    for (size_t b = 0; b < kLoadBuckets; ++b) {
      EXPECT_DOUBLE_EQ(obs.partitions.at(PartitionId(id)).buckets[b],
                       static_cast<double>(counts[b]) / static_cast<double>(total))
          << "partition " << id << " bucket " << b;
    }
  }

  // The raw admin view agrees with what was produced.
  admin = observer.PartitionsOf(pod_);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_EQ(admin->partitions.size(), 4u);
  for (const auto& p : admin->partitions) {
    uint64_t n = (others.count(p.id.value()) ? others.at(p.id.value()) : 0);
    if (p.id.value() == hot_partition) n += 70;
    EXPECT_EQ(p.end_offset, n) << p.id.value();
    EXPECT_EQ(p.appended, n) << p.id.value();
    EXPECT_TRUE(p.producers_durable);
    EXPECT_EQ(p.state, PartitionState::kActive);
  }
}

// What a group's consumers took and how long they held it, as the sidecar counts them: events
// handed out, and the time from that answer to the group's next request.
TEST_F(RealSidecarTest, ConsumersTookWhatWasDeliveredAndWereBusyUntilTheyAskedAgain) {
  MetricsObserver observer(clock_, kToken);
  std::map<uint32_t, uint64_t> end;  // per partition, the events appended so far
  // A batch handed to group g, committed, and g asking again (nothing left).
  auto round = [&](int per_key) {
    for (const auto& [p, n] : Produce(Keys(8), per_key)) end[p] += n;
    const std::string path = std::string("/v1/topics/") + kTopic + "/events?group=g&max=1000";
    auto batch = sidecar_->DataClient()->Get(path);
    ASSERT_TRUE(batch.ok()) << batch.Describe();
    for (const auto& [p, offset] : end) Commit("g", p, offset);
    auto again = sidecar_->DataClient()->Get(path);
    ASSERT_TRUE(again.ok()) << again.Describe();
  };
  round(1);  // the counters' series exist from here on
  observer.Observe(map_, {pod_});
  round(5);  // 40 events
  clock_.AdvanceMs(2000);
  const Observation obs = observer.Observe(map_, {pod_});
  ASSERT_TRUE(obs.consumers.count(pod_.name.value()));
  const ConsumerLoad& c = obs.consumers.at(pod_.name.value()).at("g");
  EXPECT_DOUBLE_EQ(c.delivered_rate, 40 / 2.0);
  EXPECT_DOUBLE_EQ(c.interval_s, 2);
  ASSERT_TRUE(c.busy.has_value()) << "shoal_consumer_busy_seconds_total not read";
  EXPECT_GT(*c.busy, 0);
}

// The sidecar's data volume (shoal_disk_*): its free space and its reserve, no pressure here.
TEST_F(RealSidecarTest, TheDataVolumeAndItsReserveAreRead) {
  MetricsObserver observer(clock_, kToken);
  const Observation obs = observer.Observe(map_, {pod_});
  ASSERT_TRUE(obs.disks.count(pod_.name.value())) << "shoal_disk_* not read";
  const DiskState& d = obs.disks.at(pod_.name.value());
  EXPECT_EQ(d.reserve_bytes, 64.0 * (1 << 20));
  EXPECT_GT(d.free_bytes, 0);
  EXPECT_FALSE(d.reserve_in_use);
  EXPECT_EQ(d.pressure(), d.free_bytes < 2 * d.reserve_bytes);
}

// A volume under pressure, as a sidecar reports it: under twice its reserve free, or the reserve
// in use; a sidecar without the metrics has no entry (nothing missing).
TEST(DiskStateTest, PressureIsUnderTwiceTheReserveFreeOrTheReserveInUse) {
  EXPECT_FALSE((DiskState{200, 100, false}).pressure());
  EXPECT_TRUE((DiskState{199, 100, false}).pressure());
  EXPECT_TRUE((DiskState{1000, 100, true}).pressure());
}

TEST_F(RealSidecarTest, NoGroupMeansLagZeroAndCpuComesFromThePod) {
  MetricsObserver observer(clock_, kToken);
  pod_.cpu_utilization = 0.7;
  observer.Observe(map_, {pod_});
  Produce(Keys(8), 1);
  clock_.AdvanceMs(2000);
  const Observation obs = observer.Observe(map_, {pod_});
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
  for (const auto& [id, load] : obs.partitions) EXPECT_EQ(load.lag, 0u) << id;
  EXPECT_EQ(obs.cpu_utilization, (std::map<std::string, double>{{pod_.name.value(), 0.7}}));
}

TEST_F(RealSidecarTest, SealedPartitionIsInactiveWithItsLag) {
  const auto before = Produce(Keys(40), 2);
  for (uint32_t p = 0; p < 4; ++p) Commit("idle", p, 0);
  // A real split of partition 0 on this sidecar: 0 sealed, successors 4 and 5 on the same pod.
  const PeerAddress address = pod_.address;
  const PartitionMap current = map_.WithPeer(pod_.name, address);
  const PartitionInfo p0 = *current.Find(PartitionId(0));
  auto split = current.Split(p0.id, p0.range.lo + p0.range.Width() / 2);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ChangeExecutor::Options eo;
  eo.step_timeout = 20s;
  ChangeExecutor executor(*admin_, eo);
  auto installed = executor.Apply(current, *split, nullptr);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString() << "\n" << sidecar_->Describe();

  MetricsObserver observer(clock_, kToken);
  Observation obs = observer.Observe(*installed, {pod_});
  // The sealed parent needs no rate: it is observed at once; the others have no earlier sample.
  ASSERT_TRUE(obs.partitions.count(PartitionId(0))) << Join(obs.missing);
  EXPECT_FALSE(obs.partitions.at(PartitionId(0)).active);
  EXPECT_EQ(obs.partitions.at(PartitionId(0)).lag, before.at(0));
  EXPECT_EQ(obs.partitions.at(PartitionId(0)).rate, 0.0);
  EXPECT_FALSE(Mentions(obs.missing, "partition 0:", "")) << Join(obs.missing);
  for (uint32_t p : {1u, 2u, 3u, 4u, 5u}) {
    EXPECT_TRUE(Mentions(obs.missing, "partition " + std::to_string(p) + ":", "no earlier"))
        << p << Join(obs.missing);
  }

  // Events of partition 0's keys now go to 4 and 5.
  const auto after = Produce(Keys(40), 1);
  EXPECT_FALSE(after.count(0));
  clock_.AdvanceMs(2000);
  obs = observer.Observe(*installed, {pod_});
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
  ASSERT_EQ(obs.partitions.size(), 6u);
  EXPECT_FALSE(obs.partitions.at(PartitionId(0)).active);
  for (uint32_t p : {1u, 2u, 3u, 4u, 5u}) {
    const uint64_t n = after.count(p) ? after.at(p) : 0;
    EXPECT_TRUE(obs.partitions.at(PartitionId(p)).active) << p;
    EXPECT_EQ(obs.partitions.at(PartitionId(p)).rate, static_cast<double>(n) / 2.0) << p;
  }
}

TEST_F(RealSidecarTest, KilledSidecarMeansMissingNotZeroThenNoEarlierSampleAfterRestart) {
  MetricsObserver observer(clock_, kToken);
  observer.Observe(map_, {pod_});
  clock_.AdvanceMs(2000);
  ASSERT_TRUE(observer.Observe(map_, {pod_}).complete());

  sidecar_->Kill9();
  clock_.AdvanceMs(2000);
  Observation obs = observer.Observe(map_, {pod_});
  EXPECT_TRUE(obs.partitions.empty()) << "a dead pod's partitions are not observed at rate 0";
  ASSERT_EQ(obs.missing.size(), 4u) << Join(obs.missing);
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_TRUE(Mentions(obs.missing, "partition " + std::to_string(p) + ": " + pod_.name.value(),
                         "/metrics: "))
        << Join(obs.missing);
  }

  // Back on the same ports, counters from 0: no diff against samples from before the kill.
  ASSERT_TRUE(sidecar_->Restart().ok()) << sidecar_->Describe();
  clock_.AdvanceMs(2000);
  obs = observer.Observe(map_, {pod_});
  EXPECT_TRUE(obs.partitions.empty());
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_TRUE(Mentions(obs.missing, "partition " + std::to_string(p) + ":", "no earlier sample"))
        << Join(obs.missing);
  }
  clock_.AdvanceMs(2000);
  obs = observer.Observe(map_, {pod_});
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
  EXPECT_EQ(obs.partitions.size(), 4u);
}

TEST_F(RealSidecarTest, WrongAdminTokenIsMissingButRatesStillCount) {
  MetricsObserver observer(clock_, "not-the-token");
  observer.Observe(map_, {pod_});
  const auto appended = Produce(Keys(20), 1);
  clock_.AdvanceMs(2000);
  const Observation obs = observer.Observe(map_, {pod_});
  ASSERT_EQ(obs.partitions.size(), 4u) << Join(obs.missing);
  for (const auto& [p, n] : appended) EXPECT_EQ(obs.partitions.at(PartitionId(p)).rate, n / 2.0) << p;
  ASSERT_EQ(obs.missing.size(), 4u) << Join(obs.missing);
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_TRUE(Mentions(obs.missing, "partition " + std::to_string(p) + ":",
                         "/v1/admin/partitions: answered 401"))
        << Join(obs.missing);
  }
  auto direct = observer.PartitionsOf(pod_);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), Status::Code::kUnauthenticated) << direct.status().ToString();
}

// ---------------------------------------------------------------------------------------------
// Against fake sidecars with canned answers.

// Serves GET <path> with whatever the test set last. Thread-safe.
class FakeSidecar {
 public:
  FakeSidecar() {
    auto ports = shoal::testing::PickFreePorts(1);
    if (!ports.ok()) return;
    port_ = (*ports)[0];
    listener_ = std::make_unique<web::http::experimental::listener::http_listener>(
        "http://127.0.0.1:" + std::to_string(port_));
    listener_->support([this](web::http::http_request req) {
      std::pair<int, std::string> answer{404, "{\"error\":\"not_found\"}"};
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = answers_.find(req.relative_uri().path());
        if (it != answers_.end()) answer = it->second;
        if (req.relative_uri().path() == "/v1/admin/partitions") {
          auth_.push_back(req.headers().has("Authorization") ? req.headers()["Authorization"] : "");
        }
      }
      // Never wait on a pool thread; observe the reply's outcome so a failure is not fatal.
      req.reply(answer.first, answer.second).then([](pplx::task<void> t) {
        try {
          t.get();
        } catch (const std::exception&) {
        }
      });
    });
    try {
      listener_->open().wait();
      open_ = true;
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  ~FakeSidecar() {
    if (!open_) return;
    try {
      listener_->close().wait();
    } catch (const std::exception&) {
    }
  }

  void Set(const std::string& path, int status, std::string body) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_[path] = {status, std::move(body)};
  }
  std::vector<std::string> auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return auth_;
  }
  bool open() const { return open_; }
  const std::string& error() const { return error_; }

  PodInfo Pod(const std::string& name) const {
    PodInfo p;
    p.name = PodName(name);
    p.ip = "127.0.0.1";
    p.address = {Address(port_), Address(port_)};
    p.metrics = Address(port_);
    return p;
  }

 private:
  uint16_t port_ = 0;
  bool open_ = false;
  std::string error_;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
  std::mutex mu_;
  std::map<std::string, std::pair<int, std::string>> answers_;
  std::vector<std::string> auth_;
};

PartitionInfo Part(uint32_t id, uint64_t lo, uint64_t hi, const std::string& owner,
                   PartitionState state = PartitionState::kActive) {
  PartitionInfo p;
  p.id = PartitionId(id);
  p.range = {lo, hi};
  p.state = state;
  p.owner = PodName(owner);
  return p;
}

// /metrics of a sidecar: appended counters and lags per partition id.
std::string Metrics(const std::map<uint32_t, double>& appended,
                    const std::map<uint32_t, std::map<std::string, double>>& lags = {},
                    const std::string& topic = kTopic) {
  std::string out =
      "# HELP shoal_events_appended_total Events appended\n"
      "# TYPE shoal_events_appended_total counter\n";
  for (const auto& [p, v] : appended) {
    out += "shoal_events_appended_total{topic=\"" + topic + "\",partition=\"" + std::to_string(p) +
           "\"} " + std::to_string(v) + "\n";
  }
  out += "# TYPE shoal_consumer_lag_events gauge\n";
  for (const auto& [p, groups] : lags) {
    for (const auto& [g, v] : groups) {
      out += "shoal_consumer_lag_events{topic=\"" + topic + "\",partition=\"" + std::to_string(p) +
             "\",group=\"" + g + "\"} " + std::to_string(v) + "\n";
    }
  }
  return out + "shoal_epoch{topic=\"" + topic + "\"} 5\n";
}

// shoal_events_delivered_total per group (what the sidecar handed to the group's consumers).
std::string Delivered(const std::map<std::string, double>& per_group) {
  std::string out = "# TYPE shoal_events_delivered_total counter\n";
  for (const auto& [g, v] : per_group) {
    out += "shoal_events_delivered_total{topic=\"" + std::string(kTopic) + "\",group=\"" + g +
           "\"} " + std::to_string(v) + "\n";
  }
  return out;
}

struct AdminEntry {
  uint32_t id;
  uint64_t appended;
  std::array<uint64_t, kLoadBuckets> buckets;
  std::vector<HashCount> tops;
  std::string state = "active";
};

std::string Admin(const std::vector<AdminEntry>& entries) {
  std::string out = R"({"topic":"orders","pod":"pod-a","epoch":5,"groups":["g"],"partitions":[)";
  for (size_t i = 0; i < entries.size(); ++i) {
    const AdminEntry& e = entries[i];
    out += i ? "," : "";
    out += "{\"id\":" + std::to_string(e.id) + ",\"state\":\"" + e.state +
           "\",\"lo\":0,\"hi\":2147483648,\"start_offset\":0,\"end_offset\":" +
           std::to_string(e.appended) +
           ",\"producers_durable\":true,\"appended\":" + std::to_string(e.appended) +
           ",\"load_buckets\":[";
    for (size_t b = 0; b < kLoadBuckets; ++b) {
      out += (b ? "," : "") + std::to_string(e.buckets[b]);
    }
    out += "],\"top_hashes\":[";
    for (size_t t = 0; t < e.tops.size(); ++t) {
      out += (t ? "," : "") + std::string("{\"hash\":") + std::to_string(e.tops[t].hash) +
             ",\"count\":" + std::to_string(e.tops[t].count) + "}";
    }
    out += "],\"commits\":{\"g\":" + std::to_string(e.appended / 2) + "}}";
  }
  return out + "]}";
}

std::array<uint64_t, kLoadBuckets> Buckets(std::initializer_list<std::pair<size_t, uint64_t>> set) {
  std::array<uint64_t, kLoadBuckets> b{};
  for (auto [i, v] : set) b[i] = v;
  return b;
}

class FakeSidecarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(a_.open()) << a_.error();
    ASSERT_TRUE(b_.open()) << b_.error();
  }
  MetricsObserver::Options Fast() {
    MetricsObserver::Options o;
    o.timeout = 500ms;
    return o;
  }

  ManualClock clock_;
  FakeSidecar a_, b_;
  // p0 on pod-a, p1 on pod-b, each half of the hash space.
  PartitionMap map_{kTopic, Epoch(5),
                    std::vector<PartitionInfo>{Part(0, 0, kHashSpace / 2, "pod-a"),
                                               Part(1, kHashSpace / 2, kHashSpace, "pod-b")}};
};

TEST_F(FakeSidecarTest, LoadShapeFromTheAdminPlanesCounters) {
  MetricsObserver observer(clock_, kToken, Fast());
  a_.Set("/metrics", 200, Metrics({{0, 100}}, {{0, {{"g", 3}, {"h", 9}}}}));
  a_.Set("/v1/admin/partitions", 200, Admin({{0, 100, Buckets({{0, 100}}), {{7, 40}, {9, 10}}}}));
  b_.Set("/metrics", 200, Metrics({{1, 0}}));
  // pod-b has no admin endpoint yet: 404 is "shape unknown", not missing.
  Observation obs = observer.Observe(map_, {a_.Pod("pod-a"), b_.Pod("pod-b")});
  EXPECT_EQ(obs.missing.size(), 2u) << Join(obs.missing);

  a_.Set("/metrics", 200, Metrics({{0, 300}}, {{0, {{"g", 3}, {"h", 9}}}}));
  a_.Set("/v1/admin/partitions", 200,
         Admin({{0, 300, Buckets({{0, 150}, {3, 50}}), {{7, 90}, {9, 110}, {11, 500}}}}));
  b_.Set("/metrics", 200, Metrics({{1, 10}}));
  clock_.AdvanceMs(2000);
  obs = observer.Observe(map_, {a_.Pod("pod-a"), b_.Pod("pod-b")});
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
  EXPECT_EQ(obs.epoch, Epoch(5));
  ASSERT_EQ(obs.partitions.size(), 2u);
  const PartitionLoad& p0 = obs.partitions.at(PartitionId(0));
  EXPECT_EQ(p0.rate, 100.0);
  EXPECT_EQ(p0.lag, 9u);
  // 50 of 100 new events in bucket 0, 50 in bucket 3.
  std::array<double, kLoadBuckets> want{};
  want[0] = 0.5;
  want[3] = 0.5;
  EXPECT_EQ(p0.buckets, want);
  // Hash 9 grew by 100 of 200 appended; 11 is new to the list and not compared.
  EXPECT_EQ(p0.top_hash, 9u);
  EXPECT_EQ(p0.top_share, 0.5);
  const PartitionLoad& p1 = obs.partitions.at(PartitionId(1));
  EXPECT_EQ(p1.rate, 5.0);
  EXPECT_EQ(p1.lag, 0u);
  EXPECT_EQ(p1.buckets, (std::array<double, kLoadBuckets>{}));
  EXPECT_EQ(p1.top_hash, 0u);

  for (const auto& h : a_.auth()) EXPECT_EQ(h, std::string("Bearer ") + kToken);
  EXPECT_EQ(a_.auth().size(), 2u);
}

TEST_F(FakeSidecarTest, CounterThatWentDownGivesNoRateOnce) {
  MetricsObserver observer(clock_, kToken, Fast());
  const std::vector<PodInfo> pods = {a_.Pod("pod-a"), b_.Pod("pod-b")};
  b_.Set("/metrics", 200, Metrics({{1, 0}}));
  a_.Set("/metrics", 200, Metrics({{0, 500}}));
  observer.Observe(map_, pods);
  a_.Set("/metrics", 200, Metrics({{0, 40}}));  // restarted in between
  clock_.AdvanceMs(2000);
  Observation obs = observer.Observe(map_, pods);
  EXPECT_FALSE(obs.partitions.count(PartitionId(0)));
  EXPECT_TRUE(Mentions(obs.missing, "partition 0:", "went down")) << Join(obs.missing);
  EXPECT_EQ(obs.partitions.at(PartitionId(1)).rate, 0.0);

  a_.Set("/metrics", 200, Metrics({{0, 60}}));
  clock_.AdvanceMs(4000);
  obs = observer.Observe(map_, pods);
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
  EXPECT_EQ(obs.partitions.at(PartitionId(0)).rate, 5.0);
}

TEST_F(FakeSidecarTest, NoTimePassedGivesNoRate) {
  MetricsObserver observer(clock_, kToken, Fast());
  const std::vector<PodInfo> pods = {a_.Pod("pod-a"), b_.Pod("pod-b")};
  a_.Set("/metrics", 200, Metrics({{0, 1}}));
  b_.Set("/metrics", 200, Metrics({{1, 1}}));
  observer.Observe(map_, pods);
  const Observation obs = observer.Observe(map_, pods);
  EXPECT_TRUE(obs.partitions.empty());
  EXPECT_TRUE(Mentions(obs.missing, "partition 0:", "no time passed")) << Join(obs.missing);
}

TEST_F(FakeSidecarTest, BrokenAdminPlaneIsMissingButTheRateIsObserved) {
  MetricsObserver observer(clock_, kToken, Fast());
  const std::vector<PodInfo> pods = {a_.Pod("pod-a"), b_.Pod("pod-b")};
  a_.Set("/metrics", 200, Metrics({{0, 0}}));
  b_.Set("/metrics", 200, Metrics({{1, 0}}));
  a_.Set("/v1/admin/partitions", 200, "{\"topic\":");  // bad JSON
  b_.Set("/v1/admin/partitions", 500, "{\"error\":\"internal\"}");
  observer.Observe(map_, pods);
  a_.Set("/metrics", 200, Metrics({{0, 20}}));
  clock_.AdvanceMs(2000);
  const Observation obs = observer.Observe(map_, pods);
  ASSERT_EQ(obs.partitions.size(), 2u) << Join(obs.missing);
  EXPECT_EQ(obs.partitions.at(PartitionId(0)).rate, 10.0);
  EXPECT_TRUE(Mentions(obs.missing, "partition 0: pod-a: /v1/admin/partitions:", "JSON"))
      << Join(obs.missing);
  EXPECT_TRUE(Mentions(obs.missing, "partition 1: pod-b: /v1/admin/partitions:", "answered 500"))
      << Join(obs.missing);
  EXPECT_EQ(obs.missing.size(), 2u) << Join(obs.missing);
}

TEST_F(FakeSidecarTest, MalformedMetricsAndUnreportedPartitionsAreMissing) {
  MetricsObserver observer(clock_, kToken, Fast());
  const std::vector<PodInfo> pods = {a_.Pod("pod-a"), b_.Pod("pod-b")};
  a_.Set("/metrics", 200, "# TYPE x counter\nx{a=\"1\" 2\n");
  // pod-b reports partition 0 (it is not its owner) but not partition 1; another topic's
  // partition 1 does not count either.
  b_.Set("/metrics", 200, Metrics({{0, 5}}) + Metrics({{1, 5}}, {}, "payments"));
  const Observation obs = observer.Observe(map_, pods);
  EXPECT_TRUE(obs.partitions.empty());
  EXPECT_TRUE(Mentions(obs.missing, "partition 0: pod-a: /metrics: line 2:", ""))
      << Join(obs.missing);
  EXPECT_TRUE(Mentions(obs.missing, "partition 1:", "pod-b does not report it"))
      << Join(obs.missing);
}

TEST_F(FakeSidecarTest, OnlyTheOwnerCounts) {
  MetricsObserver observer(clock_, kToken, Fast());
  const std::vector<PodInfo> pods = {a_.Pod("pod-a"), b_.Pod("pod-b")};
  a_.Set("/metrics", 200, Metrics({{0, 10}, {1, 1000}}, {{1, {{"g", 999}}}}));
  b_.Set("/metrics", 200, Metrics({{0, 1000}, {1, 10}}, {{0, {{"g", 999}}}}));
  observer.Observe(map_, pods);
  a_.Set("/metrics", 200, Metrics({{0, 30}, {1, 5000}}, {{1, {{"g", 999}}}}));
  b_.Set("/metrics", 200, Metrics({{0, 5000}, {1, 50}}, {{0, {{"g", 999}}}}));
  clock_.AdvanceMs(2000);
  const Observation obs = observer.Observe(map_, pods);
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
  EXPECT_EQ(obs.partitions.at(PartitionId(0)).rate, 10.0);
  EXPECT_EQ(obs.partitions.at(PartitionId(0)).lag, 0u);
  EXPECT_EQ(obs.partitions.at(PartitionId(1)).rate, 20.0);
  EXPECT_EQ(obs.partitions.at(PartitionId(1)).lag, 0u);
}

TEST_F(FakeSidecarTest, OwnerNotAmongThePods) {
  MetricsObserver observer(clock_, kToken, Fast());
  a_.Set("/metrics", 200, Metrics({{0, 10}}));
  const Observation obs = observer.Observe(map_, {a_.Pod("pod-a")});
  EXPECT_TRUE(Mentions(obs.missing, "partition 1:", "pod-b is not among the pods"))
      << Join(obs.missing);
  EXPECT_EQ(obs.missing.size(), 2u) << Join(obs.missing);  // and partition 0's first sample
}

TEST_F(FakeSidecarTest, SealedPartitionNeedsNoEarlierSample) {
  MetricsObserver observer(clock_, kToken, Fast());
  const PartitionMap map(
      kTopic, Epoch(6),
      {Part(0, 0, kHashSpace, "pod-a", PartitionState::kSealed), Part(1, 0, kHashSpace, "pod-a")});
  a_.Set("/metrics", 200, Metrics({{0, 10}, {1, 0}}, {{0, {{"g", 4}}}}));
  const Observation obs = observer.Observe(map, {a_.Pod("pod-a")});
  ASSERT_TRUE(obs.partitions.count(PartitionId(0))) << Join(obs.missing);
  EXPECT_FALSE(obs.partitions.at(PartitionId(0)).active);
  EXPECT_EQ(obs.partitions.at(PartitionId(0)).lag, 4u);
  EXPECT_EQ(obs.missing.size(), 1u) << Join(obs.missing);
  EXPECT_TRUE(Mentions(obs.missing, "partition 1:", "no earlier sample")) << Join(obs.missing);
}

// A split of p0 (sealed, on pod-a) into p1 (pod-a) and p2 (pod-b): each pod's consumers took
// their delivered counter's increase, and the backlog they serve is their group's lag on their
// own partitions plus their range of the parent held elsewhere.
TEST_F(FakeSidecarTest, ConsumersTookWhatTheirSidecarDeliveredAndServeTheirRangeOfAncestors) {
  MetricsObserver observer(clock_, kToken, Fast());
  std::vector<PartitionInfo> parts = {Part(0, 0, kHashSpace, "pod-a", PartitionState::kSealed),
                                      Part(1, 0, kHashSpace / 4, "pod-a"),
                                      Part(2, kHashSpace / 4, kHashSpace, "pod-b")};
  parts[1].parents = {PartitionId(0)};
  parts[2].parents = {PartitionId(0)};
  const PartitionMap map(kTopic, Epoch(6), parts);
  const std::vector<PodInfo> pods = {a_.Pod("pod-a"), b_.Pod("pod-b")};
  auto serve = [&](double a_delivered, double b_delivered) {
    a_.Set("/metrics", 200,
           Metrics({{0, 1000}, {1, 0}}, {{0, {{"g", 1000}, {"h", 7}}}, {1, {{"g", 10}}}}) +
               Delivered({{"g", a_delivered}}));
    // pod-b also reports p0 (it reads through it); only p0's owner counts. Its delivered
    // counter comes in two series (another label): they add up.
    b_.Set("/metrics", 200,
           Metrics({{0, 1000}, {2, 0}}, {{0, {{"g", 99999}}}, {2, {{"g", 20}}}}) +
               Delivered({{"g", b_delivered / 2}}) +
               "shoal_events_delivered_total{topic=\"orders\",group=\"g\",from=\"ancestors\"} " +
               std::to_string(b_delivered / 2) + "\n");
  };
  serve(500, 0);
  Observation obs = observer.Observe(map, pods);
  EXPECT_TRUE(obs.consumers.empty());  // no earlier sample of the counters
  serve(2500, 300);
  clock_.AdvanceMs(2000);
  obs = observer.Observe(map, pods);
  ASSERT_EQ(obs.consumers.size(), 2u);
  const ConsumerLoad& a = obs.consumers.at("pod-a").at("g");
  EXPECT_DOUBLE_EQ(a.delivered_rate, 1000);
  EXPECT_EQ(a.backlog, 1010u);  // p0, its own, whole, and p1
  const ConsumerLoad& b = obs.consumers.at("pod-b").at("g");
  EXPECT_DOUBLE_EQ(b.delivered_rate, 150);
  EXPECT_EQ(b.backlog, 20u + 750u);                    // p2 and three quarters of p0
  EXPECT_FALSE(obs.consumers.at("pod-a").count("h"));  // a lag, but nothing delivered

  // A counter that went down (a restarted sidecar) gives no rate; one without the counter is
  // left out; neither is missing.
  a_.Set("/metrics", 200, Metrics({{0, 1000}, {1, 0}}) + Delivered({{"g", 100}}));
  b_.Set("/metrics", 200, Metrics({{0, 1000}, {2, 0}}));
  clock_.AdvanceMs(1000);
  obs = observer.Observe(map, pods);
  EXPECT_TRUE(obs.consumers.empty());
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);
}

// What a pod's consumers were busy with (shoal_consumer_busy_seconds_total) beside what they
// took: pod-a's consumer counters as Prometheus text at two Observes 2 s apart, and per group
// the delivered rate and busy fraction read from them.
struct BusyCase {
  const char* name;
  std::string before, after;
  // Per group on pod-a: {delivered ev/s, busy fraction}; a group absent has no ConsumerLoad.
  std::map<std::string, std::pair<double, std::optional<double>>> expect;
};

void PrintTo(const BusyCase& c, std::ostream* os) { *os << c.name; }

// One series of a counter, as a sidecar exports it: `labels` beside topic and group.
std::string Series(const char* name, const std::string& group, double v,
                   const std::string& labels = "", const std::string& topic = kTopic) {
  return std::string(name) + "{topic=\"" + topic + "\",group=\"" + group + "\"" + labels + "} " +
         std::to_string(v) + "\n";
}
std::string Dlv(const std::string& group, double v) {
  return Series("shoal_events_delivered_total", group, v);
}
std::string Busy(const std::string& group, double v, const std::string& labels = "",
                 const std::string& topic = kTopic) {
  return Series("shoal_consumer_busy_seconds_total", group, v, labels, topic);
}

class BusyFractionTest : public FakeSidecarTest, public ::testing::WithParamInterface<BusyCase> {};

TEST_P(BusyFractionTest, IsTheBusyCountersIncreasePerSecondOfTheInterval) {
  const BusyCase& c = GetParam();
  MetricsObserver observer(clock_, kToken, Fast());
  const std::vector<PodInfo> pods = {a_.Pod("pod-a"), b_.Pod("pod-b")};
  b_.Set("/metrics", 200, Metrics({{1, 0}}));
  a_.Set("/metrics", 200, Metrics({{0, 0}}) + c.before);
  (void)observer.Observe(map_, pods);
  a_.Set("/metrics", 200, Metrics({{0, 0}}) + c.after);
  clock_.AdvanceMs(2000);
  const Observation obs = observer.Observe(map_, pods);
  EXPECT_TRUE(obs.complete()) << Join(obs.missing);  // a busy counter or none: nothing missing
  std::map<std::string, std::pair<double, std::optional<double>>> got;
  if (auto pod = obs.consumers.find("pod-a"); pod != obs.consumers.end()) {
    for (const auto& [group, load] : pod->second) {
      got[group] = {load.delivered_rate, load.busy};
      EXPECT_DOUBLE_EQ(load.interval_s, 2) << group;
    }
  }
  EXPECT_EQ(got, c.expect);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BusyFractionTest,
    ::testing::Values(
        BusyCase{"half_busy",
                 Dlv("g", 100) + Busy("g", 3),
                 Dlv("g", 1100) + Busy("g", 4),
                 {{"g", {500, 0.5}}}},
        // Series split by another label add up, as the delivered counter's do.
        BusyCase{"summed_over_other_labels",
                 Dlv("g", 0) + Busy("g", 1, ",consumer=\"c1\"") + Busy("g", 1, ",consumer=\"c2\""),
                 Dlv("g", 400) + Busy("g", 1.25, ",consumer=\"c1\"") +
                     Busy("g", 1.25, ",consumer=\"c2\""),
                 {{"g", {200, 0.25}}}},
        BusyCase{"per_group",
                 Dlv("g", 0) + Dlv("h", 0) + Busy("g", 0) + Busy("h", 0),
                 Dlv("g", 2000) + Dlv("h", 200) + Busy("g", 2) + Busy("h", 0.4),
                 {{"g", {1000, 1.0}}, {"h", {100, 0.2}}}},
        // A batch handed out before the interval and ended in it: reported as measured.
        BusyCase{"a_little_over_one",
                 Dlv("g", 0) + Busy("g", 0),
                 Dlv("g", 1000) + Busy("g", 2.5),
                 {{"g", {500, 1.25}}}},
        // A sidecar without the counter: what was delivered, the busy fraction unknown.
        BusyCase{"no_busy_counter", Dlv("g", 0), Dlv("g", 600), {{"g", {300, std::nullopt}}}},
        // No earlier sample of it (its series appears once its consumers first held a batch).
        BusyCase{"busy_counter_appears",
                 Dlv("g", 0),
                 Dlv("g", 600) + Busy("g", 1),
                 {{"g", {300, std::nullopt}}}},
        // Went down (a restarted sidecar whose delivered counter had not fallen below).
        BusyCase{"busy_counter_went_down",
                 Dlv("g", 0) + Busy("g", 9),
                 Dlv("g", 600) + Busy("g", 1),
                 {{"g", {300, std::nullopt}}}},
        // Busy time alone says nothing of what was taken.
        BusyCase{"busy_without_delivered", Busy("g", 0), Busy("g", 1), {}},
        BusyCase{"another_topics_counter",
                 Dlv("g", 0) + Busy("g", 0, "", "payments"),
                 Dlv("g", 600) + Busy("g", 1, "", "payments"),
                 {{"g", {300, std::nullopt}}}}),
    [](const auto& info) { return std::string(info.param.name); });

// A pod that accepts connections and never answers: its partitions go missing within the
// timeout, and the other pod is still observed.
TEST_F(FakeSidecarTest, SilentPodTimesOut) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  PodInfo silent = b_.Pod("pod-b");
  silent.metrics = silent.address.admin = silent.address.data = Address(ntohs(addr.sin_port));

  MetricsObserver::Options o;
  o.timeout = 300ms;
  MetricsObserver observer(clock_, kToken, o);
  a_.Set("/metrics", 200, Metrics({{0, 10}}));
  const auto start = std::chrono::steady_clock::now();
  const Observation obs = observer.Observe(map_, {a_.Pod("pod-a"), silent});
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(fd);
  EXPECT_LT(took, 5s);
  EXPECT_TRUE(Mentions(obs.missing, "partition 1: pod-b: /metrics: ", "")) << Join(obs.missing);
  EXPECT_TRUE(Mentions(obs.missing, "partition 0:", "no earlier sample")) << Join(obs.missing);
}

TEST_F(FakeSidecarTest, PartitionsOf) {
  MetricsObserver observer(clock_, kToken, Fast());
  a_.Set("/v1/admin/partitions", 200,
         Admin({{0, 8, Buckets({{1, 8}}), {{5, 2}}}, {3, 4, Buckets({}), {}, "sealed"}}));
  auto got = observer.PartitionsOf(a_.Pod("pod-a"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->partitions.size(), 2u);
  EXPECT_EQ(got->groups, (std::vector<std::string>{"g"}));
  EXPECT_EQ(got->partitions[0].id, PartitionId(0));
  EXPECT_EQ(got->partitions[0].end_offset, 8u);
  EXPECT_EQ(got->partitions[0].commits, (std::map<std::string, uint64_t>{{"g", 4}}));
  EXPECT_TRUE(got->partitions[0].producers_durable);
  EXPECT_EQ(got->partitions[1].state, PartitionState::kSealed);

  auto absent = observer.PartitionsOf(b_.Pod("pod-b"));  // 404
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), Status::Code::kNotFound);

  b_.Set("/v1/admin/partitions", 200, "[]");
  auto bad = observer.PartitionsOf(b_.Pod("pod-b"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument) << bad.status().ToString();

  PodInfo nowhere = b_.Pod("pod-c");
  auto ports = shoal::testing::PickFreePorts(1);
  ASSERT_TRUE(ports.ok());
  nowhere.address.admin = Address((*ports)[0]);  // nothing listens there
  auto refused = observer.PartitionsOf(nowhere);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kUnavailable);

  nowhere.address.admin = "";
  auto no_address = observer.PartitionsOf(nowhere);
  ASSERT_FALSE(no_address.ok());
  EXPECT_EQ(no_address.status().code(), Status::Code::kUnavailable);
}

}  // namespace
}  // namespace shoal::control
