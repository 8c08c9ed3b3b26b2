// GroupRegistry on the real file system: a group learned from a copy's leader is registered
// durably like one that made a request; a group removed here is not learned back from a leader
// that has not deleted it yet, until it makes a request of its own; input never grows it past
// max_groups.
#include "broker/group_registry.h"

#include <gtest/gtest.h>

#include "storage/file_system.h"
#include "support/temp_dir.h"

namespace shoal::broker {
namespace {

using ::shoal::testing::TempDir;

std::unique_ptr<GroupRegistry> OpenIn(const TempDir& dir, size_t max_groups = 10) {
  auto r = GroupRegistry::Open(dir.path() + "/groups.json", max_groups,
                               storage::PosixFileSystem());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(GroupRegistryTest, AGroupLearnedFromALeaderIsRegisteredDurably) {
  TempDir dir;
  {
    auto r = OpenIn(dir);
    ASSERT_TRUE(r->Learn("late", 1000).ok());
    EXPECT_TRUE(r->Contains("late"));
    ASSERT_TRUE(r->Touch("billing", 2000).ok());
    ASSERT_TRUE(r->Learn("billing", 3000).ok());  // known: its activity stays its own
    EXPECT_EQ(r->All().at("billing").last_active_ms, 2000);
  }
  auto reopened = OpenIn(dir);
  EXPECT_TRUE(reopened->Contains("late")) << "a learned group is on disk before Learn returns";
  EXPECT_EQ(reopened->All().at("late").first_seen_ms, 1000);
}

TEST(GroupRegistryTest, ARemovedGroupIsNotLearnedBackUntilItMakesARequest) {
  TempDir dir;
  auto r = OpenIn(dir);
  ASSERT_TRUE(r->Touch("gone", 1000).ok());
  ASSERT_TRUE(r->Remove("gone").ok());
  ASSERT_TRUE(r->Learn("gone", 2000).ok());
  EXPECT_FALSE(r->Contains("gone")) << "a leader that has not deleted it yet brought it back";
  // Removed here before it was ever seen here: the same.
  ASSERT_TRUE(r->Remove("never-here").ok());
  ASSERT_TRUE(r->Learn("never-here", 2000).ok());
  EXPECT_FALSE(r->Contains("never-here"));
  // Its own request makes it a group again, and Learn no longer ignores it.
  ASSERT_TRUE(r->Touch("gone", 3000).ok());
  EXPECT_TRUE(r->Contains("gone"));
  ASSERT_TRUE(r->Remove("gone").ok());
  ASSERT_TRUE(r->Touch("gone", 4000).ok());
  ASSERT_TRUE(r->Remove("gone").ok());
  EXPECT_FALSE(r->Contains("gone"));
}

TEST(GroupRegistryTest, LearningPastMaxGroupsChangesNothing) {
  TempDir dir;
  auto r = OpenIn(dir, 2);
  ASSERT_TRUE(r->Learn("a", 1).ok());
  ASSERT_TRUE(r->Learn("b", 1).ok());
  Status st = r->Learn("c", 1);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_FALSE(r->Contains("c"));
  EXPECT_EQ(r->All().size(), 2u);
  // Removals are remembered within the same bound.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(r->Remove("x" + std::to_string(i)).ok());
  ASSERT_TRUE(r->Remove("a").ok());
  ASSERT_TRUE(r->Learn("x0", 1).ok());  // the oldest removal is forgotten past the bound
  EXPECT_TRUE(r->Contains("x0"));
}

}  // namespace
}  // namespace shoal::broker
