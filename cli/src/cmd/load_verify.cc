// shoal load, shoal consume, shoal verify: keyed load with per-key sequence numbers, a recording
// consumer, and the verifier over what they wrote (JSON lines, see verifier.h). `shoal consume`
// also runs as a pod's long-running consumer (the local platform starts it): --append, --idle-exit
// 0, --max-seconds 0, --cpu-us-per-event, --service-us-per-event/--service-us-per-batch with
// --concurrency (an I/O-bound consumer), and SIGTERM finishes the batch, commits and exits 0.
#include <signal.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <thread>

#include "cmd/commands.h"
#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"

namespace shoal::cli {

namespace {

// --tls-dir DIR (ca.crt, tls.crt, tls.key: a principal's Secret as kubectl writes it out) and
// --tls-server-name: TLS to a topic whose pods require it.
struct TlsFlags {
  std::string dir;
  std::string server_name;  // empty: the topic's peer name
  void Register(CLI::App* cmd) {
    cmd->add_option("--tls-dir", dir,
                    "Directory of this caller's certificate (ca.crt, tls.crt, tls.key, as in the "
                    "Secret <topic>-client-<name>), for a topic whose pods require TLS "
                    "(https:// URLs)");
    cmd->add_option("--tls-server-name", server_name,
                    "The name the pods' certificate carries (default: shoal-peer.<topic>)");
  }
  TlsClientFiles Files(const std::string& topic) const {
    if (dir.empty()) return {};
    return {dir + "/ca.crt", dir + "/tls.crt", dir + "/tls.key",
            server_name.empty() ? PeerName(topic) : server_name};
  }
};

struct LoadCmd {
  harness::LoadOptions load;
  TlsFlags tls;
  std::string targets;
  std::string acked_out;
  bool json = false;
};

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

int RunLoad(LoadCmd c) {
  c.load.targets = SplitComma(c.targets);
  c.load.tls = c.tls.Files(c.load.topic);
  if (c.load.targets.empty()) {
    std::cerr << "shoal load: --targets needs at least one sidecar URL (http://host:port)\n";
    return 2;
  }
  if (c.load.duration_s <= 0) {
    std::cerr << "shoal load: --duration must be positive\n";
    return 2;
  }
  std::ofstream out;
  if (!c.acked_out.empty()) {
    out.open(c.acked_out);
    if (!out) {
      std::cerr << "shoal load: cannot write " << c.acked_out << "\n";
      return 1;
    }
  }
  harness::LoadGenerator gen(c.load);
  const auto start = std::chrono::steady_clock::now();
  gen.Start();
  uint64_t last = 0;
  for (int s = 1; std::chrono::steady_clock::now() - start <
                  std::chrono::duration<double>(c.load.duration_s + 0.5);
       ++s) {
    std::this_thread::sleep_until(start + std::chrono::seconds(s));  // one progress line a second
    const uint64_t now = gen.acked();
    if (!c.json) {
      std::cerr << "load: t=" << s << "s acked " << now << " (" << (now - last) << "/s, profile x"
                << harness::ProfileFactor(c.load, s) << "), retried batches " << gen.retries()
                << "\n";
    }
    last = now;
  }
  gen.Stop();
  const auto acked = gen.TakeAcked();
  for (const auto& e : acked) out << harness::AckedLine(e) << "\n";
  if (c.json) {
    std::cout << "{\"acked\":" << acked.size() << ",\"retried_batches\":" << gen.retries()
              << ",\"routed_batches\":" << gen.routed() << ",\"duration_s\":" << c.load.duration_s
              << "}\n";
  } else {
    std::cout << "acked " << acked.size() << " events, " << gen.retries() << " retried batches";
    if (c.load.route_by_map) std::cout << ", " << gen.routed() << " sent straight to their pod";
    std::cout << "\n";
  }
  return 0;
}

struct ConsumeCmd {
  harness::ConsumerOptions consumer;
  TlsFlags tls;
  std::string out;
  double idle_exit_s = 5;
  double max_s = 3600;
};

// Set by SIGTERM / SIGINT: `shoal consume` as a pod's consumer finishes its batch, commits and
// exits 0 when it is stopped.
std::atomic<int> g_stop_signal{0};

void OnStopSignal(int sig) { g_stop_signal.store(sig); }

int RunConsume(ConsumeCmd c) {
  c.consumer.tls = c.tls.Files(c.consumer.topic);
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);

  // Every batch goes to the file before its offsets are committed (ConsumerOptions::stream_to):
  // the file holds what the group committed, also when this process is killed.
  harness::ConsumerOptions options = c.consumer;
  options.stream_to = c.out;
  harness::GroupConsumer consumer(options);
  if (auto st = consumer.Start(); !st.ok()) {
    std::cerr << "shoal consume: " << st.message() << "\n";
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  auto last_change = start;
  uint64_t last = 0;
  while (g_stop_signal.load() == 0 && consumer.status().ok()) {
    const auto now = std::chrono::steady_clock::now();
    if (c.max_s > 0 && now - start >= std::chrono::duration<double>(c.max_s)) break;
    const uint64_t n = consumer.seen();
    if (n != last) {
      last = n;
      last_change = now;
    } else if (c.idle_exit_s > 0 &&
               now - last_change > std::chrono::duration<double>(c.idle_exit_s)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // progress and signal sampling
  }
  consumer.Stop();
  if (auto st = consumer.status(); !st.ok()) {
    std::cerr << "shoal consume: " << st.message() << "\n";
    return 1;
  }
  if (!consumer.committed_all()) {
    std::cerr << "shoal consume: the last batch is recorded but its commit failed (it will be "
                 "handed out again)\n";
  }
  std::cerr << "consume: recorded " << consumer.seen() << " events to " << c.out
            << (g_stop_signal.load() ? " (stopped by a signal)" : "") << "\n";
  return 0;
}

struct VerifyCmd {
  std::string acked;
  std::vector<std::string> seen;
  bool json = false;
};

int RunVerify(const VerifyCmd& c) {
  auto acked = harness::ReadAckedFile(c.acked);
  if (!acked.ok()) {
    std::cerr << "shoal verify: " << acked.status().message() << "\n";
    return 2;
  }
  std::vector<harness::SeenEvent> seen;
  for (const auto& f : c.seen) {
    auto s = harness::ReadSeenFile(f);
    if (!s.ok()) {
      std::cerr << "shoal verify: " << s.status().message() << "\n";
      return 2;
    }
    seen.insert(seen.end(), s->begin(), s->end());
  }
  auto report = harness::Verify(*acked, std::move(seen));
  std::cout << (c.json ? report.ToJson() : report.ToText()) << "\n";
  return (report.lost || report.reordered) ? 1 : 0;
}

}  // namespace

void RegisterLoadVerify(CLI::App& app, int& exit_code) {
  auto l = std::make_shared<LoadCmd>();
  l->load.duration_s = 10;
  auto* load = app.add_subcommand("load", "Keyed load with idempotent producers and per-key order");
  load->add_option("--targets", l->targets, "Sidecar URLs, comma separated")->required();
  load->add_option("--topic", l->load.topic, "Topic");
  load->add_option("--producers", l->load.producers, "Producer threads")
      ->check(CLI::Range(1, 1024));
  load->add_option("--keys", l->load.keys, "Distinct keys")->check(CLI::Range(1, 100000000));
  load->add_option("--batch", l->load.batch, "Events per request")->check(CLI::Range(1, 100000));
  load->add_option("--rate", l->load.rate, "Events/s in total at 1x (0: maximum)");
  load->add_option("--profile", l->load.profile,
                   "steady | surge (10x from 30% to 50% of --duration) | ramp (1x to 10x from "
                   "30% to 50%, held to 70%) | sawtooth")
      ->check(CLI::IsMember({"steady", "surge", "ramp", "sawtooth"}));
  load->add_option("--duration", l->load.duration_s, "Seconds");
  load->add_option("--seed", l->load.seed, "Random seed");
  load->add_option("--producer-prefix", l->load.producer_prefix, "Producer id prefix");
  load->add_flag("--route", l->load.route_by_map,
                 "Send each batch straight to its keys' pod, by the map the first target shows "
                 "(a producer outside the pods; without it the targets forward)");
  load->add_option("--acked-out", l->acked_out, "Write acknowledged events here (JSON lines)");
  load->add_flag("--json", l->json, "Print one JSON object");
  l->tls.Register(load);
  load->callback([l, &exit_code] { exit_code = RunLoad(*l); });

  auto c = std::make_shared<ConsumeCmd>();
  auto* consume = app.add_subcommand("consume", "Consume as a group and record what was seen");
  consume->add_option("--target", c->consumer.target, "Sidecar URL")->required();
  consume->add_option("--topic", c->consumer.topic, "Topic");
  consume->add_option("--group", c->consumer.group, "Consumer group");
  consume->add_option("--out", c->out, "Write seen events here (JSON lines)")->required();
  consume->add_flag("--append", c->consumer.append,
                    "Append to --out (a pod's consumer across restarts) instead of truncating");
  consume->add_option("--idle-exit", c->idle_exit_s,
                      "Stop after this many idle seconds (0: never stop on idleness)");
  consume->add_option("--max-seconds", c->max_s,
                      "Stop after this many seconds in any case (0: no limit)");
  consume
      ->add_option("--cpu-us-per-event", c->consumer.cpu_us_per_event,
                   "Busy CPU work per event in microseconds (a CPU-bound consumer)")
      ->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  consume
      ->add_option("--service-us-per-event", c->consumer.service_us_per_event,
                   "Microseconds each event waits (an I/O-bound consumer: a database, a "
                   "downstream call), in --concurrency lanes by key")
      ->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  consume
      ->add_option("--service-us-per-batch", c->consumer.service_us_per_batch,
                   "Microseconds each batch waits once (a round trip per batch)")
      ->check(CLI::Range(int64_t{0}, int64_t{60'000'000}));
  consume
      ->add_option("--concurrency", c->consumer.concurrency,
                   "Lanes that wait at once (one key's events stay in one lane, in order)")
      ->check(CLI::Range(1, 1024));
  c->tls.Register(consume);
  consume->callback([c, &exit_code] { exit_code = RunConsume(*c); });

  auto v = std::make_shared<VerifyCmd>();
  auto* verify = app.add_subcommand(
      "verify", "Count lost, reordered and duplicated events; non-zero exit on loss or reorder");
  verify->add_option("--acked", v->acked, "Acked events from shoal load --acked-out")->required();
  verify->add_option("--seen", v->seen, "Seen events from shoal consume --out (repeatable)")
      ->required();
  verify->add_flag("--json", v->json, "Print one JSON object");
  verify->callback([v, &exit_code] { exit_code = RunVerify(*v); });
}

}  // namespace shoal::cli
