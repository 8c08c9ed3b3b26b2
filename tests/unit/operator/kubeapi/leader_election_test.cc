// LeaderElector against the fake API server, each replica with its own KubeClient and token of
// the operator's RBAC rules (deploy/rbac/operator-rules.yaml):
//
//  - two candidates: exactly one leads and the Lease names it (fields, MicroTime, 1500 ms written
//    as 2 s);
//  - a leader stopped cleanly releases the Lease (holder "", leaseDurationSeconds 1, the rest
//    kept) and the other takes over without any time passing on its clock, leaseTransitions + 1;
//  - a leader that dies without releasing (every write to the Lease fails while it stops) is
//    replaced only once the lease duration has passed on the candidate's clock since it last
//    saw the Lease change: not at +1499 ms, not at +1999 ms (the holder wrote 2 s), at +2000 ms;
//  - a leader whose renewals fail stops acting (is_leader() false at once, on_stopped_leading)
//    at renew_deadline after its last good renewal, before the lease duration, and leads again
//    when the API server comes back and the Lease still names it;
//  - only the verbs granted to the operator (get, create, update) are used and none is refused;
//    without `update` the elector never leads;
//  - Create refuses bad timings and empty names, and makes up hostname_<uuid> identities.
//
// Expiry and deadlines run on a ManualClock shared by the server and the electors: it moves
// only when a test advances it, so "too early" is checked exactly. The electors' loops pace on
// real time (retry 200 ms); every wait is on a condition with a deadline. To know that a
// candidate has made an attempt after some point, a test waits for two more GETs of the Lease
// by its user: the server counts a request before the client reads the answer, so once the
// second is counted, the attempt that began with the first one is over.
#include "shoal/kubeapi/leader_election.h"

#include <gtest/gtest.h>

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/json.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shoal/kubeapi/kube_client.h"
#include "support/fake_kube/fake_api_server.h"
#include "support/manual_clock.h"

namespace shoal::kubeapi {
namespace {

using namespace std::chrono_literals;
using shoal::testing::FakeApiServer;
using shoal::testing::FakeApiServerOptions;
using shoal::testing::FakeApiUser;
using shoal::testing::ManualClock;

constexpr char kAdminToken[] = "admin-token";
constexpr char kTokenA[] = "replica-a-token";
constexpr char kTokenB[] = "replica-b-token";
constexpr char kTokenNoUpdate[] = "no-update-token";
// The two replicas' users: the operator's ServiceAccount and rules, told apart by name so that
// a test can count each one's requests.
const std::string kUserA = shoal::testing::kOperatorUser;
const std::string kUserB = std::string(shoal::testing::kOperatorUser) + "-b";
const std::string kUserNoUpdate = std::string(shoal::testing::kOperatorUser) + "-no-update";

constexpr char kLeasePath[] =
    "/apis/coordination.k8s.io/v1/namespaces/default/leases/shoal-operator";
constexpr char kLeases[] = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

constexpr auto kLeaseDuration = 1500ms;  // written as 2 s
constexpr auto kRenewDeadline = 1000ms;
constexpr auto kRetryPeriod = 200ms;
// A real-time bound for waits on conditions: far above what a few retry periods need.
constexpr auto kWait = 15s;

// ManualClock's start, 2023-11-14T22:13:20Z.
constexpr int64_t kStartMs = 1'700'000'000'000;

template <typename Pred>
bool WaitFor(Pred&& pred, std::chrono::milliseconds timeout = kWait) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

LeaderElectionOptions Options(const std::string& identity) {
  LeaderElectionOptions o;
  o.identity = identity;
  o.lease_duration = kLeaseDuration;
  o.renew_deadline = kRenewDeadline;
  o.retry_period = kRetryPeriod;
  return o;
}

// One replica: its own client, an elector and the thread that runs it, with what its callbacks
// saw. Stop (or destruction) ends Run and joins.
class Replica {
 public:
  Replica(const std::string& base_url, const std::string& token, const Clock& clock,
          LeaderElectionOptions options)
      : clock_(clock) {
    KubeConfig config;
    config.server = base_url;
    config.token = token;
    KubeClientOptions copts;
    copts.request_timeout = 5s;
    auto client = KubeClient::Create(config, copts);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) return;
    client_ = std::move(*client);
    auto elector = LeaderElector::Create(*client_, std::move(options), clock);
    EXPECT_TRUE(elector.ok()) << elector.status().ToString();
    if (elector.ok()) elector_ = std::move(*elector);
  }
  ~Replica() { Stop(); }
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  void Start() {
    ASSERT_TRUE(elector_);
    thread_ = std::thread([this] {
      elector_->Run(
          stop_, [this] { started_.fetch_add(1); },
          [this] {
            stopped_at_ms_.store(clock_.NowMs());
            stopped_.fetch_add(1);
          });
    });
  }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  bool is_leader() const { return elector_ && elector_->is_leader(); }
  const std::string& identity() const { return elector_->identity(); }
  uint64_t transitions() const { return elector_->transitions(); }
  int started() const { return started_.load(); }
  int stopped() const { return stopped_.load(); }
  int64_t stopped_at_ms() const { return stopped_at_ms_.load(); }

 private:
  const Clock& clock_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<LeaderElector> elector_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<int> started_{0};
  std::atomic<int> stopped_{0};
  std::atomic<int64_t> stopped_at_ms_{0};
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeApiServerOptions o;
    o.admin_token = kAdminToken;
    o.clock = &clock_;
    for (const auto& [token, name] : {std::pair{kTokenA, kUserA}, std::pair{kTokenB, kUserB}}) {
      auto user = shoal::testing::OperatorUser(token, shoal::testing::kOperatorRulesFile);
      ASSERT_TRUE(user.ok()) << user.status().ToString();
      user->name = name;
      o.users.push_back(*user);
    }
    // The operator's rules with `update` taken from the leases rule.
    auto no_update =
        shoal::testing::OperatorUser(kTokenNoUpdate, shoal::testing::kOperatorRulesFile);
    ASSERT_TRUE(no_update.ok()) << no_update.status().ToString();
    no_update->name = kUserNoUpdate;
    bool found = false;
    for (auto& rule : no_update->rules) {
      if (rule.resources == std::vector<std::string>{"leases"}) {
        std::erase(rule.verbs, "update");
        found = true;
      }
    }
    ASSERT_TRUE(found) << "no leases rule in " << shoal::testing::kOperatorRulesFile;
    o.users.push_back(*no_update);
    auto server = FakeApiServer::Start(std::move(o));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }

  // Every test: the replicas used only what the operator's ClusterRole grants on leases
  // (get, create, update) and nothing was refused them.
  void TearDown() override {
    if (!server_) return;
    for (const auto& r : server_->Requests()) {
      if (r.user == kUserNoUpdate) continue;
      EXPECT_TRUE(r.user == kUserA || r.user == kUserB) << r.method << " " << r.path;
      EXPECT_TRUE(r.path == kLeasePath || r.path == kLeases) << r.method << " " << r.path;
      EXPECT_TRUE(r.method == "GET" || r.method == "POST" || r.method == "PUT")
          << r.method << " " << r.path;
      EXPECT_NE(r.code, 401) << r.method << " " << r.path;
      EXPECT_NE(r.code, 403) << r.method << " " << r.path;
    }
  }

  std::unique_ptr<Replica> NewReplica(const std::string& token, const std::string& identity) {
    return std::make_unique<Replica>(server_->base_url(), token, clock_, Options(identity));
  }

  web::json::value Lease() const {
    auto text = server_->Object(kLeasePath);
    return text ? web::json::value::parse(*text) : web::json::value::null();
  }
  std::string Spec(const std::string& field) const {
    const auto v = At(Lease(), "spec." + field);
    return v.is_string() ? v.as_string() : "";
  }
  int64_t SpecInt(const std::string& field) const {
    const auto v = At(Lease(), "spec." + field);
    return v.is_number() ? v.as_number().to_int64() : -1;
  }

  // GETs of the Lease answered to `user` so far.
  int Gets(const std::string& user) const {
    int n = 0;
    for (const auto& r : server_->Requests()) {
      if (r.user == user && r.method == "GET" && r.path == kLeasePath) ++n;
    }
    return n;
  }
  // Waits until `user`'s elector has made (at least) one whole attempt that began after the call.
  bool WaitForAttempt(const std::string& user) const {
    const int base = Gets(user);
    return WaitFor([&] { return Gets(user) >= base + 2; });
  }

  ManualClock clock_{kStartMs};
  std::unique_ptr<FakeApiServer> server_;
};

TEST_F(LeaderElectionTest, ExactlyOneOfTwoLeadsAndTheLeaseNamesIt) {
  auto a = NewReplica(kTokenA, "replica-a");
  auto b = NewReplica(kTokenB, "replica-b");
  a->Start();
  b->Start();
  bool both = false;
  ASSERT_TRUE(WaitFor([&] {
    both = both || (a->is_leader() && b->is_leader());
    return a->is_leader() || b->is_leader();
  }));
  // Let both run a few more rounds: still exactly one.
  ASSERT_TRUE(WaitForAttempt(kUserA));
  ASSERT_TRUE(WaitForAttempt(kUserB));
  EXPECT_FALSE(both);
  ASSERT_NE(a->is_leader(), b->is_leader());
  Replica& leader = a->is_leader() ? *a : *b;
  Replica& other = a->is_leader() ? *b : *a;
  EXPECT_EQ(Spec("holderIdentity"), leader.identity());
  EXPECT_EQ(leader.started(), 1);
  EXPECT_EQ(leader.transitions(), 1u);
  EXPECT_EQ(other.started(), 0);
  EXPECT_EQ(other.transitions(), 0u);
  EXPECT_EQ(server_->CountRequests("POST", kLeases, 201), 1);

  // The Lease as client-go writes it; the clock has not moved, so both times are its start.
  EXPECT_EQ(SpecInt("leaseDurationSeconds"), 2);  // 1500 ms, rounded up
  EXPECT_EQ(SpecInt("leaseTransitions"), 0);
  EXPECT_EQ(Spec("acquireTime"), "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(Spec("renewTime"), "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(Name(Lease()), "shoal-operator");
  EXPECT_EQ(Namespace(Lease()), "default");

  // Renewals move renewTime, not acquireTime.
  clock_.AdvanceMs(250);
  ASSERT_TRUE(WaitFor([&] { return Spec("renewTime") == "2023-11-14T22:13:20.250000Z"; }));
  EXPECT_EQ(Spec("acquireTime"), "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(Spec("holderIdentity"), leader.identity());
  EXPECT_TRUE(leader.is_leader());
  EXPECT_FALSE(other.is_leader());
}

TEST_F(LeaderElectionTest, StopReleasesTheLeaseKeepingItsOtherFields) {
  auto a = NewReplica(kTokenA, "replica-a");
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->is_leader(); }));
  clock_.AdvanceMs(300);
  ASSERT_TRUE(WaitFor([&] { return Spec("renewTime") == "2023-11-14T22:13:20.300000Z"; }));
  a->Stop();
  EXPECT_FALSE(a->is_leader());
  EXPECT_EQ(a->stopped(), 1);
  EXPECT_EQ(Spec("holderIdentity"), "");
  EXPECT_EQ(SpecInt("leaseDurationSeconds"), 1);
  EXPECT_EQ(Spec("acquireTime"), "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(Spec("renewTime"), "2023-11-14T22:13:20.300000Z");
  EXPECT_EQ(SpecInt("leaseTransitions"), 0);
}

TEST_F(LeaderElectionTest, ReleasedLeaseIsTakenOverAtOnce) {
  auto a = NewReplica(kTokenA, "replica-a");
  auto b = NewReplica(kTokenB, "replica-b");
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->is_leader(); }));
  b->Start();
  ASSERT_TRUE(WaitForAttempt(kUserB));
  EXPECT_FALSE(b->is_leader());
  EXPECT_EQ(SpecInt("leaseTransitions"), 0);

  a->Stop();
  EXPECT_EQ(a->stopped(), 1);
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return b->is_leader(); }));
  const auto took = std::chrono::steady_clock::now() - released;
  // No time passed on B's clock: it took the lease because it was released, not expired; and
  // in real time it took one retry period or so, well within the lease duration.
  EXPECT_EQ(clock_.NowMs(), kStartMs);
  EXPECT_LT(took, kLeaseDuration);
  EXPECT_EQ(Spec("holderIdentity"), "replica-b");
  EXPECT_EQ(SpecInt("leaseTransitions"), 1);
  EXPECT_EQ(SpecInt("leaseDurationSeconds"), 2);
  EXPECT_EQ(b->started(), 1);
  EXPECT_FALSE(a->is_leader());
}

TEST_F(LeaderElectionTest, DeadLeaderIsReplacedOnlyAfterTheLeaseDuration) {
  auto a = NewReplica(kTokenA, "replica-a");
  auto b = NewReplica(kTokenB, "replica-b");
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->is_leader(); }));
  b->Start();
  ASSERT_TRUE(WaitForAttempt(kUserB));

  // A "dies": while every write to the Lease fails it stops, so its release never lands.
  server_->FailNextWrites(kLeasePath, 1'000'000, 500);
  a->Stop();
  EXPECT_GE(server_->CountRequests("PUT", kLeasePath, 500), 1);
  server_->FailNextWrites(kLeasePath, 0, 0);
  const std::string last_rv = ResourceVersion(Lease());
  EXPECT_EQ(Spec("holderIdentity"), "replica-a");
  // B has seen the Lease as it stays now (A's last renewal) with the clock at its start: the
  // clock has not moved since B started.
  ASSERT_TRUE(WaitForAttempt(kUserB));

  clock_.AdvanceMs(kLeaseDuration.count() - 1);  // +1499 ms
  ASSERT_TRUE(WaitForAttempt(kUserB));
  EXPECT_FALSE(b->is_leader());
  EXPECT_EQ(Spec("holderIdentity"), "replica-a");

  clock_.AdvanceMs(500);  // +1999 ms: past B's own 1500 ms, not the 2 s A wrote
  ASSERT_TRUE(WaitForAttempt(kUserB));
  EXPECT_FALSE(b->is_leader());
  EXPECT_EQ(Spec("holderIdentity"), "replica-a");
  EXPECT_EQ(ResourceVersion(Lease()), last_rv);

  clock_.AdvanceMs(1);  // +2000 ms: expired
  ASSERT_TRUE(WaitFor([&] { return b->is_leader(); }));
  EXPECT_EQ(Spec("holderIdentity"), "replica-b");
  EXPECT_EQ(SpecInt("leaseTransitions"), 1);
  EXPECT_EQ(Spec("acquireTime"), "2023-11-14T22:13:22.000000Z");
  EXPECT_EQ(b->started(), 1);
}

TEST_F(LeaderElectionTest, LeaderThatCannotRenewStopsBeforeItsLeaseCanExpire) {
  auto a = NewReplica(kTokenA, "replica-a");
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->is_leader(); }));
  // Its last good renewal is at the clock's start: the clock does not move until renewals fail.
  const auto last_good = clock_.SteadyNow();
  server_->FailNextWrites(kLeasePath, 1'000'000, 500);
  ASSERT_TRUE(WaitFor([&] { return server_->CountRequests("PUT", kLeasePath, 500) >= 2; }));

  clock_.AdvanceMs(kRenewDeadline.count() - 1);  // 999 ms without a renewal: still leading
  EXPECT_TRUE(a->is_leader());
  ASSERT_TRUE(WaitForAttempt(kUserA));
  EXPECT_TRUE(a->is_leader());
  EXPECT_EQ(a->stopped(), 0);

  clock_.AdvanceMs(1);  // renew_deadline: is_leader() says so at once, before the loop notices
  EXPECT_FALSE(a->is_leader());
  ASSERT_TRUE(WaitFor([&] { return a->stopped() == 1; }));
  // It stopped exactly at renew_deadline after its last good renewal, on its clock.
  EXPECT_EQ(a->stopped_at_ms() - kStartMs, kRenewDeadline.count());
  EXPECT_EQ(clock_.SteadyNow() - last_good, kRenewDeadline);
  // Before the lease duration (its own, and the 2 s written in the Lease that others wait for).
  EXPECT_LT(a->stopped_at_ms() - kStartMs, kLeaseDuration.count());
  EXPECT_LT(a->stopped_at_ms() - kStartMs, SpecInt("leaseDurationSeconds") * 1000);
  EXPECT_FALSE(a->is_leader());
  EXPECT_EQ(Spec("holderIdentity"), "replica-a");  // nothing was written

  // The API server is back: A is a candidate again, and the Lease still names it, so it leads
  // again (same holder: no transition in the Lease).
  server_->FailNextWrites(kLeasePath, 0, 0);
  ASSERT_TRUE(WaitFor([&] { return a->is_leader(); }));
  EXPECT_EQ(a->started(), 2);
  EXPECT_EQ(a->transitions(), 2u);
  EXPECT_EQ(SpecInt("leaseTransitions"), 0);
}

TEST_F(LeaderElectionTest, UsesOnlyTheVerbsTheOperatorIsGranted) {
  // create, renew, release and take over; TearDown checks every request of every test.
  auto a = NewReplica(kTokenA, "replica-a");
  auto b = NewReplica(kTokenB, "replica-b");
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->is_leader(); }));
  b->Start();
  ASSERT_TRUE(WaitForAttempt(kUserA));
  a->Stop();
  ASSERT_TRUE(WaitFor([&] { return b->is_leader(); }));
  b->Stop();
  std::set<std::string> methods;
  for (const auto& r : server_->Requests()) methods.insert(r.method);
  EXPECT_EQ(methods, (std::set<std::string>{"GET", "POST", "PUT"}));
  EXPECT_EQ(server_->CountRequests("POST", kLeases, 201), 1);
  EXPECT_EQ(Spec("holderIdentity"), "");
  EXPECT_EQ(SpecInt("leaseTransitions"), 1);
}

TEST_F(LeaderElectionTest, WithoutUpdateOnLeasesItNeverLeads) {
  // Control for the RBAC check: the fake does refuse what is not granted.
  auto c = NewReplica(kTokenNoUpdate, "replica-c");
  auto a = NewReplica(kTokenA, "replica-a");
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->is_leader(); }));
  a->Stop();  // released: anyone may take it at once
  ASSERT_EQ(Spec("holderIdentity"), "");
  c->Start();
  ASSERT_TRUE(WaitFor([&] {
    int refused = 0;
    for (const auto& r : server_->Requests()) {
      if (r.user == kUserNoUpdate && r.method == "PUT" && r.code == 403) ++refused;
    }
    return refused >= 2;
  }));
  EXPECT_FALSE(c->is_leader());
  EXPECT_EQ(c->started(), 0);
  EXPECT_EQ(Spec("holderIdentity"), "");
}

// A client that Create needs but that sends nothing.
Result<std::unique_ptr<KubeClient>> UnusedClient() {
  KubeConfig config;
  config.server = "http://127.0.0.1:1";
  return KubeClient::Create(config);
}

TEST(LeaderElectorCreateTest, RefusesBadTimingsAndNames) {
  auto client = UnusedClient();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ManualClock clock;
  struct Case {
    const char* what;
    LeaderElectionOptions options;
    bool ok;
  };
  auto with = [](auto tweak) {
    LeaderElectionOptions o = Options("x");
    tweak(o);
    return o;
  };
  const std::vector<Case> cases = {
      {"valid", Options("x"), true},
      {"client-go defaults", with([](auto& o) {
         o.lease_duration = 15s;
         o.renew_deadline = 10s;
         o.retry_period = 2s;
       }),
       true},
      {"lease == renew", with([](auto& o) { o.renew_deadline = o.lease_duration; }), false},
      {"lease < renew", with([](auto& o) { o.renew_deadline = 2000ms; }), false},
      {"renew just above 1.2 x retry", with([](auto& o) { o.retry_period = 833ms; }), true},
      {"renew == 1.2 x retry", with([](auto& o) {
         o.renew_deadline = 1200ms;
         o.retry_period = 1000ms;
       }),
       false},
      {"renew < 1.2 x retry", with([](auto& o) { o.retry_period = 900ms; }), false},
      {"retry 0", with([](auto& o) { o.retry_period = 0ms; }), false},
      {"empty namespace", with([](auto& o) { o.ns = ""; }), false},
      {"empty lease name", with([](auto& o) { o.lease_name = ""; }), false},
  };
  for (const auto& c : cases) {
    auto e = LeaderElector::Create(**client, c.options, clock);
    EXPECT_EQ(e.ok(), c.ok) << c.what;
    if (!c.ok) {
      EXPECT_EQ(e.status().code(), Status::Code::kInvalidArgument) << c.what;
    }
  }
}

TEST(LeaderElectorCreateTest, DefaultIdentityIsHostnameAndRandomUuid) {
  auto client = UnusedClient();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ManualClock clock;
  auto first = LeaderElector::Create(**client, Options(""), clock);
  auto second = LeaderElector::Create(**client, Options(""), clock);
  ASSERT_TRUE(first.ok() && second.ok());
  const std::regex pattern(
      ".+_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  EXPECT_TRUE(std::regex_match((*first)->identity(), pattern)) << (*first)->identity();
  EXPECT_NE((*first)->identity(), (*second)->identity());
  EXPECT_EQ((*first)->identity().substr(0, (*first)->identity().rfind('_')),
            (*second)->identity().substr(0, (*second)->identity().rfind('_')));
  EXPECT_EQ(LeaderElector::Create(**client, Options("given"), clock).value()->identity(), "given");
}

}  // namespace
}  // namespace shoal::kubeapi
