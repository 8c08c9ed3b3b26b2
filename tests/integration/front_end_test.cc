// The sidecar's front end against clients that try to exhaust it, on a real sidecar process with
// raw sockets: a header that never ends, a thousand half-sent requests, answers nobody reads.
// Each of these held a sidecar's memory or descriptors before its listener was GuardedListener.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "shoal/common/wire.h"
#include "support/http_test_client.h"
#include "support/raw_connection.h"
#include "support/sidecar_cluster.h"
#include "support/sidecar_process.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

const std::string kTopic = "orders";

SidecarOptions Options(std::vector<std::string> extra = {}) {
  SidecarOptions o;
  // SHOAL_SIDECAR_BIN_UNDER_TEST runs these against another build (one from before these limits
  // fails them).
  o.binary = SidecarBinaryUnderTest(SHOAL_SIDECAR_BIN);
  o.topic = kTopic;
  o.partitions = 1;
  o.fsync = "never";
  o.log_level = "warn";
  o.extra_args = std::move(extra);
  return o;
}

// A produce through the client library; the status.
Status ProduceOne(const SidecarProcess& s, const std::string& key) {
  auto p = client::ShoalClient(s.data_url(), kTopic).Produce({{key, "1", "", std::nullopt}});
  return p.ok() ? Status::Ok() : p.status();
}

TEST(FrontEndTest, AHeaderThatNeverEndsIsRefused431OnEveryPortAndCostsUnder16MiB) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  ASSERT_TRUE(ProduceOne(s, "warm").ok());
  const uint64_t rss_before = RssBytes(s.pid());
  const std::string mib(1 << 20, 'a');
  // The admin port too, without its token: nothing is read past the cap before anyone checks.
  for (uint16_t port : {s.port(), s.admin_port(), s.metrics_port()}) {
    SCOPED_TRACE("port " + std::to_string(port));
    RawConnection conn(port);
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(conn.Send("GET /v1/topics/orders HTTP/1.1\r\nHost: x\r\nX-Filler: "));
    size_t sent_mib = 0;  // up to 300 MiB of one header, until the sidecar answers
    while (sent_mib < 300 && conn.Send(mib) && !conn.Readable()) ++sent_mib;
    const std::string answer = conn.ReadAll(10s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << "sent " << sent_mib << " MiB: " << answer;
    EXPECT_NE(answer.find("\"header_too_large\""), std::string::npos) << answer;
    EXPECT_LE(sent_mib, 32u) << "the sidecar read far past its header cap (64 KiB)";
  }
  const uint64_t peak = PeakRssBytes(s.pid());
  std::printf("resident before %.1f MiB, peak after three 300 MiB headers %.1f MiB\n",
              static_cast<double>(rss_before) / (1 << 20), static_cast<double>(peak) / (1 << 20));
  EXPECT_LT(peak, rss_before + (uint64_t{16} << 20)) << "memory grew with the header";
  EXPECT_TRUE(ProduceOne(s, "after").ok()) << s.Describe();
}

TEST(FrontEndTest, AThousandHalfOpenConnectionsPerPortLeaveHealthzAndAProduceAnswering) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  const size_t files_before = OpenFiles(s.pid());
  std::vector<std::unique_ptr<RawConnection>> half;
  for (uint16_t port : {s.port(), s.admin_port(), s.metrics_port()}) {
    for (int i = 0; i < 1000; ++i) {
      auto c = std::make_unique<RawConnection>(port);
      ASSERT_TRUE(c->connected()) << i;
      ASSERT_TRUE(c->Send("POST /v1/topics/orders/events HTTP/1.1\r\nHost: x\r\nContent-"));
      half.push_back(std::move(c));
    }
  }
  ASSERT_TRUE(WaitFor([&] { return OpenFiles(s.pid()) >= files_before + 2900; }, 10s))
      << "the sidecar holds " << OpenFiles(s.pid()) << " descriptors";
  const auto t0 = SteadyClock::now();
  HttpResponse health = s.MetricsClient()->Get("/healthz");
  EXPECT_EQ(health.status, 200) << health.Describe();
  HttpResponse data_health = s.DataClient()->Get("/healthz");
  EXPECT_EQ(data_health.status, 200) << data_health.Describe();
  EXPECT_TRUE(ProduceOne(s, "through").ok()) << s.Describe();
  const auto took = SteadyClock::now() - t0;
  std::printf("3,000 half-open connections held; /healthz twice and a produce took %.1f ms\n",
              std::chrono::duration<double, std::milli>(took).count());
  EXPECT_LT(took, 5s);
}

TEST(FrontEndTest, OverTheConnectionCapTheLongestWaitingConnectionMakesRoom) {
  SidecarProcess s(Options({"--max-connections", "64", "--header-timeout-ms", "4000"}));
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  const size_t files_before = OpenFiles(s.pid());
  std::vector<std::unique_ptr<RawConnection>> half;
  for (int i = 0; i < 1000; ++i) {
    auto c = std::make_unique<RawConnection>(s.port());
    ASSERT_TRUE(c->connected()) << i;
    c->Send("GET /v1/topics/orders HTTP/1.1\r\nHo");
    half.push_back(std::move(c));
  }
  // The cap holds: 1,000 connections in, at most 64 (and those being closed) held.
  EXPECT_TRUE(WaitFor([&] { return OpenFiles(s.pid()) <= files_before + 64 + 8; }, 3s))
      << "the sidecar holds " << OpenFiles(s.pid()) << " descriptors, " << files_before
      << " before";
  EXPECT_TRUE(ProduceOne(s, "room").ok()) << s.Describe();
  // The newest ones are held; the ones before were closed to make room.
  size_t open = 0;
  for (auto& c : half) open += c->Readable() ? 0 : 1;
  EXPECT_GT(open, 0u);
  EXPECT_LE(open, 64u);
  EXPECT_FALSE(half.back()->Readable()) << "the newest connection was closed";
  EXPECT_TRUE(half.front()->Readable()) << "the oldest connection is still held";
  // Those left are closed once their headers are late (4 s), with a 408.
  const std::string answer = half.back()->ReadAll(10s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_TRUE(WaitFor([&] { return OpenFiles(s.pid()) <= files_before + 2; }, 5s))
      << "the sidecar holds " << OpenFiles(s.pid()) << " descriptors, " << files_before
      << " before";
}

TEST(FrontEndTest, SixtyAnswersNobodyReadsStayWithinTheAnswerBudget) {
  constexpr size_t kBudget = size_t{16} << 20;
  SidecarProcess s(
      Options({"--answer-budget-bytes", std::to_string(kBudget), "--write-timeout-ms", "3000"}));
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  // About 8 MiB of events, which every new group is handed from the start in one answer.
  client::ShoalClient producer(s.data_url(), kTopic);
  const std::string value = "\"" + std::string(4000, 'v') + "\"";
  for (int b = 0; b < 20; ++b) {
    std::vector<client::OutgoingEvent> batch;
    for (int i = 0; i < 100; ++i) batch.push_back({"k" + std::to_string(i), value, "", {}});
    ASSERT_TRUE(producer.Produce(batch).ok());
  }
  const uint64_t rss_before = RssBytes(s.pid());
  std::vector<std::unique_ptr<RawConnection>> readers;
  int handed = 0, refused = 0;
  for (int g = 0; g < 60; ++g) {
    auto c = std::make_unique<RawConnection>(s.port());
    ASSERT_TRUE(c->connected());
    ASSERT_TRUE(c->Send("GET /v1/topics/orders/events?group=g" + std::to_string(g) +
                        "&max=10000 HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(c->Readable(10000)) << "no answer to group " << g;
    const std::string head = c->Peek(12);
    if (head == "HTTP/1.1 200") ++handed;
    if (head == "HTTP/1.1 503") ++refused;
    readers.push_back(std::move(c));  // never read
  }
  const uint64_t rss_after = RssBytes(s.pid());
  std::printf("60 unread answers: %d handed, %d refused 503; resident %.1f -> %.1f MiB\n", handed,
              refused, static_cast<double>(rss_before) / (1 << 20),
              static_cast<double>(rss_after) / (1 << 20));
  EXPECT_EQ(handed + refused, 60);
  EXPECT_GT(refused, 0) << "the budget never ran out";
  // The budget, plus one answer built past it and its copy on the way out.
  EXPECT_LT(rss_after, rss_before + kBudget + (uint64_t{32} << 20));
  // The write timeout closes connections whose answers are not taken, which frees the budget.
  EXPECT_TRUE(WaitFor(
      [&] {
        HttpResponse r = s.DataClient()->Get("/v1/topics/orders/events?group=late&max=1");
        return r.status == 200;
      },
      10s))
      << s.Describe();
}

// Many bodies sent slowly at once: each within --max-body-bytes, together far over what one may
// hold. Past the request budget they are refused before their bodies are read.
TEST(FrontEndTest, ManySlowBodiesAtOnceStayWithinTheRequestBudget) {
  constexpr size_t kBudget = size_t{16} << 20;
  SidecarProcess s(Options({"--request-budget-bytes", std::to_string(kBudget)}));
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  const uint64_t rss_before = RssBytes(s.pid());
  const std::string part(3 << 20, 'x');  // 3 of the 4 MiB each declares
  std::vector<std::unique_ptr<RawConnection>> senders;
  for (int i = 0; i < 40; ++i) {
    auto c = std::make_unique<RawConnection>(s.port());
    ASSERT_TRUE(c->connected());
    ASSERT_TRUE(
        c->Send("POST /v1/topics/orders/events HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/json\r\nContent-Length: 4194304\r\n\r\n"));
    c->Send(part);
    senders.push_back(std::move(c));
  }
  int busy = 0, waiting = 0;
  for (auto& c : senders) {
    const std::string head = c->Readable(500) ? c->Peek(12) : "";
    if (head == "HTTP/1.1 503") ++busy;
    if (head.empty()) ++waiting;
  }
  const uint64_t rss_after = RssBytes(s.pid());
  std::printf(
      "40 bodies of 4 MiB sent 3/4 of the way: %d refused busy, %d read; resident %.1f -> "
      "%.1f MiB\n",
      busy, waiting, static_cast<double>(rss_before) / (1 << 20),
      static_cast<double>(rss_after) / (1 << 20));
  EXPECT_LE(waiting, 4) << "more bodies read at once than the budget holds";
  EXPECT_EQ(busy + waiting, 40);
  EXPECT_LT(rss_after, rss_before + kBudget + (uint64_t{16} << 20));
  senders.clear();  // the bodies never end: their connections go
  EXPECT_TRUE(WaitFor([&] { return ProduceOne(s, "after").ok(); }, 10s)) << s.Describe();
}

// A made-up group's commit at offset 1 pinned a partition at 1.25 MB under an 8 KiB retention.
// Retention now holds whatever groups committed; the group goes on from the oldest event kept.
TEST(FrontEndTest, ACommitByAMadeUpGroupDoesNotPinRetention) {
  SidecarProcess s(Options({"--segment-bytes", "4096", "--retention-bytes", "8192"}));
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  auto data = s.DataClient();
  HttpResponse first = data->Get("/v1/topics/orders/events?group=stranger&max=1");
  ASSERT_EQ(first.status, 200) << first.Describe();
  client::ShoalClient producer(s.data_url(), kTopic);
  const std::string value = "\"" + std::string(1000, 'v') + "\"";
  ASSERT_TRUE(producer.Produce({{"a", value, "", {}}, {"b", value, "", {}}}).ok());
  HttpResponse commit = data->Post("/v1/topics/orders/commits",
                                   "{\"group\":\"stranger\",\"offsets\":[{\"partition\":0,"
                                   "\"offset\":1}]}");
  ASSERT_EQ(commit.status, 200) << commit.Describe();
  for (int b = 0; b < 1250; ++b) {  // one event a request: segments of about 4 KiB
    ASSERT_TRUE(producer.Produce({{"k" + std::to_string(b % 50), value, "", {}}}).ok());
  }
  auto metric = [&](const std::string& name) {
    return SumMetric(s.MetricsClient()->Get("/metrics").body, name);
  };
  // Retention runs every 5 s: the log comes down to its limit and a segment or two.
  EXPECT_TRUE(
      WaitFor([&] { return metric("shoal_partition_log_size_bytes") <= 8192 + 3 * 4096; }, 15s))
      << metric("shoal_partition_log_size_bytes") << " bytes kept";
  EXPECT_GT(metric("shoal_retention_skipped_events_total"), 1000);
  // The stranger goes on from the oldest event kept, not from its commit.
  HttpResponse next = data->Get("/v1/topics/orders/events?group=stranger&max=10");
  ASSERT_EQ(next.status, 200) << next.Describe();
  auto events = wire::ParseConsumeResponse(next.body);
  ASSERT_TRUE(events.ok() && !events->empty()) << next.body;
  EXPECT_GT(events->front().offset, 1000u);
}

// The console's event browser reads a partition's events, or one key's, on the admin plane
// without consuming them for any group: a group that comes afterwards starts at the beginning.
TEST(FrontEndTest, BrowsingEventsConsumesNothingForAnyGroup) {
  SidecarOptions o = Options();
  o.admin_token = "browse-token";
  SidecarProcess s(o);
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  client::ShoalClient producer(s.data_url(), kTopic);
  std::vector<client::OutgoingEvent> batch;
  for (int i = 0; i < 300; ++i)
    batch.push_back({"k" + std::to_string(i % 10), std::to_string(i), "", {}});
  ASSERT_TRUE(producer.Produce(batch).ok());
  HttpRequestOptions bearer;
  bearer.headers["Authorization"] = "Bearer browse-token";
  auto admin = s.AdminClient();
  HttpResponse page = admin->Get("/v1/admin/partitions/0/events?from=20&max=50", bearer);
  ASSERT_EQ(page.status, 200) << page.Describe();
  const std::string head = page.body.substr(0, page.body.find("\"events\""));
  EXPECT_NE(head.find("\"from\":20,\"next\":70"), std::string::npos) << head;
  auto events = wire::ParseConsumeResponse(page.body);
  ASSERT_TRUE(events.ok()) << page.body;
  ASSERT_EQ(events->size(), 50u);
  EXPECT_EQ(events->front().offset, 20u);
  EXPECT_EQ(events->back().offset, 69u);
  // One key's events, in order, and nothing else.
  HttpResponse key = admin->Get("/v1/admin/partitions/0/events?key=k3&max=1000", bearer);
  ASSERT_EQ(key.status, 200) << key.Describe();
  auto of_key = wire::ParseConsumeResponse(key.body);
  ASSERT_TRUE(of_key.ok()) << key.body;
  ASSERT_EQ(of_key->size(), 30u);
  for (size_t i = 0; i < of_key->size(); ++i) {
    EXPECT_EQ((*of_key)[i].key, "k3");
    EXPECT_EQ((*of_key)[i].offset, 3 + 10 * i);
  }
  EXPECT_NE(key.body.find("\"next\":300"), std::string::npos) << key.body.substr(0, 200);
  // Bad input is a 4xx with a reason; the admin plane's token is needed.
  EXPECT_EQ(admin->Get("/v1/admin/partitions/0/events?max=0", bearer).status, 400);
  EXPECT_EQ(admin->Get("/v1/admin/partitions/0/events?max=100000", bearer).status, 400);
  EXPECT_EQ(admin->Get("/v1/admin/partitions/0/events?from=x", bearer).status, 400);
  EXPECT_EQ(admin->Get("/v1/admin/partitions/0/events?from=-1", bearer).status, 400);
  EXPECT_EQ(admin->Get("/v1/admin/partitions/7/events", bearer).status, 404);
  EXPECT_EQ(admin->Get("/v1/admin/partitions/0/events").status, 401);
  // Nothing was consumed: a group that comes now starts at offset 0.
  HttpResponse first = s.DataClient()->Get("/v1/topics/orders/events?group=late&max=5");
  ASSERT_EQ(first.status, 200) << first.Describe();
  auto consumed = wire::ParseConsumeResponse(first.body);
  ASSERT_TRUE(consumed.ok() && !consumed->empty()) << first.body;
  EXPECT_EQ(consumed->front().offset, 0u);
}

}  // namespace
}  // namespace shoal::testing
