#include "shoal/common/partition_map.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace shoal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint32_t kMaxHash = UINT32_MAX;

PartitionInfo Active(uint32_t id, uint64_t lo, uint64_t hi, std::vector<uint32_t> parents = {}) {
  PartitionInfo p;
  p.id = PartitionId(id);
  p.range = {lo, hi};
  p.owner = PodName("pod-a");
  for (uint32_t parent : parents) p.parents.push_back(PartitionId(parent));
  return p;
}

PartitionInfo Sealed(uint32_t id, uint64_t lo, uint64_t hi) {
  PartitionInfo p = Active(id, lo, hi);
  p.state = PartitionState::kSealed;
  return p;
}

PartitionMap MustInitial(uint32_t count, std::string owner = "pod-a") {
  auto m = PartitionMap::Initial("orders", count, PodName(std::move(owner)));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

template <typename T>
T Must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

// ---------------------------------------------------------------------------------------------
// Initial

TEST(PartitionMapInitialTest, CoversTheHashSpaceExactlyWithEqualRanges) {
  for (uint32_t count : {1u, 2u, 3u, 7u, 64u, 1000u, 65536u}) {
    SCOPED_TRACE("count " + std::to_string(count));
    PartitionMap m = MustInitial(count);
    EXPECT_TRUE(m.Validate().ok()) << m.Validate().ToString();
    EXPECT_EQ(m.topic(), "orders");
    EXPECT_EQ(m.epoch(), Epoch(1));
    ASSERT_EQ(m.partitions().size(), count);
    EXPECT_EQ(m.active_count(), count);
    uint64_t next = 0, min_width = kHashSpace, max_width = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const PartitionInfo& p = m.partitions()[i];
      ASSERT_EQ(p.id, PartitionId(i));
      ASSERT_EQ(p.range.lo, next);
      ASSERT_TRUE(p.active());
      ASSERT_EQ(p.owner, PodName("pod-a"));
      ASSERT_TRUE(p.parents.empty());
      min_width = std::min(min_width, p.range.Width());
      max_width = std::max(max_width, p.range.Width());
      next = p.range.hi;
    }
    EXPECT_EQ(next, kHashSpace);
    // "Equal" ranges: 2^32 is not always divisible by count, so widths differ by at most 1.
    EXPECT_LE(max_width - min_width, 1u);
    EXPECT_EQ(m.NextId(), PartitionId(count));
  }
}

TEST(PartitionMapInitialTest, RejectsZeroAndTooManyPartitions) {
  for (uint32_t count : {0u, 65537u}) {
    auto m = PartitionMap::Initial("orders", count, PodName("pod-a"));
    ASSERT_FALSE(m.ok()) << count;
    EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  }
}

// ---------------------------------------------------------------------------------------------
// Validate

struct ValidateCase {
  const char* name;
  std::string topic;
  std::vector<PartitionInfo> partitions;
  const char* error;  // nullptr: valid
};

// Test names and failure messages show the case name instead of the struct's raw bytes.
void PrintTo(const ValidateCase& c, std::ostream* os) { *os << c.name; }

class PartitionMapValidateTest : public ::testing::TestWithParam<ValidateCase> {};

TEST_P(PartitionMapValidateTest, Validate) {
  const ValidateCase& c = GetParam();
  PartitionMap m(c.topic, Epoch(3), c.partitions);
  Status st = m.Validate();
  if (c.error == nullptr) {
    EXPECT_TRUE(st.ok()) << st.ToString();
  } else {
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr(c.error));
  }
}

constexpr uint64_t kHalf = kHashSpace / 2;

INSTANTIATE_TEST_SUITE_P(
    Cases, PartitionMapValidateTest,
    ::testing::Values(
        ValidateCase{"one_partition", "t", {Active(0, 0, kHashSpace)}, nullptr},
        ValidateCase{
            "two_halves", "t", {Active(0, 0, kHalf), Active(1, kHalf, kHashSpace)}, nullptr},
        // Sealed parents overlap their successors by design; only active ranges must tile.
        ValidateCase{
            "sealed_parent_overlaps",
            "t",
            {Sealed(0, 0, kHashSpace), Active(1, 0, kHalf, {0}), Active(2, kHalf, kHashSpace, {0})},
            nullptr},
        // A retired parent has left the map; its children stay valid.
        ValidateCase{"retired_parent", "t", {Active(5, 0, kHashSpace, {4})}, nullptr},
        ValidateCase{"no_topic", "", {Active(0, 0, kHashSpace)}, "no topic"},
        ValidateCase{"no_partitions", "t", {}, "gap at hash 0"},
        ValidateCase{"only_sealed", "t", {Sealed(0, 0, kHashSpace)}, "gap at hash 0"},
        ValidateCase{"gap_at_start", "t", {Active(0, 1, kHashSpace)}, "gap at hash 0"},
        ValidateCase{"gap_in_middle",
                     "t",
                     {Active(0, 0, 100), Active(1, 101, kHashSpace)},
                     "gap at hash 100"},
        ValidateCase{"gap_at_end", "t", {Active(0, 0, kHashSpace - 1)}, "gap at hash 4294967295"},
        ValidateCase{
            "overlap", "t", {Active(0, 0, 101), Active(1, 100, kHashSpace)}, "overlap at hash 100"},
        ValidateCase{"same_range_twice",
                     "t",
                     {Active(0, 0, kHashSpace), Active(1, 0, kHashSpace)},
                     "overlap at hash 0"},
        ValidateCase{"duplicate_id",
                     "t",
                     {Active(7, 0, kHalf), Active(7, kHalf, kHashSpace)},
                     "duplicate partition id 7"},
        ValidateCase{"duplicate_id_sealed",
                     "t",
                     {Sealed(7, 0, kHashSpace), Active(7, 0, kHashSpace)},
                     "duplicate partition id 7"},
        ValidateCase{"empty_range",
                     "t",
                     {Active(0, 0, kHalf), Active(1, kHalf, kHalf), Active(2, kHalf, kHashSpace)},
                     "partition 1 has an empty or out-of-space range"},
        ValidateCase{"inverted_range",
                     "t",
                     {Active(0, kHalf, 10)},
                     "partition 0 has an empty or out-of-space range"},
        ValidateCase{"beyond_hash_space",
                     "t",
                     {Active(0, 0, kHashSpace + 1)},
                     "partition 0 has an empty or out-of-space range"},
        ValidateCase{"own_parent", "t", {Active(0, 0, kHashSpace, {0})}, "its own parent"}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Route

TEST(PartitionMapRouteTest, HitsTheOwnerAtEveryRangeEdge) {
  for (uint32_t count : {1u, 2u, 3u, 64u, 1000u}) {
    SCOPED_TRACE("count " + std::to_string(count));
    PartitionMap m = MustInitial(count);
    for (const PartitionInfo& p : m.partitions()) {
      EXPECT_EQ(m.Route(static_cast<uint32_t>(p.range.lo)).id, p.id);
      EXPECT_EQ(m.Route(static_cast<uint32_t>(p.range.hi - 1)).id, p.id);
    }
    EXPECT_EQ(m.Route(0).id, PartitionId(0));
    EXPECT_EQ(m.Route(kMaxHash).id, PartitionId(count - 1));
  }
}

TEST(PartitionMapRouteTest, SkipsSealedPartitionsAndHandlesUnevenRanges) {
  // Ranges of width 1 at both ends of the hash space: the edges where off-by-one errors live.
  PartitionMap m = MustInitial(1);
  m = Must(m.Split(PartitionId(0), 1));               // 1: [0,1)  2: [1,2^32)
  m = Must(m.Split(PartitionId(2), kHashSpace - 1));  // 3: [1,2^32-1)  4: [2^32-1,2^32)
  m = Must(m.Split(PartitionId(3), 2));               // 5: [1,2)  6: [2,2^32-1)
  ASSERT_TRUE(m.Validate().ok()) << m.Validate().ToString();
  EXPECT_EQ(m.Route(0).id, PartitionId(1));
  EXPECT_EQ(m.Route(1).id, PartitionId(5));
  EXPECT_EQ(m.Route(2).id, PartitionId(6));
  EXPECT_EQ(m.Route(kMaxHash - 1).id, PartitionId(6));
  EXPECT_EQ(m.Route(kMaxHash).id, PartitionId(4));
  // A range of width one has no inner point to split at.
  EXPECT_EQ(m.Split(PartitionId(1), 0).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.Split(PartitionId(1), 1).status().code(), Status::Code::kInvalidArgument);
}

TEST(PartitionMapRouteTest, AgreesWithALinearScanAfterChanges) {
  PartitionMap m = MustInitial(8);
  m = Must(m.Split(PartitionId(3), m.Find(PartitionId(3))->range.lo + 12345));
  m = Must(m.Merge(PartitionId(5), PartitionId(6)));
  m = Must(m.Move(PartitionId(0), PodName("pod-b")));
  ASSERT_TRUE(m.Validate().ok());
  // A fixed-seed LCG: deterministic, and spread over the whole space.
  uint64_t x = 42;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint32_t h = static_cast<uint32_t>(x >> 32);
    const PartitionInfo* expected = nullptr;
    for (const auto& p : m.partitions()) {
      if (p.active() && p.range.Contains(h)) expected = &p;
    }
    ASSERT_NE(expected, nullptr);
    ASSERT_EQ(m.Route(h).id, expected->id) << "hash " << h;
  }
}

// Route narrows its search with a table on the top 16 bits of h; these maps put range edges where
// that can go wrong: many tiny ranges inside one 2^16-wide slice, edges on and next to slice
// boundaries, and ranges of width one at both ends of the hash space.
struct RouteShape {
  uint32_t uniform_cuts;    // range edges anywhere
  uint32_t crowded_slices;  // slices that get crowd_size edges each
  uint32_t crowd_size;
  uint32_t slice_edges;  // edges at a slice boundary, or one off it
  int maps;              // how many random maps of this shape to check
};

// A valid map: active partitions over the cuts, ids shuffled, plus sealed ones over arbitrary
// ranges (which Route must never pick). Returns the cuts (range starts but 0) in `cuts`.
PartitionMap RandomMap(std::mt19937_64& rng, const RouteShape& shape, std::set<uint64_t>* cuts) {
  auto point = [&](uint64_t lo, uint64_t hi) {  // uniform in [lo, hi)
    return std::uniform_int_distribution<uint64_t>(lo, hi - 1)(rng);
  };
  cuts->clear();
  for (uint32_t i = 0; i < shape.uniform_cuts; ++i) cuts->insert(point(1, kHashSpace));
  for (uint32_t i = 0; i < shape.crowded_slices; ++i) {
    const uint64_t slice = point(0, 1 << 16) << 16;
    for (uint32_t j = 0; j < shape.crowd_size; ++j) {
      // Half anywhere in the slice, half packed at its start: runs of width-one ranges.
      const uint64_t c = j % 2 ? point(slice, slice + (1 << 16)) : slice + j / 2;
      if (c > 0) cuts->insert(c);
    }
  }
  for (uint32_t i = 0; i < shape.slice_edges; ++i) {
    const uint64_t c = (point(0, 1 << 16) << 16) + point(0, 3) - 1;
    if (c > 0 && c < kHashSpace) cuts->insert(c);
  }
  std::vector<uint64_t> starts = {0};
  starts.insert(starts.end(), cuts->begin(), cuts->end());
  std::vector<uint32_t> ids(starts.size() + starts.size() / 4 + 1);
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<PartitionInfo> parts;
  for (size_t i = 0; i < starts.size(); ++i) {
    parts.push_back(Active(ids[i], starts[i], i + 1 < starts.size() ? starts[i + 1] : kHashSpace));
  }
  for (size_t i = starts.size(); i < ids.size(); ++i) {
    const uint64_t lo = point(0, kHashSpace);
    parts.push_back(Sealed(ids[i], lo, point(lo + 1, kHashSpace + 1)));
  }
  std::shuffle(parts.begin(), parts.end(), rng);
  return PartitionMap("t", Epoch(1), std::move(parts));
}

// The hash points where an off-by-one would show: both ends of the space, each edge and its
// neighbours, the slice boundaries around each edge, and random points.
std::vector<uint32_t> Probes(std::mt19937_64& rng, const std::set<uint64_t>& cuts) {
  std::vector<uint64_t> points = {0, 1, kHashSpace - 2, kHashSpace - 1};
  for (uint64_t c : cuts) {
    const uint64_t slice = c >> 16 << 16;
    for (uint64_t p :
         {c - 1, c, c + 1, slice - 1, slice, slice + (1 << 16) - 1, slice + (1 << 16)}) {
      points.push_back(p);
    }
  }
  for (int i = 0; i < 500; ++i) points.push_back(rng() >> 32);
  std::vector<uint32_t> out;
  for (uint64_t p : points) {
    if (p < kHashSpace) out.push_back(static_cast<uint32_t>(p));
  }
  return out;
}

class PartitionMapRouteShapeTest : public ::testing::TestWithParam<RouteShape> {};

TEST_P(PartitionMapRouteShapeTest, AgreesWithALinearScanOnRandomMaps) {
  std::mt19937_64 rng(7);
  std::set<uint64_t> cuts;
  for (int round = 0; round < GetParam().maps; ++round) {
    SCOPED_TRACE("map " + std::to_string(round));
    const PartitionMap m = RandomMap(rng, GetParam(), &cuts);
    ASSERT_TRUE(m.Validate().ok()) << m.Validate().ToString();
    for (uint32_t h : Probes(rng, cuts)) {
      const PartitionInfo* expected = nullptr;
      for (const auto& p : m.partitions()) {
        if (p.active() && p.range.Contains(h)) expected = &p;
      }
      ASSERT_NE(expected, nullptr) << "hash " << h;
      ASSERT_EQ(&m.Route(h), expected) << "hash " << h;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PartitionMapRouteShapeTest,
    // The linear scan costs partitions x probes per map, so big shapes check fewer maps.
    ::testing::Values(RouteShape{0, 0, 0, 0, 20},      // one partition
                      RouteShape{1, 0, 0, 0, 200},     // two
                      RouteShape{5, 0, 0, 3, 200},     // a few, some on slice boundaries
                      RouteShape{300, 0, 0, 0, 30},    // even-ish
                      RouteShape{20, 1, 400, 0, 30},   // one slice crowded with tiny ranges
                      RouteShape{0, 1, 2000, 0, 3},    // nearly all partitions in one slice
                      RouteShape{50, 3, 150, 50, 20},  // several crowded slices, edges on bounds
                      RouteShape{0, 0, 0, 200, 40}),   // every edge on or next to a slice boundary
    [](const auto& info) { return "shape" + std::to_string(info.index); });

TEST(PartitionMapRouteTest, AgreesWithTheOwnerAtEveryEdgeOfHugeMaps) {
  // More active partitions than slices (2^16), so most slices hold several; and the largest
  // initial map, where every slice holds exactly one.
  std::mt19937_64 rng(11);
  std::set<uint64_t> cuts;
  const PartitionMap huge = RandomMap(rng, {70000, 2, 3000, 1000, 1}, &cuts);
  ASSERT_TRUE(huge.Validate().ok());
  ASSERT_GT(huge.active_count(), size_t{1} << 16);
  for (const PartitionMap& m : {huge, MustInitial(65536)}) {
    for (const auto& p : m.partitions()) {
      if (!p.active()) continue;
      ASSERT_EQ(m.Route(static_cast<uint32_t>(p.range.lo)).id, p.id) << p.range.lo;
      ASSERT_EQ(m.Route(static_cast<uint32_t>(p.range.hi - 1)).id, p.id) << p.range.hi;
    }
  }
}

TEST(PartitionMapRouteTest, CopiesRouteAlikeAfterTheOriginalIsGone) {
  // The routing table is shared between copies, not owned by the first one.
  std::mt19937_64 rng(3);
  std::set<uint64_t> cuts;
  auto original = std::make_unique<PartitionMap>(RandomMap(rng, {50, 1, 100, 10, 1}, &cuts));
  PartitionMap copy = *original;
  PartitionMap assigned;
  assigned = *original;
  std::vector<std::pair<uint32_t, PartitionId>> expected;
  for (uint32_t h : Probes(rng, cuts)) expected.emplace_back(h, original->Route(h).id);
  original.reset();
  for (const auto& [h, id] : expected) {
    ASSERT_EQ(copy.Route(h).id, id) << h;
    ASSERT_EQ(assigned.Route(h).id, id) << h;
  }
  // A change builds its own table: routing follows the new ranges, the copy keeps the old.
  const PartitionInfo& middle = copy.Route(kMaxHash / 2);
  ASSERT_GE(middle.range.Width(), 2u);
  const uint64_t at = middle.range.lo + middle.range.Width() / 2;
  const PartitionMap split = Must(copy.Split(middle.id, at));
  EXPECT_EQ(split.Route(static_cast<uint32_t>(at)).id, PartitionId(split.NextId().value() - 1));
  EXPECT_EQ(split.Route(static_cast<uint32_t>(at - 1)).id, PartitionId(split.NextId().value() - 2));
  EXPECT_EQ(copy.Route(static_cast<uint32_t>(at)).id, middle.id);
}

// ---------------------------------------------------------------------------------------------
// Split, Merge, Move

TEST(PartitionMapSplitTest, SealsTheParentAndCreatesTwoChildren) {
  const PartitionMap before = MustInitial(4);
  const PartitionInfo parent = *before.Find(PartitionId(1));
  const uint64_t at = parent.range.lo + parent.range.Width() / 3;
  PartitionMap after = Must(before.Split(PartitionId(1), at));

  EXPECT_TRUE(after.Validate().ok()) << after.Validate().ToString();
  EXPECT_EQ(after.epoch(), Epoch(2));
  EXPECT_EQ(after.topic(), "orders");
  EXPECT_EQ(after.active_count(), 5u);
  EXPECT_EQ(after.Find(PartitionId(1))->state, PartitionState::kSealed);
  EXPECT_EQ(after.Find(PartitionId(1))->range, parent.range);

  const PartitionInfo* left = after.Find(PartitionId(4));
  const PartitionInfo* right = after.Find(PartitionId(5));
  ASSERT_NE(left, nullptr);
  ASSERT_NE(right, nullptr);
  EXPECT_EQ(left->range, (HashRange{parent.range.lo, at}));
  EXPECT_EQ(right->range, (HashRange{at, parent.range.hi}));
  EXPECT_TRUE(left->active());
  EXPECT_TRUE(right->active());
  EXPECT_THAT(left->parents, ElementsAre(PartitionId(1)));
  EXPECT_THAT(right->parents, ElementsAre(PartitionId(1)));
  EXPECT_EQ(left->owner, parent.owner);
  EXPECT_EQ(right->owner, parent.owner);
  // Keys move as little as possible: the other partitions are untouched.
  for (uint32_t id : {0u, 2u, 3u}) {
    EXPECT_EQ(*after.Find(PartitionId(id)), *before.Find(PartitionId(id)));
  }
  // A change returns a new map and never modifies the original.
  EXPECT_EQ(before, MustInitial(4));
}

TEST(PartitionMapMergeTest, SealsBothAndCreatesOneSuccessorInEitherOrder) {
  const PartitionMap before = MustInitial(4);
  for (auto [a, b] : {std::pair{1u, 2u}, std::pair{2u, 1u}}) {
    SCOPED_TRACE("merge " + std::to_string(a) + "+" + std::to_string(b));
    PartitionMap after = Must(before.Merge(PartitionId(a), PartitionId(b)));
    EXPECT_TRUE(after.Validate().ok()) << after.Validate().ToString();
    EXPECT_EQ(after.epoch(), Epoch(2));
    EXPECT_EQ(after.active_count(), 3u);
    EXPECT_FALSE(after.Find(PartitionId(1))->active());
    EXPECT_FALSE(after.Find(PartitionId(2))->active());
    const PartitionInfo* merged = after.Find(PartitionId(4));
    ASSERT_NE(merged, nullptr);
    EXPECT_TRUE(merged->active());
    EXPECT_EQ(merged->range, (HashRange{before.Find(PartitionId(1))->range.lo,
                                        before.Find(PartitionId(2))->range.hi}));
    // Parents are listed in hash order whatever the argument order.
    EXPECT_THAT(merged->parents, ElementsAre(PartitionId(1), PartitionId(2)));
  }
}

TEST(PartitionMapMoveTest, SealsAndCreatesASuccessorOnTheNewOwner) {
  const PartitionMap before = MustInitial(2);
  PartitionMap after = Must(before.Move(PartitionId(0), PodName("pod-b")));
  EXPECT_TRUE(after.Validate().ok()) << after.Validate().ToString();
  EXPECT_EQ(after.epoch(), Epoch(2));
  EXPECT_FALSE(after.Find(PartitionId(0))->active());
  EXPECT_EQ(after.Find(PartitionId(0))->owner, PodName("pod-a"));
  const PartitionInfo* succ = after.Find(PartitionId(2));
  ASSERT_NE(succ, nullptr);
  EXPECT_TRUE(succ->active());
  EXPECT_EQ(succ->owner, PodName("pod-b"));
  EXPECT_EQ(succ->range, before.Find(PartitionId(0))->range);
  EXPECT_THAT(succ->parents, ElementsAre(PartitionId(0)));
  EXPECT_EQ(after.Route(0).id, PartitionId(2));
}

TEST(PartitionMapDeclareLostTest, SealsThePodsPartitionsAsLostAndGivesActiveRangesSuccessors) {
  // pod-a: p0 (active) and p2 (sealed, split into p3 and p4 on pod-b); pod-b: p1, p3, p4.
  PartitionMap m = MustInitial(2);
  m = Must(m.Move(PartitionId(1), PodName("pod-b")));  // p1 sealed on a, p2 active on b
  m = Must(m.WithEndOffset(PartitionId(1), 7));
  PartitionMap after = Must(m.DeclareLost(PodName("pod-a")));
  ASSERT_TRUE(after.Validate().ok()) << after.Validate().ToString();
  EXPECT_EQ(after.epoch(), Epoch(m.epoch().value() + 1));
  const PartitionInfo* p0 = after.Find(PartitionId(0));
  const PartitionInfo* p1 = after.Find(PartitionId(1));
  EXPECT_TRUE(p0->lost && !p0->active());
  EXPECT_TRUE(p1->lost && !p1->active());
  EXPECT_EQ(p1->end_offset, 7u) << "a sealed partition keeps its recorded end";
  EXPECT_FALSE(after.Find(PartitionId(2))->lost) << "pod-b's partition is untouched";
  // Only the active one gets a successor: on the emptied pod, over the same range.
  const PartitionInfo* s = after.Find(PartitionId(3));
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->active());
  EXPECT_EQ(s->owner, PodName("pod-a"));
  EXPECT_EQ(s->range, p0->range);
  EXPECT_THAT(s->parents, ElementsAre(PartitionId(0)));
  EXPECT_EQ(after.Find(PartitionId(4)), nullptr);
  EXPECT_EQ(after.Route(0).id, PartitionId(3));
  // The mark survives JSON and names another map (the digest covers it).
  EXPECT_EQ(Must(PartitionMap::FromJson(after.ToJson())), after);
  EXPECT_NE(after.ToJson().find("\"lost\":true"), std::string::npos);
  // Declared again (the pod emptied once more): only what is not lost already.
  const PartitionMap again = Must(after.DeclareLost(PodName("pod-a")));
  EXPECT_TRUE(again.Find(PartitionId(3))->lost);
  ASSERT_NE(again.Find(PartitionId(4)), nullptr);
  EXPECT_THAT(again.Find(PartitionId(4))->parents, ElementsAre(PartitionId(3)));
  EXPECT_EQ(again.Find(PartitionId(5)), nullptr);
  EXPECT_EQ(after.DeclareLost(PodName("pod-c")).status().code(),
            Status::Code::kInvalidArgument);
}

TEST(PartitionMapDeclareLostTest, ALostActivePartitionIsInvalid) {
  PartitionInfo p = Active(0, 0, kHashSpace);
  p.lost = true;
  PartitionMap m("orders", Epoch(1), {p});
  EXPECT_THAT(m.Validate().message(), HasSubstr("is lost and active"));
}

TEST(PartitionMapChangeTest, ChainsKeepLineageAndNeverReuseIds) {
  PartitionMap m = MustInitial(2);
  m = Must(m.Split(PartitionId(0), 1000));             // 2, 3 <- 0
  m = Must(m.Move(PartitionId(3), PodName("pod-b")));  // 4 <- 3
  m = Must(m.Merge(PartitionId(2), PartitionId(4)));   // 5 <- 2, 4
  m = Must(m.Merge(PartitionId(5), PartitionId(1)));   // 6 <- 5, 1
  ASSERT_TRUE(m.Validate().ok()) << m.Validate().ToString();
  EXPECT_EQ(m.epoch(), Epoch(5));
  EXPECT_EQ(m.active_count(), 1u);
  EXPECT_EQ(m.partitions().size(), 7u);
  const PartitionInfo* last = m.Find(PartitionId(6));
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->range, (HashRange{0, kHashSpace}));
  EXPECT_THAT(last->parents, ElementsAre(PartitionId(5), PartitionId(1)));
  EXPECT_THAT(m.Find(PartitionId(5))->parents, ElementsAre(PartitionId(2), PartitionId(4)));
  EXPECT_THAT(m.Find(PartitionId(4))->parents, ElementsAre(PartitionId(3)));
  EXPECT_EQ(m.NextId(), PartitionId(7));
}

struct ChangeErrorCase {
  const char* name;
  std::function<Result<PartitionMap>(const PartitionMap&)> change;
  Status::Code code;
  const char* error;
};

void PrintTo(const ChangeErrorCase& c, std::ostream* os) { *os << c.name; }

class PartitionMapChangeErrorTest : public ::testing::TestWithParam<ChangeErrorCase> {};

// The map under test: 4 partitions over quarters, then partition 0 split at 1000 (ids 4 and 5),
// so partition 0 is sealed.
PartitionMap ErrorFixture() { return Must(MustInitial(4).Split(PartitionId(0), 1000)); }

TEST_P(PartitionMapChangeErrorTest, RejectsAndLeavesTheMapAlone) {
  const PartitionMap before = ErrorFixture();
  auto r = GetParam().change(before);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), GetParam().code) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr(GetParam().error));
  EXPECT_EQ(before, ErrorFixture());
}

constexpr uint64_t kQ = kHashSpace / 4;

INSTANTIATE_TEST_SUITE_P(
    Cases, PartitionMapChangeErrorTest,
    ::testing::Values(
        ChangeErrorCase{"split_at_lo", [](auto& m) { return m.Split(PartitionId(1), kQ); },
                        Status::Code::kInvalidArgument, "is not inside"},
        ChangeErrorCase{"split_at_hi", [](auto& m) { return m.Split(PartitionId(1), 2 * kQ); },
                        Status::Code::kInvalidArgument, "is not inside"},
        ChangeErrorCase{"split_below", [](auto& m) { return m.Split(PartitionId(1), 0); },
                        Status::Code::kInvalidArgument, "is not inside"},
        ChangeErrorCase{"split_above",
                        [](auto& m) { return m.Split(PartitionId(1), kHashSpace + 5); },
                        Status::Code::kInvalidArgument, "is not inside"},
        ChangeErrorCase{"split_sealed", [](auto& m) { return m.Split(PartitionId(0), 10); },
                        Status::Code::kFailedPrecondition, "partition 0 is sealed"},
        ChangeErrorCase{"split_unknown", [](auto& m) { return m.Split(PartitionId(99), 10); },
                        Status::Code::kNotFound, "no partition 99"},
        ChangeErrorCase{"merge_not_adjacent",
                        [](auto& m) { return m.Merge(PartitionId(1), PartitionId(3)); },
                        Status::Code::kInvalidArgument, "not adjacent"},
        ChangeErrorCase{"merge_with_itself",
                        [](auto& m) { return m.Merge(PartitionId(1), PartitionId(1)); },
                        Status::Code::kInvalidArgument, "not adjacent"},
        ChangeErrorCase{"merge_sealed",
                        [](auto& m) { return m.Merge(PartitionId(0), PartitionId(1)); },
                        Status::Code::kFailedPrecondition, "partition 0 is sealed"},
        ChangeErrorCase{"merge_sealed_second",
                        [](auto& m) { return m.Merge(PartitionId(5), PartitionId(0)); },
                        Status::Code::kFailedPrecondition, "partition 0 is sealed"},
        ChangeErrorCase{"merge_unknown",
                        [](auto& m) { return m.Merge(PartitionId(1), PartitionId(42)); },
                        Status::Code::kNotFound, "no partition 42"},
        ChangeErrorCase{"move_same_owner",
                        [](auto& m) { return m.Move(PartitionId(1), PodName("pod-a")); },
                        Status::Code::kInvalidArgument, "already on pod-a"},
        ChangeErrorCase{"move_sealed",
                        [](auto& m) { return m.Move(PartitionId(0), PodName("pod-b")); },
                        Status::Code::kFailedPrecondition, "partition 0 is sealed"},
        ChangeErrorCase{"move_unknown",
                        [](auto& m) { return m.Move(PartitionId(7), PodName("pod-b")); },
                        Status::Code::kNotFound, "no partition 7"}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// End offsets and retirement

// An end recorded from a seal's answer is known as such, across JSON; the digest (what a seal
// names before its end exists) is the same either way.
TEST(PartitionMapRetireTest, AnEndRecordedFromASealIsKnownAsSuchAndLeavesTheDigestAlone) {
  PartitionMap m = Must(MustInitial(2).Split(PartitionId(0), 1000));
  EXPECT_FALSE(m.Find(PartitionId(0))->end_known);
  PartitionMap with_end = Must(m.WithEndOffset(PartitionId(0), 0));
  EXPECT_TRUE(with_end.Find(PartitionId(0))->end_known);
  EXPECT_EQ(with_end.Digest(), m.Digest());
  EXPECT_FALSE(with_end == m);
  PartitionMap back = Must(PartitionMap::FromJson(with_end.ToJson()));
  EXPECT_TRUE(back.Find(PartitionId(0))->end_known);
  EXPECT_EQ(back.Find(PartitionId(0))->end_offset, 0u);
  EXPECT_TRUE(back == with_end);
  EXPECT_EQ(with_end.ToJson().find("end_known"), with_end.ToJson().rfind("end_known"));
  EXPECT_EQ(m.ToJson().find("end_known"), std::string::npos);
}

TEST(PartitionMapRetireTest, RecordsEndOffsetsAndRetiresSealedPartitionsOnly) {
  PartitionMap m = Must(MustInitial(2).Split(PartitionId(0), 1000));
  PartitionMap with_end = Must(m.WithEndOffset(PartitionId(0), 120));
  EXPECT_EQ(with_end.epoch(), m.epoch());
  EXPECT_EQ(with_end.Find(PartitionId(0))->end_offset, 120u);
  EXPECT_EQ(m.Find(PartitionId(0))->end_offset, 0u);

  EXPECT_EQ(m.WithEndOffset(PartitionId(1), 5).status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(m.WithEndOffset(PartitionId(9), 5).status().code(), Status::Code::kNotFound);

  PartitionMap retired = Must(with_end.WithoutRetired(PartitionId(0)));
  EXPECT_EQ(retired.Find(PartitionId(0)), nullptr);
  EXPECT_TRUE(retired.Validate().ok()) << retired.Validate().ToString();
  // Children keep naming their retired parent: lineage is history, not a live pointer.
  EXPECT_THAT(retired.Find(PartitionId(2))->parents, ElementsAre(PartitionId(0)));
  EXPECT_EQ(retired.NextId(), PartitionId(4));

  EXPECT_EQ(m.WithoutRetired(PartitionId(1)).status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(m.WithoutRetired(PartitionId(9)).status().code(), Status::Code::kNotFound);
}

// ---------------------------------------------------------------------------------------------
// JSON

TEST(PartitionMapJsonTest, RoundTrips) {
  std::vector<PartitionMap> maps;
  maps.push_back(MustInitial(1));
  maps.push_back(MustInitial(64));
  PartitionMap changed = MustInitial(4, "pod \"a\"\\\n\xC3\xA9");  // owner needing escapes
  changed = Must(changed.Split(PartitionId(2), changed.Find(PartitionId(2))->range.lo + 7));
  changed = Must(changed.Merge(PartitionId(0), PartitionId(1)));
  changed = Must(changed.Move(PartitionId(3), PodName("pod-b")));
  changed = Must(changed.WithEndOffset(PartitionId(2), UINT64_MAX));
  maps.push_back(changed);
  maps.push_back(PartitionMap("t\x01\"", Epoch(UINT64_MAX), {Active(kMaxPartitionId, 0, kHashSpace)}));

  for (const PartitionMap& m : maps) {
    const std::string json = m.ToJson();
    SCOPED_TRACE(json.substr(0, 300));
    auto back = PartitionMap::FromJson(json);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, m);
    EXPECT_EQ(back->ToJson(), json);
    EXPECT_EQ(back->Route(0).id, m.Route(0).id);  // the routing index is rebuilt too
    EXPECT_EQ(back->Route(kMaxHash).id, m.Route(kMaxHash).id);
  }
}

TEST(PartitionMapJsonTest, AcceptsAMissingEndOffsetAndAnyFieldOrder) {
  auto m = PartitionMap::FromJson(
      R"({"partitions":[{"parents":[],"owner":"p","state":"active","hi":4294967296,"lo":0,"id":0}],
          "epoch":9,"topic":"t"})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->epoch(), Epoch(9));
  EXPECT_EQ(m->partitions().at(0).end_offset, 0u);
}

struct FromJsonCase {
  const char* name;
  std::string json;
  const char* error;
};

void PrintTo(const FromJsonCase& c, std::ostream* os) { *os << c.name; }

class PartitionMapFromJsonErrorTest : public ::testing::TestWithParam<FromJsonCase> {};

TEST_P(PartitionMapFromJsonErrorTest, RejectsWithAClearStatus) {
  auto m = PartitionMap::FromJson(GetParam().json);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr(GetParam().error));
}

// One valid entry, and one built from pieces so each case breaks exactly one thing.
const std::string kEntry =
    R"({"id":0,"lo":0,"hi":4294967296,"state":"active","owner":"p","parents":[]})";
std::string Doc(const std::string& parts, const std::string& head = R"("topic":"t","epoch":1)") {
  return "{" + head + ",\"partitions\":[" + parts + "]}";
}
std::string Entry(const std::string& fields) { return "{" + fields + "}"; }
const std::string kEntryTail = R"("owner":"p","parents":[])";
const std::string kRange = R"("lo":0,"hi":4294967296)";

INSTANTIATE_TEST_SUITE_P(
    Cases, PartitionMapFromJsonErrorTest,
    ::testing::Values(
        FromJsonCase{"empty", "", "not JSON"},
        FromJsonCase{"truncated", Doc(kEntry).substr(0, 30), "not JSON"},
        FromJsonCase{"trailing_garbage", Doc(kEntry) + "x", "not JSON"},
        FromJsonCase{"array", "[" + kEntry + "]", "needs topic, epoch and partitions"},
        FromJsonCase{"missing_topic", Doc(kEntry, R"("epoch":1)"), "needs topic"},
        FromJsonCase{"missing_epoch", Doc(kEntry, R"("topic":"t")"), "needs topic"},
        FromJsonCase{"missing_partitions", R"({"topic":"t","epoch":1})", "needs topic"},
        FromJsonCase{"topic_not_string", Doc(kEntry, R"("topic":1,"epoch":1)"), "needs topic"},
        FromJsonCase{"negative_epoch", Doc(kEntry, R"("topic":"t","epoch":-1)"), "needs topic"},
        FromJsonCase{"fractional_epoch", Doc(kEntry, R"("topic":"t","epoch":1.5)"), "needs topic"},
        FromJsonCase{"partitions_not_array", R"({"topic":"t","epoch":1,"partitions":{}})",
                     "needs topic"},
        FromJsonCase{"entry_not_object", Doc("1"), "partition entry needs"},
        FromJsonCase{"entry_missing_id", Doc(Entry(kRange + R"(,"state":"active",)" + kEntryTail)),
                     "partition entry needs id"},
        FromJsonCase{"entry_missing_hi",
                     Doc(Entry(R"("id":0,"lo":0,"state":"active",)" + kEntryTail)),
                     "partition entry needs"},
        FromJsonCase{"entry_missing_state", Doc(Entry(R"("id":0,)" + kRange + "," + kEntryTail)),
                     "partition entry needs"},
        FromJsonCase{"entry_missing_owner",
                     Doc(Entry(R"("id":0,)" + kRange + R"(,"state":"active","parents":[])")),
                     "partition entry needs"},
        FromJsonCase{"entry_missing_parents",
                     Doc(Entry(R"("id":0,)" + kRange + R"(,"state":"active","owner":"p")")),
                     "partition entry needs"},
        FromJsonCase{"negative_lo",
                     Doc(Entry(R"("id":0,"lo":-1,"hi":4294967296,"state":"active",)" + kEntryTail)),
                     "partition entry needs"},
        FromJsonCase{
            "id_too_large",
            Doc(Entry(R"("id":4294967296,)" + kRange + R"(,"state":"active",)" + kEntryTail)),
            "partition id 4294967296 is out of range"},
        FromJsonCase{"bad_state",
                     Doc(Entry(R"("id":0,)" + kRange + R"(,"state":"open",)" + kEntryTail)),
                     "state must be active or sealed"},
        FromJsonCase{
            "parent_not_integer",
            Doc(Entry(R"("id":0,)" + kRange + R"(,"state":"active","owner":"p","parents":["x"])")),
            "bad parent id"},
        FromJsonCase{"parent_too_large",
                     Doc(Entry(R"("id":0,)" + kRange +
                               R"(,"state":"active","owner":"p","parents":[4294967296])")),
                     "bad parent id"},
        // Well-formed JSON that is not a valid map is rejected by Validate, with its reason.
        FromJsonCase{"gap", Doc(Entry(R"("id":0,"lo":0,"hi":100,"state":"active",)" + kEntryTail)),
                     "gap at hash 100"},
        FromJsonCase{"hi_beyond_space",
                     Doc(Entry(R"("id":0,"lo":0,"hi":4294967297,"state":"active",)" + kEntryTail)),
                     "out-of-space range"},
        FromJsonCase{"duplicate_id", Doc(kEntry + "," + kEntry), "duplicate partition id 0"},
        FromJsonCase{"empty_topic", Doc(kEntry, R"("topic":"","epoch":1)"), "no topic"}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Initial with several owners, WithoutPeer, active_in_order

TEST(PartitionMapInitialTest, SpreadsPartitionsRoundRobinOverOwners) {
  struct Case {
    uint32_t count;
    std::vector<std::string> owners;
  };
  for (const Case& c : {Case{1, {"a"}}, Case{4, {"a", "b"}}, Case{7, {"a", "b", "c"}},
                        Case{2, {"a", "b", "c", "d"}}, Case{1000, {"a", "b", "c"}}}) {
    SCOPED_TRACE("count " + std::to_string(c.count) + " owners " + std::to_string(c.owners.size()));
    std::vector<PodName> owners;
    for (const auto& o : c.owners) owners.emplace_back(o);
    PartitionMap m = Must(PartitionMap::Initial("orders", c.count, owners));
    const PartitionMap single = MustInitial(c.count);
    EXPECT_TRUE(m.Validate().ok()) << m.Validate().ToString();
    EXPECT_EQ(m.epoch(), Epoch(1));
    ASSERT_EQ(m.partitions().size(), c.count);
    for (uint32_t i = 0; i < c.count; ++i) {
      EXPECT_EQ(m.partitions()[i].id, PartitionId(i));
      EXPECT_EQ(m.partitions()[i].owner, owners[i % owners.size()]);
      // Same ranges as the single-owner map: only the owners differ.
      EXPECT_EQ(m.partitions()[i].range, single.partitions()[i].range);
    }
    EXPECT_EQ(m.Route(0).owner, owners[0]);
  }
}

TEST(PartitionMapInitialTest, SeveralOwnersRejectsNoOwnersAndBadCounts) {
  auto none = PartitionMap::Initial("orders", 4, std::vector<PodName>{});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("owner"));
  const std::vector<PodName> owners = {PodName("a"), PodName("b")};
  EXPECT_EQ(PartitionMap::Initial("orders", 0, owners).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(PartitionMap::Initial("orders", 65537, owners).status().code(),
            Status::Code::kInvalidArgument);
}

TEST(PartitionMapPeerTest, WithoutPeerDropsOnlyThatPodAndKeepsTheEpoch) {
  const PartitionMap base = MustInitial(2)
                                .WithPeer(PodName("pod-a"), {"a:1", "a:2"})
                                .WithPeer(PodName("pod-b"), {"b:1", "b:2"});
  const PartitionMap without = base.WithoutPeer(PodName("pod-b"));
  EXPECT_EQ(without.epoch(), base.epoch());
  EXPECT_EQ(without.partitions(), base.partitions());
  EXPECT_EQ(without.Peer(PodName("pod-b")), nullptr);
  ASSERT_NE(without.Peer(PodName("pod-a")), nullptr);
  EXPECT_EQ(*without.Peer(PodName("pod-a")), (PeerAddress{"a:1", "a:2"}));
  EXPECT_EQ(without.peers().size(), 1u);
  // The original is untouched; dropping an unknown pod is a no-op.
  ASSERT_NE(base.Peer(PodName("pod-b")), nullptr);
  EXPECT_EQ(base.WithoutPeer(PodName("pod-z")), base);
  EXPECT_EQ(without.Route(0).id, base.Route(0).id);
}

// The active partitions of m, sorted by range start, computed the slow way.
std::vector<PartitionId> ActiveByRangeSlow(const PartitionMap& m) {
  std::vector<const PartitionInfo*> act;
  for (const auto& p : m.partitions()) {
    if (p.active()) act.push_back(&p);
  }
  std::sort(act.begin(), act.end(), [](const PartitionInfo* a, const PartitionInfo* b) {
    return a->range.lo < b->range.lo;
  });
  std::vector<PartitionId> ids;
  for (const auto* p : act) ids.push_back(p->id);
  return ids;
}

std::vector<PartitionId> ActiveInOrder(const PartitionMap& m) {
  std::vector<PartitionId> ids;
  for (uint32_t i : m.active_in_order()) ids.push_back(m.partitions().at(i).id);
  return ids;
}

TEST(PartitionMapActiveInOrderTest, ListsActivePartitionsInHashOrder) {
  PartitionMap m = MustInitial(4);
  EXPECT_THAT(ActiveInOrder(m),
              ElementsAre(PartitionId(0), PartitionId(1), PartitionId(2), PartitionId(3)));
  // Successors get higher ids but sit in the middle of the hash space: order is by range.
  m = Must(m.Split(PartitionId(1), m.Find(PartitionId(1))->range.lo + 10));  // 4, 5 <- 1
  m = Must(m.Merge(PartitionId(2), PartitionId(3)));                         // 6 <- 2, 3
  m = Must(m.Move(PartitionId(0), PodName("pod-b")));                        // 7 <- 0
  EXPECT_THAT(ActiveInOrder(m),
              ElementsAre(PartitionId(7), PartitionId(4), PartitionId(5), PartitionId(6)));
  EXPECT_EQ(ActiveInOrder(m), ActiveByRangeSlow(m));
  EXPECT_EQ(m.active_in_order().size(), m.active_count());
  const PartitionMap back = Must(PartitionMap::FromJson(m.ToJson()));
  EXPECT_EQ(ActiveInOrder(back), ActiveInOrder(m));
}

// ---------------------------------------------------------------------------------------------
// MapChange

// Checks what every map a MapChange builds must satisfy: valid, active ranges tile [0, 2^32),
// one epoch past the base, every partition that is new has a fresh id and parents from the base.
void ExpectComposedFrom(const PartitionMap& base, const PartitionMap& next) {
  EXPECT_TRUE(next.Validate().ok()) << next.Validate().ToString();
  EXPECT_EQ(next.epoch(), Epoch(base.epoch().value() + 1));
  EXPECT_EQ(next.topic(), base.topic());
  EXPECT_EQ(next.peers(), base.peers());
  uint64_t at = 0;
  for (uint32_t i : next.active_in_order()) {
    ASSERT_EQ(next.partitions()[i].range.lo, at);
    at = next.partitions()[i].range.hi;
  }
  EXPECT_EQ(at, kHashSpace);
  for (const auto& p : next.partitions()) {
    if (base.Find(p.id)) continue;
    EXPECT_GE(p.id.value(), base.NextId().value()) << "successor " << p.id.value();
    EXPECT_TRUE(p.active());
    EXPECT_FALSE(p.parents.empty()) << "successor " << p.id.value();
    for (PartitionId parent : p.parents) {
      const PartitionInfo* was = base.Find(parent);
      ASSERT_NE(was, nullptr) << "parent " << parent.value();
      EXPECT_TRUE(was->active()) << "parent " << parent.value() << " was already sealed";
      const PartitionInfo* now = next.Find(parent);
      ASSERT_NE(now, nullptr);
      EXPECT_FALSE(now->active()) << "parent " << parent.value() << " is not sealed";
    }
  }
}

TEST(MapChangeTest, EmptyChangeBuildsTheSameMapAtTheNextEpoch) {
  const PartitionMap base = MustInitial(3).WithPeer(PodName("pod-a"), {"d", "a"});
  MapChange change(base);
  EXPECT_TRUE(change.empty());
  EXPECT_EQ(change.size(), 0u);
  const PartitionMap next = Must(change.Build());
  EXPECT_EQ(next, base.Reissued(Epoch(2))) << "every partition keeps its birth";
  ExpectComposedFrom(base, next);
}

struct KWaySplitCase {
  const char* name;
  uint32_t count;          // partitions of the base map
  uint32_t split;          // the one to split
  std::vector<double> at;  // cut points as fractions of its range
};

void PrintTo(const KWaySplitCase& c, std::ostream* os) { *os << c.name; }

class MapChangeSplitTest : public ::testing::TestWithParam<KWaySplitCase> {};

TEST_P(MapChangeSplitTest, SplitsIntoCutsPlusOneSuccessorsOnTheOwner) {
  const KWaySplitCase& c = GetParam();
  const PartitionMap base = MustInitial(c.count, "pod-x");
  const HashRange r = base.Find(PartitionId(c.split))->range;
  std::vector<uint64_t> cuts;
  for (double f : c.at) cuts.push_back(r.lo + static_cast<uint64_t>(f * double(r.Width())));
  MapChange change(base);
  ASSERT_TRUE(change.Split(PartitionId(c.split), cuts).ok());
  EXPECT_EQ(change.size(), 1u);
  const PartitionMap next = Must(change.Build());
  ExpectComposedFrom(base, next);
  EXPECT_EQ(next.active_count(), c.count + cuts.size());
  EXPECT_FALSE(next.Find(PartitionId(c.split))->active());
  uint64_t lo = r.lo;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const PartitionInfo* s = next.Find(PartitionId(c.count + static_cast<uint32_t>(i)));
    ASSERT_NE(s, nullptr) << "piece " << i;
    const uint64_t hi = i < cuts.size() ? cuts[i] : r.hi;
    EXPECT_EQ(s->range, (HashRange{lo, hi})) << "piece " << i;
    EXPECT_EQ(s->owner, PodName("pod-x"));
    EXPECT_THAT(s->parents, ElementsAre(PartitionId(c.split)));
    EXPECT_EQ(next.Route(static_cast<uint32_t>(lo)).id, s->id);
    lo = hi;
  }
  EXPECT_EQ(next.NextId().value(), c.count + cuts.size() + 1);
  EXPECT_EQ(base, MustInitial(c.count, "pod-x"));  // the base is never modified
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MapChangeSplitTest,
    ::testing::Values(
        KWaySplitCase{"two_way", 4, 1, {0.5}}, KWaySplitCase{"three_way", 4, 2, {1.0 / 3, 2.0 / 3}},
        KWaySplitCase{"ten_way_uneven", 2, 0, {0.01, 0.02, 0.1, 0.3, 0.31, 0.5, 0.7, 0.9, 0.999}},
        KWaySplitCase{"last_partition", 3, 2, {0.25, 0.5, 0.75}},
        KWaySplitCase{"whole_space", 1, 0, {0.125, 0.25, 0.5}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MapChangeTest, SplitAtEveryPointOfATinyRange) {
  // The tightest split possible: a range of width 3 cut at both inner points.
  const PartitionMap base = Must(MustInitial(1).Split(PartitionId(0), 3));  // 1: [0,3), 2
  MapChange change(base);
  ASSERT_TRUE(change.Split(PartitionId(1), {1, 2}).ok());
  const PartitionMap next = Must(change.Build());
  ExpectComposedFrom(base, next);
  for (uint32_t h : {0u, 1u, 2u}) EXPECT_EQ(next.Route(h).range.Width(), 1u);
}

TEST(MapChangeTest, ComposesManyChangesIntoOneEpochWithFreshIds) {
  // Base: 8 partitions, then partition 7 split (so 7 is sealed and ids 8, 9 exist).
  const PartitionMap base =
      Must(Must(PartitionMap::Initial("orders", 8, {PodName("p0"), PodName("p1")}))
               .Split(PartitionId(7), 7 * (kHashSpace / 8) + 100))
          .WithPeer(PodName("p0"), {"d0", "a0"});
  MapChange change(base);
  const HashRange r0 = base.Find(PartitionId(0))->range;
  ASSERT_TRUE(change.Split(PartitionId(0), {r0.lo + 10, r0.lo + 20}).ok());  // 10, 11, 12
  ASSERT_TRUE(change.MergeRun({PartitionId(1), PartitionId(2), PartitionId(3)}).ok());  // 13
  ASSERT_TRUE(change.Move(PartitionId(4), PodName("p9")).ok());                         // 14
  ASSERT_TRUE(change.Merge(PartitionId(5), PartitionId(6)).ok());                       // 15
  ASSERT_TRUE(change.Retire(PartitionId(7)).ok());
  EXPECT_FALSE(change.empty());
  EXPECT_EQ(change.size(), 8u);  // 0, 1, 2, 3, 4, 5, 6, 7
  const PartitionMap next = Must(change.Build());
  ExpectComposedFrom(base, next);
  EXPECT_EQ(next.epoch(), Epoch(3));  // one epoch for the whole change
  EXPECT_EQ(next.Find(PartitionId(7)), nullptr);
  EXPECT_EQ(next.NextId(), PartitionId(16));
  EXPECT_THAT(ActiveInOrder(next),
              ElementsAre(PartitionId(10), PartitionId(11), PartitionId(12), PartitionId(13),
                          PartitionId(14), PartitionId(15), PartitionId(8), PartitionId(9)));
  const PartitionInfo* merged = next.Find(PartitionId(13));
  ASSERT_NE(merged, nullptr);
  EXPECT_THAT(merged->parents, ElementsAre(PartitionId(1), PartitionId(2), PartitionId(3)));
  EXPECT_EQ(merged->range,
            (HashRange{base.Find(PartitionId(1))->range.lo, base.Find(PartitionId(3))->range.hi}));
  EXPECT_EQ(merged->owner, base.Find(PartitionId(1))->owner);  // the first one's owner
  EXPECT_EQ(next.Find(PartitionId(14))->owner, PodName("p9"));
  EXPECT_EQ(next.Find(PartitionId(14))->range, base.Find(PartitionId(4))->range);
  EXPECT_THAT(next.Find(PartitionId(15))->parents, ElementsAre(PartitionId(5), PartitionId(6)));
  EXPECT_EQ(next.Find(PartitionId(15))->owner, base.Find(PartitionId(5))->owner);
  // Untouched partitions are carried over as they were.
  EXPECT_EQ(*next.Find(PartitionId(8)), *base.Find(PartitionId(8)));
  EXPECT_EQ(*next.Find(PartitionId(9)), *base.Find(PartitionId(9)));
}

TEST(MapChangeTest, MergeRunTakesTheLowerOwnerWhateverTheArgumentOrder) {
  const PartitionMap base =
      Must(PartitionMap::Initial("orders", 4, {PodName("p0"), PodName("p1")}));
  MapChange change(base);
  ASSERT_TRUE(change.Merge(PartitionId(2), PartitionId(1)).ok());
  const PartitionMap next = Must(change.Build());
  ExpectComposedFrom(base, next);
  const PartitionInfo* merged = next.Find(PartitionId(4));
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(merged->owner, PodName("p1"));  // partition 1's: the lower range
  EXPECT_THAT(merged->parents, ElementsAre(PartitionId(1), PartitionId(2)));
}

TEST(MapChangeTest, RetireDropsSealedPartitionsAndKeepsLineage) {
  PartitionMap base = Must(MustInitial(2).Split(PartitionId(0), 1000));  // 2, 3 <- 0
  base = Must(base.Merge(PartitionId(3), PartitionId(1)));               // 4 <- 3, 1
  MapChange change(base);
  ASSERT_TRUE(change.Retire(PartitionId(0)).ok());
  ASSERT_TRUE(change.Retire(PartitionId(1)).ok());
  const PartitionMap next = Must(change.Build());
  ExpectComposedFrom(base, next);
  EXPECT_EQ(next.Find(PartitionId(0)), nullptr);
  EXPECT_EQ(next.Find(PartitionId(1)), nullptr);
  ASSERT_NE(next.Find(PartitionId(3)), nullptr);  // still sealed, not retired
  EXPECT_THAT(next.Find(PartitionId(4))->parents, ElementsAre(PartitionId(3), PartitionId(1)));
  EXPECT_EQ(next.active_count(), base.active_count());
  EXPECT_EQ(next.NextId(), base.NextId());
}

TEST(MapChangeTest, AMergeRunStoppedByASealedPartitionPutsBackWhatItTook) {
  // Partition 3 (the last quarter) is sealed; a run 2+3 takes 2 before it meets 3.
  const PartitionMap base =
      Must(MustInitial(4).Split(PartitionId(3), 3 * (kHashSpace / 4) + 10));  // 4, 5 <- 3
  MapChange change(base);
  const Status s = change.MergeRun({PartitionId(2), PartitionId(3)});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("partition 3 is sealed"));
  EXPECT_TRUE(change.empty());
  ASSERT_TRUE(change.Merge(PartitionId(1), PartitionId(2)).ok());
  const PartitionMap next = Must(change.Build());
  ExpectComposedFrom(base, next);
  EXPECT_THAT(next.Find(PartitionId(6))->parents, ElementsAre(PartitionId(1), PartitionId(2)));
}

TEST(MapChangeTest, ThousandsOfSplitsInOneChange) {
  const PartitionMap base = MustInitial(10000);
  MapChange change(base);
  for (uint32_t i = 0; i < 10000; ++i) {
    const HashRange r = base.Find(PartitionId(i))->range;
    ASSERT_TRUE(change.Split(PartitionId(i), {r.lo + r.Width() / 2}).ok()) << i;
  }
  const PartitionMap next = Must(change.Build());
  ExpectComposedFrom(base, next);
  EXPECT_EQ(next.active_count(), 20000u);
  EXPECT_EQ(next.partitions().size(), 30000u);
  EXPECT_EQ(next.epoch(), Epoch(2));
}

struct MapChangeErrorCase {
  const char* name;
  // Applies changes to `c`; returns the status of the last one (the one expected to fail).
  std::function<Status(MapChange& c, const PartitionMap& base)> apply;
  Status::Code code;
  const char* error;
};

void PrintTo(const MapChangeErrorCase& c, std::ostream* os) { *os << c.name; }

class MapChangeErrorTest : public ::testing::TestWithParam<MapChangeErrorCase> {};

// The base of every error case: 4 partitions over quarters on pod-a, then partition 0 split at
// 1000 (ids 4 [0, 1000) and 5 [1000, 2^30)), so partition 0 is sealed.
PartitionMap MapChangeErrorBase() { return Must(MustInitial(4).Split(PartitionId(0), 1000)); }

TEST_P(MapChangeErrorTest, RejectsAndLeavesTheChangeUsable) {
  const PartitionMap base = MapChangeErrorBase();
  MapChange change(base);
  const Status s = GetParam().apply(change, base);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), GetParam().code) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(GetParam().error));
  // Whatever succeeded before the failure still builds a valid map; the failed call left nothing.
  auto next = change.Build();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ExpectComposedFrom(base, *next);
  // And the change still takes more: partition 3 is untouched in every case.
  ASSERT_TRUE(change.Move(PartitionId(3), PodName("pod-z")).ok());
  auto more = change.Build();
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  ExpectComposedFrom(base, *more);
  EXPECT_EQ(base, MapChangeErrorBase());
}

constexpr uint64_t kQuarter = kHashSpace / 4;

INSTANTIATE_TEST_SUITE_P(
    Cases, MapChangeErrorTest,
    ::testing::Values(
        MapChangeErrorCase{"split_no_points",
                           [](MapChange& c, auto&) { return c.Split(PartitionId(1), {}); },
                           Status::Code::kInvalidArgument, "at least one point"},
        MapChangeErrorCase{"split_points_equal",
                           [](MapChange& c, auto&) {
                             return c.Split(PartitionId(1), {kQuarter + 10, kQuarter + 10});
                           },
                           Status::Code::kInvalidArgument, "must increase strictly inside"},
        MapChangeErrorCase{"split_points_decreasing",
                           [](MapChange& c, auto&) {
                             return c.Split(PartitionId(1), {kQuarter + 20, kQuarter + 10});
                           },
                           Status::Code::kInvalidArgument, "must increase strictly inside"},
        MapChangeErrorCase{"split_point_at_lo",
                           [](MapChange& c, auto&) { return c.Split(PartitionId(1), {kQuarter}); },
                           Status::Code::kInvalidArgument, "must increase strictly inside"},
        MapChangeErrorCase{"split_point_at_hi",
                           [](MapChange& c, auto&) {
                             return c.Split(PartitionId(1), {kQuarter + 1, 2 * kQuarter});
                           },
                           Status::Code::kInvalidArgument, "must increase strictly inside"},
        MapChangeErrorCase{"split_point_below",
                           [](MapChange& c, auto&) { return c.Split(PartitionId(1), {5}); },
                           Status::Code::kInvalidArgument, "must increase strictly inside"},
        MapChangeErrorCase{
            "split_point_beyond_space",
            [](MapChange& c, auto&) { return c.Split(PartitionId(2), {kHashSpace + 1}); },
            Status::Code::kInvalidArgument, "must increase strictly inside"},
        MapChangeErrorCase{"split_sealed",
                           [](MapChange& c, auto&) { return c.Split(PartitionId(0), {10}); },
                           Status::Code::kFailedPrecondition, "partition 0 is sealed"},
        MapChangeErrorCase{"split_unknown",
                           [](MapChange& c, auto&) { return c.Split(PartitionId(99), {10}); },
                           Status::Code::kNotFound, "no partition 99"},
        MapChangeErrorCase{"split_twice",
                           [](MapChange& c, auto&) {
                             EXPECT_TRUE(c.Split(PartitionId(1), {kQuarter + 10}).ok());
                             return c.Split(PartitionId(1), {kQuarter + 20});
                           },
                           Status::Code::kFailedPrecondition, "partition 1 is"},
        MapChangeErrorCase{"split_a_successor_of_this_change",
                           [](MapChange& c, auto&) {
                             EXPECT_TRUE(c.Split(PartitionId(1), {kQuarter + 10}).ok());
                             // Id 6 is the first successor: not a partition of the base.
                             return c.Split(PartitionId(6), {kQuarter + 5});
                           },
                           Status::Code::kNotFound, "no partition 6"},
        MapChangeErrorCase{"split_then_move",
                           [](MapChange& c, auto&) {
                             EXPECT_TRUE(c.Split(PartitionId(1), {kQuarter + 10}).ok());
                             return c.Move(PartitionId(1), PodName("pod-b"));
                           },
                           Status::Code::kFailedPrecondition, "partition 1 is"},
        MapChangeErrorCase{"move_then_merge",
                           [](MapChange& c, auto&) {
                             EXPECT_TRUE(c.Move(PartitionId(2), PodName("pod-b")).ok());
                             return c.Merge(PartitionId(1), PartitionId(2));
                           },
                           Status::Code::kFailedPrecondition, "partition 2 is"},
        MapChangeErrorCase{"merge_then_split",
                           [](MapChange& c, auto&) {
                             EXPECT_TRUE(c.Merge(PartitionId(1), PartitionId(2)).ok());
                             return c.Split(PartitionId(2), {2 * kQuarter + 10});
                           },
                           Status::Code::kFailedPrecondition, "partition 2 is"},
        MapChangeErrorCase{"merge_not_adjacent",
                           [](MapChange& c, auto&) {
                             return c.MergeRun({PartitionId(1), PartitionId(3)});
                           },
                           Status::Code::kInvalidArgument, "not adjacent"},
        MapChangeErrorCase{"merge_run_with_a_hole",
                           [](MapChange& c, auto&) {
                             return c.MergeRun({PartitionId(4), PartitionId(1), PartitionId(2)});
                           },
                           Status::Code::kInvalidArgument, "not adjacent"},
        MapChangeErrorCase{
            "merge_with_itself",
            [](MapChange& c, auto&) { return c.Merge(PartitionId(1), PartitionId(1)); },
            Status::Code::kInvalidArgument, "not adjacent"},
        MapChangeErrorCase{"merge_one",
                           [](MapChange& c, auto&) { return c.MergeRun({PartitionId(1)}); },
                           Status::Code::kInvalidArgument, "two or more"},
        MapChangeErrorCase{"merge_sealed",
                           [](MapChange& c, auto&) {
                             return c.MergeRun({PartitionId(0), PartitionId(1)});
                           },
                           Status::Code::kFailedPrecondition, "partition 0 is sealed"},
        MapChangeErrorCase{
            "merge_unknown",
            [](MapChange& c, auto&) { return c.Merge(PartitionId(1), PartitionId(42)); },
            Status::Code::kNotFound, "no partition 42"},
        MapChangeErrorCase{
            "move_same_owner",
            [](MapChange& c, auto&) { return c.Move(PartitionId(1), PodName("pod-a")); },
            Status::Code::kInvalidArgument, "already on pod-a"},
        MapChangeErrorCase{
            "move_sealed",
            [](MapChange& c, auto&) { return c.Move(PartitionId(0), PodName("pod-b")); },
            Status::Code::kFailedPrecondition, "partition 0 is sealed"},
        MapChangeErrorCase{"retire_active",
                           [](MapChange& c, auto&) { return c.Retire(PartitionId(1)); },
                           Status::Code::kFailedPrecondition, "only sealed partitions retire"},
        MapChangeErrorCase{"retire_twice",
                           [](MapChange& c, auto&) {
                             EXPECT_TRUE(c.Retire(PartitionId(0)).ok());
                             return c.Retire(PartitionId(0));
                           },
                           Status::Code::kFailedPrecondition, "already changed"},
        MapChangeErrorCase{"retire_unknown",
                           [](MapChange& c, auto&) { return c.Retire(PartitionId(77)); },
                           Status::Code::kNotFound, "no partition 77"}),
    [](const auto& info) { return std::string(info.param.name); });

// A MergeRun that fails part-way (its last partition is already changed) must put back the
// partitions it took before failing: they stay active and can still be merged.
struct MergeRollbackCase {
  const char* name;
  std::vector<uint32_t> taken_first;  // partitions split before the failing run
  std::vector<uint32_t> failing_run;
  std::vector<uint32_t> then_run;  // must succeed afterwards
};

void PrintTo(const MergeRollbackCase& c, std::ostream* os) { *os << c.name; }

class MapChangeMergeRollbackTest : public ::testing::TestWithParam<MergeRollbackCase> {};

TEST_P(MapChangeMergeRollbackTest, AFailedMergeRunLeavesTheChangeUsable) {
  const MergeRollbackCase& c = GetParam();
  const PartitionMap base = MustInitial(8);
  MapChange change(base);
  for (uint32_t id : c.taken_first) {
    const HashRange r = base.Find(PartitionId(id))->range;
    ASSERT_TRUE(change.Split(PartitionId(id), {r.lo + 1}).ok());
  }
  std::vector<PartitionId> failing;
  for (uint32_t id : c.failing_run) failing.emplace_back(id);
  const Status s = change.MergeRun(failing);
  ASSERT_FALSE(s.ok());
  // The partition changed first is sealed in this change: it cannot be taken again.
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(change.size(), c.taken_first.size());
  // Built now, the partitions the failed run took are active again (no gap in the cover).
  const PartitionMap mid = Must(change.Build());
  ExpectComposedFrom(base, mid);
  for (uint32_t id : c.failing_run) {
    if (std::find(c.taken_first.begin(), c.taken_first.end(), id) != c.taken_first.end()) continue;
    EXPECT_TRUE(mid.Find(PartitionId(id))->active()) << "partition " << id;
  }
  std::vector<PartitionId> then;
  for (uint32_t id : c.then_run) then.emplace_back(id);
  ASSERT_TRUE(change.MergeRun(then).ok());
  const PartitionMap next = Must(change.Build());
  ExpectComposedFrom(base, next);
  const PartitionInfo* merged = nullptr;
  for (const auto& p : next.partitions()) {
    if (p.parents == then) merged = &p;
  }
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(merged->range,
            (HashRange{base.Find(then.front())->range.lo, base.Find(then.back())->range.hi}));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MapChangeMergeRollbackTest,
    ::testing::Values(MergeRollbackCase{"last_of_three_taken", {3}, {1, 2, 3}, {1, 2}},
                      MergeRollbackCase{"last_of_five_taken", {5}, {1, 2, 3, 4, 5}, {1, 2, 3, 4}},
                      MergeRollbackCase{"middle_taken", {2}, {1, 2, 3}, {0, 1}},
                      MergeRollbackCase{"first_taken", {1}, {1, 2}, {2, 3}},
                      MergeRollbackCase{"given_out_of_order", {4}, {3, 4, 2}, {2, 3}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace shoal
