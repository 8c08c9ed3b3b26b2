// The admin plane's bearer token, against a real sidecar process: every request without the exact
// token is refused 401 with a JSON {"error","reason"} body; the exact token gets the map. Without
// --admin-token the sidecar generates one into <data-dir>/admin-token (mode 0600), which works.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <string>

#include "shoal/common/partition_map.h"
#include "support/http_test_client.h"
#include "support/sidecar_process.h"

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
