// shoal up FILE: a whole elastic topic on this machine: the control loop (in this process) on the
// local platform (sidecar and consumer processes on loopback addresses), a load profile (flash
// sale by default), a live view, and at the end a report directory (summary, chart, timeline,
// the verifier's numbers). --compare runs the same profile three ways (static at the baseline
// size, static at the peak size, dynamic) and adds the trade-off table. --no-load leaves the
// topic running for the user's own producers and consumers until Ctrl-C. Run again, it resumes
// the topic from its state directory. --chaos (a topic with copies) kills the sidecar of a leader
// during the surge and shows the failover in the report; no failover is a failed run.
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "cmd/commands.h"
#include "cmd/up_options.h"
#include "shoal/client/admin_client.h"
#include "shoal/common/clock.h"
#include "shoal/common/logging.h"
#include "shoal/common/topic_spec.h"
#include "shoal/console/console.h"
#include "shoal/console/console_server.h"
#include "shoal/control/control_frontend.h"
#include "shoal/control/control_loop.h"
#include "shoal/control/local_platform.h"
#include "shoal/control/metrics_observer.h"
#include "shoal/control/process.h"
#include "shoal/harness/run_report.h"
#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"

namespace shoal::cli {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

std::string Timestamp() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::gmtime(&t));
  return buf;
}

// The flash sale's 10x phase, in seconds from the start (LoadOptions' surge fractions).
double SurgeFrom(const UpOptions& o) { return harness::LoadOptions{}.surge_from * o.duration_s; }
double SurgeUntil(const UpOptions& o) { return harness::LoadOptions{}.surge_until * o.duration_s; }

// When --chaos kills, in seconds from the start: a third and two thirds into the flash sale's
// surge (its split and its pods are in place by then), or into the run without a surge; a kill
// that cannot be made then (no other pod leads a partition with copies) is tried each second
// until the surge (the run) ends.
std::vector<double> ChaosKillTimes(const UpOptions& o) {
  const bool surge = o.profile == "flash-sale";
  const double from = surge ? SurgeFrom(o) : 0;
  const double until = surge ? SurgeUntil(o) : o.duration_s;
  std::vector<double> at;
  for (int k = 1; k <= o.chaos_kills; ++k) at.push_back(from + (until - from) * k / 3);
  return at;
}
double ChaosLastChance(const UpOptions& o) {
  return o.profile == "flash-sale" ? SurgeUntil(o) : o.duration_s;
}

// The announced flash sale as a schedule of the topic (spec.scaling.schedules): from `start`
// for the sale's length, the partitions its 10x rate needs at the target (less the tolerance) and
// the pods its consumers need at their CPU target (each pod waits for `concurrency` events of
// consumer_service_us at once), within the topic's caps, in place 5 s before it starts.
ScheduleSpec SaleSchedule(const UpOptions& o, const TopicSpec& spec, WallTime start) {
  const double rate = 10 * o.rate;
  ScheduleSpec s;
  s.name = "flash-sale";
  s.start = FormatWallTime(start);
  s.duration_seconds =
      static_cast<uint32_t>(std::max(1.0, std::ceil(SurgeUntil(o) - SurgeFrom(o))));
  s.ready_seconds = 5;
  // At the target less the tolerance, so that the sale's own noise splits nothing.
  s.min_partitions = std::min<uint32_t>(
      spec.partitions.max,
      static_cast<uint32_t>(std::ceil(
          rate / (spec.scaling.events_per_second_per_partition * (1 - spec.scale_up.tolerance)))));
  // A consumer's lanes are never evenly loaded (keys fall where they fall, and a batch takes as
  // long as its busiest lane): measured here, a pod of 4 lanes at 4 ms takes about 600 of its
  // nominal 1,000 events/s, so the sale is sized at half the nominal rate.
  const double per_pod =
      o.consumer_service_us > 0 ? 0.5 * o.consumer_concurrency * 1e6 / o.consumer_service_us : 0;
  uint32_t pods = (s.min_partitions + spec.scaling.partitions_per_replica - 1) /
                  spec.scaling.partitions_per_replica;
  if (per_pod > 0) pods = std::max(pods, static_cast<uint32_t>(std::ceil(rate / per_pod)));
  s.min_replicas = std::min(spec.replicas.max, pods);
  // As many partitions on each pod, so that each carries the same share of the sale.
  if (s.min_replicas > 0) {
    const uint32_t per = (s.min_partitions + s.min_replicas - 1) / s.min_replicas;
    s.min_partitions = std::min(spec.partitions.max, per * s.min_replicas);
  }
  return s;
}

int TerminalWidth() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
  return 100;
}

std::string Fit(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width > 3 ? width - 3 : 0) + "...";
}

// Counts the lines of the consumers' seen files in a directory, reading only what was appended
// since the last call (the view asks every second; the files grow to millions of lines).
class SeenCounter {
 public:
  explicit SeenCounter(std::string dir) : dir_(std::move(dir)) {}

  uint64_t Count() {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir_, ec)) {
      File& file = files_[f.path().string()];
      std::ifstream in(f.path(), std::ios::binary);
      in.seekg(static_cast<std::streamoff>(file.complete));
      char buf[1 << 16];
      uint64_t read = 0;
      while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        const auto n = static_cast<size_t>(in.gcount());
        for (size_t i = 0; i < n; ++i) {
          if (buf[i] != '\n') continue;
          // A line counts once complete; an empty line is not an event.
          if (file.complete + read + i > file.line_start) ++file.lines;
          file.line_start = file.complete + read + i + 1;
        }
        read += n;
      }
      file.complete = file.line_start;
    }
    uint64_t n = 0;
    for (const auto& [path, file] : files_) n += file.lines;
    return n;
  }

 private:
  struct File {
    uint64_t complete = 0;    // bytes up to the end of the last complete line
    uint64_t line_start = 0;  // where the next line starts
    uint64_t lines = 0;
  };
  std::string dir_;
  std::map<std::string, File> files_;
};

// One run of the topic: pods, loop, load, live view, verification. Fills `out`.
class Run {
 public:
  // `min_sampled_s`: keep sampling at least this long, so that compared runs cover the same
  // window (the dynamic run samples through its catch-up and shrink-back).
  Run(const UpOptions& o, TopicSpec spec, std::string name, std::string state_dir,
      double min_sampled_s = 0)
      : o_(o),
        spec_(std::move(spec)),
        name_(std::move(name)),
        state_dir_(std::move(state_dir)),
        min_sampled_s_(min_sampled_s) {}

  Status Execute(harness::RunSummary* out) {
    if (o_.fresh) {
      std::error_code ec;
      std::filesystem::remove_all(state_dir_, ec);
    }
    control::LocalPlatformOptions po = PlatformOptionsFor(spec_, state_dir_);
    po.ip_prefix = o_.ip_prefix;
    po.cpu_us_per_event = o_.consumer_cpu_us;
    po.cpu_request_cores = o_.consumer_cpu_request;
    po.service_us_per_event = o_.consumer_service_us;
    po.concurrency = o_.consumer_concurrency;
    po.log_level = "warn";
    po.sidecar_args.push_back("--redelivery-ms=5000");
    auto platform = control::LocalPlatform::Open(po);
    if (!platform.ok()) return platform.status();
    auto& clock = SystemClock::Instance();
    control::MetricsObserver observer(clock, (*platform)->AdminToken());
    client::AdminClient admin((*platform)->AdminToken());
    control::ControlLoop loop(spec_, **platform, observer, admin, clock, {});
    SHOAL_RETURN_IF_ERROR(loop.Start());
    std::unique_ptr<control::ControlFrontend> frontend;
    if (o_.control_port) {
      frontend = std::make_unique<control::ControlFrontend>("127.0.0.1", o_.control_port, loop);
      if (Status st = frontend->Open(); !st.ok()) {
        std::cerr << "shoal up: " << st.message() << " (continuing without /status)\n";
        frontend.reset();
      }
    }
    // The live console (docs/console.md): the ring, lineage, groups, decisions and events.
    console::ConsoleOptions co;
    co.topic = spec_.name;
    co.seeds = [&loop] {
      std::vector<std::string> admins;
      const PartitionMap map = loop.map();
      for (const auto& [pod, peer] : map.peers()) admins.push_back(peer.admin);
      return admins;
    };
    co.status = [&loop] { return loop.StatusJson(); };
    console::Console console(co, admin, clock);
    std::unique_ptr<console::ConsoleServer> console_server;
    if (o_.console_port) {
      console_server =
          std::make_unique<console::ConsoleServer>("127.0.0.1", o_.console_port, console);
      if (Status st = console_server->Open(); !st.ok()) {
        std::cerr << "shoal up: " << st.message() << " (continuing without the console)\n";
        console_server.reset();
      } else {
        console.Start();
        std::printf("shoal up: console at %s\n", console_server->Address().c_str());
        std::fflush(stdout);
      }
    }
    std::atomic<bool> stop_loop{false};
    std::thread loop_thread([&] { loop.Run(stop_loop); });
    auto finish = [&](Status st) {
      stop_loop.store(true);
      loop_thread.join();
      if (console_server) console_server->Close();
      console.Stop();
      if (frontend) frontend->Close();
      // Consumers first, so they commit and flush what they recorded; data stays for a rerun.
      Status down = (*platform)->Shutdown();
      return st.ok() ? down : st;
    };

    // The topic exists once the loop installed its first map.
    const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (loop.map().epoch().value() == 0 && !g_interrupted.load()) {
      if (SteadyClock::now() > deadline) {
        return finish(
            Status::Unavailable("the topic's first pods did not become ready in 60 s; "
                                "see " +
                                state_dir_ + "/pods/*/sidecar.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling the loop's state
    }
    const std::string target = "http://" + (*platform)->PodIp(0) + ":8080";
    if (o_.no_load) {
      std::cerr << "shoal up: topic " << spec_.name << " is up; produce to " << target
                << "/v1/topics/" << spec_.name << "/events, consume from each pod's :8080, "
                << "status at http://127.0.0.1:" << o_.control_port
                << "/status. Ctrl-C stops it.\n";
      while (!g_interrupted.load()) {
        Sample(loop, **platform, nullptr, 0);
        View(loop, nullptr);
        std::this_thread::sleep_for(std::chrono::seconds(1));  // the view's refresh
      }
      return finish(Status::Ok());
    }

    harness::LoadOptions lo;
    lo.targets = {target};
    lo.topic = spec_.name;
    lo.rate = o_.rate;
    lo.profile = LoadProfile(o_.profile);
    lo.duration_s = o_.duration_s;
    lo.keys = o_.keys;
    lo.producers = o_.producers;
    lo.batch = 25;
    lo.producer_prefix = "up-" + Timestamp();
    // Producers spread over the ready pods, as a Service in front of the topic's pods would
    // (each sidecar forwards what another pod owns): not all through pod 0.
    lo.spread = true;
    lo.route_by_map = o_.route;
    harness::LoadGenerator load(lo);
    auto follow_pods = [&] {
      auto pods = (*platform)->ListPods();
      if (!pods.ok()) return;
      std::vector<std::string> targets;
      for (const auto& p : *pods) {
        if (p.ready && !p.draining) targets.push_back("http://" + p.address.data);
      }
      load.SetTargets(std::move(targets));
    };
    seen_before_ = seen_.Count();  // a resumed topic's earlier runs
    last_seen_ = seen_before_;
    if (o_.scheduled_sale && o_.profile == "flash-sale" &&
        spec_.partitions.min < spec_.partitions.max) {
      // Announced: the sale's window, from when the load starts, becomes a schedule.
      TopicSpec announced = spec_;
      announced.scaling.schedules.push_back(
          SaleSchedule(o_, spec_,
                       std::chrono::system_clock::now() +
                           std::chrono::milliseconds(static_cast<int64_t>(SurgeFrom(o_) * 1000))));
      if (Status st = ValidateTopic(announced); !st.ok()) return finish(st);
      const auto& sc = announced.scaling.schedules.back();
      std::cerr << "shoal up: the flash sale is announced: schedule " << sc.name << " from "
                << sc.start << " for " << sc.duration_seconds << " s, at least "
                << sc.min_partitions << " partitions and " << sc.min_replicas << " pods, ready "
                << sc.ready_seconds << " s before\n";
      loop.UpdateSpec(announced);
    }
    start_ = SteadyClock::now();
    load.Start();
    uint64_t last_acked = 0;
    while (!g_interrupted.load()) {
      const double t = Elapsed();
      if (t >= o_.duration_s) break;
      std::this_thread::sleep_until(start_ + std::chrono::seconds(static_cast<int>(t) + 1));
      follow_pods();
      const uint64_t acked = load.acked();
      Sample(loop, **platform, &load, static_cast<double>(acked - last_acked));
      last_acked = acked;
      if (o_.chaos) MaybeKill(loop, **platform);
      View(loop, &load);
    }
    load.Stop();
    auto acked = load.TakeAcked();
    // Let the consumers catch up (the lag drains) and the topic shrink back toward its baseline,
    // still sampling: up to three scale-down windows.
    const auto drain_deadline =
        std::max(SteadyClock::now() +
                     std::chrono::seconds(3 * spec_.scale_down.stabilization_window_seconds + 30),
                 start_ + std::chrono::duration_cast<SteadyClock::duration>(
                              std::chrono::duration<double>(min_sampled_s_)));
    auto at_baseline = [&] {
      if (samples_.empty()) return true;
      const auto& first = samples_.front();
      const auto& last = samples_.back();
      return last.partitions <= first.partitions && last.pods <= first.pods;
    };
    // A topic left with a backlog (a static one too small for the surge) is waited for as long
    // as its consumers make progress, up to 15 minutes: what they have not reached yet is
    // queued, not lost, and the verifier must see it before it counts anything as lost.
    const auto backlog_deadline = SteadyClock::now() + std::chrono::minutes(15);
    uint64_t progress_seen = seen_.Count();
    auto progress_at = SteadyClock::now();
    auto behind = [&] { return seen_.Count() < acked.size() + seen_before_; };
    auto consuming = [&] {
      const uint64_t now_seen = seen_.Count();
      if (now_seen > progress_seen) {
        progress_seen = now_seen;
        progress_at = SteadyClock::now();
      }
      return SteadyClock::now() - progress_at < std::chrono::seconds(30) &&
             SteadyClock::now() < backlog_deadline;
    };
    bool announced = false;
    while (!g_interrupted.load() &&
           ((SteadyClock::now() < drain_deadline &&
             (behind() || !at_baseline() || Elapsed() < min_sampled_s_)) ||
            (behind() && consuming()))) {
      if (!announced && SteadyClock::now() >= drain_deadline && behind()) {
        announced = true;
        std::cerr << "shoal up: " << name_ << ": the consumers are still behind ("
                  << (acked.size() + seen_before_ - seen_.Count())
                  << " events to go); waiting while they make progress\n";
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));  // the view's refresh
      Sample(loop, **platform, &load, 0);
      View(loop, &load);
    }
    if (tty_) std::cerr << "\n";
    Status st = finish(Status::Ok());
    if (!st.ok()) return st;

    auto seen_files = harness::ReadSeenDir(state_dir_ + "/seen");
    if (!seen_files.ok()) return seen_files.status();
    std::vector<harness::SeenEvent> seen = std::move(seen_files).value();
    out->name = name_;
    out->topic = spec_.name;
    out->profile = o_.profile;
    out->base_rate = o_.rate;
    out->surge_factor = o_.profile == "flash-sale" ? 10 : 1;
    out->surge_start_s = o_.profile == "flash-sale" ? SurgeFrom(o_) : 0;
    out->surge_end_s = o_.profile == "flash-sale" ? SurgeUntil(o_) : 0;
    out->duration_s = o_.duration_s;
    out->samples = samples_;
    out->decisions = decisions_;
    out->verify = harness::Verify(acked, std::move(seen));
    out->command = o_.command;
    out->announced = o_.scheduled_sale;
    out->chaos = o_.chaos;
    out->kills_planned = o_.chaos ? static_cast<uint32_t>(o_.chaos_kills) : 0;
    out->kills = kills_;
    out->failovers = failovers_;
    return Status::Ok();
  }

 private:
  double Elapsed() const {
    return std::chrono::duration<double>(SteadyClock::now() - start_).count();
  }

  void Sample(control::ControlLoop& loop, control::LocalPlatform& platform,
              harness::LoadGenerator* load, double acked_in_second) {
    harness::RunSample s;
    s.t = Elapsed();
    s.arrival_rate = acked_in_second;
    const auto obs = loop.last_observed();
    s.lag = obs.lag;
    const auto map = loop.map();
    s.partitions = static_cast<uint32_t>(map.active_count());
    s.pods = platform.DesiredPods();
    s.ready_pods = obs.ready_pods;  // the loop already listed the pods this tick
    if (load) {
      auto lat = load->TakeLatenciesMs();
      if (!lat.empty()) {
        std::sort(lat.begin(), lat.end());
        s.produce_p99_ms = Percentile(lat, 0.99);
      }
    }
    // The failovers the loop made since the last sample, at their own times.
    for (const auto& fo : loop.failovers()) {
      if (fo.at <= last_failover_at_) continue;
      last_failover_at_ = fo.at;
      harness::RunFailover rf;
      rf.t = std::chrono::duration<double>(fo.at - start_).count();
      rf.pods = fo.pods;
      rf.partitions = static_cast<uint32_t>(fo.partitions);
      rf.seconds = fo.seconds;
      std::string pods;
      for (const auto& p : rf.pods) pods += (pods.empty() ? "" : ",") + p;
      if (tty_ && drawn_) std::cerr << "\x1b[3F\x1b[J";
      drawn_ = false;
      std::fprintf(stderr,
                   "shoal up: t=%.1fs the control loop failed over %u partitions led by %s "
                   "(%.1f s from its last ready answer)\n",
                   rf.t, rf.partitions, pods.c_str(), rf.seconds);
      failovers_.push_back(std::move(rf));
    }
    const uint64_t seen = seen_.Count();
    s.consumed_rate = static_cast<double>(seen > last_seen_ ? seen - last_seen_ : 0);
    last_seen_ = seen;
    samples_.push_back(s);
    const auto d = loop.last_decision();
    if (d.at_ms != last_decision_ms_ && !(d.kinds.size() == 1 && d.kinds[0] == control::DecisionKind::kHold)) {
      last_decision_ms_ = d.at_ms;
      const std::string kinds = control::JoinKinds(d.kinds);
      harness::RunDecision rd;
      rd.t = s.t;
      rd.kinds = kinds;
      rd.reason = d.reason;
      rd.partitions_from = last_partitions_ ? last_partitions_ : s.partitions;
      rd.partitions_to = d.partitions;
      rd.pods_from = last_pods_ ? last_pods_ : s.pods;
      rd.pods_to = d.replicas;
      decisions_.push_back(rd);
      last_reason_ = d.reason;
    }
    last_partitions_ = s.partitions;
    last_pods_ = s.pods;
  }

  // --chaos: when the next kill is due, SIGKILL the sidecar of the pod that leads the most
  // partitions with copies (not one killed before; ties by name), once the pod killed before is
  // ready again (two copies down at once could leave a partition without a quorum).
  void MaybeKill(control::ControlLoop& loop, control::LocalPlatform& platform) {
    if (kill_at_.empty()) kill_at_ = ChaosKillTimes(o_);
    if (kills_tried_ >= kill_at_.size() || Elapsed() < kill_at_[kills_tried_]) return;
    auto give_up = [&](const std::string& why) {
      if (Elapsed() + 1 < ChaosLastChance(o_)) return;  // tried again next second
      std::fprintf(stderr, "shoal up --chaos: kill %zu not made: %s\n", kills_tried_ + 1,
                   why.c_str());
      ++kills_tried_;
    };
    auto pods = platform.ListPods();
    if (!pods.ok()) return give_up(pods.status().message());
    for (const auto& k : kills_) {
      for (const auto& p : *pods) {
        if (p.name.value() == k.pod && !p.ready) {
          return give_up("pod " + k.pod + ", killed before, is not ready again");
        }
      }
    }
    std::map<std::string, uint32_t> led;
    const PartitionMap map = loop.map();
    for (const auto& p : map.partitions()) {
      if (p.active() && !p.lost && !p.replicas.empty()) ++led[p.owner.value()];
    }
    for (const auto& k : kills_) led.erase(k.pod);
    std::string pod;
    uint32_t most = 0;
    for (const auto& [name, n] : led) {
      if (n > most) {
        pod = name;
        most = n;
      }
    }
    if (pod.empty()) return give_up("no other pod leads a partition with copies");
    const double t = Elapsed();
    auto pid = platform.KillSidecar(
        PodName(pod), std::chrono::milliseconds(static_cast<int64_t>(o_.chaos_down_s * 1000)));
    if (!pid.ok()) return give_up(pid.status().message());
    harness::RunKill k;
    k.t = t;
    k.pod = pod;
    k.pid = *pid;
    k.partitions_led = most;
    if (tty_ && drawn_) std::cerr << "\x1b[3F\x1b[J";
    drawn_ = false;
    std::fprintf(stderr,
                 "shoal up --chaos: t=%.1fs killed the sidecar of %s (pid %lld, leader of %u "
                 "partitions with copies); the platform starts it again in %.0f s\n",
                 t, pod.c_str(), static_cast<long long>(*pid), most, o_.chaos_down_s);
    kills_.push_back(std::move(k));
    ++kills_tried_;
  }

  void View(control::ControlLoop& loop, harness::LoadGenerator* load) {
    if (samples_.empty()) return;
    const auto& s = samples_.back();
    const bool surge = o_.profile == "flash-sale" && s.t >= SurgeFrom(o_) && s.t < SurgeUntil(o_);
    char line[256];
    std::snprintf(line, sizeof line,
                  "t=%3.0fs %s arrival %7.0f ev/s  partitions %3u  pods %u/%u  lag %8.0f  "
                  "produce p99 %6.1f ms",
                  s.t, surge ? "SURGE" : "     ", s.arrival_rate, s.partitions, s.ready_pods,
                  s.pods, s.lag, s.produce_p99_ms);
    const auto d = loop.last_decision();
    const std::string reason = d.reason.empty() ? "(none yet)" : d.reason;
    if (tty_) {
      const size_t w = static_cast<size_t>(TerminalWidth());
      // Redraw three lines in place.
      if (drawn_) std::cerr << "\x1b[3F";
      std::cerr << "\x1b[2K" << Fit(line, w) << "\n\x1b[2K" << Fit("last decision: " + reason, w)
                << "\n\x1b[2K"
                << Fit(loop.plan_in_progress() ? "changing: a plan is in progress" : "", w) << "\n";
      drawn_ = true;
    } else if (static_cast<int>(s.t) % 5 == 0 || !load) {
      std::cerr << line << "\n";
      if (reason != printed_reason_) {
        std::cerr << "  decision: " << reason << "\n";
        printed_reason_ = reason;
      }
    }
  }

  const UpOptions& o_;
  const TopicSpec spec_;
  const std::string name_, state_dir_;
  const double min_sampled_s_;
  SeenCounter seen_{state_dir_ + "/seen"};
  SteadyClock::time_point start_ = SteadyClock::now();
  std::vector<harness::RunSample> samples_;
  std::vector<harness::RunDecision> decisions_;
  int64_t last_decision_ms_ = 0;
  uint32_t last_partitions_ = 0, last_pods_ = 0;
  uint64_t last_seen_ = 0, seen_before_ = 0;
  std::string last_reason_, printed_reason_;
  const bool tty_ = isatty(STDERR_FILENO) != 0;
  bool drawn_ = false;
  // --chaos.
  std::vector<double> kill_at_;
  size_t kills_tried_ = 0;
  std::vector<harness::RunKill> kills_;
  std::vector<harness::RunFailover> failovers_;
  SteadyClock::time_point last_failover_at_{};
};

void PrintFigures(const harness::RunSummary& r, const harness::RunFigures& f) {
  std::printf(
      "%s: acked %llu, lost %llu, reordered %llu, duplicated %llu; partitions %u -> %u -> %u, "
      "pods %u -> %u -> %u; peak lag %.0f (%.1f s after the surge began); produce p99 %.1f ms; "
      "%.0f partition-seconds, %.0f pod-seconds\n",
      r.name.c_str(), static_cast<unsigned long long>(f.acked),
      static_cast<unsigned long long>(f.lost), static_cast<unsigned long long>(f.reordered),
      static_cast<unsigned long long>(f.duplicated), f.baseline_partitions, f.max_partitions,
      f.final_partitions, f.baseline_pods, f.max_pods, f.final_pods, f.peak_lag,
      f.lag_peak_after_surge_s, f.produce_p99_ms, f.partition_seconds, f.pod_seconds);
  if (!r.chaos) return;
  for (const auto& k : r.kills) {
    std::printf(
        "%s: chaos: killed %s (pid %lld, leader of %u partitions with copies) at t=%.1f s\n",
        r.name.c_str(), k.pod.c_str(), static_cast<long long>(k.pid), k.partitions_led, k.t);
  }
  std::printf(
      "%s: chaos: %u of %u kills failed over; %u failovers, %u partitions failed over; failover "
      "%.1f s (the control loop's measure, the longest), its map %.1f s after the kill\n",
      r.name.c_str(), f.kills_failed_over, r.kills_planned, f.failovers, f.failed_over_partitions,
      f.failover_s, f.kill_to_failover_s);
  const bool pass = f.lost == 0 && f.reordered == 0 && f.chaos_failed_over;
  std::printf("%s: %s: %llu lost, %llu reordered, %s\n", r.name.c_str(), pass ? "PASS" : "FAIL",
              static_cast<unsigned long long>(f.lost), static_cast<unsigned long long>(f.reordered),
              f.chaos_failed_over ? "every killed leader's partitions failed over"
                                  : "a killed leader's partitions were not failed over");
}

int RunUp(UpOptions o) {
  (void)InitLogging("warn");
  auto text = ReadTextFile(o.file);
  if (!text.ok()) {
    std::cerr << "shoal up: " << text.status().message()
              << " (run from the repository root, or give the PartitionedTopic file)\n";
    return 2;
  }
  auto spec = ParseTopic(*text);
  if (!spec.ok()) {
    std::cerr << "shoal up: " << o.file << ": " << spec.status().message() << "\n";
    return 2;
  }
  if (o.chaos && o.no_load) {
    std::cerr << "shoal up: --chaos kills a leader during the load run; drop --no-load\n";
    return 2;
  }
  if (o.chaos && spec->replication.factor < 2) {
    std::cerr << "shoal up: --chaos kills a leader's sidecar to show its partitions failing over "
                 "to a copy, and "
              << o.file << " keeps one copy of each partition (spec.replication.factor: "
              << spec->replication.factor
              << "): set spec.replication.factor: 3 in it (spec.replicas.max at least 3)\n";
    return 2;
  }
  if (o.state_dir.empty()) o.state_dir = ".shoal/" + spec->name;
  if (o.report_dir.empty()) o.report_dir = "reports/" + spec->name + "-" + Timestamp();
  signal(SIGINT, OnInterrupt);
  signal(SIGTERM, OnInterrupt);
  std::cerr << "shoal up: " << spec->name << " from " << o.file << ", state in " << o.state_dir
            << (o.no_load
                    ? ""
                    : ", profile " + o.profile + " at " + std::to_string(static_cast<int>(o.rate)) +
                          " ev/s for " + std::to_string(static_cast<int>(o.duration_s)) + " s" +
                          (o.profile == "flash-sale"
                               ? " (x10 from t=" + std::to_string(static_cast<int>(SurgeFrom(o))) +
                                     " s to t=" + std::to_string(static_cast<int>(SurgeUntil(o))) +
                                     " s)"
                               : ""))
            << "\n";

  harness::RunSummary dynamic;
  {
    Run run(o, *spec, "dynamic", o.state_dir);
    if (Status st = run.Execute(&dynamic); !st.ok()) {
      std::cerr << "shoal up: " << st.message() << "\n";
      return 1;
    }
  }
  if (o.no_load) return 0;
  const auto fd = harness::ComputeFigures(dynamic);
  std::vector<harness::RunSummary> compare;
  if (o.compare && !g_interrupted.load()) {
    // The same profile with the partition count and pods fixed: at the baseline, and at the
    // peak the dynamic run reached. Fresh state for each.
    UpOptions so = o;
    so.fresh = true;
    so.chaos = false;  // the static runs are the comparison, not the chaos
    for (const auto& [name, parts, pods] :
         {std::tuple<std::string, uint32_t, uint32_t>{"static-baseline", fd.baseline_partitions,
                                                      fd.baseline_pods},
          {"static-peak", fd.max_partitions, fd.max_pods}}) {
      if (g_interrupted.load()) break;
      TopicSpec s = *spec;
      s.partitions.min = s.partitions.max = s.partitions.initial = std::max<uint32_t>(1, parts);
      s.replicas.min = s.replicas.max = std::max<uint32_t>(1, pods);
      std::cerr << "shoal up --compare: " << name << " (" << parts << " partitions, " << pods
                << " pods)\n";
      harness::RunSummary r;
      // Sampled over the same window as the dynamic run, for comparable partition-seconds.
      const double window = dynamic.samples.empty() ? 0 : dynamic.samples.back().t;
      Run run(so, s, name, o.state_dir + "-" + name, window);
      if (Status st = run.Execute(&r); !st.ok()) {
        std::cerr << "shoal up: " << name << ": " << st.message() << "\n";
        return 1;
      }
      compare.push_back(std::move(r));
    }
    compare.insert(compare.begin(), dynamic);
  }
  if (Status st = harness::WriteReport(o.report_dir, dynamic, compare); !st.ok()) {
    std::cerr << "shoal up: " << st.message() << "\n";
    return 1;
  }
  PrintFigures(dynamic, fd);
  for (size_t i = 1; i < compare.size(); ++i) PrintFigures(compare[i], ComputeFigures(compare[i]));
  std::printf("report: %s/summary.md%s\n", o.report_dir.c_str(),
              compare.empty() ? "" : (" and " + o.report_dir + "/compare.md").c_str());
  if (fd.lost > 0 || fd.reordered > 0) {
    std::cerr << "shoal up: the verifier found lost or reordered events\n";
    return 3;
  }
  if (dynamic.chaos && !fd.chaos_failed_over) {
    std::cerr << "shoal up: --chaos: "
              << (fd.kills < dynamic.kills_planned
                      ? "not every planned kill was made"
                      : "a killed leader's partitions were not failed over")
              << "; a chaos run that shows no failover does not pass\n";
    return 4;
  }
  return 0;
}

}  // namespace

LoadAndConsumerFlags AddLoadAndConsumerFlags(CLI::App* cmd, UpOptions& o) {
  LoadAndConsumerFlags f;
  f.profile = cmd->add_option("--profile", o.profile,
                              "flash-sale | ramp (1x to 10x from 30% to 50% of the duration, held "
                              "to 70%) | steady | sawtooth")
                  ->check(CLI::IsMember({"flash-sale", "ramp", "steady", "sawtooth"}));
  f.rate = cmd->add_option("--rate", o.rate,
                           "Events/s at 1x (the flash sale is 10x from 30% to 50% of the duration)")
               ->check(CLI::Range(1.0, 1e7));
  f.duration = cmd->add_option("--duration", o.duration_s, "Seconds of load")
                   ->check(CLI::Range(3.0, 86400.0));
  f.cpu_us = cmd->add_option("--consumer-cpu-us", o.consumer_cpu_us,
                             "CPU microseconds a consumer spends per event");
  f.cpu_request =
      cmd->add_option("--consumer-cpu-request", o.consumer_cpu_request,
                      "Cores one consumer pod requests (CPU utilization is measured against it)");
  f.service_us = cmd->add_option("--consumer-service-us", o.consumer_service_us,
                                 "Microseconds a consumer waits per event (its database or "
                                 "downstream call; 0: none)")
                     ->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  f.concurrency = cmd->add_option("--consumer-concurrency", o.consumer_concurrency,
                                  "Events a consumer pod waits for at once (lanes by key, order "
                                  "kept)")
                      ->check(CLI::Range(1, 1024));
  return f;
}

void RegisterUp(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<UpOptions>();
  auto* cmd = app.add_subcommand(
      "up", "Run an elastic topic on this machine under a load profile, live, with a report");
  cmd->add_option("file", o->file, "PartitionedTopic YAML (default examples/flash-sale.yaml)");
  AddLoadAndConsumerFlags(cmd, *o);
  cmd->add_option("--keys", o->keys, "Distinct keys")->check(CLI::Range(1, 100000000));
  cmd->add_option("--producers", o->producers, "Producer threads")->check(CLI::Range(1, 256));
  cmd->add_option("--state-dir", o->state_dir, "Topic state (default .shoal/<topic>)");
  cmd->add_option("--report", o->report_dir, "Report directory (default reports/<topic>-<time>)");
  cmd->add_option("--ip-prefix", o->ip_prefix, "Pods bind <prefix>.2, <prefix>.3, ...");
  cmd->add_option("--control-port", o->control_port, "/metrics and /status on 127.0.0.1 (0: off)");
  cmd->add_option("--console-port", o->console_port,
                  "The live console on 127.0.0.1 (docs/console.md; 0: off)");
  cmd->add_flag("--no-load", o->no_load, "Leave the topic running for your own producers");
  cmd->add_flag("--route", o->route,
                "Producers send each batch straight to its keys' pod by the map (as a producer "
                "outside the pods) instead of over the pods as a Service would");
  cmd->add_flag("--compare", o->compare,
                "Also run static at the baseline and at the peak size, and compare");
  cmd->add_flag("--fresh", o->fresh, "Start from an empty state directory");
  cmd->add_flag("--chaos", o->chaos,
                "Kill (SIGKILL) the sidecar of the pod that leads the most partitions a third "
                "into the surge; the run passes only if its partitions fail over to a copy and "
                "nothing is lost (needs spec.replication.factor >= 2)");
  cmd->add_option("--chaos-kills", o->chaos_kills,
                  "With --chaos: 1, or 2 (another leader two thirds into the surge)")
      ->check(CLI::Range(1, 2));
  cmd->add_option("--chaos-down", o->chaos_down_s,
                  "With --chaos: seconds a killed sidecar stays down before the platform starts "
                  "it again")
      ->check(CLI::Range(0.0, 600.0));
  cmd->add_flag("--scheduled-sale,!--unannounced", o->scheduled_sale,
                "The flash sale is announced (the default): the elastic run's topic gets a "
                "schedule (spec.scaling.schedules) that holds the sale's partitions and pods "
                "from 5 s before it starts to its end; --unannounced leaves it to the policy's "
                "reaction and prediction");
  cmd->callback([o, &exit_code] {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  " --profile %s --rate %g --duration %g --consumer-cpu-us %lld"
                  " --consumer-service-us %lld --consumer-concurrency %d",
                  o->profile.c_str(), o->rate, o->duration_s,
                  static_cast<long long>(o->consumer_cpu_us),
                  static_cast<long long>(o->consumer_service_us), o->consumer_concurrency);
    char down[32];
    std::snprintf(down, sizeof down, "%g", o->chaos_down_s);
    o->command = "shoal up " + o->file + buf +
                 (o->profile == "flash-sale" && !o->scheduled_sale ? " --unannounced" : "") +
                 (o->compare ? " --compare" : "") +
                 (o->chaos ? " --chaos --chaos-kills " + std::to_string(o->chaos_kills) +
                                 " --chaos-down " + down
                           : "");
    exit_code = RunUp(*o);
  });
}

}  // namespace shoal::cli
