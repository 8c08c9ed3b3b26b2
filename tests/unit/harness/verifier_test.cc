// The verifier's account of what a group saw against what was acknowledged: a second sighting of
// an event is a duplicate; it is a redelivery of an uncommitted batch when no commit of an
// earlier sighting had been accepted before it, and a committed event read again otherwise.
#include "shoal/harness/verifier.h"

#include <gtest/gtest.h>

#include <vector>

namespace shoal::harness {
namespace {

SeenEvent Seen(uint64_t seq, uint64_t observed_ns, uint64_t committed_ns) {
  SeenEvent e;
  e.producer = "app";
  e.key = "k";
  e.seq = seq;
  e.n = seq;
  e.observed_ns = observed_ns;
  e.committed_ns = committed_ns;
  return e;
}

std::vector<AckedEvent> Acked(uint64_t count) {
  std::vector<AckedEvent> out;
  for (uint64_t s = 1; s <= count; ++s) out.push_back({"app", "k", s, s, 1});
  return out;
}

TEST(VerifierTest, ASecondSightingBeforeAnyCommitIsARedeliveryOfAnUncommittedBatch) {
  // Seen at 10 and never committed, seen again at 20 and committed at 25.
  auto r = Verify(Acked(1), {Seen(1, 10, 0), Seen(1, 20, 25)});
  EXPECT_EQ(r.duplicated, 1u);
  EXPECT_EQ(r.redelivered_uncommitted, 1u);
  EXPECT_EQ(r.lost, 0u);
  // Seen at 10, its commit accepted at 30, seen again at 20 (two consumers held it at once).
  r = Verify(Acked(1), {Seen(1, 10, 30), Seen(1, 20, 40)});
  EXPECT_EQ(r.redelivered_uncommitted, 1u);
}

TEST(VerifierTest, ASightingAfterTheCommitOfAnEarlierOneIsACommittedEventReadAgain) {
  auto r = Verify(Acked(2), {Seen(1, 10, 15), Seen(2, 12, 15), Seen(1, 20, 25)});
  EXPECT_EQ(r.duplicated, 1u);
  EXPECT_EQ(r.redelivered_uncommitted, 0u);
  EXPECT_FALSE(r.ok());
  // With an origin, the example gives both sightings and the commit in seconds from it.
  r = Verify(Acked(1), {Seen(1, 2'500'000'000, 3'000'000'000), Seen(1, 4'250'000'000, 0)}, 0,
             1'000'000'000);
  ASSERT_EQ(r.examples.size(), 1u);
  EXPECT_NE(r.examples[0].find("first seen at 1.500 s, a commit covering it accepted at 2.000 s, "
                               "seen again at 3.250 s"),
            std::string::npos)
      << r.examples[0];
}

}  // namespace
}  // namespace shoal::harness
