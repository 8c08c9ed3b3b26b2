// shoal-sidecar: the per-pod broker. One topic's partitions in one process; the data plane, the
// admin plane and the metrics on three ports. See docs/data-plane.md for the contract these flags
// keep.
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <fcntl.h>
#include <pplx/threadpool.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "broker/replica_fetch.h"
#include "broker/sidecar_probe.h"
#include "broker/topic.h"
#include "http/admin_frontend.h"
#include "http/data_frontend.h"
#include "http/metrics_frontend.h"
#include "http/peer_client.h"
#include "shoal/common/clock.h"
#include "shoal/common/files.h"
#include "shoal/common/logging.h"
#include "shoal/common/tls.h"
#include "shoal/common/version.h"
#include "storage/file_util.h"

namespace {

using namespace shoal;

int Fail(const std::string& what) {
  std::fprintf(stderr, "shoal-sidecar: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shoal-sidecar: one topic's partitions, served over HTTP"};
  app.set_version_flag("--version", "shoal-sidecar " + shoal::Version());
  broker::TopicOptions topic_opts;
  http::DataFrontendOptions data_opts;
  http::AdminFrontendOptions admin_opts;
  std::string fsync = "interval", log_level = "info", bind = "0.0.0.0", token_file, pod;
  uint16_t metrics_port = 9090;
  // Two per core measured best here (2 cores: 1.28M events/s at 4 threads, 0.98M at 8).
  size_t http_threads = std::max(4u, 2 * std::thread::hardware_concurrency());
  app.add_option("--topic", topic_opts.topic, "Topic this sidecar serves")->required();
  app.add_option("--partitions", topic_opts.partitions,
                 "Partitions of a new topic (an existing map in --data-dir wins)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--data-dir", topic_opts.data_dir, "Directory for logs, commits and the map")
      ->required();
  app.add_option("--port", data_opts.port, "Data plane port (produce, consume, commit)");
  app.add_option("--admin-port", admin_opts.port, "Admin plane port (bearer token)");
  app.add_option("--metrics-port", metrics_port, "Port of /metrics, /healthz, /readyz");
  app.add_option("--bind", bind, "Address to listen on");
  app.add_option("--fsync", fsync, "always | interval | never")
      ->check(CLI::IsMember({"always", "interval", "never"}));
  app.add_option("--fsync-interval-ms", topic_opts.fsync_interval_ms,
                 "Under --fsync interval: how often logs are synced")
      ->check(CLI::Range(1, 60000));
  app.add_option("--pod-name", pod, "Name of this sidecar's pod in the partition map")
      ->envname("POD_NAME");
  app.add_option("--admin-token", admin_opts.token, "Admin bearer token")
      ->envname("SHOAL_ADMIN_TOKEN");
  app.add_option("--admin-token-file", token_file, "File holding the admin bearer token");
  app.add_flag("--wait-for-map", topic_opts.wait_for_map,
               "With no map in --data-dir, hold no partitions until a map is installed on the "
               "admin plane (a sidecar joining a multi-sidecar topic)");
  app.add_option("--max-body-bytes", data_opts.max_body_bytes, "Largest request body accepted")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
  app.add_option("--body-timeout-ms", data_opts.body_timeout_ms,
                 "A request body must arrive whole within this long of its headers")
      ->check(CLI::Range(int64_t{100}, int64_t{600000}));
  http::ListenerLimits http_limits;
  app.add_option("--max-header-bytes", http_limits.max_header_bytes,
                 "Largest request line and headers accepted (431 beyond)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 24));
  int64_t header_timeout_ms = http_limits.header_timeout.count();
  app.add_option("--header-timeout-ms", header_timeout_ms,
                 "A request's headers must arrive within this long (a new connection: of its "
                 "opening; 408 otherwise)")
      ->check(CLI::Range(int64_t{100}, int64_t{600000}));
  int64_t idle_timeout_ms = http_limits.idle_timeout.count();
  app.add_option("--idle-timeout-ms", idle_timeout_ms,
                 "Close a connection that has sent no new request for this long")
      ->check(CLI::Range(int64_t{100}, int64_t{86400000}));
  int64_t write_timeout_ms = http_limits.write_timeout.count();
  app.add_option("--write-timeout-ms", write_timeout_ms,
                 "Close a connection whose client has not taken its answer within this long")
      ->check(CLI::Range(int64_t{100}, int64_t{600000}));
  app.add_option("--max-connections", http_limits.max_connections,
                 "Connections per port; past it the one waiting longest for a request is closed")
      ->check(CLI::Range(size_t{4}, size_t{1} << 20));
  size_t answer_budget_bytes = size_t{64} << 20;
  app.add_option("--answer-budget-bytes", answer_budget_bytes,
                 "Bytes of answers held for clients that have not taken them; consumes are "
                 "refused (503, retry) while it is spent")
      ->check(CLI::Range(size_t{1} << 20, size_t{1} << 40));
  app.add_option("--tls-cert", data_opts.tls.cert_file,
                 "PEM certificate (chain) of the data and admin ports: clients that start a TLS "
                 "handshake get TLS; read again when the file changes");
  app.add_option("--tls-key", data_opts.tls.key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", data_opts.tls.client_ca_file,
                 "PEM CA of the topic: with it, the data and admin ports are TLS only, every "
                 "caller shows a certificate it signed (its common name is the caller's name), "
                 "and peers are called over TLS with --tls-cert as the client certificate");
  app.add_option("--local-port", data_opts.local_port,
                 "Plain-HTTP data port for the pod's own containers, bound to --local-bind "
                 "(where --tls-client-ca makes the data port TLS only)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--local-bind", data_opts.local_host, "Address of --local-port");
  std::string access_file;
  app.add_option("--access-file", access_file,
                 "JSON of who may produce and which groups each may read and commit, by the "
                 "common name of its TLS client certificate (needs --tls-client-ca)");
  size_t request_budget_bytes = size_t{128} << 20;
  app.add_option("--request-budget-bytes", request_budget_bytes,
                 "Bytes of data-plane request bodies read and handled at once; a request past it "
                 "is refused (503, retry) before its body is read")
      ->check(CLI::Range(size_t{1} << 20, size_t{1} << 40));
  int64_t forward_timeout_ms = 2000;
  app.add_option("--forward-timeout-ms", forward_timeout_ms,
                 "How long a produce forwarded to a key's owner waits for it before the producer "
                 "gets a retryable 503")
      ->check(CLI::Range(int64_t{10}, int64_t{600000}));
  app.add_option("--max-groups", topic_opts.max_groups,
                 "Consumer groups the topic may have; a new one past it is refused")
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  // On by default, as Kafka's offsets.retention.minutes (7 days): a group nobody uses stops
  // holding back the retirement of sealed partitions and frees its place under --max-groups.
  topic_opts.group_expiry_ms = int64_t{7} * 24 * 3600 * 1000;
  app.add_option("--group-expiry-ms", topic_opts.group_expiry_ms,
                 "Delete a consumer group idle on every sidecar of the topic for this long "
                 "(0: never; default 7 days), so that a group gone for good stops holding back "
                 "the retirement of sealed partitions")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50));
  app.add_option("--max-key-bytes", data_opts.limits.max_key_bytes, "Largest key accepted")
      ->check(CLI::Range(1, 65535));
  app.add_option("--max-value-bytes", data_opts.limits.max_value_bytes,
                 "Largest value (as minified JSON) accepted")
      ->check(CLI::Range(size_t{1}, size_t{64} << 20));
  app.add_option("--segment-bytes", topic_opts.partition.segment_bytes,
                 "Roll a partition's log to a new segment file past this size")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 31));
  app.add_option("--retention-bytes", topic_opts.partition.retention_bytes,
                 "Per partition: remove old segments past this size (0: unlimited)");
  app.add_option("--retention-ms", topic_opts.partition.retention_ms,
                 "Per partition: remove segments older than this (0: unlimited)");
  uint64_t disk_reserve_bytes = uint64_t{64} << 20;
  app.add_option("--disk-reserve-bytes", disk_reserve_bytes,
                 "Space kept on the data volume for commits, group registrations, seals and "
                 "retirement: produce is refused (507) before it eats into it, so that a full "
                 "volume can drain and free space (0: no reserve)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 40));
  app.add_option("--range-reads", topic_opts.range_reads,
                 "Successors' consumers read their ranges of unconsumed ancestors at once, "
                 "wherever those are held (true); false: a successor waits for its whole "
                 "lineage, read by the pods that hold it (for comparison)");
  app.add_option("--redelivery-ms", topic_opts.partition.redelivery_ms,
                 "Hand events out again when their group has not committed them for this long")
      ->check(CLI::Range(int64_t{100}, int64_t{86400000}));
  std::string acks = "quorum";
  app.add_option("--acks", acks,
                 "For partitions the map replicates: acknowledge a produce once a quorum of the "
                 "copies holds it (quorum), or once the leader does (leader: faster, and a "
                 "failover can lose acknowledged events)")
      ->check(CLI::IsMember({"quorum", "leader"}));
  app.add_option("--replication-timeout-ms", topic_opts.replication_timeout_ms,
                 "With --acks quorum: how long a produce waits for a quorum of copies before "
                 "the producer gets a retryable 503")
      ->check(CLI::Range(int64_t{10}, int64_t{600000}));
  app.add_option("--fetch-wait-ms", topic_opts.fetch_wait_ms,
                 "How long a follower's fetch waits at its leader for new events")
      ->check(CLI::Range(int64_t{0}, int64_t{10000}));
  app.add_option("--fetch-max-bytes", topic_opts.fetch_max_bytes,
                 "About how many bytes of records a follower asks its leader for in one fetch "
                 "(at least one record)")
      ->check(CLI::Range(size_t{1}, broker::kMaxFetchBytes));
  app.add_option("--http-threads", http_threads, "Threads of the HTTP server pool")
      ->check(CLI::Range(1, 256));
  app.add_option("--log-level", log_level, "trace | debug | info | warn | error | off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  CLI11_PARSE(app, argc, argv);

  if (auto st = InitLogging(log_level); !st.ok()) return Fail(st.message());
  auto log = Logger("sidecar");
  auto policy = broker::ParseFsyncPolicy(fsync);
  if (!policy.ok()) return Fail(policy.status().message());
  topic_opts.partition.fsync = *policy;
  topic_opts.acks_quorum = acks == "quorum";
  topic_opts.pod = PodName(pod.empty() ? "local" : pod);
  data_opts.host = admin_opts.host = bind;
  if (admin_opts.token.empty() && !token_file.empty()) {
    std::string t;
    if (auto st = storage::ReadWholeFile(token_file, &t); !st.ok()) return Fail(st.message());
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    admin_opts.token = t;
  }

  // Signals go to the main thread's sigwait only: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  crossplat::threadpool::initialize_with_threads(http_threads);

  broker::SidecarProbe probe(topic_opts.topic);
  if (admin_opts.token.empty()) {
    // A generated token survives restarts, so peers and operators keep working.
    const std::string path = topic_opts.data_dir + "/admin-token";
    std::string t;
    if (storage::ReadWholeFile(path, &t).ok()) {
      while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
      admin_opts.token = t;
    }
  }
  if (admin_opts.token.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(topic_opts.data_dir, ec);
    auto token = RandomToken();
    if (!token.ok()) return Fail(token.status().message());
    admin_opts.token = *token;
    const std::string path = topic_opts.data_dir + "/admin-token";
    if (auto st = WriteFileDurable(path, admin_opts.token + "\n", 0600); !st.ok()) {
      return Fail(st.message());
    }
    log->info("msg=\"no admin token given; generated one\" path={}", path);
  }

  // The disk reserve is held before the topic opens, so that a restart on a full volume
  // writes what it must inside it.
  {
    std::error_code ec;
    std::filesystem::create_directories(topic_opts.data_dir, ec);
  }
  storage::DiskReserve reserve(topic_opts.data_dir, disk_reserve_bytes);
  if (auto st = reserve.Start(); !st.ok()) {
    log->warn("msg=\"could not hold the disk reserve; produce is refused until it is held\" "
              "reason=\"{}\"",
              st.message());
  }
  const std::unique_ptr<storage::FileSystem> reserved_fs =
      storage::WithReserve(storage::PosixFileSystem(), reserve);
  topic_opts.fs = reserved_fs.get();
  topic_opts.disk_reserve = &reserve;

  // With the topic's CA, peers are called over TLS with this pod's certificate, and must show
  // the topic's peer name.
  TlsClientFiles peer_tls;
  if (data_opts.tls.mutual()) {
    peer_tls = {data_opts.tls.client_ca_file, data_opts.tls.cert_file, data_opts.tls.key_file,
                PeerName(topic_opts.topic)};
  }
  data_opts.peer_name = PeerName(topic_opts.topic);
  admin_opts.tls = data_opts.tls;
  admin_opts.callers = {PeerName(topic_opts.topic), OperatorName(topic_opts.topic)};
  http::HttpPeerClient peers(admin_opts.token, std::chrono::milliseconds(forward_timeout_ms),
                             peer_tls);
  auto topic = broker::Topic::Open(topic_opts, SystemClock::Instance(), probe, &peers);
  if (!topic.ok()) return Fail(topic.status().ToString());
  broker::Topic& t = **topic;

  http_limits.header_timeout = std::chrono::milliseconds(header_timeout_ms);
  http_limits.idle_timeout = std::chrono::milliseconds(idle_timeout_ms);
  http_limits.write_timeout = std::chrono::milliseconds(write_timeout_ms);
  if (data_opts.tls.cert_file.empty() != data_opts.tls.key_file.empty() ||
      (data_opts.tls.cert_file.empty() && !data_opts.tls.client_ca_file.empty())) {
    return Fail("--tls-cert and --tls-key go together, and --tls-client-ca needs them");
  }
  std::optional<http::AccessPolicy> access;
  if (!access_file.empty()) {
    if (data_opts.tls.client_ca_file.empty()) {
      return Fail("--access-file needs --tls-client-ca: callers are named by their certificates");
    }
    auto loaded = http::AccessPolicy::Load(access_file);
    if (!loaded.ok()) return Fail(loaded.status().message());
    access = std::move(loaded).value();
    data_opts.access = &*access;
  }
  http::ByteBudget answer_budget(answer_budget_bytes);
  http::ByteBudget request_budget(request_budget_bytes);
  data_opts.http = admin_opts.http = http_limits;
  data_opts.answers = admin_opts.answers = &answer_budget;
  data_opts.requests = &request_budget;

  std::atomic<bool> ready{false};
  http::DataFrontend data(data_opts, t, probe, ready, &peers);
  http::AdminFrontend admin(admin_opts, t, probe);
  http::MetricsFrontend metrics(bind, metrics_port, {probe.registry(), t.StateCollectable()}, ready,
                                http_limits);
  t.SetDataListener([&data] { data.NotifyData(); });
  t.SetAppendListener([&admin] { admin.NotifyAppend(); });
  t.Start();
  for (Status st : {data.Open(), admin.Open(), metrics.Open()}) {
    if (!st.ok()) {
      // A port taken (or any port that cannot be opened): stop what runs, then say why and exit
      // 1 (returning with the topic's threads running would abort).
      data.Close();
      admin.Close();
      metrics.Close();
      (void)t.Close();
      return Fail(st.message());
    }
  }
  ready = true;
  log->info(
      "msg=\"sidecar ready\" topic={} pod={} port={} admin_port={} metrics_port={} local_port={} "
      "tls={} fsync={}",
      topic_opts.topic, topic_opts.pod.value(), data_opts.port, admin_opts.port, metrics_port,
      data.local_port(),
      data_opts.tls.mutual() ? "required" : (data_opts.tls.cert_file.empty() ? "off" : "optional"),
      fsync);

  int sig = 0;
  sigwait(&signals, &sig);
  log->info("msg=\"shutting down\" signal={}", sig);
  ready = false;
  data.Close();
  admin.Close();
  metrics.Close();
  if (auto st = t.Close(); !st.ok()) {
    log->error("msg=\"close failed\" reason=\"{}\"", st.message());
    return 1;
  }
  log->info("msg=\"stopped cleanly\"");
  return 0;
}
