// The console's port against a real sidecar (docs/console.md): the page and its assets are built
// in; /api/state carries the sidecar's map and partitions; /api/events browses a partition and a
// key without consuming; bad queries are 4xx with a reason; only GET is served; with a token, the
// API needs it. The page in a browser during a flash sale: tests/integration/cli/console_test.cc.
#include "shoal/console/console_server.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shoal/client/admin_client.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/clock.h"
#include "shoal/common/wire.h"
#include "shoal/console/console.h"
#include "support/http_test_client.h"
#include "support/raw_connection.h"
#include "support/sidecar_process.h"

namespace shoal::testing {
namespace {

constexpr char kToken[] = "console-admin-token";

struct Fixture {
  SidecarProcess sidecar;
  client::AdminClient admin{kToken};
  console::Console console;
  uint16_t port = 0;

  static SidecarOptions Options() {
    SidecarOptions o;
    o.binary = SHOAL_SIDECAR_BIN;
    o.topic = "orders";
    o.partitions = 2;
    o.fsync = "never";
    o.log_level = "warn";
    o.admin_token = kToken;
    return o;
  }
  Fixture()
      : sidecar(Options()),
        console(
            [this] {
              console::ConsoleOptions co;
              co.topic = "orders";
              co.seeds = [this] {
                return std::vector<std::string>{"127.0.0.1:" +
                                                std::to_string(sidecar.admin_port())};
              };
              return co;
            }(),
            admin, SystemClock::Instance()) {}
};

TEST(ConsoleServerTest, ServesThePageTheStateAndEventsAndRefusesBadInput) {
  Fixture f;
  ASSERT_TRUE(f.sidecar.Start().ok()) << f.sidecar.Describe();
  std::vector<client::OutgoingEvent> batch;
  for (int i = 0; i < 200; ++i) {
    batch.push_back({"k" + std::to_string(i % 20), "{\"n\":" + std::to_string(i) + "}", "", {}});
  }
  ASSERT_TRUE(client::ShoalClient(f.sidecar.data_url(), "orders").Produce(batch).ok());
  f.console.Sample();
  auto ports = PickFreePorts(1);
  ASSERT_TRUE(ports.ok());
  console::ConsoleServer server("127.0.0.1", (*ports)[0], f.console);
  ASSERT_TRUE(server.Open().ok());
  HttpTestClient http("http://127.0.0.1:" + std::to_string((*ports)[0]));

  // The page and its assets, from the binary, with a policy that lets nothing else in.
  HttpResponse page = http.Get("/");
  ASSERT_EQ(page.status, 200) << page.Describe();
  EXPECT_NE(page.body.find("<script src=\"console.js\">"), std::string::npos);
  EXPECT_EQ(http.Get("/console.js").status, 200);
  EXPECT_EQ(http.Get("/console.css").status, 200);
  EXPECT_EQ(http.Get("/nothing-here").status, 404);

  // The state: the sidecar's map and what it reports of its partitions.
  HttpResponse state = http.Get("/api/state");
  ASSERT_EQ(state.status, 200) << state.Describe();
  EXPECT_NE(state.body.find("\"topic\":\"orders\""), std::string::npos) << state.body;
  EXPECT_NE(state.body.find("\"load_buckets\""), std::string::npos) << state.body;

  // A partition from an offset, and a key's events through every partition that holds it.
  HttpResponse part = http.Get("/api/events?partition=0&from=3&max=5");
  ASSERT_EQ(part.status, 200) << part.Describe();
  auto events = wire::ParseConsumeResponse(part.body);
  ASSERT_TRUE(events.ok()) << part.body;
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->front().offset, 3u);
  EXPECT_LE(events->size(), 5u);
  HttpResponse key = http.Get("/api/events?key=k7");
  ASSERT_EQ(key.status, 200) << key.Describe();
  auto of_key = wire::ParseConsumeResponse(key.body);
  ASSERT_TRUE(of_key.ok()) << key.body;
  EXPECT_EQ(of_key->size(), 10u);
  for (const auto& e : *of_key) EXPECT_EQ(e.key, "k7");

  // Browsing consumed nothing: a group that comes now starts at the beginning.
  HttpResponse first = f.sidecar.DataClient()->Get("/v1/topics/orders/events?group=g&max=1000");
  auto consumed = wire::ParseConsumeResponse(first.body);
  ASSERT_TRUE(consumed.ok()) << first.body;
  EXPECT_EQ(consumed->front().offset, 0u);

  // Bad input: a 4xx with a reason; only GET.
  for (const char* bad : {"/api/events", "/api/events?partition=x", "/api/events?partition=0&max=0",
                          "/api/events?partition=0&max=5000", "/api/events?partition=0&from=-1",
                          "/api/events?key="}) {
    HttpResponse r = http.Get(bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.Describe();
    EXPECT_NE(r.body.find("\"reason\""), std::string::npos) << bad;
  }
  EXPECT_EQ(http.Get("/api/events?partition=77").status, 404);
  EXPECT_EQ(http.Post("/api/state", "{}").status, 405);

  // A page elsewhere that rebinds its own name to 127.0.0.1 sends that name as Host: refused.
  {
    RawConnection raw((*ports)[0]);
    ASSERT_TRUE(raw.connected());
    ASSERT_TRUE(raw.Send("GET /api/state HTTP/1.1\r\nHost: rebound.example:" +
                         std::to_string((*ports)[0]) + "\r\nConnection: close\r\n\r\n"));
    const std::string answer = raw.ReadAll(std::chrono::seconds(5));
    EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << answer.substr(0, 300);
  }

  // With a token, the API needs it; the page itself does not (it carries no data).
  auto more = PickFreePorts(1);
  ASSERT_TRUE(more.ok());
  console::ConsoleServer guarded("127.0.0.1", (*more)[0], f.console, "s3cret");
  ASSERT_TRUE(guarded.Open().ok());
  EXPECT_EQ(guarded.Address(), "http://127.0.0.1:" + std::to_string((*more)[0]) + "/#token=s3cret");
  HttpTestClient g("http://127.0.0.1:" + std::to_string((*more)[0]));
  EXPECT_EQ(g.Get("/").status, 200);
  EXPECT_EQ(g.Get("/api/state").status, 401);
  HttpRequestOptions bearer;
  bearer.headers["Authorization"] = "Bearer s3cret";
  EXPECT_EQ(g.Get("/api/state", bearer).status, 200);
}

}  // namespace
}  // namespace shoal::testing
