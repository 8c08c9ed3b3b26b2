// Console's sampling over a scripted admin plane: arrival as a rate per partition over the time
// since it was read (a pod silent for a while makes no spike when it answers again), and a
// lagging sidecar's older map never replaces a newer one.
#include "shoal/console/console.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>

#include "support/fake_admin_plane.h"
#include "support/manual_clock.h"

namespace shoal::console {
namespace {

std::string Map(uint64_t epoch) {
  return R"({"topic":"orders","epoch":)" + std::to_string(epoch) +
         R"(,"partitions":[{"id":0,"lo":0,"hi":2147483648,"state":"active","owner":"p0","parents":[],"end_offset":0},)"
         R"({"id":1,"lo":2147483648,"hi":4294967296,"state":"active","owner":"p1","parents":[],"end_offset":0}],)"
         R"("peers":{"p0":{"data":"a0:8080","admin":"a0:8081"},"p1":{"data":"a1:8080","admin":"a1:8081"}}})";
}

std::string Partitions(const std::string& pod, uint32_t id, uint64_t appended, uint64_t commit) {
  std::string buckets = "[";
  for (int i = 0; i < 16; ++i) buckets += i ? ",0" : "0";
  buckets += "]";
  return R"({"topic":"orders","pod":")" + pod + R"(","epoch":1,"digest":"d","groups":["g"],)" +
         R"("partitions":[{"id":)" + std::to_string(id) +
         R"(,"state":"active","lo":0,"hi":1,"start_offset":0,"end_offset":)" +
         std::to_string(appended) + R"(,"producers_durable":true,"appended":)" +
         std::to_string(appended) + R"(,"load_buckets":)" + buckets +
         R"(,"top_hashes":[],"commits":{"g":)" + std::to_string(commit) + "}}]}";
}

// The last sample's arrival and the state's epoch.
std::pair<double, uint64_t> Last(const Console& c) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array history;
  uint64_t epoch = 0;
  EXPECT_FALSE(parser.parse(simdjson::padded_string(c.StateJson())).get(doc));
  EXPECT_FALSE(doc["epoch"].get(epoch));
  EXPECT_FALSE(doc["history"].get(history));
  double arrival = -1;
  for (auto s : history) EXPECT_FALSE(s["arrival"].get(arrival));
  return {arrival, epoch};
}

TEST(ConsoleSamplingTest, ArrivalIsARatePerPartitionAndAnOlderMapIsNotTaken) {
  testing::FakeAdminPlane admin;
  testing::ManualClock clock;
  ConsoleOptions o;
  o.topic = "orders";
  o.seeds = [] { return std::vector<std::string>{"a0:8081"}; };
  Console console(o, admin, clock);
  for (const char* a : {"a0:8081", "a1:8081"}) admin.SetGetAnswer(a, "/v1/admin/map", Map(1));
  auto counters = [&](uint64_t n0, uint64_t n1) {
    admin.SetGetAnswer("a0:8081", "/v1/admin/partitions", Partitions("p0", 0, n0, 0));
    admin.SetGetAnswer("a1:8081", "/v1/admin/partitions", Partitions("p1", 1, n1, 0));
  };
  counters(0, 0);
  console.Sample();
  EXPECT_EQ(Last(console).first, 0);  // nothing to compare with yet
  clock.AdvanceMs(1000);
  counters(1000, 500);
  console.Sample();
  EXPECT_DOUBLE_EQ(Last(console).first, 1500);
  // p1 silent for two samples: only p0's rate; then p1's 1,500 over its 3 s.
  admin.SetReachable("a1:8081", false);
  for (uint64_t n0 : {2000, 3000}) {
    clock.AdvanceMs(1000);
    counters(n0, 0);
    console.Sample();
    EXPECT_DOUBLE_EQ(Last(console).first, 1000);
  }
  admin.SetReachable("a1:8081", true);
  clock.AdvanceMs(1000);
  counters(4000, 2000);
  console.Sample();
  EXPECT_DOUBLE_EQ(Last(console).first, 1000 + 500);
  // A newer map, then a lagging sidecar's older one: the newer stays.
  admin.SetGetAnswer("a0:8081", "/v1/admin/map", Map(2));
  clock.AdvanceMs(1000);
  console.Sample();
  EXPECT_EQ(Last(console).second, 2u);
  admin.SetGetAnswer("a0:8081", "/v1/admin/map", Map(1));
  admin.SetGetAnswer("a1:8081", "/v1/admin/map", Map(1));
  clock.AdvanceMs(1000);
  console.Sample();
  EXPECT_EQ(Last(console).second, 2u);
}

}  // namespace
}  // namespace shoal::console
