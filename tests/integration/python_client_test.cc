// The Python client (clients/python) under changes: its example producer (examples/produce.py)
// sends keyed load through pod 0 of a two-pod topic while its example consumer
// (examples/consume.py) reads the group on each pod; meanwhile the test, as the coordinator,
// splits a partition of pod 0 and then moves a partition of pod 1 to pod 0. The verifier over what
// the producer had acknowledged and what the consumers saw finds nothing lost or reordered.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "shoal/control/process.h"
#include "shoal/harness/verifier.h"
#include "support/sidecar_cluster.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;

const std::string kExamples = std::string(SHOAL_SOURCE_DIR) + "/clients/python/examples/";

TEST(PythonClientTest, ASplitAndAMoveUnderItsConsumersLoseAndReorderNothing) {
  SidecarClusterOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.pods = 2;
  o.partitions_per_pod = 2;
  SidecarCluster c(o);
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  TempDir dir;
  const std::string seen_dir = dir.path() + "/seen";
  std::filesystem::create_directories(seen_dir);

  std::vector<control::ChildProcess> consumers;
  for (size_t i = 0; i < c.size(); ++i) {
    auto p = control::ChildProcess::Spawn(
        {SHOAL_PYTHON, kExamples + "consume.py", "--url", c.pod(i).data_url(), "--group", "verify",
         "--out", seen_dir + "/pod-" + std::to_string(i) + ".jsonl"},
        dir.path() + "/consumer-" + std::to_string(i) + ".log");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    consumers.push_back(std::move(p).value());
  }
  const std::string acked_path = dir.path() + "/acked.jsonl";
  auto producer = control::ChildProcess::Spawn(
      {SHOAL_PYTHON, kExamples + "produce.py", "--url", c.pod(0).data_url(), "--keys", "200",
       "--rate", "1500", "--duration", "8", "--acked-out", acked_path},
      dir.path() + "/producer.log");
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();

  // Under the load: split partition 0 (pod 0), then move partition 1 (pod 1) to pod 0.
  ASSERT_TRUE(WaitFor([&] { return harness::CountSeenLines(seen_dir) >= 1000; }, 20s))
      << "the consumers saw nothing yet\n"
      << c.Describe();
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  auto split = c.current().Split(p0.id, p0.range.lo + p0.range.Width() / 2);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  const uint64_t after_split = harness::CountSeenLines(seen_dir);
  ASSERT_TRUE(WaitFor([&] { return harness::CountSeenLines(seen_dir) >= after_split + 1000; }, 20s))
      << c.Describe();
  auto move = c.current().Move(PartitionId(1), SidecarCluster::Pod(0));
  ASSERT_TRUE(move.ok()) << move.status().ToString();
  ASSERT_TRUE(c.Apply(*move).ok()) << c.Describe();

  auto exit_code = producer->Wait(60s);
  ASSERT_TRUE(exit_code.has_value()) << "the producer did not finish";
  EXPECT_EQ(*exit_code, 0) << "some events were not acknowledged (producer.log)";
  auto acked = harness::ReadAckedFile(acked_path);
  ASSERT_TRUE(acked.ok()) << acked.status().ToString();
  ASSERT_GT(acked->size(), 5000u);
  // The consumers catch up, then stop (SIGTERM: each finishes its batch and commits).
  EXPECT_TRUE(WaitFor([&] { return harness::CountSeenLines(seen_dir) >= acked->size(); }, 30s));
  for (auto& p : consumers) EXPECT_EQ(p.Stop(10s), 0);
  auto seen = harness::ReadSeenDir(seen_dir);
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  const harness::VerifyReport report = harness::Verify(*acked, *seen);
  std::printf(
      "python client: acked %zu, seen %zu, lost %llu, reordered %llu, duplicated %llu "
      "(a split and a move under the consumers)\n",
      acked->size(), seen->size(), static_cast<unsigned long long>(report.lost),
      static_cast<unsigned long long>(report.reordered),
      static_cast<unsigned long long>(report.duplicated));
  EXPECT_EQ(report.lost, 0u) << report.ToText();
  EXPECT_EQ(report.reordered, 0u) << report.ToText();
}

}  // namespace
}  // namespace shoal::testing
