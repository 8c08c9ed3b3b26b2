// shoal-operator: reconciles PartitionedTopics into StatefulSets, Services and Secrets and runs
// each topic's control loop on the Kubernetes platform, as the leader of its replicas
// (docs/kubernetes.md). One HTTP port serves /metrics, /healthz and /readyz.
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/http_listener.h>
#include <pplx/threadpool.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <sstream>
#include <thread>

#include "shoal/common/clock.h"
#include "shoal/common/logging.h"
#include "shoal/common/version.h"
#include "shoal/console/console_server.h"
#include "shoal/control/get_only_port.h"
#include "shoal/kubeapi/kube_client.h"
#include "shoal/kubeapi/leader_election.h"
#include "shoal/reconciler/topic_operator.h"

namespace {

using namespace shoal;
namespace http = web::http;

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shoal-operator: elastic PartitionedTopics on Kubernetes"};
  app.set_version_flag("--version", "shoal-operator " + shoal::Version());
  std::string kubeconfig, context, namespaces, log_level = "info";
  bool leader_elect = true;
  std::string lease_ns, lease_name = "shoal-operator", identity;
  int64_t lease_ms = 15'000, renew_ms = 10'000, retry_ms = 2'000;
  std::string bind = "0.0.0.0";
  uint16_t http_port = 8080;
  reconciler::TopicOperatorOptions opts;
  int64_t interval_ms = 1000, resync_ms = 10'000, watch_timeout_s = 300;
  double kube_qps = 20;
  int kube_burst = 100;
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)");
  app.add_option("--context", context, "kubeconfig context (default: current-context)");
  app.add_option("--namespaces", namespaces,
                 "Comma-separated namespaces to watch (default: all)")
      ->envname("WATCH_NAMESPACES");
  app.add_option("--leader-elect", leader_elect, "Elect one leader among replicas by a Lease")
      ->default_val(true);
  app.add_option("--lease-namespace", lease_ns,
                 "Namespace of the Lease (default: the operator's own)")
      ->envname("POD_NAMESPACE");
  app.add_option("--lease-name", lease_name, "Name of the Lease");
  app.add_option("--identity", identity, "This replica's identity (default: hostname_uuid)");
  app.add_option("--lease-duration-ms", lease_ms, "Lease duration");
  app.add_option("--renew-deadline-ms", renew_ms, "Stop acting after failing to renew this long");
  app.add_option("--retry-period-ms", retry_ms, "Lease acquire and renew period");
  app.add_option("--bind", bind, "Address of the HTTP port");
  app.add_option("--http-port", http_port, "Port of /metrics, /healthz and /readyz");
  uint16_t console_port = 0;
  app.add_option("--console-port", console_port,
                 "Port of the topics' live consoles, on --bind (docs/console.md; 0: none)");
  app.add_option("--max-partitions", opts.max_partitions,
                 "The most partitions a topic may ask for (spec.partitions.max)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--interval-ms", interval_ms, "Control loop interval")->check(CLI::Range(10, 600'000));
  app.add_option("--resync-ms", resync_ms, "Reconcile every topic at least this often")
      ->check(CLI::Range(100, 3'600'000));
  app.add_option("--watch-timeout-s", watch_timeout_s, "Watch requests end after this long")
      ->check(CLI::Range(1, 3600));
  app.add_option("--data-volume-size", opts.manifests.data_volume_size,
                 "Size of each sidecar's volume claim");
  app.add_option("--storage-class", opts.manifests.storage_class,
                 "StorageClass of the volume claims (default: the cluster's)");
  app.add_option("--sidecar-log-level", opts.manifests.log_level, "The sidecars' --log-level");
  app.add_option("--tls-default", opts.manifests.tls_default,
                 "Topics without spec.security.tls speak TLS only between their pods and to "
                 "callers outside them, with a CA of their own (true or false)");
  app.add_option("--cert-dir", opts.cert_dir,
                 "Directory for the operator's own client certificate of each TLS topic "
                 "(default: under the system's temporary directory)");
  app.add_option("--sidecar-image", opts.manifests.sidecar_image,
                 "The sidecar's image where a topic's spec.sidecar.image is empty (the chart: "
                 "its own image)");
  std::string pull_secrets;
  app.add_option("--image-pull-secrets", pull_secrets,
                 "Comma-separated Secrets every topic pod pulls its images with");
  app.add_option("--kube-qps", kube_qps, "Requests per second to the API server (0: unlimited)")
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--kube-burst", kube_burst, "Requests allowed at once above --kube-qps")
      ->check(CLI::Range(1, 10000));
  app.add_option("--log-level", log_level, "trace | debug | info | warn | error | off");
  CLI11_PARSE(app, argc, argv);
  if (Status st = InitLogging(log_level); !st.ok()) {
    std::fprintf(stderr, "shoal-operator: %s\n", st.ToString().c_str());
    return 2;
  }
  auto log = Logger("operator");

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  crossplat::threadpool::initialize_with_threads(8);

  auto config = kubeapi::ResolveConfig(kubeconfig, context);
  if (!config.ok()) {
    std::fprintf(stderr, "shoal-operator: %s\n", config.status().message().c_str());
    return 2;
  }
  if (lease_ns.empty()) lease_ns = config->ns;
  // Requests end well within the renew deadline, so a leader cut off from the API server
  // notices in time (watches have their own, longer timeout).
  kubeapi::KubeClientOptions co;
  co.request_timeout = std::chrono::seconds(std::clamp<int64_t>(renew_ms / 2000, 1, 30));
  // The Lease has a client of its own, never rate-limited: a busy reconciler must not delay a
  // renewal past the deadline.
  auto lease_client = kubeapi::KubeClient::Create(*config, co);
  co.qps = kube_qps;
  co.burst = kube_burst;
  auto client = kubeapi::KubeClient::Create(*config, co);
  if (!lease_client.ok()) {
    std::fprintf(stderr, "shoal-operator: %s\n", lease_client.status().message().c_str());
    return 2;
  }
  if (!client.ok()) {
    std::fprintf(stderr, "shoal-operator: %s\n", client.status().message().c_str());
    return 2;
  }
  opts.namespaces = SplitList(namespaces);
  opts.manifests.image_pull_secrets = SplitList(pull_secrets);
  opts.loop.interval = std::chrono::milliseconds(interval_ms);
  opts.resync = std::chrono::milliseconds(resync_ms);
  opts.watch_timeout = std::chrono::seconds(watch_timeout_s);

  std::unique_ptr<kubeapi::LeaderElector> elector;
  if (leader_elect) {
    kubeapi::LeaderElectionOptions lo;
    lo.ns = lease_ns;
    lo.lease_name = lease_name;
    lo.identity = identity;
    lo.lease_duration = std::chrono::milliseconds(lease_ms);
    lo.renew_deadline = std::chrono::milliseconds(renew_ms);
    lo.retry_period = std::chrono::milliseconds(retry_ms);
    auto e = kubeapi::LeaderElector::Create(**lease_client, lo, SystemClock::Instance());
    if (!e.ok()) {
      std::fprintf(stderr, "shoal-operator: %s\n", e.status().message().c_str());
      return 2;
    }
    elector = std::move(e).value();
    opts.identity = elector->identity();
  } else if (!identity.empty()) {
    opts.identity = identity;
  }

  opts.console = console_port != 0;
  reconciler::TopicOperator op(**client, opts, SystemClock::Instance());
  // The topics' consoles, each behind its topic's admin token.
  std::unique_ptr<control::GetOnlyPort> consoles;
  if (console_port != 0) {
    consoles = std::make_unique<control::GetOnlyPort>(
        bind, console_port, [&op](const control::GetRequest& r) { return op.ServeConsole(r); },
        console::ConsoleHeaders());
    if (Status st = consoles->Open(); !st.ok()) {
      std::fprintf(stderr, "shoal-operator: %s\n", st.message().c_str());
      return 2;
    }
  }

  // /metrics, /healthz, /readyz.
  http::experimental::listener::http_listener listener("http://" + bind + ":" +
                                                        std::to_string(http_port));
  listener.support(http::methods::GET, [&](http::http_request req) {
    const std::string path = req.relative_uri().path();
    if (path == "/metrics") {
      req.reply(http::status_codes::OK, op.MetricsText(), "text/plain; version=0.0.4");
    } else if (path == "/healthz") {
      req.reply(http::status_codes::OK, "{\"status\":\"ok\"}", "application/json");
    } else if (path == "/readyz") {
      const bool ok = op.synced();
      req.reply(ok ? http::status_codes::OK : http::status_codes::ServiceUnavailable,
                ok ? "{\"status\":\"ok\"}" : "{\"status\":\"informers not synced\"}",
                "application/json");
    } else {
      req.reply(http::status_codes::NotFound,
                "{\"error\":\"not found\",\"reason\":\"this port serves /metrics, /healthz and "
                "/readyz\"}",
                "application/json");
    }
  });
  try {
    listener.open().wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shoal-operator: cannot listen on %s:%u: %s\n", bind.c_str(), http_port,
                 e.what());
    return 2;
  }
  log->info("msg=\"started\" http={}:{} namespaces=\"{}\" leader_elect={} identity={}", bind,
            http_port, namespaces.empty() ? "*" : namespaces, leader_elect, opts.identity);

  std::atomic<bool> stop{false};
  std::thread run([&] { op.Run(stop); });
  std::thread lead;
  if (elector) {
    lead = std::thread([&] {
      elector->Run(
          stop, [&] { op.StartLeading([&] { return elector->is_leader(); }); },
          [&] { op.StopLeading(); });
    });
  } else {
    op.StartLeading([] { return true; });
  }
  int sig = 0;
  sigwait(&signals, &sig);
  log->info("msg=\"shutting down\" signal={}", sig);
  if (consoles) consoles->Close();
  op.StopLeading();
  stop.store(true);
  if (lead.joinable()) lead.join();
  run.join();
  try {
    listener.close().wait();
  } catch (...) {
  }
  return 0;
}
