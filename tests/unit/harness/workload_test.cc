// The pure parts of workload.h: the consumer's service time (lanes by key, per event and per
// batch). The generators and consumers run against real sidecars in tests/integration.
#include "shoal/harness/workload.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shoal::harness {
namespace {

using std::chrono::microseconds;

TEST(ServiceTimeTest, OneLaneWaitsForEveryEventInTurn) {
  const std::vector<std::string_view> keys = {"a", "b", "c", "a"};
  EXPECT_EQ(ServiceTime(keys, 1000, 0, 1), microseconds(4000));
  EXPECT_EQ(ServiceTime(keys, 1000, 500, 1), microseconds(4500));
  EXPECT_EQ(ServiceTime({}, 1000, 500, 4), microseconds(500)) << "the batch's round trip only";
}

TEST(ServiceTimeTest, LanesWaitAtOnceAndOneKeyStaysInOneLane) {
  // One key: however many lanes, its events wait in turn (their order is kept).
  const std::vector<std::string_view> same(8, "hot");
  EXPECT_EQ(ServiceTime(same, 1000, 0, 8), microseconds(8000));
  // Many keys over 4 lanes: the busiest lane sets the time, at least a quarter of the events.
  std::vector<std::string> names;
  for (int i = 0; i < 400; ++i) names.push_back("key-" + std::to_string(i));
  std::vector<std::string_view> keys(names.begin(), names.end());
  const auto t = ServiceTime(keys, 1000, 0, 4);
  EXPECT_GE(t, microseconds(100 * 1000));
  EXPECT_LT(t, microseconds(160 * 1000)) << "the lanes are roughly even";
  // Nonsense settings wait nothing rather than forever.
  EXPECT_EQ(ServiceTime(keys, -5, -5, 0), microseconds(0));
}

TEST(ProfileTest, ARampRisesEvenlyToTenTimesHoldsAsLongAgainAndReturns) {
  // 100 s: 1x until 30 s, 1x -> 10x by 50 s, 10x until 70 s, then 1x.
  EXPECT_DOUBLE_EQ(ProfileFactor("ramp", 10, 100), 1);
  EXPECT_DOUBLE_EQ(ProfileFactor("ramp", 30, 100), 1);
  EXPECT_DOUBLE_EQ(ProfileFactor("ramp", 40, 100), 5.5);
  EXPECT_DOUBLE_EQ(ProfileFactor("ramp", 50, 100), 10);
  EXPECT_DOUBLE_EQ(ProfileFactor("ramp", 69, 100), 10);
  EXPECT_DOUBLE_EQ(ProfileFactor("ramp", 70, 100), 1);
  EXPECT_DOUBLE_EQ(ProfileFactor("ramp", 5, 0), 1);  // no duration: steady
}

}  // namespace
}  // namespace shoal::harness
