// `shoal up` end to end with a shortened flash sale (issue 5): the command runs the topic, the
// load and the report; the report's verifier numbers are zeros and the topic scaled up during the
// surge and back down after it. With --chaos (issue 25) a leader killed in the surge is failed
// over and the report says so.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "shoal/client/shoal_client.h"
#include "shoal/control/process.h"
#include "short_sale.h"
#include "support/loopback.h"
#include "support/temp_dir.h"

namespace shoal {
namespace {

using namespace std::chrono_literals;

std::string WriteTopic(const std::string& dir, const std::string& replication = "") {
  return testing::WriteShortSaleTopic(dir, replication);
}

// `shoal up TOPIC` on a 30 s flash sale at 400 ev/s with `extra` flags, its state and report
// (dir/report) in `dir`, which must end with exit 0 (dir is kept otherwise).
void RunShortSale(testing::TempDir& dir, const std::string& topic,
                  const std::vector<std::string>& extra) {
  std::vector<std::string> argv{SHOAL_BIN,
                                "up",
                                topic,
                                "--duration",
                                "30",
                                "--rate",
                                "400",
                                "--state-dir",
                                dir.path() + "/state",
                                "--report",
                                dir.path() + "/report",
                                "--control-port",
                                "0",
                                "--fresh"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto up = control::ChildProcess::Spawn(argv, dir.path() + "/up.log");
  ASSERT_TRUE(up.ok()) << up.status().message();
  const auto code = up->Wait(280s);
  ASSERT_TRUE(code.has_value()) << "shoal up did not finish; see " << dir.path() << "/up.log";
  if (*code != 0) dir.Keep();
  ASSERT_EQ(*code, 0) << "see " << dir.path() << "/up.log";
}

uint64_t EpochOf(const std::string& view) {
  simdjson::dom::parser parser;
  simdjson::padded_string text(view);
  simdjson::dom::element doc;
  uint64_t epoch = 0;
  if (parser.parse(text).get(doc) || doc["epoch"].get(epoch)) return 0;
  return epoch;
}

// The pids in the state directory's pid files that still run.
std::vector<pid_t> LivePids(const std::string& state_dir) {
  std::vector<pid_t> live;
  std::error_code ec;
  for (const auto& pod : std::filesystem::directory_iterator(state_dir + "/pods", ec)) {
    for (const char* f : {"sidecar.pid", "consumer.pid"}) {
      std::ifstream in(pod.path() / f);
      pid_t pid = 0;
      if (in >> pid && pid > 0 && control::ProcessAlive(pid)) live.push_back(pid);
    }
  }
  return live;
}

TEST(ShoalUpTest, ShortFlashSaleScalesUpAndDownAndLosesNothing) {
  testing::TempDir dir("shoal-up");
  const std::string prefix = testing::RandomLoopbackPrefix();
  const std::string topic = WriteTopic(dir.path());
  const std::string report = dir.path() + "/report";
  RunShortSale(dir, topic, {"--consumer-cpu-us", "50", "--ip-prefix", prefix});
  if (HasFatalFailure()) return;

  std::ifstream in(report + "/report.json");
  std::stringstream ss;
  ss << in.rdbuf();
  simdjson::dom::parser parser;
  simdjson::padded_string text(ss.str());
  simdjson::dom::element doc, figures;
  ASSERT_FALSE(parser.parse(text).get(doc)) << ss.str();
  ASSERT_FALSE(doc["figures"].get(figures)) << ss.str();
  uint64_t acked = 0, lost = 1, reordered = 1;
  bool scaled_up = false, scaled_down = false;
  ASSERT_FALSE(figures["acked"].get(acked));
  ASSERT_FALSE(figures["lost"].get(lost));
  ASSERT_FALSE(figures["reordered"].get(reordered));
  ASSERT_FALSE(figures["scaled_up"].get(scaled_up));
  ASSERT_FALSE(figures["scaled_down"].get(scaled_down));
  EXPECT_GT(acked, 10000u);
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(reordered, 0u);
  EXPECT_TRUE(scaled_up) << ss.str();
  EXPECT_TRUE(scaled_down) << ss.str();
  for (const char* f : {"summary.md", "chart.svg", "timeline.csv"}) {
    EXPECT_TRUE(std::ifstream(report + "/" + f).good()) << f;
  }
}

using testing::ReadAll;

// --chaos on a topic of one copy has nothing to fail over to: refused up front, saying what to
// change, before any pod starts.
TEST(ShoalUpTest, ChaosOnATopicOfOneCopyIsRefusedUpFront) {
  testing::TempDir dir("shoal-up-chaos-refused");
  const std::string topic = WriteTopic(dir.path());
  auto up = control::ChildProcess::Spawn(
      {SHOAL_BIN, "up", topic, "--chaos", "--state-dir", dir.path() + "/state", "--report",
       dir.path() + "/report", "--ip-prefix", testing::RandomLoopbackPrefix(), "--control-port",
       "0"},
      dir.path() + "/up.log");
  ASSERT_TRUE(up.ok()) << up.status().message();
  const auto code = up->Wait(30s);
  ASSERT_TRUE(code.has_value()) << "shoal up --chaos did not stop at once";
  EXPECT_EQ(*code, 2);
  const std::string log = ReadAll(dir.path() + "/up.log");
  EXPECT_NE(log.find("spec.replication.factor: 1"), std::string::npos) << log;
  EXPECT_NE(log.find("set spec.replication.factor: 3"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/state")) << "pods were started";
}

// --chaos on a topic of three copies: in the short flash sale's surge the sidecar of the pod that
// leads the most partitions is killed; the control loop fails its partitions over, the report
// says so, and the verifier finds nothing lost or reordered.
TEST(ShoalUpTest, ChaosKillsALeaderInTheSurgeWhichIsFailedOverAndNothingIsLost) {
  testing::TempDir dir("shoal-up-chaos");
  const std::string topic = WriteTopic(dir.path(), "{factor: 3, acks: quorum}");
  const std::string report = dir.path() + "/report";
  RunShortSale(dir, topic, {"--chaos", "--ip-prefix", testing::RandomLoopbackPrefix()});
  if (HasFatalFailure()) return;

  const std::string json = ReadAll(report + "/report.json");
  simdjson::dom::parser parser;
  simdjson::padded_string text(json);
  simdjson::dom::element doc, figures, kill, failovers;
  ASSERT_FALSE(parser.parse(text).get(doc)) << json;
  ASSERT_FALSE(doc["figures"].get(figures)) << json;
  uint64_t lost = 1, reordered = 1, kills = 0, failed_over = 0;
  bool chaos = false;
  ASSERT_FALSE(doc["chaos"].get(chaos));
  EXPECT_TRUE(chaos);
  ASSERT_FALSE(figures["lost"].get(lost));
  ASSERT_FALSE(figures["reordered"].get(reordered));
  ASSERT_FALSE(figures["kills"].get(kills));
  ASSERT_FALSE(figures["kills_failed_over"].get(failed_over));
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(reordered, 0u);
  EXPECT_EQ(kills, 1u) << json;
  EXPECT_EQ(failed_over, 1u) << json;
  // The killed pod is among the leaders of a failover after the kill.
  std::string_view pod;
  double killed_at = 0;
  ASSERT_FALSE(doc["kills"].at(0).get(kill)) << json;
  ASSERT_FALSE(kill["pod"].get(pod));
  ASSERT_FALSE(kill["t"].get(killed_at));
  ASSERT_FALSE(doc["failovers"].get(failovers));
  bool found = false;
  for (auto fo : simdjson::dom::array(failovers)) {
    double t = 0;
    ASSERT_FALSE(fo["t"].get(t));
    for (auto p : simdjson::dom::array(fo["pods"])) {
      std::string_view name;
      found |= !p.get(name) && name == pod && t >= killed_at;
    }
  }
  EXPECT_TRUE(found) << json;
  const std::string summary = ReadAll(report + "/summary.md");
  EXPECT_NE(summary.find("**Run: PASS** (chaos)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("**Chaos: PASS**"), std::string::npos) << summary;
  const std::string log = ReadAll(dir.path() + "/up.log");
  EXPECT_NE(log.find("killed the sidecar of " + std::string(pod)), std::string::npos) << log;
  EXPECT_TRUE(LivePids(dir.path() + "/state").empty()) << "pod processes left running";
}

// Ctrl-C stops `shoal up` cleanly (exit 0, no pod process left), and running it again resumes
// the topic from its state directory: the same map, and every event acknowledged before still
// there.
TEST(ShoalUpTest, InterruptedUpStopsCleanlyAndResumesTheTopic) {
  testing::TempDir dir("shoal-up-resume");
  const std::string prefix = testing::RandomLoopbackPrefix();
  const std::string state = dir.path() + "/state";
  const std::string pod0 = "http://" + prefix + ".2:8080";
  const std::string topic = WriteTopic(dir.path());
  auto start = [&](const std::string& log, bool fresh) {
    std::vector<std::string> argv = {SHOAL_BIN,    "up",          topic,
                                     "--no-load",  "--state-dir", state,
                                     "--ip-prefix", prefix,        "--control-port",
                                     "0"};
    if (fresh) argv.push_back("--fresh");
    return control::ChildProcess::Spawn(argv, dir.path() + "/" + log);
  };
  // Up once the loop installed the topic's map at pod 0.
  auto wait_topic = [&](client::ShoalClient& c) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto view = c.TopicView();
      if (view.ok() && EpochOf(*view) > 0) return EpochOf(*view);
      std::this_thread::sleep_for(100ms);  // polling for the map, under the deadline
    }
    return uint64_t{0};
  };

  auto first = start("up-1.log", true);
  ASSERT_TRUE(first.ok()) << first.status().message();
  client::ShoalClient c(pod0, "orders", 5s);
  const uint64_t epoch = wait_topic(c);
  ASSERT_GT(epoch, 0u) << "the topic did not come up; see " << dir.path() << "/up-1.log";
  std::set<uint64_t> acked;
  for (uint64_t batch = 0; batch < 20; ++batch) {
    std::vector<client::OutgoingEvent> events;
    for (uint64_t i = 0; i < 100; ++i) {
      const uint64_t seq = batch * 100 + i;
      events.push_back({"key-" + std::to_string(seq % 37), "{\"n\":" + std::to_string(seq) + "}",
                        "resume-test", seq});
    }
    auto r = c.Produce(events);
    ASSERT_TRUE(r.ok()) << r.status().message();
    for (const auto& e : events) acked.insert(*e.seq);
  }

  first->Signal(SIGINT);
  const auto code = first->Wait(60s);
  ASSERT_TRUE(code.has_value()) << "shoal up did not stop on SIGINT; see up-1.log";
  EXPECT_EQ(*code, 0) << "see " << dir.path() << "/up-1.log";
  EXPECT_TRUE(LivePids(state).empty()) << "pod processes left running after Ctrl-C";

  auto second = start("up-2.log", false);
  ASSERT_TRUE(second.ok()) << second.status().message();
  client::ShoalClient c2(pod0, "orders", 5s);
  const uint64_t resumed = wait_topic(c2);
  EXPECT_EQ(resumed, epoch) << "the topic was created anew instead of resumed";
  // Every event acknowledged before the stop is there, read by a group of our own.
  std::set<uint64_t> seen;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (seen.size() < acked.size() && std::chrono::steady_clock::now() < deadline) {
    auto got = c2.Consume("resume-check", 1000, 200);
    if (!got.ok()) continue;
    std::map<uint32_t, uint64_t> commit;
    for (const auto& e : *got) {
      if (e.seq) seen.insert(*e.seq);
      commit[e.partition] = std::max(commit[e.partition], e.offset + 1);
    }
    std::vector<wire::CommitOffset> offsets;
    for (auto [p, o] : commit) offsets.push_back({PartitionId(p), Offset(o)});
    if (!offsets.empty()) (void)c2.Commit("resume-check", offsets);
  }
  EXPECT_EQ(seen, acked);

  second->Signal(SIGINT);
  const auto code2 = second->Wait(60s);
  ASSERT_TRUE(code2.has_value());
  EXPECT_EQ(*code2, 0);
  EXPECT_TRUE(LivePids(state).empty());
  if (HasFailure()) dir.Keep();
}

}  // namespace
}  // namespace shoal
