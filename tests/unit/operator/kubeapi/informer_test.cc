// Informer against the fake API server (as admin, and once as the operator's ServiceAccount):
//  - it lists, delivers every object as ADDED, reports synced, and caches what it listed;
//  - watch events reach the handler in order, after the cache was updated;
//  - bookmarks move its resourceVersion;
//  - a stream the server closes is watched again from the last RV, so changes made while no
//    watch was open arrive as ordinary events, without a relist;
//  - when that history is gone (410 Expired) it relists and reports the difference: MODIFIED,
//    ADDED, and DELETED for what vanished in the gap;
//  - a label selector limits both the list and the watch.
// "While no watch was open" is made exact, not timed: the test handler blocks on one event (the
// informer's thread is then not reading), the test closes the watch and writes, then lets go.
#include "shoal/kubeapi/informer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_kube/fake_api_server.h"

namespace shoal::kubeapi {
namespace {

using namespace std::chrono_literals;
using shoal::testing::FakeApiServer;
using shoal::testing::FakeApiServerOptions;

constexpr char kAdmin[] = "admin-token";
constexpr char kOperator[] = "operator-token";
constexpr char kTopics[] = "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics";

Json J(const std::string& text) { return Json::parse(text); }

struct Seen {
  std::string type;
  std::string name;
  std::string rv;
  bool cache_agreed = false;  // the cache already showed the change when the handler ran
};

// Runs an Informer on its own thread and records what its handler sees. The handler can be
// made to block on the ADDED of one name until Release(), which holds the informer's thread.
class InformerRunner {
 public:
  InformerRunner(KubeClient& client, const ResourceKind& kind, InformerOptions options,
                 std::string block_on = "")
      : block_on_(std::move(block_on)),
        informer_(client, kind, std::move(options),
                  [this](const std::string& type, const Json& object) { OnEvent(type, object); }),
        thread_([this] { informer_.Run(stop_); }) {}
  ~InformerRunner() {
    Release();
    stop_ = true;
    thread_.join();
  }
  InformerRunner(const InformerRunner&) = delete;
  InformerRunner& operator=(const InformerRunner&) = delete;

  Informer& informer() { return informer_; }

  bool WaitForEvents(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return events_.size() >= n; });
  }
  bool WaitBlocked(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return blocked_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::vector<Seen> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  void OnEvent(const std::string& type, const Json& object) {
    const auto cached = informer_.Get(Namespace(object), Name(object));
    const bool agreed = type == "DELETED"
                            ? !cached.has_value()
                            : cached && ResourceVersion(*cached) == ResourceVersion(object);
    std::unique_lock<std::mutex> lock(mu_);
    events_.push_back({type, Name(object), ResourceVersion(object), agreed});
    cv_.notify_all();
    if (type == "ADDED" && !block_on_.empty() && Name(object) == block_on_) {
      blocked_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, 10s, [&] { return released_; });
    }
  }

  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> events_;  // guarded by mu_
  const std::string block_on_;
  bool blocked_ = false;   // guarded by mu_
  bool released_ = false;  // guarded by mu_
  Informer informer_;
  std::thread thread_;  // last: starts once everything above exists
};

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeApiServerOptions options;
    options.admin_token = kAdmin;
    auto op = shoal::testing::OperatorUser(kOperator, shoal::testing::kOperatorRulesFile);
    ASSERT_TRUE(op.ok()) << op.status().ToString();
    options.users.push_back(*op);
    auto server = FakeApiServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server.value());
    admin_ = NewClient(kAdmin);
    op_ = NewClient(kOperator);
    ASSERT_TRUE(admin_ && op_);
  }

  std::unique_ptr<KubeClient> NewClient(const std::string& token) {
    KubeConfig config;
    config.server = server_->base_url();
    config.token = token;
    auto client = KubeClient::Create(config);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client.value()) : nullptr;
  }

  static InformerOptions Options() {
    InformerOptions o;
    o.ns = "default";
    o.backoff = 20ms;
    o.backoff_max = 200ms;
    return o;
  }

  void CreateTopic(const std::string& name) {
    auto created =
        admin_->Create(PartitionedTopics(), "default",
                       J(R"({"metadata":{"name":")" + name + R"("},"spec":{"partitions":4}})"));
    ASSERT_TRUE(created.ok()) << created.error().ToString();
  }
  void SetPartitions(const std::string& name, int partitions) {
    ASSERT_TRUE(admin_
                    ->MergePatch(PartitionedTopics(), "default", name,
                                 J(R"({"spec":{"partitions":)" + std::to_string(partitions) + "}}"))
                    .ok());
  }
  void DeleteTopic(const std::string& name) {
    ASSERT_TRUE(admin_->Delete(PartitionedTopics(), "default", name).ok());
  }
  int Watches() {
    int n = 0;
    for (const auto& r : server_->Requests()) {
      if (r.method == "GET" && r.path == kTopics && r.query.find("watch=1") != std::string::npos) {
        ++n;
      }
    }
    return n;
  }

  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<KubeClient> admin_;
  std::unique_ptr<KubeClient> op_;
};

std::vector<std::string> Summary(const std::vector<Seen>& events, size_t from = 0) {
  std::vector<std::string> out;
  for (size_t i = from; i < events.size(); ++i) {
    out.push_back(events[i].type + " " + events[i].name);
  }
  return out;
}

TEST_F(InformerTest, SyncsAndCachesTheList) {
  CreateTopic("a");
  CreateTopic("b");
  // As the operator's ServiceAccount: list and watch are all an informer needs.
  InformerRunner run(*op_, PartitionedTopics(), Options());
  ASSERT_TRUE(run.informer().WaitForSync(5s));
  EXPECT_TRUE(run.informer().synced());
  EXPECT_EQ(run.informer().lists(), 1u);
  EXPECT_EQ(Summary(run.events()), (std::vector<std::string>{"ADDED a", "ADDED b"}));
  for (const auto& e : run.events()) EXPECT_TRUE(e.cache_agreed) << e.name;
  ASSERT_EQ(run.informer().List().size(), 2u);
  auto a = run.informer().Get("default", "a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(Name(*a), "a");
  EXPECT_EQ(At(*a, "spec.partitions").as_integer(), 4);
  EXPECT_FALSE(run.informer().Get("default", "zzz").has_value());
  EXPECT_EQ(run.informer().resource_version(), std::to_string(server_->resource_version()));
}

TEST_F(InformerTest, EventsReachTheHandlerInOrder) {
  CreateTopic("a");
  InformerRunner run(*admin_, PartitionedTopics(), Options());
  ASSERT_TRUE(run.informer().WaitForSync(5s));
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));

  CreateTopic("b");
  SetPartitions("b", 8);
  DeleteTopic("a");
  ASSERT_TRUE(run.WaitForEvents(4, 5s));
  const auto events = run.events();
  EXPECT_EQ(Summary(events),
            (std::vector<std::string>{"ADDED a", "ADDED b", "MODIFIED b", "DELETED a"}));
  for (const auto& e : events) EXPECT_TRUE(e.cache_agreed) << e.type << " " << e.name;
  EXPECT_FALSE(run.informer().Get("default", "a").has_value());
  EXPECT_EQ(At(*run.informer().Get("default", "b"), "spec.partitions").as_integer(), 8);
  EXPECT_EQ(run.informer().resource_version(), std::to_string(server_->resource_version()));
  EXPECT_EQ(run.informer().lists(), 1u);
}

TEST_F(InformerTest, BookmarksMoveTheResourceVersion) {
  InformerRunner run(*admin_, PartitionedTopics(), Options());
  ASSERT_TRUE(run.informer().WaitForSync(5s));
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  // A write to another kind moves the server's RV; the topic watch learns it by a bookmark.
  ASSERT_TRUE(admin_->Create(Services(), "default", J(R"({"metadata":{"name":"s"}})")).ok());
  const std::string rv = std::to_string(server_->resource_version());
  EXPECT_NE(run.informer().resource_version(), rv);
  server_->SendBookmark();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (run.informer().resource_version() != rv && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(2ms);  // polls the condition; the bookmark has no callback
  }
  EXPECT_EQ(run.informer().resource_version(), rv);
  EXPECT_TRUE(run.events().empty());  // a bookmark is not an object event
}

TEST_F(InformerTest, ChangesWhileNoWatchWasOpenArriveAfterTheRewatch) {
  CreateTopic("a");
  CreateTopic("b");
  InformerRunner run(*admin_, PartitionedTopics(), Options(), /*block_on=*/"x");
  ASSERT_TRUE(run.informer().WaitForSync(5s));
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));

  CreateTopic("x");
  ASSERT_TRUE(run.WaitBlocked(5s));  // the informer's thread sits in the handler
  const std::string rv_at_close = ResourceVersion(*run.informer().Get("default", "x"));
  server_->CloseAllWatches();
  ASSERT_EQ(server_->open_watches(), 0u);
  SetPartitions("b", 8);
  CreateTopic("c");
  DeleteTopic("a");
  run.Release();

  ASSERT_TRUE(run.WaitForEvents(6, 5s));
  EXPECT_EQ(Summary(run.events(), 3),
            (std::vector<std::string>{"MODIFIED b", "ADDED c", "DELETED a"}));
  EXPECT_EQ(run.informer().lists(), 1u);  // no relist: the history was still there
  EXPECT_EQ(Watches(), 2);
  const auto requests = server_->Requests();
  std::string rewatch;
  for (const auto& r : requests) {
    if (r.path == kTopics && r.query.find("watch=1") != std::string::npos) rewatch = r.query;
  }
  EXPECT_NE(rewatch.find("resourceVersion=" + rv_at_close + "&"), std::string::npos) << rewatch;
  EXPECT_FALSE(run.informer().Get("default", "a").has_value());
  EXPECT_TRUE(run.informer().Get("default", "c").has_value());
}

TEST_F(InformerTest, RelistsAfterTheHistoryIsGoneAndReportsTheDifference) {
  CreateTopic("a");
  CreateTopic("b");
  InformerRunner run(*admin_, PartitionedTopics(), Options(), /*block_on=*/"x");
  ASSERT_TRUE(run.informer().WaitForSync(5s));
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  const std::string a_rv = ResourceVersion(*run.informer().Get("default", "a"));

  CreateTopic("x");
  ASSERT_TRUE(run.WaitBlocked(5s));
  server_->CloseAllWatches();
  SetPartitions("b", 8);
  CreateTopic("c");
  DeleteTopic("a");
  server_->CompactHistory();  // the re-watch from x's RV will get 410 Expired
  run.Release();

  ASSERT_TRUE(run.WaitForEvents(6, 5s));
  auto tail = Summary(run.events(), 3);
  std::sort(tail.begin(), tail.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"ADDED c", "DELETED a", "MODIFIED b"}));
  EXPECT_EQ(run.informer().lists(), 2u);
  for (const auto& e : run.events()) {
    EXPECT_TRUE(e.cache_agreed) << e.type << " " << e.name;
    if (e.type == "DELETED") {
      EXPECT_EQ(e.rv, a_rv);  // the last state the cache knew
    }
  }
  std::vector<std::string> cached;
  for (const auto& t : run.informer().List()) cached.push_back(Name(t));
  EXPECT_EQ(cached, (std::vector<std::string>{"b", "c", "x"}));
  EXPECT_EQ(run.informer().resource_version(), std::to_string(server_->resource_version()));

  // And it keeps watching after the relist.
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  CreateTopic("d");
  ASSERT_TRUE(run.WaitForEvents(7, 5s));
  EXPECT_EQ(Summary(run.events(), 6), (std::vector<std::string>{"ADDED d"}));
}

TEST_F(InformerTest, LabelSelectorFiltersListAndWatch) {
  auto service = [](const std::string& name, const std::string& team) {
    return J(R"({"metadata":{"name":")" + name + R"(","labels":{"team":")" + team + R"("}}})");
  };
  ASSERT_TRUE(admin_->Create(Services(), "default", service("a", "x")).ok());
  ASSERT_TRUE(admin_->Create(Services(), "default", service("b", "y")).ok());
  InformerOptions options = Options();
  options.label_selector = "team=x";
  InformerRunner run(*admin_, Services(), options);
  ASSERT_TRUE(run.informer().WaitForSync(5s));
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  EXPECT_EQ(Summary(run.events()), (std::vector<std::string>{"ADDED a"}));

  ASSERT_TRUE(admin_->Create(Services(), "default", service("c", "y")).ok());
  ASSERT_TRUE(admin_->Create(Services(), "default", service("d", "x")).ok());
  // "a" stops matching: the watch reports it as DELETED.
  ASSERT_TRUE(
      admin_->MergePatch(Services(), "default", "a", J(R"({"metadata":{"labels":{"team":"y"}}})"))
          .ok());
  ASSERT_TRUE(run.WaitForEvents(3, 5s));
  EXPECT_EQ(Summary(run.events()), (std::vector<std::string>{"ADDED a", "ADDED d", "DELETED a"}));
  ASSERT_EQ(run.informer().List().size(), 1u);
  EXPECT_EQ(Name(run.informer().List()[0]), "d");
}

TEST_F(InformerTest, StopEndsRun) {
  auto runner = std::make_unique<InformerRunner>(*admin_, PartitionedTopics(), Options());
  ASSERT_TRUE(runner->informer().WaitForSync(5s));
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  const auto start = std::chrono::steady_clock::now();
  runner.reset();  // sets stop and joins Run's thread
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

}  // namespace
}  // namespace shoal::kubeapi
