// The control state's form in a PartitionedTopic's status (KubePlatform::StateToStatus and
// StatusToState): the map gzip+base64, the plan as written, the last decision with an RFC 3339
// time; and back, so that the next leader loads what the last one saved.
#include "shoal/k8s/kube_platform.h"

#include <gtest/gtest.h>

#include "shoal/common/partition_map.h"

namespace shoal::k8s {
namespace {

using web::json::value;

TEST(GzipBase64Test, RoundTripsAndRefusesGarbage) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "{\"id\":" + std::to_string(i) + "},";
  const std::string packed = GzipBase64(text);
  EXPECT_LT(packed.size(), text.size() / 3);
  auto back = GunzipBase64(packed);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
  EXPECT_FALSE(GunzipBase64("bm90IGd6aXA=").ok());
  EXPECT_FALSE(GunzipBase64("***").ok());
}

TEST(KubePlatformStateTest, ControlStateSurvivesTheStatus) {
  const PartitionMap map = PartitionMap::Initial("orders", 4, PodName("orders-0")).value();
  const std::string state =
      R"({"version":1,"topic":"orders","map":)" + map.ToJson() +
      R"(,"plan":{"id":7,"reason":"surge","next":1,"steps":[{"kind":"change","state":"done"},
         {"kind":"set_pods","pods":3,"state":"pending"}]},"next_plan_id":8,
         "last_decision":{"at_ms":1764400000123,"kinds":["split","pods_up"],"partitions":8,
                          "replicas":3,"reason":"arrival 4000/s over 4 partitions"}})";
  auto status = KubePlatform::StateToStatus(state);
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_EQ(status->at("partitionMap").at("encoding").as_string(), "gzip+base64");
  EXPECT_EQ(status->at("partitionMap").at("epoch").as_integer(), 1);
  EXPECT_EQ(status->at("plan").at("id").as_integer(), 7);
  EXPECT_EQ(status->at("nextPlanId").as_integer(), 8);
  EXPECT_EQ(status->at("lastDecision").at("time").as_string(), "2025-11-29T07:06:40.123Z");
  EXPECT_EQ(status->at("lastDecision").at("kinds").size(), 2u);

  auto back = KubePlatform::StatusToState(*status, "orders");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const value again = value::parse(*back);
  EXPECT_EQ(again.at("map"), value::parse(map.ToJson()));
  EXPECT_EQ(again.at("plan"), status->at("plan"));
  EXPECT_EQ(again.at("next_plan_id").as_integer(), 8);
  EXPECT_EQ(again.at("last_decision").at("at_ms").as_number().to_int64(), 1764400000123);
  EXPECT_EQ(again.at("last_decision").at("reason").as_string(), "arrival 4000/s over 4 partitions");
}

TEST(KubePlatformStateTest, NoPlanRemovesItAndAnEmptyStatusIsNotFound) {
  const PartitionMap map = PartitionMap::Initial("orders", 2, PodName("orders-0")).value();
  auto status = KubePlatform::StateToStatus(R"({"version":1,"topic":"orders","map":)" +
                                            map.ToJson() +
                                            R"(,"plan":null,"next_plan_id":3,"last_decision":{"at_ms":0,"kinds":[],"partitions":0,"replicas":0,"reason":""}})");
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(status->at("plan").is_null()) << "null deletes status.plan in a merge patch";
  EXPECT_FALSE(status->has_field("lastDecision"));
  auto none = KubePlatform::StatusToState(value::object(), "orders");
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  value broken = value::object();
  broken["partitionMap"]["encoding"] = value::string("gzip+base64");
  broken["partitionMap"]["data"] = value::string("!!");
  EXPECT_EQ(KubePlatform::StatusToState(broken, "orders").status().code(),
            Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace shoal::k8s
