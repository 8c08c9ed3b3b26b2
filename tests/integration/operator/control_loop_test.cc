// The control loop on the local platform with real sidecars under load (issue 4's acceptance):
// `shoal control` runs as its own process with pods (sidecar + consumer processes) on a loopback
// block of their own; keyed load with a surge drives it. The test watches the persisted control
// state and checks that the surge leads to splits, new pods and moves; kills the loop with
// kill -9 in the middle of a plan and starts it again, which must complete that plan; lets the
// surge pass and checks that scale-down returns the pods; and finally verifies, over the whole
// run, that every acknowledged event was seen, none reordered.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "shoal/control/admin_partitions.h"
#include "shoal/control/process.h"
#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"
#include "support/loopback.h"
#include "support/temp_dir.h"

namespace shoal {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the control state file says at one moment.
struct Snapshot {
  bool has_map = false;
  uint64_t epoch = 0;
  size_t active = 0;
  std::set<std::string> owners;  // of active partitions
  std::map<std::string, size_t> held;  // partitions per owner, active and sealed
  bool has_plan = false;
  uint64_t plan_id = 0, plan_next = 0, plan_steps = 0;
  std::vector<std::string> step_kinds;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// nullopt while the file is missing or being replaced.
std::optional<Snapshot> ReadState(const std::string& dir) {
  const std::string text = ReadAll(dir + "/control-state.json");
  if (text.empty()) return std::nullopt;
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element doc;
  if (parser.parse(padded).get(doc)) return std::nullopt;
  Snapshot s;
  simdjson::dom::element map, plan;
  if (!doc["map"].get(map) && !map.is_null()) {
    s.has_map = true;
    if (map["epoch"].get(s.epoch)) return std::nullopt;
    simdjson::dom::array parts;
    if (map["partitions"].get(parts)) return std::nullopt;
    for (auto p : parts) {
      std::string_view state, owner;
      if (p["state"].get(state) || p["owner"].get(owner)) return std::nullopt;
      ++s.held[std::string(owner)];
      if (state == "active") {
        ++s.active;
        s.owners.insert(std::string(owner));
      }
    }
  }
  if (!doc["plan"].get(plan) && !plan.is_null()) {
    s.has_plan = true;
    simdjson::dom::array steps;
    if (plan["id"].get(s.plan_id) || plan["next"].get(s.plan_next) || plan["steps"].get(steps)) {
      return std::nullopt;
    }
    for (auto st : steps) {
      std::string_view kind;
      if (st["kind"].get(kind)) return std::nullopt;
      s.step_kinds.emplace_back(kind);
    }
    s.plan_steps = s.step_kinds.size();
  }
  return s;
}

uint32_t DesiredPods(const std::string& dir) {
  const std::string text = ReadAll(dir + "/desired-pods");
  return text.empty() ? 0 : static_cast<uint32_t>(std::stoul(text));
}

class ControlLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ip_prefix_ = testing::RandomLoopbackPrefix();
    state_ = dir_.path() + "/state";
    topic_file_ = dir_.path() + "/orders.yaml";
    std::ofstream(topic_file_) << R"(apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata: {name: orders}
spec:
  partitions: {min: 2, max: 16, initial: 2}
  replicas: {min: 1, max: 4}
  scaling:
    targetEventsPerSecondPerPartition: 400
    targetPartitionsPerReplica: 4
    targetConsumerLag: 50000
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0, tolerance: 0.1}
    scaleDown: {stabilizationWindowSeconds: 6, tolerance: 0.1}
  durability: {fsync: interval}
)";
  }

  void TearDown() override {
    if (loop_.running()) loop_.Stop(5s);
    // Stop the pods whatever happened (they run in sessions of their own).
    auto down = control::ChildProcess::Spawn(
        {SHOAL_BIN, "down", "--topic", "orders", "--state-dir", state_}, dir_.path() + "/down.log");
    if (down.ok()) down->Wait(60s);
    if (HasFailure()) {
      dir_.Keep();
      std::fprintf(stderr, "kept %s for inspection\n", dir_.path().c_str());
    }
  }

  void StartLoop() {
    auto p = control::ChildProcess::Spawn(
        {SHOAL_BIN, "control", topic_file_, "--state-dir", state_, "--ip-prefix", ip_prefix_,
         "--control-port", "0", "--interval-ms", "500", "--log-level", "info"},
        dir_.path() + "/control.log");
    ASSERT_TRUE(p.ok()) << p.status().message();
    loop_ = std::move(p).value();
  }

  // Polls the control state until `pred` holds; records every snapshot seen on the way.
  bool WaitFor(const std::function<bool(const Snapshot&)>& pred, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (auto s = ReadState(state_)) {
        max_active_ = std::max(max_active_, s->active);
        max_owners_ = std::max(max_owners_, s->owners.size());
        max_pods_ = std::max(max_pods_, DesiredPods(state_));
        if (pred(*s)) return true;
      }
      std::this_thread::sleep_for(20ms);  // polling interval of a file another process writes
    }
    return false;
  }

  // Waits (up to 60 s) until the consumers recorded as many events as were acknowledged.
  void WaitUntilSeen(size_t acked) {
    const auto deadline = Clock::now() + 60s;
    while (harness::CountSeenLines(state_ + "/seen") < acked && Clock::now() < deadline) {
      std::this_thread::sleep_for(50ms);  // polling files other processes append to
    }
  }

  // What the consumers recorded against what was acknowledged: nothing lost or reordered.
  harness::VerifyReport VerifySeen(const std::vector<harness::AckedEvent>& acked, size_t* seen) {
    auto recorded = harness::ReadSeenDir(state_ + "/seen");
    EXPECT_TRUE(recorded.ok()) << recorded.status().message();
    if (!recorded.ok()) return {};
    *seen = recorded->size();
    auto report = harness::Verify(acked, std::move(recorded).value());
    EXPECT_EQ(report.lost, 0u) << report.ToText();
    EXPECT_EQ(report.reordered, 0u) << report.ToText();
    return report;
  }

  // Keyed load through pod 0 (it forwards the other pods' ranges): 300 events/s of 500 keys.
  harness::LoadOptions KeyedLoadThroughPod0() const {
    harness::LoadOptions lo;
    lo.targets = {"http://" + ip_prefix_ + ".2:8080"};
    lo.rate = 300;
    lo.keys = 500;
    lo.producers = 2;
    lo.batch = 10;
    return lo;
  }

  // Waits (up to 60 s) until the consumers saw every acknowledged event, then checks that
  // nothing was lost or reordered.
  void WaitAllSeen(const std::vector<harness::AckedEvent>& acked) {
    const auto seen_deadline = Clock::now() + 60s;
    auto all_seen = [&] {
      auto recorded = harness::ReadSeenDir(state_ + "/seen");
      if (!recorded.ok()) return false;
      return harness::Verify(acked, std::move(recorded).value()).lost == 0;
    };
    while (!all_seen() && Clock::now() < seen_deadline) {
      std::this_thread::sleep_for(200ms);  // polling files other processes append to
    }
    size_t seen = 0;
    VerifySeen(acked, &seen);
  }

  // A topic of 3 partitions on 3 pods with 3 copies of each (fsync always) under the loop, once
  // `map_file` (a pod's map) is written.
  void StartThreeCopiesTopic(const std::string& map_file) {
    std::ofstream(topic_file_) << R"(apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata: {name: orders}
spec:
  partitions: {min: 3, max: 3, initial: 3}
  replicas: {min: 3, max: 3}
  replication: {factor: 3, acks: quorum}
  durability: {fsync: always}
)";
    StartLoop();
    ASSERT_TRUE(WaitFor([](const Snapshot& s) { return s.owners.size() == 3; }, 60s))
        << "the topic was not created on three pods; see control.log";
    ASSERT_TRUE(WaitFile(map_file, true, 30s));
  }

  // Waits until `path` exists (or not), up to `timeout`; returns whether it does as asked.
  static bool WaitFile(const std::string& path, bool exists, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (std::filesystem::exists(path) != exists && Clock::now() < deadline) {
      std::this_thread::sleep_for(50ms);  // polling a file another process writes
    }
    return std::filesystem::exists(path) == exists;
  }
  // Empties a pod's data directory (its volume lost), leaving the directory. Stop the pod's
  // process first: one that runs writes files beside the ones being removed.
  static void EmptyDataDir(const std::string& pod_dir) {
    for (const auto& e : std::filesystem::directory_iterator(pod_dir + "/data")) {
      std::filesystem::remove_all(e.path());
    }
  }
  // The loop's log once it says `text` (or as it is after `timeout`).
  std::string WaitLog(const std::string& text, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::string log;
    while (Clock::now() < deadline) {
      log = ReadAll(dir_.path() + "/control.log");
      if (log.find(text) != std::string::npos) break;
      std::this_thread::sleep_for(50ms);  // polling a log another process writes
    }
    return log;
  }

  testing::TempDir dir_{"shoal-control"};
  std::string ip_prefix_, state_, topic_file_;
  control::ChildProcess loop_;
  size_t max_active_ = 0, max_owners_ = 0;
  uint32_t max_pods_ = 0;
};

TEST_F(ControlLoopTest, SurgeScalesUpKilledLoopResumesScaleDownReturnsPodsNothingLost) {
  StartLoop();
  ASSERT_TRUE(WaitFor([](const Snapshot& s) { return s.has_map; }, 60s))
      << "the topic was not created; see control.log";

  // Load: 500 events/s, ten times that in the middle third of 36 s, into pod 0 (it forwards).
  harness::LoadOptions lo;
  lo.targets = {"http://" + ip_prefix_ + ".2:8080"};
  lo.rate = 500;
  lo.profile = "surge";
  lo.duration_s = 36;
  lo.surge_from = 1.0 / 3;
  lo.surge_until = 2.0 / 3;
  lo.keys = 2000;
  lo.producers = 4;
  lo.batch = 25;
  harness::LoadGenerator load(lo);
  load.Start();

  // The surge: splits, then more pods, then moves. Kill the loop once a plan has done its first
  // step and still has steps to go.
  uint64_t killed_plan = 0;
  ASSERT_TRUE(WaitFor(
      [&](const Snapshot& s) {
        if (s.has_plan && s.plan_next >= 1 && s.plan_next < s.plan_steps) {
          killed_plan = s.plan_id;
          return true;
        }
        return false;
      },
      60s))
      << "no plan in progress seen during the surge";
  loop_.Signal(SIGKILL);
  ASSERT_TRUE(loop_.Wait(10s).has_value());
  const auto before = ReadState(state_);
  ASSERT_TRUE(before && before->has_plan && before->plan_id == killed_plan);
  StartLoop();
  // The restarted loop completes that very plan.
  ASSERT_TRUE(
      WaitFor([&](const Snapshot& s) { return !s.has_plan || s.plan_id > killed_plan; }, 60s))
      << "plan " << killed_plan << " was not completed after the restart";

  // Scale-up happened: more partitions, more pods, partitions moved onto them.
  // (A tenfold surge of 500 ev/s at 400 ev/s per partition needs at least 8 partitions.)
  EXPECT_TRUE(WaitFor(
      [&](const Snapshot&) { return max_pods_ >= 2 && max_owners_ >= 2 && max_active_ >= 8; }, 30s))
      << "max pods " << max_pods_ << ", max owners " << max_owners_ << ", max partitions "
      << max_active_;

  // The surge passes and the load ends: scale-down returns the pods and merges partitions.
  ASSERT_TRUE(WaitFor(
      [&](const Snapshot& s) {
        return !s.has_plan && DesiredPods(state_) == 1 && s.owners.size() == 1 && s.active <= 4;
      },
      120s))
      << "scale-down did not return to one pod";
  load.Stop();
  const auto acked = load.TakeAcked();
  ASSERT_GT(acked.size(), 10000u);

  // Every acknowledged event reaches a consumer: wait until the consumers recorded them all.
  WaitUntilSeen(acked.size());
  loop_.Stop(10s);
  auto down = control::ChildProcess::Spawn(
      {SHOAL_BIN, "down", "--topic", "orders", "--state-dir", state_}, dir_.path() + "/down.log");
  ASSERT_TRUE(down.ok());
  ASSERT_EQ(down->Wait(60s).value_or(-1), 0);
  size_t seen = 0;
  const auto report = VerifySeen(acked, &seen);
  std::printf(
      "acked %zu, seen %zu, lost %llu, reordered %llu, duplicated %llu; max partitions %zu, "
      "max pods %u\n",
      acked.size(), seen, static_cast<unsigned long long>(report.lost),
      static_cast<unsigned long long>(report.reordered),
      static_cast<unsigned long long>(report.duplicated), max_active_, max_pods_);
}

// A pod whose sidecar may open only a few more files (its RLIMIT_NOFILE lowered with prlimit,
// as a container's ulimit would) never gets more partitions than it can open; the surge is
// taken by adding pods instead, and nothing is lost.
TEST_F(ControlLoopTest, APodWithFewDescriptorsGetsNoMorePartitionsThanItCanOpenAndPodsAreAdded) {
  StartLoop();
  ASSERT_TRUE(WaitFor([](const Snapshot& s) { return s.has_map; }, 60s))
      << "the topic was not created; see control.log";
  // Pod 0's sidecar: whatever it has open now, the descriptors of reserve (kFilesReserve), and
  // room for 4 more partitions of two files each: it can hold 6 (its 2 and 4 more).
  const std::string pid_text = ReadAll(state_ + "/pods/orders-0/sidecar.pid");
  ASSERT_FALSE(pid_text.empty());
  const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
  size_t open_now = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++open_now;
  }
  constexpr size_t kCanHold = 6;
  const rlim_t limit = static_cast<rlim_t>(open_now + control::kFilesReserve + 2 * (kCanHold - 2));
  rlimit lowered{limit, limit};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &lowered, nullptr), 0) << std::strerror(errno);
  std::printf("pod 0's sidecar (pid %d): %zu descriptors open, limit lowered to %llu\n",
              static_cast<int>(pid), open_now, static_cast<unsigned long long>(limit));

  // A tenfold surge that wants at least 8 partitions (5,000 ev/s at 400 per partition).
  harness::LoadOptions lo;
  lo.targets = {"http://" + ip_prefix_ + ".2:8080"};
  lo.rate = 500;
  lo.profile = "surge";
  lo.duration_s = 30;
  lo.surge_from = 0.2;
  lo.surge_until = 0.7;
  lo.keys = 2000;
  lo.producers = 4;
  lo.batch = 25;
  harness::LoadGenerator load(lo);
  load.Start();
  size_t most_on_pod0 = 0;
  const bool scaled = WaitFor(
      [&](const Snapshot& s) {
        if (auto it = s.held.find("orders-0"); it != s.held.end()) {
          most_on_pod0 = std::max(most_on_pod0, it->second);
        }
        return max_pods_ >= 2 && max_owners_ >= 2 && max_active_ >= 8;
      },
      60s);
  // Keep watching through the rest of the load.
  WaitFor(
      [&](const Snapshot& s) {
        if (auto it = s.held.find("orders-0"); it != s.held.end()) {
          most_on_pod0 = std::max(most_on_pod0, it->second);
        }
        return false;
      },
      20s);
  load.Stop();
  EXPECT_TRUE(scaled) << "max pods " << max_pods_ << ", max owners " << max_owners_
                      << ", max partitions " << max_active_;
  EXPECT_LE(most_on_pod0, kCanHold) << "pod 0 was given more partitions than it can open";
  const std::string log = ReadAll(state_ + "/pods/orders-0/sidecar.log");
  EXPECT_EQ(log.find("Too many open files"), std::string::npos)
      << "pod 0's sidecar ran out of descriptors";
  // It was the limit that kept the partitions off pod 0: the decisions say so.
  const std::string control_log = ReadAll(dir_.path() + "/control.log");
  EXPECT_NE(control_log.find("pod orders-0 can hold no more partitions"), std::string::npos)
      << "no decision was limited by pod 0's open files";
  const auto acked = load.TakeAcked();
  WaitUntilSeen(acked.size());
  size_t seen = 0;
  const auto report = VerifySeen(acked, &seen);
  std::printf(
      "limit %llu: pod 0 held at most %zu partitions (it can hold %zu); max partitions %zu, "
      "max pods %u; acked %zu, lost %llu, reordered %llu\n",
      static_cast<unsigned long long>(limit), most_on_pod0, kCanHold, max_active_, max_pods_,
      acked.size(), static_cast<unsigned long long>(report.lost),
      static_cast<unsigned long long>(report.reordered));
}


// A pod whose volume is emptied under shoal control: its sidecar comes back (the platform
// restarts it) holding no map while the map gives it a partition. The loop names it within a
// few of its checks and does not install the map on it (which would start the partition again
// at offset 0, the loss unsaid); the other pod keeps its map.
TEST_F(ControlLoopTest, APodThatCameBackWithoutItsDataIsNamedAndItsRangesTakeWritesAgain) {
  std::ofstream(topic_file_) << R"(apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata: {name: orders}
spec:
  partitions: {min: 2, max: 2, initial: 2}
  replicas: {min: 2, max: 2}
  durability: {fsync: always}
)";
  StartLoop();
  ASSERT_TRUE(WaitFor([](const Snapshot& s) { return s.owners.size() == 2; }, 60s))
      << "the topic was not created on two pods; see control.log";
  const std::string pod_dir = state_ + "/pods/orders-1";
  const std::string map_file = pod_dir + "/data/orders/map.json";
  // The state is saved before the map goes out: wait until the pod holds it.
  ASSERT_TRUE(WaitFile(map_file, true, 30s));

  // Keyed load through pod 0 (it forwards orders-1's ranges) before, during and after the wipe.
  harness::LoadGenerator load(KeyedLoadThroughPod0());
  load.Start();
  const auto acked_some = Clock::now() + 30s;
  while (load.acked() < 600 && Clock::now() < acked_some) std::this_thread::sleep_for(50ms);
  ASSERT_GE(load.acked(), 600u) << load.last_error();

  // The volume emptied, then the process killed: it restarts on an empty data directory. Stopped
  // first, so that it writes nothing more to the volume it is about to lose.
  const std::string pid_text = ReadAll(pod_dir + "/sidecar.pid");
  ASSERT_FALSE(pid_text.empty());
  const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
  ASSERT_EQ(::kill(pid, SIGSTOP), 0) << std::strerror(errno);
  EmptyDataDir(pod_dir);
  ASSERT_EQ(::kill(pid, SIGKILL), 0) << std::strerror(errno);
  const auto wiped_at = Clock::now();

  // Named first, then its partitions declared lost and their ranges given new partitions there.
  const std::string said = "a pod came back without its data";
  const std::string declared = "partitions declared lost";
  std::string log = WaitLog(declared, 60s);
  const auto declared_at = Clock::now();
  auto tail = [&] { return log.substr(log.size() > 4000 ? log.size() - 4000 : 0); };
  ASSERT_NE(log.find(said), std::string::npos) << tail();
  ASSERT_NE(log.find(declared), std::string::npos) << tail();
  EXPECT_LT(declared_at - wiped_at, 30s) << "noticed within seconds";
  std::printf("partitions declared lost %.1f s after the wipe\n",
              std::chrono::duration<double>(declared_at - wiped_at).count());
  const std::string line = log.substr(log.find(declared), 300);
  EXPECT_NE(line.find("pod=orders-1"), std::string::npos) << line;
  EXPECT_EQ(line.find("events=0 "), std::string::npos) << "the loss counts its events: " << line;
  EXPECT_EQ(log.find("re-installing the current map\" pod=orders-1"), std::string::npos)
      << "the wiped pod was given the old map";
  // The pod holds the new map, which says what was lost.
  ASSERT_TRUE(WaitFile(map_file, true, 30s));
  const std::string held = ReadAll(map_file);
  EXPECT_NE(held.find("\"lost\":true"), std::string::npos) << held;

  // Writes to every range resume: what is acknowledged from now on is all seen, in order.
  load.TakeAcked();
  const uint64_t acked_before = load.acked();
  const auto resumed = Clock::now() + 30s;
  while (load.acked() < acked_before + 1500 && Clock::now() < resumed) {
    std::this_thread::sleep_for(50ms);
  }
  load.Stop();
  ASSERT_GE(load.acked(), acked_before + 1500) << load.last_error();
  WaitAllSeen(load.TakeAcked());
  // And the control state (what /status shows) says it.
  const std::string state = ReadAll(state_ + "/control-state.json");
  EXPECT_NE(state.find("\"losses\":[{\"pod\":\"orders-1\""), std::string::npos) << state;
}

TEST_F(ControlLoopTest, APausedLeaderIsFailedOverAndNoAcknowledgedEventIsLost) {
  const std::string pod_dir = state_ + "/pods/orders-1";
  const std::string map_file = pod_dir + "/data/orders/map.json";
  ASSERT_NO_FATAL_FAILURE(StartThreeCopiesTopic(map_file));
  ASSERT_NE(ReadAll(map_file).find("\"replicas\":["), std::string::npos) << ReadAll(map_file);

  // Keyed load through pod 0 (it forwards orders-1's and orders-2's ranges).
  harness::LoadGenerator load(KeyedLoadThroughPod0());
  load.Start();
  const auto acked_some = Clock::now() + 30s;
  while (load.acked() < 600 && Clock::now() < acked_some) std::this_thread::sleep_for(50ms);
  ASSERT_GE(load.acked(), 600u) << load.last_error();

  // orders-1's sidecar stops answering (SIGSTOP): its partition goes to a copy.
  const pid_t pid = static_cast<pid_t>(std::stol(ReadAll(pod_dir + "/sidecar.pid")));
  ASSERT_EQ(::kill(pid, SIGSTOP), 0) << std::strerror(errno);
  const auto paused_at = Clock::now();
  const std::string failed_over = "failed over partitions whose leader stopped answering";
  std::string log = WaitLog(failed_over, 60s);
  const auto failed_over_at = Clock::now();
  auto tail = [&] { return log.substr(log.size() > 4000 ? log.size() - 4000 : 0); };
  ASSERT_NE(log.find(failed_over), std::string::npos) << tail();
  std::printf("failed over %.1f s after the leader was paused\n",
              std::chrono::duration<double>(failed_over_at - paused_at).count());
  const std::string line = log.substr(log.find(failed_over), 300);
  EXPECT_NE(line.find("moved=\"1->orders-"), std::string::npos) << line;

  // Writes to every range go on, then the old leader runs again, takes the new map and follows.
  const uint64_t acked_before = load.acked();
  const auto resumed = Clock::now() + 30s;
  while (load.acked() < acked_before + 1500 && Clock::now() < resumed) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_GE(load.acked(), acked_before + 1500) << load.last_error();
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  const auto followed = Clock::now() + 30s;
  while (ReadAll(map_file).find("\"owner\":\"orders-1\"") != std::string::npos &&
         Clock::now() < followed) {
    std::this_thread::sleep_for(100ms);  // polling a file another process writes
  }
  EXPECT_EQ(ReadAll(map_file).find("\"owner\":\"orders-1\""), std::string::npos)
      << "the old leader still holds the map that makes it lead: " << ReadAll(map_file);
  load.Stop();
  // Every event acknowledged over the whole run, before, during and after the failover, is seen.
  WaitAllSeen(load.TakeAcked());
}

TEST_F(ControlLoopTest, WithCopiesAPodThatCameBackWithoutItsDataLosesNothingAndCatchesUp) {
  const std::string pod_dir = state_ + "/pods/orders-1";
  const std::string map_file = pod_dir + "/data/orders/map.json";
  ASSERT_NO_FATAL_FAILURE(StartThreeCopiesTopic(map_file));
  harness::LoadGenerator load(KeyedLoadThroughPod0());
  load.Start();
  const auto acked_some = Clock::now() + 30s;
  while (load.acked() < 600 && Clock::now() < acked_some) std::this_thread::sleep_for(50ms);
  ASSERT_GE(load.acked(), 600u) << load.last_error();

  // The volume emptied, then the process killed: it restarts on an empty data directory. Stopped
  // first, so that it writes nothing more to the volume it is about to lose.
  const pid_t pid = static_cast<pid_t>(std::stol(ReadAll(pod_dir + "/sidecar.pid")));
  ASSERT_EQ(::kill(pid, SIGSTOP), 0) << std::strerror(errno);
  EmptyDataDir(pod_dir);
  ASSERT_EQ(::kill(pid, SIGKILL), 0) << std::strerror(errno);

  // Its partition goes to a copy; nothing is declared lost.
  const std::string failed_over = "failed over partitions whose leader stopped answering";
  std::string log = WaitLog(failed_over, 60s);
  auto tail = [&] { return log.substr(log.size() > 4000 ? log.size() - 4000 : 0); };
  ASSERT_NE(log.find(failed_over), std::string::npos) << tail();
  // The pod takes the map again and follows: its copies fill up from the other pods.
  ASSERT_TRUE(WaitFile(map_file, true, 30s)) << tail();
  const uint64_t acked_before = load.acked();
  const auto resumed = Clock::now() + 30s;
  while (load.acked() < acked_before + 1500 && Clock::now() < resumed) {
    std::this_thread::sleep_for(50ms);
  }
  load.Stop();
  ASSERT_GE(load.acked(), acked_before + 1500) << load.last_error();
  const std::string partitions = pod_dir + "/data/orders/partitions";
  auto copied = [&] {
    size_t bytes = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(partitions, ec)) {
      if (e.is_regular_file() && e.path().filename().string().size() == 24 &&
          e.path().extension() == ".log") {
        bytes += e.file_size();
      }
    }
    return bytes;
  };
  const auto caught_up = Clock::now() + 30s;
  while (copied() == 0 && Clock::now() < caught_up) std::this_thread::sleep_for(100ms);
  EXPECT_GT(copied(), 0u) << "the pod's copies did not fill up";
  log = ReadAll(dir_.path() + "/control.log");
  EXPECT_EQ(log.find("partitions declared lost"), std::string::npos) << tail();
  WaitAllSeen(load.TakeAcked());
}

}  // namespace
}  // namespace shoal
