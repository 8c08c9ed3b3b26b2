// `shoal wait-drained`: the preStop hook of a topic pod's sidecar (docs/kubernetes.md). Kubernetes
// runs it before it stops the pod's containers; it returns once the sidecar holds no active
// partition (the operator moved them away and the pod is being removed), or fails at --timeout
// (the pod goes anyway: its whole topic is being deleted, or the operator is not running).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "commands.h"
#include "shoal/client/admin_client.h"
#include "shoal/control/admin_partitions.h"

namespace shoal::cli {

void RegisterWaitDrained(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "wait-drained", "Wait until a sidecar holds no active partition (a pod's preStop hook)");
  struct Opts {
    std::string admin;  // empty: $POD_IP (or 127.0.0.1) and --admin-port
    uint16_t admin_port = 8081;
    std::string token_file;
    int64_t timeout_s = 55;
    int64_t interval_ms = 500;
    std::string tls_dir;  // ca.crt, tls.crt, tls.key: the pod's own certificate
    std::string topic;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--admin", o->admin,
                  "The sidecar's admin address (host:port or http://...); default: the pod's IP "
                  "from $POD_IP (a kubelet does not expand $(VAR) in hooks) and --admin-port");
  cmd->add_option("--admin-port", o->admin_port, "The sidecar's admin port");
  cmd->add_option("--token-file", o->token_file, "File holding the admin bearer token")
      ->required();
  cmd->add_option("--timeout", o->timeout_s, "Give up after this many seconds (exit 1)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400}));
  cmd->add_option("--interval-ms", o->interval_ms, "Poll interval")
      ->check(CLI::Range(int64_t{10}, int64_t{60000}));
  cmd->add_option("--tls-dir", o->tls_dir,
                  "Directory of the pod's certificate (ca.crt, tls.crt, tls.key), where the "
                  "topic's admin port is TLS only; needs --topic");
  cmd->add_option("--topic", o->topic, "The topic (its pods' certificate name), with --tls-dir");
  cmd->callback([o, &exit_code] {
    auto token = ReadTextFile(o->token_file);
    if (!token.ok()) {
      std::fprintf(stderr, "shoal wait-drained: %s\n", token.status().message().c_str());
      exit_code = 2;
      return;
    }
    std::string t = *token;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    std::string admin = o->admin;
    if (admin.empty()) {
      const char* ip = std::getenv("POD_IP");
      admin = std::string(ip && *ip ? ip : "127.0.0.1") + ":" + std::to_string(o->admin_port);
    }
    if (admin.rfind("http://", 0) == 0) admin = admin.substr(7);
    if (!o->tls_dir.empty() && o->topic.empty()) {
      std::fprintf(stderr, "shoal wait-drained: --tls-dir needs --topic\n");
      exit_code = 2;
      return;
    }
    TlsClientFiles tls;
    if (!o->tls_dir.empty()) {
      tls = {o->tls_dir + "/ca.crt", o->tls_dir + "/tls.crt", o->tls_dir + "/tls.key",
             PeerName(o->topic)};
    }
    client::AdminClient client(t, tls);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o->timeout_s);
    std::string last = "no answer yet";
    for (;;) {
      auto body = client.Get(admin, "/v1/admin/partitions", true);
      if (body.ok()) {
        auto report = control::ParseAdminPartitions(*body);
        if (report.ok()) {
          size_t active = 0;
          for (const auto& p : report->partitions) {
            active += p.state == PartitionState::kActive ? 1 : 0;
          }
          if (active == 0) {
            std::printf("shoal wait-drained: %s holds no active partition\n", admin.c_str());
            exit_code = 0;
            return;
          }
          last = std::to_string(active) + " active partitions still held";
        } else {
          last = report.status().message();
        }
      } else {
        last = body.status().message();
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(o->interval_ms));  // poll pace
    }
    std::fprintf(stderr, "shoal wait-drained: not drained after %lld s: %s\n",
                 static_cast<long long>(o->timeout_s), last.c_str());
    exit_code = 1;
  });
}

}  // namespace shoal::cli
