// The admin plane's bearer token, against a real sidecar process: every request without the exact
// token is refused 401 with a JSON {"error","reason"} body; the exact token gets the map. Without
// --admin-token the sidecar generates one into <data-dir>/admin-token (mode 0600), which works.
// Also the admin plane's group deletion (DELETE /v1/admin/groups/{group}).
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/partition_map.h"
#include "support/http_test_client.h"
#include "shoal/control/process.h"
#include "support/sidecar_process.h"
#include "support/temp_dir.h"
#include "support/topic_view.h"

namespace shoal::testing {
namespace {

SidecarOptions Options(const std::string& token) {
  SidecarOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.topic = "orders";
  o.partitions = 4;
  o.fsync = "never";
  o.admin_token = token;
  return o;
}

HttpRequestOptions WithAuth(const std::string& value) {
  HttpRequestOptions o;
  o.headers["Authorization"] = value;
  return o;
}

// Expects a 401 with a JSON body whose "error" and "reason" are non-empty strings.
void ExpectUnauthorized(const HttpResponse& r, const std::string& what) {
  EXPECT_EQ(r.status, 401) << what << ": " << r.Describe();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(simdjson::padded_string(r.body)).get(doc), simdjson::SUCCESS)
      << what << ": body is not JSON: " << r.body;
  std::string_view error, reason;
  EXPECT_EQ(doc["error"].get(error), simdjson::SUCCESS) << what << ": " << r.body;
  EXPECT_EQ(doc["reason"].get(reason), simdjson::SUCCESS) << what << ": " << r.body;
  EXPECT_FALSE(error.empty()) << what;
  EXPECT_FALSE(reason.empty()) << what;
}

// The token file's contents without the trailing newline.
std::string ReadToken(const std::string& path) {
  std::ifstream in(path);
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  return token;
}

void ExpectMap(const HttpResponse& r, const std::string& topic, size_t partitions) {
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto map = PartitionMap::FromJson(r.body);
  ASSERT_TRUE(map.ok()) << map.status().ToString() << "\n" << r.body;
  EXPECT_EQ(map->topic(), topic);
  EXPECT_EQ(map->epoch().value(), 1u);
  EXPECT_EQ(map->active_count(), partitions);
}

TEST(AdminAuthTest, OnlyTheExactBearerTokenIsAccepted) {
  SidecarProcess sidecar(Options("s3cret"));
  ASSERT_TRUE(sidecar.Start().ok()) << sidecar.Describe();
  auto admin = sidecar.AdminClient();
  const std::string map = "/v1/admin/map";

  ExpectUnauthorized(admin->Get(map), "no Authorization header");
  ExpectUnauthorized(admin->Get(map, WithAuth("Bearer wrong")), "wrong token");
  ExpectUnauthorized(admin->Get(map, WithAuth("Bearer ")), "Bearer with an empty token");
  ExpectUnauthorized(admin->Get(map, WithAuth("Bearer")), "Bearer without a token");
  ExpectUnauthorized(admin->Get(map, WithAuth("Bearer s3cre")), "a prefix of the token");
  ExpectUnauthorized(admin->Get(map, WithAuth("Bearer s3cret2")), "the token plus a suffix");
  ExpectUnauthorized(admin->Get(map, WithAuth("s3cret")), "the token without Bearer");
  ExpectUnauthorized(admin->Get(map, WithAuth("Basic s3cret")), "another scheme");
  // A refused request changes nothing and reveals nothing, whatever the path or method.
  ExpectUnauthorized(admin->Send("DELETE", map, ""), "DELETE without a token");
  ExpectUnauthorized(admin->Get("/v1/admin/nothing-here"), "unknown path without a token");

  ExpectMap(admin->Get(map, WithAuth("Bearer s3cret")), "orders", 4);

  // The data plane needs no token.
  auto data = sidecar.DataClient();
  EXPECT_EQ(data->Get("/v1/topics/orders").status, 200);
  auto code = sidecar.Terminate();
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0) << sidecar.Describe();
}

// Runs `shoal ARGS` with a token file holding `token` in `dir`; the exit code (nullopt if it
// did not end within 30 s) and what it printed.
struct CliRun {
  std::optional<int> code;
  std::string out;
};
CliRun RunShoal(std::vector<std::string> args, const TempDir& dir, const std::string& token) {
  const std::string token_file = dir.path() + "/token-" + token;
  {
    std::ofstream out(token_file);
    out << token << "\n";
  }
  args.insert(args.begin(), SHOAL_BIN);
  args.insert(args.end(), {"--token-file", token_file});
  const std::string log = dir.path() + "/cli.log";
  std::filesystem::remove(log);
  auto cli = control::ChildProcess::Spawn(args, log);
  if (!cli.ok()) return {std::nullopt, cli.status().ToString()};
  CliRun run;
  run.code = cli->Wait(std::chrono::seconds(30));
  std::ifstream in(log);
  run.out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return run;
}

// DELETE /v1/admin/groups/{group}: a group gone for good is forgotten on every partition the
// sidecar holds, durably (kill -9 with fsync always), and only with the token; the other groups
// keep their commits.
TEST(AdminGroupsTest, ADeletedGroupIsForgottenDurablyAndOnlyWithTheToken) {
  SidecarOptions o = Options("s3cret");
  o.fsync = "always";
  SidecarProcess sidecar(o);
  ASSERT_TRUE(sidecar.Start().ok()) << sidecar.Describe();
  auto data = sidecar.DataClient();
  std::string produce = "{\"events\":[";
  for (int i = 0; i < 40; ++i) {
    produce += std::string(i ? "," : "") + "{\"key\":\"k" + std::to_string(i) + "\",\"value\":" +
               std::to_string(i) + "}";
  }
  produce += "]}";
  ASSERT_EQ(data->Post("/v1/topics/orders/events", produce).status, 200);
  std::string commits_of_gone = "{\"group\":\"gone\",\"offsets\":[", commits_of_kept =
                                                                       "{\"group\":\"kept\",\"offsets\":[";
  for (int p = 0; p < 4; ++p) {
    const std::string entry = std::string(p ? "," : "") + "{\"partition\":" + std::to_string(p) +
                              ",\"offset\":1}";
    commits_of_gone += entry;
    commits_of_kept += entry;
  }
  commits_of_gone += "]}";
  commits_of_kept += "]}";
  ASSERT_EQ(data->Post("/v1/topics/orders/commits", commits_of_gone).status, 200);
  ASSERT_EQ(data->Post("/v1/topics/orders/commits", commits_of_kept).status, 200);

  auto admin = sidecar.AdminClient();
  ExpectUnauthorized(admin->Send("DELETE", "/v1/admin/groups/gone", ""), "DELETE without a token");
  const auto bad = admin->Send("DELETE", "/v1/admin/groups/no%20spaces", "", WithAuth("Bearer s3cret"));
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  EXPECT_NE(bad.body.find("\"reason\""), std::string::npos) << bad.body;
  // Alive (it committed a moment ago; the default --redelivery-ms is 30 s): refused, unless
  // forced.
  const auto alive = admin->Send("DELETE", "/v1/admin/groups/gone", "", WithAuth("Bearer s3cret"));
  EXPECT_EQ(alive.status, 409) << alive.Describe();
  EXPECT_NE(alive.body.find("committed"), std::string::npos) << alive.body;
  const auto del =
      admin->Send("DELETE", "/v1/admin/groups/gone?force=true", "", WithAuth("Bearer s3cret"));
  ASSERT_EQ(del.status, 200) << del.Describe();
  EXPECT_EQ(del.body, "{\"group\":\"gone\",\"partitions\":[0,1,2,3]}");
  const auto twice = admin->Send("DELETE", "/v1/admin/groups/gone", "", WithAuth("Bearer s3cret"));
  ASSERT_EQ(twice.status, 200) << twice.Describe();
  EXPECT_EQ(twice.body, "{\"group\":\"gone\",\"partitions\":[]}");

  sidecar.Kill9();
  ASSERT_TRUE(sidecar.Restart().ok()) << sidecar.Describe();
  auto after = sidecar.DataClient();
  auto view = ParseTopicView(after->Get("/v1/topics/orders").body);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  for (const auto& [id, p] : view->partitions) {
    EXPECT_EQ(p.committed, (std::map<std::string, uint64_t>{{"kept", 1}})) << "partition " << id;
  }

  // The same through `shoal delete-group`, as a user runs it (a token file, the admin address).
  TempDir dir("delete-group");
  const std::string address = "127.0.0.1:" + std::to_string(sidecar.admin_port());
  const CliRun run = RunShoal({"delete-group", "kept", "--admin", address, "--force"}, dir, "s3cret");
  ASSERT_EQ(run.code, std::optional<int>(0)) << run.out;
  EXPECT_NE(run.out.find("\"group\":\"kept\",\"partitions\":[0,1,2,3]"), std::string::npos)
      << run.out;
  view = ParseTopicView(after->Get("/v1/topics/orders").body);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  for (const auto& [id, p] : view->partitions) EXPECT_TRUE(p.committed.empty()) << id;
  // A wrong token: a clear message and exit 1.
  const CliRun wrong = RunShoal({"delete-group", "kept", "--admin", address}, dir, "nope");
  EXPECT_EQ(wrong.code, std::optional<int>(1)) << wrong.out;
  EXPECT_NE(wrong.out.find("401"), std::string::npos) << wrong.out;
}

// `shoal delete-group --all`: the sidecars of the topic come from the map the first one holds.
TEST(AdminGroupsTest, DeleteGroupAllReachesEverySidecarOfTheMap) {
  SidecarProcess a(Options("s3cret")), b(Options("s3cret"));
  ASSERT_TRUE(a.Start().ok()) << a.Describe();
  ASSERT_TRUE(b.Start().ok()) << b.Describe();
  for (SidecarProcess* s : {&a, &b}) {
    auto data = s->DataClient();
    ASSERT_EQ(data->Post("/v1/topics/orders/events", R"({"events":[{"key":"k","value":1}]})").status,
              200);
    const auto view = ParseTopicView(data->Get("/v1/topics/orders").body);
    ASSERT_TRUE(view.ok());
    for (const auto& [id, p] : view->partitions) {
      if (p.end_offset == 0) continue;
      ASSERT_EQ(data->Post("/v1/topics/orders/commits",
                           R"({"group":"old","offsets":[{"partition":)" + std::to_string(id) +
                               R"(,"offset":1}]})")
                    .status,
                200);
    }
  }
  // a's map lists both sidecars as peers.
  auto admin = a.AdminClient();
  auto map = PartitionMap::FromJson(admin->Get("/v1/admin/map", WithAuth("Bearer s3cret")).body);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  auto strip = [](const std::string& url) { return url.substr(std::string("http://").size()); };
  const PartitionMap with_peers =
      map->WithPeer(PodName("a"), {strip(a.data_url()), strip(a.admin_url())})
          .WithPeer(PodName("b"), {strip(b.data_url()), strip(b.admin_url())})
          .WithEpoch(Epoch(map->epoch().value() + 1));
  const auto installed =
      admin->Send("POST", "/v1/admin/map", with_peers.ToJson(), WithAuth("Bearer s3cret"));
  ASSERT_EQ(installed.status, 200) << installed.Describe();

  TempDir dir("delete-group-all");
  const CliRun run = RunShoal(
      {"delete-group", "old", "--all", "--force", "--admin", strip(a.admin_url())}, dir, "s3cret");
  ASSERT_EQ(run.code, std::optional<int>(0)) << run.out;
  for (SidecarProcess* s : {&a, &b}) {
    const auto view = ParseTopicView(s->DataClient()->Get("/v1/topics/orders").body);
    ASSERT_TRUE(view.ok());
    for (const auto& [id, p] : view->partitions) EXPECT_TRUE(p.committed.empty()) << run.out;
  }
}

TEST(AdminAuthTest, GeneratedTokenIsWrittenPrivatelyAndWorks) {
  SidecarProcess sidecar(Options(""));
  ASSERT_TRUE(sidecar.Start().ok()) << sidecar.Describe();
  const std::string path = sidecar.data_dir() + "/admin-token";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path << "\n" << sidecar.Describe();
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "mode of " << path;
  const std::string token = ReadToken(path);
  ASSERT_GE(token.size(), 16u) << "a generated token should be long: \"" << token << "\"";

  auto admin = sidecar.AdminClient();
  const std::string map = "/v1/admin/map";
  ExpectUnauthorized(admin->Get(map), "no Authorization header");
  ExpectUnauthorized(admin->Get(map, WithAuth("Bearer ")), "Bearer with an empty token");
  ExpectUnauthorized(admin->Get(map, WithAuth("Bearer " + token.substr(0, token.size() - 1))),
                     "a prefix of the generated token");
  ExpectMap(admin->Get(map, WithAuth("Bearer " + token)), "orders", 4);

  // After a restart the file again holds a token that works (and is still private).
  auto code = sidecar.Terminate();
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0) << sidecar.Describe();
  ASSERT_TRUE(sidecar.Restart().ok()) << sidecar.Describe();
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "mode of " << path << " after a restart";
  const std::string again = ReadToken(path);
  ASSERT_GE(again.size(), 16u);
  admin = sidecar.AdminClient();
  ExpectMap(admin->Get(map, WithAuth("Bearer " + again)), "orders", 4);
  ExpectUnauthorized(admin->Get(map), "no Authorization header after a restart");
}

}  // namespace
}  // namespace shoal::testing
