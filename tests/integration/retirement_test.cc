// Retirement of a sealed partition against real sidecar processes on loopback, over real HTTP:
// two pods, a split of p0 under a little load, a consumer group that consumes the parent to its
// end, then the map without p0 (WithoutRetired, at the next epoch) installed on every pod. After
// that GET /v1/admin/partitions no longer lists p0, its directory is gone, a map that drops an
// active partition is refused 400 and changes nothing, production and consumption go on with
// every acknowledged event seen once and in order, and a restart does not bring p0 back.
//
// The test plays the operator with the ChangeExecutor. Every wait is on a condition with a
// deadline; SidecarProcess kills its child when a test fails.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/admin_client.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "shoal/common/partition_map.h"
#include "shoal/control/change_executor.h"
#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"
#include "support/http_test_client.h"
#include "support/sidecar_process.h"
#include "support/topic_view.h"
#include "support/verify_load.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kTopic[] = "orders";
constexpr char kToken[] = "retirement-admin-token";

PodName Pod(size_t i) { return PodName("pod-" + std::to_string(i)); }
std::string Address(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

template <typename Pred>
bool WaitFor(Pred&& pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = 20ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);  // polling period of a condition with a deadline
  }
}

HttpRequestOptions Bearer() {
  HttpRequestOptions o;
  o.headers["Authorization"] = std::string("Bearer ") + kToken;
  return o;
}

// One partition of GET /v1/admin/partitions, the fields this test looks at.
struct HeldPartition {
  std::string state;
  uint64_t end_offset = 0, appended = 0, bucket_sum = 0;
  bool producers_durable = false;
  size_t top_hashes = 0;
  std::map<std::string, uint64_t> commits;
};

// GET /v1/admin/partitions of a pod: {id: partition}, or an error.
Result<std::map<uint32_t, HeldPartition>> HeldPartitions(const SidecarProcess& pod) {
  HttpResponse r = pod.AdminClient()->Get("/v1/admin/partitions", Bearer());
  if (r.status != 200) return Status::Unavailable("GET /v1/admin/partitions: " + r.Describe());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array parts;
  if (parser.parse(simdjson::padded_string(r.body)).get(doc) || doc["partitions"].get(parts)) {
    return Status::InvalidArgument("not a partitions answer: " + r.body);
  }
  std::map<uint32_t, HeldPartition> out;
  for (simdjson::dom::element p : parts) {
    HeldPartition h;
    uint64_t id = 0;
    std::string_view state;
    simdjson::dom::array buckets, top;
    simdjson::dom::object commits;
    if (p["id"].get(id) || p["state"].get(state) || p["end_offset"].get(h.end_offset) ||
        p["appended"].get(h.appended) || p["producers_durable"].get(h.producers_durable) ||
        p["load_buckets"].get(buckets) || p["top_hashes"].get(top) || p["commits"].get(commits) ||
        buckets.size() != 16) {
      return Status::InvalidArgument("a partition without the documented fields: " + r.body);
    }
    h.state = state;
    for (simdjson::dom::element b : buckets) h.bucket_sum += b.get_uint64().value();
    h.top_hashes = top.size();
    for (auto [g, o] : commits) h.commits[std::string(g)] = o.get_uint64().value();
    out[static_cast<uint32_t>(id)] = h;
  }
  return out;
}

// Whether `group` has committed every partition `pod` holds up to its end.
bool GroupCaughtUp(const SidecarProcess& pod, const std::string& group) {
  HttpResponse r = pod.DataClient(10s)->Get(std::string("/v1/topics/") + kTopic);
  if (r.status != 200) return false;
  auto view = ParseTopicView(r.body);
  if (!view.ok()) return false;
  for (const auto& [id, p] : view->partitions) {
    if (!p.held || p.end_offset == 0) continue;
    auto it = p.committed.find(group);
    if (it == p.committed.end() || it->second < p.end_offset) return false;
  }
  return true;
}

TEST(RetirementTest, ASealedParentConsumedToItsEndIsRetiredOnEveryPodUnderLoad) {
  client::AdminClient admin(kToken);
  control::ChangeExecutor::Options eo;
  eo.step_timeout = 20s;
  control::ChangeExecutor executor(admin, eo);
  std::vector<std::unique_ptr<SidecarProcess>> pods;
  for (size_t i = 0; i < 2; ++i) {
    SidecarOptions o;
    o.binary = SHOAL_SIDECAR_BIN;
    o.topic = kTopic;
    o.fsync = "interval";
    o.admin_token = kToken;
    o.extra_args = {"--pod-name", Pod(i).value(), "--wait-for-map"};
    pods.push_back(std::make_unique<SidecarProcess>(o));
    ASSERT_TRUE(pods.back()->Start().ok()) << pods.back()->Describe();
  }
  auto describe = [&] {
    std::string out;
    for (const auto& p : pods) out += p->Describe(40) + "\n";
    return out;
  };
  // Epoch 1: p0 [0,1/4) pod-0, p1 pod-1, p2 pod-0, p3 pod-1.
  std::vector<PartitionInfo> parts;
  for (uint32_t i = 0; i < 4; ++i) {
    PartitionInfo p;
    p.id = PartitionId(i);
    p.range = {kHashSpace * i / 4, kHashSpace * (i + 1) / 4};
    p.owner = Pod(i % 2);
    parts.push_back(p);
  }
  PartitionMap current(kTopic, Epoch(1), parts);
  for (size_t i = 0; i < pods.size(); ++i) {
    current = current.WithPeer(Pod(i), {Address(pods[i]->port()), Address(pods[i]->admin_port())});
  }
  ASSERT_TRUE(executor.InstallEverywhere(current).ok()) << describe();

  std::vector<std::unique_ptr<harness::GroupConsumer>> consumers;
  for (const auto& pod : pods) {
    harness::ConsumerOptions co;
    co.target = pod->data_url();
    co.topic = kTopic;
    co.group = "verify";
    consumers.push_back(std::make_unique<harness::GroupConsumer>(co));
    ASSERT_TRUE(consumers.back()->Start().ok());
  }
  harness::LoadOptions lo;
  for (const auto& pod : pods) lo.targets.push_back(pod->data_url());
  lo.topic = kTopic;
  lo.producers = 2;
  lo.keys = 32;
  lo.batch = 10;
  lo.rate = 1000;
  harness::LoadGenerator load(lo);
  load.Start();
  auto more_acked = [&](uint64_t n) {
    const uint64_t target = load.acked() + n;
    return WaitFor([&] { return load.acked() >= target; }, 20s);
  };
  ASSERT_TRUE(more_acked(300)) << load.last_error() << "\n" << describe();

  // Split p0 (pod-0) into p4, p5 (pod-0) under the load.
  const PartitionInfo p0 = *current.Find(PartitionId(0));
  {
    auto split = current.Split(p0.id, p0.range.lo + p0.range.Width() / 2);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    auto installed = executor.Apply(current, *split, nullptr);
    ASSERT_TRUE(installed.ok()) << installed.status().ToString() << "\n" << describe();
    current = *installed;
  }
  const uint64_t p0_end = current.Find(PartitionId(0))->end_offset;
  ASSERT_GT(p0_end, 0u);
  ASSERT_TRUE(more_acked(300)) << load.last_error() << "\n" << describe();

  // What the operator waits for before it retires p0: the group consumed it to its end, and the
  // successors' inherited producer state is durable.
  const std::string p0_dir = pods[0]->data_dir() + "/" + kTopic + "/partitions/0";
  ASSERT_TRUE(WaitFor(
      [&] {
        auto held = HeldPartitions(*pods[0]);
        if (!held.ok() || !held->count(0) || !held->count(4) || !held->count(5)) return false;
        const auto& c = held->at(0).commits;
        return held->at(0).state == "sealed" && c.count("verify") && c.at("verify") >= p0_end &&
               held->at(4).producers_durable && held->at(5).producers_durable;
      },
      20s))
      << describe();
  ASSERT_TRUE(std::filesystem::exists(p0_dir));

  // Retire p0: the map without it, at the next epoch, on every pod.
  auto without = current.WithoutRetired(PartitionId(0));
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  const PartitionMap retired = without->WithEpoch(Epoch(current.epoch().value() + 1));
  ASSERT_TRUE(executor.InstallEverywhere(retired).ok()) << describe();
  current = retired;
  for (size_t i = 0; i < pods.size(); ++i) {
    auto m = admin.GetMap(Address(pods[i]->admin_port()));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->ToJson(), current.ToJson()) << "pod-" << i;
  }
  {
    auto held0 = HeldPartitions(*pods[0]);
    ASSERT_TRUE(held0.ok()) << held0.status().ToString();
    EXPECT_EQ(held0->count(0), 0u) << "pod-0 still lists the retired p0";
    EXPECT_EQ(held0->size(), 3u);  // p2, p4, p5
    auto held1 = HeldPartitions(*pods[1]);
    ASSERT_TRUE(held1.ok()) << held1.status().ToString();
    EXPECT_EQ(held1->size(), 2u);  // p1, p3
  }
  EXPECT_FALSE(std::filesystem::exists(p0_dir)) << "the retired p0's directory is still there";

  // A map that drops an active partition (p4 and p5 replaced by a new p6 over p0's range) is
  // refused 409 "conflict" with a reason (the coordinator stops and re-reads; it is never taken
  // as installed), and changes nothing.
  {
    std::vector<PartitionInfo> bad_parts;
    for (const auto& info : current.partitions()) {
      if (info.id.value() == 4 || info.id.value() == 5) continue;
      bad_parts.push_back(info);
    }
    PartitionInfo p6;
    p6.id = PartitionId(6);
    p6.range = p0.range;
    p6.owner = Pod(0);
    bad_parts.push_back(p6);
    PartitionMap bad(kTopic, Epoch(current.epoch().value() + 1), bad_parts);
    for (const auto& [pod, addr] : current.peers()) bad = bad.WithPeer(PodName(pod), addr);
    ASSERT_TRUE(bad.Validate().ok());
    HttpResponse r = pods[0]->AdminClient()->Post("/v1/admin/map", bad.ToJson(), Bearer());
    EXPECT_EQ(r.status, 409) << r.Describe();
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view error, reason;
    ASSERT_EQ(parser.parse(simdjson::padded_string(r.body)).get(doc), simdjson::SUCCESS) << r.body;
    EXPECT_EQ(doc["error"].get(error), simdjson::SUCCESS) << r.body;
    EXPECT_EQ(error, "conflict") << r.body;
    EXPECT_EQ(doc["reason"].get(reason), simdjson::SUCCESS) << r.body;
    EXPECT_NE(reason.find("active"), std::string_view::npos) << r.body;
    auto m = admin.GetMap(Address(pods[0]->admin_port()));
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->ToJson(), current.ToJson());
    EXPECT_FALSE(std::filesystem::exists(pods[0]->data_dir() + "/" + kTopic + "/partitions/6"));
  }

  // Production and consumption go on.
  ASSERT_TRUE(more_acked(300)) << load.last_error() << "\n" << describe();
  load.Stop();
  ASSERT_TRUE(WaitFor(
      [&] { return GroupCaughtUp(*pods[0], "verify") && GroupCaughtUp(*pods[1], "verify"); }, 20s,
      50ms))
      << "the group did not drain\n"
      << describe();
  ExpectEachAckedEventOnceInOrder(consumers, load.TakeAcked(), 901);

  // With the load stopped, each successor's sketch accounts for every append.
  {
    auto held0 = HeldPartitions(*pods[0]);
    ASSERT_TRUE(held0.ok());
    for (uint32_t id : {4u, 5u}) {
      const HeldPartition& h = held0->at(id);
      EXPECT_EQ(h.state, "active");
      EXPECT_GT(h.appended, 0u) << "p" << id;
      EXPECT_EQ(h.appended, h.end_offset) << "p" << id << ": appends since the start";
      EXPECT_EQ(h.bucket_sum, h.appended) << "p" << id;
      EXPECT_GT(h.top_hashes, 0u) << "p" << id;
    }
  }

  // A restart of pod-0 does not bring p0 back.
  ASSERT_TRUE(pods[0]->Terminate().ok());
  ASSERT_TRUE(pods[0]->Restart().ok()) << pods[0]->Describe();
  EXPECT_FALSE(std::filesystem::exists(p0_dir));
  auto held0 = HeldPartitions(*pods[0]);
  ASSERT_TRUE(held0.ok()) << held0.status().ToString();
  EXPECT_EQ(held0->count(0), 0u);
  EXPECT_EQ(held0->size(), 3u);
  client::ShoalClient via_pod0(pods[0]->data_url(), kTopic);
  std::vector<client::OutgoingEvent> after = {{"after-restart", "{\"x\":1}", "", std::nullopt}};
  auto produced = via_pod0.Produce(after);
  ASSERT_TRUE(produced.ok()) << produced.status().ToString();
  EXPECT_NE((*produced)[0].partition, 0u);
}

}  // namespace
}  // namespace shoal::testing
