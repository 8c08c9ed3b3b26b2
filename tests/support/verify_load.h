// ExpectEachAckedEventOnceInOrder: stops a group's consumers (harness::GroupConsumer) and checks
// what they saw against what load generators had acknowledged (at least `min_acked` events):
// nothing lost, duplicated or reordered (harness::Verify). For tests that drove a topic with the
// harness's workload and drained the group first.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"

namespace shoal::testing {

inline void ExpectEachAckedEventOnceInOrder(
    std::vector<std::unique_ptr<harness::GroupConsumer>>& consumers,
    const std::vector<harness::AckedEvent>& acked, size_t min_acked) {
  std::vector<harness::SeenEvent> seen;
  for (auto& consumer : consumers) {
    consumer->Stop();
    auto s = consumer->TakeSeen();
    seen.insert(seen.end(), s.begin(), s.end());
  }
  ASSERT_GE(acked.size(), min_acked);
  auto report = harness::Verify(acked, seen);
  EXPECT_TRUE(report.ok()) << report.ToText();
  EXPECT_EQ(report.lost, 0u);
  EXPECT_EQ(report.duplicated, 0u);
  EXPECT_EQ(report.reordered, 0u);
}

}  // namespace shoal::testing
