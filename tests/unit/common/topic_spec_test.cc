#include "shoal/common/topic_spec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace shoal {
namespace {

std::string ReadExample(const std::string& name) {
  std::ifstream in(std::string(SHOAL_SOURCE_DIR) + "/examples/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr const char* kMinimal = R"(apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata: {name: orders}
spec:
  partitions: {min: 2, max: 8, initial: 2}
)";

TEST(TopicSpecTest, EveryExampleParsesAndValidates) {
  for (const char* f : {"flash-sale.yaml", "steady.yaml", "traces/topic.yaml",
                        "traces/big-topic.yaml", "traces/scheduled-topic.yaml"}) {
    auto t = ParseTopic(ReadExample(f));
    ASSERT_TRUE(t.ok()) << f << ": " << t.status().ToString();
  }
  auto t = ParseTopic(ReadExample("flash-sale.yaml"));
  EXPECT_EQ(t->name, "orders");
  EXPECT_EQ(t->partitions.max, 32u);
  EXPECT_EQ(t->scale_down.stabilization_window_seconds, 5u);
  EXPECT_EQ(t->scaling.events_per_second_per_partition, 500);
  EXPECT_EQ(t->sidecar_resources.at("requests.cpu"), "100m");
  EXPECT_NE(t->consumer_template_yaml.find("order-processor"), std::string::npos);
}

TEST(TopicSpecTest, DefaultsFillWhatIsMissing) {
  auto t = ParseTopic(kMinimal);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->namespace_name, "default");
  EXPECT_EQ(t->fsync, "interval");
  EXPECT_EQ(t->replication.factor, 1u);
  EXPECT_EQ(t->replication.acks, "quorum");
  EXPECT_EQ(t->replicas.min, 1u);
  EXPECT_EQ(t->scale_down.stabilization_window_seconds, 300u);
  EXPECT_TRUE(t->scale_up.predictive);
  EXPECT_EQ(t->scaling.drain_seconds, 30u);
}

TEST(TopicSpecTest, DrainSecondsIsReadAndRoundTrips) {
  auto t = ParseTopic(std::string(kMinimal) + "  scaling: {drainSeconds: 120}\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->scaling.drain_seconds, 120u);
  for (const std::string& text : {TopicToYaml(*t), TopicToJson(*t)}) {
    auto back = ParseTopic(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
    EXPECT_EQ(back->scaling.drain_seconds, 120u) << text;
  }
}

TEST(TopicSpecTest, PredictionCanBeTurnedOffAndRoundTrips) {
  auto t = ParseTopic(std::string(kMinimal) + "  behavior: {scaleUp: {predictive: false}}\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->scale_up.predictive);
  for (const std::string& text : {TopicToYaml(*t), TopicToJson(*t)}) {
    auto back = ParseTopic(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
    EXPECT_FALSE(back->scale_up.predictive) << text;
  }
}

TEST(TopicSpecTest, YamlAndJsonRoundTrip) {
  auto t = ParseTopic(ReadExample("flash-sale.yaml"));
  ASSERT_TRUE(t.ok());
  for (const std::string& text : {TopicToYaml(*t), TopicToJson(*t)}) {
    auto back = ParseTopic(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
    EXPECT_EQ(TopicToJson(*back), TopicToJson(*t));  // JSON ignores YAML's flow/block style
  }
  EXPECT_EQ(TopicToJson(*t).front(), '{');
  EXPECT_NE(TopicToJson(*t).find("\"max\":32"), std::string::npos);
}

struct Bad {
  const char* name;
  std::string text;
  const char* must_mention;
};

class TopicSpecRejectTest : public ::testing::TestWithParam<Bad> {};

// spec.storage: its size and class round-trip; retention that fits the volume is taken.
TEST(TopicSpecTest, StorageFitsRetentionOfEveryPartitionAPodCanOwn) {
  auto t = ParseTopic(std::string(kMinimal) +
                      "  retention: {bytes: 1073741824}\n"
                      "  storage: {size: 4Gi, storageClassName: fast-ssd, reserve: 128Mi}\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->storage.size, "4Gi");
  EXPECT_EQ(t->storage.storage_class, "fast-ssd");
  EXPECT_EQ(t->storage.reserve, "128Mi");
  auto back = ParseTopic(TopicToYaml(*t));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->storage.size, "4Gi");
  EXPECT_EQ(back->storage.storage_class, "fast-ssd");
  EXPECT_EQ(back->storage.reserve, "128Mi");
  // partitions.max spread over replicas.max counts when it is more than the per-pod target:
  // 64 partitions over 2 pods is 32 a pod.
  TopicSpec wide = *t;
  wide.partitions.max = 64;
  wide.replicas.max = 2;
  EXPECT_FALSE(RetentionFits(wide, "4Gi", "f").ok());
  EXPECT_TRUE(RetentionFits(wide, "32Gi", "f").ok());
  // Three copies of each: 64 partitions, 3 copies, 2 pods: each pod keeps a copy of all 64.
  TopicSpec copied = wide;
  copied.replication.factor = 3;
  EXPECT_FALSE(RetentionFits(copied, "32Gi", "f").ok());
  EXPECT_NE(RetentionFits(copied, "32Gi", "f").message().find("replication.factor 3"),
            std::string::npos);
  EXPECT_TRUE(RetentionFits(copied, "64Gi", "f").ok());
  wide.retention.bytes = 0;
  EXPECT_TRUE(RetentionFits(wide, "1Mi", "f").ok()) << "time-bound only";
  EXPECT_EQ(*QuantityBytes("20Gi"), 20ULL << 30);
  EXPECT_EQ(*QuantityBytes("500M"), 500'000'000ULL);
  EXPECT_EQ(*QuantityBytes("1073741824"), 1073741824ULL);
  EXPECT_FALSE(QuantityBytes("1.5Gi").ok());
  EXPECT_FALSE(QuantityBytes("Gi").ok());
  EXPECT_FALSE(QuantityBytes("99999999999999999999").ok());
}

TEST_P(TopicSpecRejectTest, NamesTheFieldAndTheFix) {
  auto t = ParseTopic(GetParam().text);
  ASSERT_FALSE(t.ok()) << GetParam().name;
  EXPECT_EQ(t.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(t.status().message().find(GetParam().must_mention), std::string::npos)
      << t.status().message();
}

std::string With(const std::string& spec_tail) {
  return "apiVersion: shoal.dev/v1alpha1\nkind: PartitionedTopic\nmetadata: {name: orders}\n"
         "spec:\n" +
         spec_tail;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TopicSpecRejectTest,
    ::testing::Values(
        Bad{"not yaml", "{{{", "not YAML"},
        Bad{"wrong kind",
            "apiVersion: shoal.dev/v1alpha1\nkind: Topic\nmetadata: {name: a}\nspec: {}\n", "kind"},
        Bad{"wrong api", "apiVersion: v1\nkind: PartitionedTopic\nmetadata: {name: a}\nspec: {}\n",
            "apiVersion"},
        Bad{"no name", "apiVersion: shoal.dev/v1alpha1\nkind: PartitionedTopic\nspec: {}\n",
            "metadata.name"},
        Bad{"bad name",
            "apiVersion: shoal.dev/v1alpha1\nkind: PartitionedTopic\n"
            "metadata: {name: Orders_1}\nspec: {}\n",
            "metadata.name"},
        Bad{"min over max", With("  partitions: {min: 9, max: 4}\n"), "spec.partitions"},
        Bad{"initial outside", With("  partitions: {min: 2, max: 4, initial: 8}\n"),
            "spec.partitions.initial"},
        Bad{"cap", With("  partitions: {min: 2, max: 100000}\n"), "spec.partitions.max"},
        Bad{"replicas", With("  replicas: {min: 0, max: 4}\n"), "spec.replicas"},
        Bad{"typo", With("  scaling: {targetEventsPerSec: 5}\n"),
            "spec.scaling.targetEventsPerSec"},
        Bad{"not a number", With("  scaling: {targetEventsPerSecondPerPartition: lots}\n"),
            "targetEventsPerSecondPerPartition"},
        Bad{"cpu", With("  scaling: {targetCPUUtilizationPercent: 150}\n"),
            "targetCPUUtilizationPercent"},
        Bad{"tolerance", With("  behavior: {scaleUp: {tolerance: 1.5}}\n"), "tolerance"},
        Bad{"drain in no time", With("  scaling: {drainSeconds: 0}\n"),
            "spec.scaling.drainSeconds: 0 must be between 1 and 3600"},
        Bad{"drain over an hour", With("  scaling: {drainSeconds: 7200}\n"),
            "spec.scaling.drainSeconds: 7200 must be between 1 and 3600"},
        Bad{"drain not a number", With("  scaling: {drainSeconds: soon}\n"), "drainSeconds"},
        Bad{"predictive not a bool", With("  behavior: {scaleUp: {predictive: sometimes}}\n"),
            "spec.behavior.scaleUp.predictive: expected true or false"},
        // Prediction is a scale-up matter: scale-down always follows what was observed.
        Bad{"predictive scale-down", With("  behavior: {scaleDown: {predictive: true}}\n"),
            "spec.behavior.scaleDown.predictive"},
        Bad{"fsync", With("  durability: {fsync: sometimes}\n"), "spec.durability.fsync"},
        Bad{"replication factor", With("  replication: {factor: 0}\n"), "spec.replication.factor"},
        Bad{"replication factor 6", With("  replication: {factor: 6}\n"),
            "spec.replication.factor"},
        Bad{"replication acks", With("  replication: {factor: 3, acks: all}\n"),
            "spec.replication.acks"},
        Bad{"replication field", With("  replication: {copies: 3}\n"), "spec.replication.copies"},
        Bad{"unknown spec field", With("  partitons: {min: 1}\n"), "spec.partitons"},
        Bad{"storage size", With("  storage: {size: lots}\n"), "spec.storage.size"},
        Bad{"storage typo", With("  storage: {sise: 1Gi}\n"), "spec.storage.sise"},
        Bad{"reserve", With("  storage: {reserve: plenty}\n"), "spec.storage.reserve"},
        Bad{"reserve over half the volume", With("  storage: {size: 1Gi, reserve: 600Mi}\n"),
            "spec.storage.reserve: 600Mi is more than half of spec.storage.size 1Gi"},
        // 4 partitions a pod (targetPartitionsPerReplica) x 1 GiB do not fit 2Gi.
        Bad{"retention over storage",
            With("  retention: {bytes: 1073741824}\n  storage: {size: 2Gi}\n"),
            "spec.storage.size: 2Gi cannot hold spec.retention.bytes (1073741824) for each of the "
            "4"}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (auto& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

}  // namespace
}  // namespace shoal
