// `shoal up` end to end with a shortened flash sale (issue 5): the command runs the topic, the
// load and the report; the report's verifier numbers are zeros and the topic scaled up during the
// surge and back down after it.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <fstream>
#include <random>
#include <sstream>

#include "shoal/client/process.h"
#include "support/temp_dir.h"

namespace shoal {
namespace {

using namespace std::chrono_literals;

TEST(ShoalUpTest, ShortFlashSaleScalesUpAndDownAndLosesNothing) {
  testing::TempDir dir("shoal-up");
  std::random_device rd;
  std::mt19937 rng(rd());
  const std::string prefix =
      "127." + std::to_string(20 + rng() % 200) + "." + std::to_string(rng() % 250);
  // A topic that reacts within this short run: 300 ev/s per partition, a 6 s scale-down window.
  const std::string topic = dir.path() + "/orders.yaml";
  std::ofstream(topic) << R"(apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata: {name: orders}
spec:
  partitions: {min: 2, max: 16, initial: 2}
  replicas: {min: 1, max: 4}
  scaling:
    targetEventsPerSecondPerPartition: 300
    targetPartitionsPerReplica: 4
    targetConsumerLag: 5000
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0, tolerance: 0.1}
    scaleDown: {stabilizationWindowSeconds: 6, tolerance: 0.1}
)";
  const std::string report = dir.path() + "/report";
  auto up = client::ChildProcess::Spawn(
      {SHOAL_BIN, "up", topic, "--duration", "30", "--rate", "400", "--consumer-cpu-us", "50",
       "--state-dir", dir.path() + "/state", "--report", report, "--ip-prefix", prefix,
       "--control-port", "0", "--fresh"},
      dir.path() + "/up.log");
  ASSERT_TRUE(up.ok()) << up.status().message();
  const auto code = up->Wait(280s);
  ASSERT_TRUE(code.has_value()) << "shoal up did not finish; see " << dir.path() << "/up.log";
  if (*code != 0) dir.Keep();
  ASSERT_EQ(*code, 0) << "see " << dir.path() << "/up.log";

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

}  // namespace
}  // namespace shoal
