// TLS and authorization on real sidecar processes, with certificates made by the openssl command
// as the operator issues them (docs/security.md): the data port TLS only with the topic's CA,
// callers held to their grants, producer ids bound to their callers, peers calling each other
// (forwarding, reads and commits through a peer, replication, the admin plane) over TLS, and no
// caller taken for a peer.
#include "shoal/common/tls.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "shoal/common/partition_map.h"
#include "support/http_test_client.h"
#include "support/sidecar_cluster.h"
#include "support/sidecar_process.h"
#include "support/test_pki.h"
#include "support/wait_for.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;

// One sidecar of a one-partition topic "orders".
SidecarOptions Options(std::vector<std::string> extra = {}) {
  return SidecarOptions{.binary = SidecarBinaryUnderTest(SHOAL_SIDECAR_BIN),
                        .topic = "orders",
                        .partitions = 1,
                        .fsync = "never",
                        .data_dir = "",
                        .admin_token = "",
                        .log_level = "warn",
                        .extra_args = std::move(extra)};
}

uint16_t LocalPort() {
  auto ports = PickFreePorts(1);
  EXPECT_TRUE(ports.ok()) << ports.status().ToString();
  return ports.ok() ? (*ports)[0] : 0;
}

// TLS on the data port: with the topic's CA it is TLS only, and a client must show a certificate
// of that CA; the pod's own containers have a plain port on the pod's loopback; a certificate
// replaced on disk serves the next connections without a restart.
TEST(TlsTest, TheDataPortIsTlsOnlyWithACaAndItsCertificateRotatesWithoutARestart) {
  TestPki pki;
  pki.Issue("server", "sidecar-one");
  pki.Issue("client", "billing");
  const uint16_t local = LocalPort();
  SidecarProcess s(
      Options({"--tls-cert", pki.Path("server.pem"), "--tls-key", pki.Path("server.key"),
               "--tls-client-ca", pki.Path("ca.pem"), "--local-port", std::to_string(local)}));
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  const std::string https = "https://127.0.0.1:" + std::to_string(s.port());
  const std::string as_billing = "curl -sS --cacert " + pki.Path("ca.pem") + " --cert " +
                                 pki.Path("client.pem") + " --key " + pki.Path("client.key");
  auto [code, out] =
      Shell(as_billing + " -X POST " + https +
            "/v1/topics/orders/events -d '{\"events\":[{\"key\":\"a\",\"value\":1}]}'");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"results\""), std::string::npos) << out;
  // Without a client certificate: refused in the handshake.
  std::tie(code, out) = Shell("curl -sS --cacert " + pki.Path("ca.pem") + " " + https + "/healthz");
  EXPECT_NE(code, 0) << "a TLS client without a certificate was served: " << out;
  // Plain HTTP to the data port is refused, with the reason; the local port serves it.
  HttpResponse plain = s.DataClient()->Get("/v1/topics/orders/events?group=g&max=10");
  EXPECT_EQ(plain.status, 403) << plain.Describe();
  EXPECT_NE(plain.body.find("\"tls_required\""), std::string::npos) << plain.body;
  HttpResponse own = HttpTestClient("http://127.0.0.1:" + std::to_string(local))
                         .Get("/v1/topics/orders/events?group=g&max=10");
  EXPECT_EQ(own.status, 200) << own.Describe();
  EXPECT_NE(own.body.find("\"key\":\"a\""), std::string::npos) << own.body;
  // Rotation: a new certificate on disk serves the next connections.
  std::tie(code, out) = Shell(as_billing + " -v " + https + "/healthz");
  EXPECT_NE(out.find("CN=sidecar-one"), std::string::npos) << out;
  pki.Issue("server", "sidecar-two");
  EXPECT_TRUE(WaitFor(
      [&] {
        const auto [c, o] = Shell(as_billing + " -v " + https + "/healthz");
        return c == 0 && o.find("CN=sidecar-two") != std::string::npos;
      },
      10s))
      << "the new certificate was not served";
  EXPECT_TRUE(s.Running()) << s.Describe();
}

// With an access file, callers come over TLS with a certificate and are held to their grants: no
// credential, no produce; a grant for one group is no grant for another; and a caller's producer
// ids are its own, so that one cannot make another's events read as duplicates.
TEST(TlsTest, WithAnAccessFileCallersAreHeldToTheirGrantsAndProducerIdsAreTheirOwn) {
  TestPki pki;
  pki.Issue("server", "sidecar-one");
  for (const char* who : {"billing", "orders-api", "mallory"}) pki.Issue(who, who);
  {
    std::ofstream access(pki.Path("access.json"));
    access << R"({"principals":{"billing":{"groups":["billing","audit-*"]},)"
           << R"("orders-api":{"produce":true},"mallory":{"produce":true}}})";
  }
  const uint16_t local = LocalPort();
  SidecarProcess s(
      Options({"--tls-cert", pki.Path("server.pem"), "--tls-key", pki.Path("server.key"),
               "--tls-client-ca", pki.Path("ca.pem"), "--access-file", pki.Path("access.json"),
               "--local-port", std::to_string(local)}));
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  const std::string https = "https://127.0.0.1:" + std::to_string(s.port()) + "/v1/topics/orders";
  auto as = [&](const std::string& who) {
    return "curl -sS --cacert " + pki.Path("ca.pem") + " --cert " + pki.Path(who + ".pem") +
           " --key " + pki.Path(who + ".key") + " ";
  };
  auto post = [&](const std::string& who, const std::string& path, const std::string& body) {
    return Shell(as(who) + "-X POST " + https + path + " -d '" + body + "'").second;
  };
  // No credential: plain HTTP is refused, and TLS without a certificate.
  auto [code, out] =
      Shell("curl -sS -X POST http://127.0.0.1:" + std::to_string(s.port()) +
            "/v1/topics/orders/events -d " + "'{\"events\":[{\"key\":\"a\",\"value\":1}]}'");
  EXPECT_NE(out.find("\"tls_required\""), std::string::npos) << out;
  std::tie(code, out) = Shell("curl -sS --cacert " + pki.Path("ca.pem") + " " + https);
  EXPECT_NE(code, 0) << out;
  // Grants.
  const std::string event = R"({"events":[{"key":"a","value":1}]})";
  EXPECT_NE(post("billing", "/events", event).find("\"permission_denied\""), std::string::npos);
  EXPECT_NE(
      Shell(as("billing") + "'" + https + "/events?group=other'").second.find("permission_denied"),
      std::string::npos);
  EXPECT_NE(
      post("billing", "/commits", R"({"group":"other","offsets":[{"partition":0,"offset":0}]})")
          .find("permission_denied"),
      std::string::npos);
  EXPECT_NE(post("orders-api", "/events", event).find("\"results\""), std::string::npos);
  // mallory sends seq 1 under orders-api's producer id first; orders-api's own seq 1 is stored.
  const std::string spoof =
      R"({"events":[{"key":"a","value":"evil","producer":"orders-svc","seq":1}]})";
  const std::string real =
      R"({"events":[{"key":"a","value":"real","producer":"orders-svc","seq":1}]})";
  EXPECT_NE(post("mallory", "/events", spoof).find("\"duplicate\":false"), std::string::npos);
  out = post("orders-api", "/events", real);
  EXPECT_NE(out.find("\"duplicate\":false"), std::string::npos)
      << "another caller made orders-api's event read as a duplicate: " << out;
  // billing reads its own group (and a prefix grant): every event, each under its caller's id.
  out = Shell(as("billing") + "'" + https + "/events?group=billing&max=10'").second;
  EXPECT_NE(out.find("\"producer\":\"orders-api/orders-svc\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"producer\":\"mallory/orders-svc\""), std::string::npos) << out;
  EXPECT_NE(
      Shell(as("billing") + "'" + https + "/events?group=audit-1&max=1'").second.find("\"events\""),
      std::string::npos);
  // The pod's own containers (plain, on the local port) may do anything.
  HttpResponse own = HttpTestClient("http://127.0.0.1:" + std::to_string(local))
                         .Get("/v1/topics/orders/events?group=app&max=10");
  EXPECT_EQ(own.status, 200) << own.Describe();
}

// Two pods of a replicated topic whose ports are TLS only: every call between them (the map's
// install from the test's operator certificate, forwarding, replication with quorum acks, reads
// and commits through a peer) goes over TLS with the pods' certificate, and no caller passes
// for a peer: a plain request is refused, a granted caller's X-Shoal-Forwarded is not taken,
// and the admin plane refuses it with the token.
TEST(TlsTest, PeersCallEachOtherOverTlsAndNoCallerPassesForAPeer) {
  TestPki pki;
  pki.IssuePeer("pod", "orders");
  pki.IssueClient("shoal-operator.orders");
  for (const char* who : {"orders-api", "billing"}) pki.IssueClient(who);
  {
    std::ofstream access(pki.Path("access.json"));
    access << R"({"principals":{"orders-api":{"produce":true},"billing":{"groups":["billing"]}}})";
  }
  SidecarClusterOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.pods = 2;
  o.partitions_per_pod = 2;
  o.replication = 2;
  o.extra_args = {"--tls-cert",      pki.Path("pod.pem"),
                  "--tls-key",       pki.Path("pod.key"),
                  "--tls-client-ca", pki.Path("ca.pem"),
                  "--access-file",   pki.Path("access.json"),
                  "--acks",          "quorum"};
  o.admin_tls = {pki.Path("ca.pem"), pki.Path("shoal-operator.orders.pem"),
                 pki.Path("shoal-operator.orders.key"), PeerName("orders")};
  SidecarCluster c(o);
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  // A pod's certificate names the topic, not the pod's address: curl connects to the address
  // and checks the name (as docs/security.md shows).
  auto https = [&](size_t pod, const std::string& path, uint16_t port = 0) {
    if (port == 0) port = c.pod(pod).port();
    const std::string p = std::to_string(port);
    return "--connect-to shoal-peer.orders:" + p + ":127.0.0.1:" + p +
           " 'https://shoal-peer.orders:" + p + path + "'";
  };
  // orders-api produces 40 keys through pod 0: about half are pod 1's, forwarded over TLS, and
  // each is held by both pods before it is acknowledged (replication over TLS).
  std::string events;
  for (int k = 0; k < 40; ++k) {
    events += std::string(k ? "," : "") + R"({"key":"k)" + std::to_string(k) +
              R"(","value":1,"producer":"api","seq":)" + std::to_string(k + 1) + "}";
  }
  auto [code, out] =
      Shell(pki.Curl("orders-api") + "-X POST " + https(0, "/v1/topics/orders/events") + " -d '" +
            R"({"events":[)" + events + "]}'");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("\"error\""), std::string::npos) << out;
  int stored = 0;
  for (size_t at = out.find("\"duplicate\":false"); at != std::string::npos;
       at = out.find("\"duplicate\":false", at + 1)) {
    ++stored;
  }
  EXPECT_EQ(stored, 40) << out << c.Describe();
  // billing reads its group from each pod (each serves the partitions it leads): every event,
  // each producer id bound once to the caller that sent it (not to the pod that forwarded it).
  std::string seen;
  EXPECT_TRUE(WaitFor(
      [&] {
        for (size_t pod : {0, 1}) {
          const auto [rc, page] =
              Shell(pki.Curl("billing") +
                    https(pod, "/v1/topics/orders/events?group=billing&max=100&wait_ms=200"));
          if (rc != 0) return false;
          seen += page;
        }
        size_t n = 0;
        for (size_t at = seen.find("\"producer\":\"orders-api/api\""); at != std::string::npos;
             at = seen.find("\"producer\":\"orders-api/api\"", at + 1)) {
          ++n;
        }
        return n >= 40;
      },
      20s))
      << seen << c.Describe();
  EXPECT_EQ(seen.find("shoal-peer"), std::string::npos) << seen;
  // Plain HTTP to either port of a pod: refused.
  for (uint16_t port : {c.pod(1).port(), c.pod(1).admin_port()}) {
    std::tie(code, out) =
        Shell("curl -sS http://127.0.0.1:" + std::to_string(port) + "/v1/admin/map");
    EXPECT_NE(out.find("\"tls_required\""), std::string::npos) << port << ": " << out;
  }
  // A granted caller's X-Shoal-Forwarded is not taken: its events are forwarded to their owner
  // as anyone's (a forwarded event of a key not owned here would be refused), and bound to it.
  std::tie(code, out) =
      Shell(pki.Curl("orders-api") + "-H 'X-Shoal-Forwarded: 1' -X POST " +
            https(0, "/v1/topics/orders/events") + " -d '" + R"({"events":[)" + events + "]}'");
  EXPECT_EQ(out.find("\"error\""), std::string::npos) << out;
  EXPECT_EQ(out.find("\"duplicate\":false"), std::string::npos)
      << "a retry was stored again: " << out;
  // The admin plane, with the token, to a granted caller: refused for its name. The test's
  // operator certificate is taken.
  std::tie(code, out) = Shell(pki.Curl("billing") + "-H 'Authorization: Bearer " + o.token + "' " +
                              https(0, "/v1/admin/map", c.pod(0).admin_port()));
  EXPECT_NE(out.find("\"permission_denied\""), std::string::npos) << out;
  auto map = c.admin().GetMap(c.admin_address(0));
  EXPECT_TRUE(map.ok()) << map.status().ToString();
}

}  // namespace
}  // namespace shoal::testing
