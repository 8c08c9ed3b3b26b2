#include "shoal/control/local_platform.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "shoal/common/files.h"
#include "shoal/common/logging.h"
#include "shoal/control/process.h"

namespace shoal::control {

namespace fs = std::filesystem;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

constexpr uint32_t kMaxPods = 253;  // ip_prefix.2 .. ip_prefix.254

std::string Errno() { return std::strerror(errno); }

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist");
    return Status::IoError("cannot read " + path + ": " + Errno());
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The path of `binary` if it can be run: as given when it names a path, else found on PATH.
Result<std::string> ResolveBinary(const std::string& binary, const std::string& what) {
  if (binary.find('/') != std::string::npos) {
    if (::access(binary.c_str(), X_OK) == 0)
      return fs::absolute(binary).lexically_normal().string();
    return Status::NotFound("the " + what + " binary " + binary + " cannot be run: " + Errno());
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string cand = dir + "/" + binary;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
  }
  return Status::NotFound("the " + what + " binary " + binary +
                          " is not next to this program, nor in the build tree, nor on PATH");
}

// The status code of GET path, or 0 when no answer came within the timeout. A minimal client of
// its own: a probe must never wait longer than its timeout, whatever the server does.
int HttpStatus(const std::string& ip, uint16_t port, const std::string& path,
               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  };
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return 0;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) return 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return 0;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, left_ms()) != 1) return 0;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return 0;
  }
  const std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: " + ip + "\r\nConnection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < req.size()) {
    const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return 0;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, left_ms()) != 1) return 0;
  }
  std::string in;
  while (in.find("\r\n") == std::string::npos && in.size() < 256) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left_ms()) != 1) return 0;
    char buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return 0;
    }
    in.append(buf, static_cast<size_t>(n));
  }
  // "HTTP/1.1 200 OK"
  const size_t sp = in.find(' ');
  if (in.rfind("HTTP/", 0) != 0 || sp == std::string::npos || in.size() < sp + 4) return 0;
  return std::atoi(in.substr(sp + 1, 3).c_str());
}

bool ParseIpPrefix(const std::string& prefix) {
  std::stringstream ss(prefix);
  std::string part;
  int parts = 0;
  while (std::getline(ss, part, '.')) {
    if (part.empty() || part.size() > 3 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(part) > 255) {
      return false;
    }
    ++parts;
  }
  return parts == 3 && prefix.back() != '.';
}

// Sends SIGTERM to every pid, waits for all until one deadline, then SIGKILLs the rest. Returns
// the pids that are still there after all that.
std::vector<pid_t> StopAll(const std::vector<pid_t>& pids, std::chrono::milliseconds grace) {
  for (pid_t p : pids) ::kill(p, SIGTERM);
  std::vector<pid_t> left;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (pid_t p : pids) {
    const auto wait = std::max(std::chrono::milliseconds(0),
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    if (!control::WaitProcessGone(p, wait)) left.push_back(p);
  }
  std::vector<pid_t> stuck;
  for (pid_t p : left) {
    ::kill(p, SIGKILL);
    if (!control::WaitProcessGone(p, std::chrono::seconds(10))) stuck.push_back(p);
  }
  return stuck;
}

const char* RoleName(bool sidecar) { return sidecar ? "sidecar" : "consumer"; }

}  // namespace

// ---------------------------------------------------------------------------------------------

LocalPlatform::LocalPlatform(LocalPlatformOptions options)
    : opts_(std::move(options)),
      clock_(opts_.clock ? *opts_.clock : SystemClock::Instance()),
      state_dir_(fs::absolute(opts_.state_dir).lexically_normal().string()) {
  while (state_dir_.size() > 1 && state_dir_.back() == '/') state_dir_.pop_back();
}

LocalPlatform::~LocalPlatform() {
  {
    std::lock_guard<std::mutex> lock(supervisor_mu_);
    supervisor_stop_ = true;
  }
  supervisor_cv_.notify_all();
  if (supervisor_.joinable()) supervisor_.join();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the state directory's lock
}

Result<std::unique_ptr<LocalPlatform>> LocalPlatform::Open(LocalPlatformOptions options) {
  if (options.topic.empty()) return Status::InvalidArgument("LocalPlatform: no topic given");
  if (options.state_dir.empty()) {
    return Status::InvalidArgument("LocalPlatform: no state directory given");
  }
  if (!ParseIpPrefix(options.ip_prefix)) {
    return Status::InvalidArgument(
        "LocalPlatform: ip_prefix must be three octets like 127.0.0, not '" + options.ip_prefix +
        "'");
  }
  if (!(options.cpu_request_cores > 0)) {
    return Status::InvalidArgument("LocalPlatform: cpu_request_cores must be positive");
  }
  auto sidecar = ResolveBinary(
      options.sidecar_binary.empty() ? control::FindSidecarBinary() : options.sidecar_binary,
      "shoal-sidecar");
  if (!sidecar.ok()) return sidecar.status();
  options.sidecar_binary = *sidecar;
  if (!options.consumer_binary.empty()) {
    auto consumer = ResolveBinary(options.consumer_binary, "shoal (consumer)");
    if (!consumer.ok()) return consumer.status();
    options.consumer_binary = *consumer;
  }
  std::unique_ptr<LocalPlatform> p(new LocalPlatform(std::move(options)));
  SHOAL_RETURN_IF_ERROR(p->Init());
  if (p->opts_.supervise_interval.count() > 0) {
    p->supervisor_ = std::thread([raw = p.get()] { raw->SupervisorLoop(); });
  }
  return p;
}

Status LocalPlatform::Init() {
  std::error_code ec;
  for (const auto& d : {state_dir_, state_dir_ + "/pods", state_dir_ + "/seen"}) {
    fs::create_directories(d, ec);
    if (ec) return Status::IoError("creating " + d + ": " + ec.message());
  }
  // One coordinator per state directory (invariant 5): the directory's control state is the
  // authority's record, and two loops writing it would mint two maps of one epoch. The lock is
  // the kernel's, so it goes with the process however it ends.
  const std::string lock_path = state_dir_ + "/lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return Status::IoError("opening " + lock_path + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string holder;
    if (auto text = ReadFile(lock_path); text.ok()) holder = Trim(*text);
    ::close(lock_fd_);
    lock_fd_ = -1;
    return Status::FailedPrecondition(
        "another shoal control or shoal up (pid " + (holder.empty() ? "unknown" : holder) +
        ") runs on " + state_dir_ + "; stop it first, or use another state directory");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 ||
      ::pwrite(lock_fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    Logger("platform")->warn("msg=\"could not write the pid into the state directory's lock\"");
  }

  // The admin token: given, or generated once and kept in the state directory; the sidecars
  // read it from that file (--admin-token-file), so it is not visible in the process list.
  const std::string token_path = state_dir_ + "/admin-token";
  auto existing = ReadFile(token_path);
  if (!existing.ok() && existing.status().code() != Status::Code::kNotFound) {
    return existing.status();
  }
  const std::string stored = existing.ok() ? Trim(*existing) : "";
  token_ = !opts_.admin_token.empty() ? opts_.admin_token : stored;
  if (token_.empty()) {
    auto token = RandomToken();
    if (!token.ok()) return token.status();
    token_ = *token;
  }
  if (token_ != stored) SHOAL_RETURN_IF_ERROR(WriteFileDurable(token_path, token_ + "\n", 0600));

  // Which pods exist: their directories.
  std::vector<uint32_t> found;
  const std::string prefix = opts_.topic + "-";
  for (const auto& entry : fs::directory_iterator(state_dir_ + "/pods", ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind(prefix, 0) != 0) continue;
    const std::string num = name.substr(prefix.size());
    if (num.empty() || num.size() > 3 ||
        !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const uint32_t ordinal = static_cast<uint32_t>(std::stoul(num));
    if (ordinal < kMaxPods && std::to_string(ordinal) == num) found.push_back(ordinal);
  }
  if (ec) return Status::IoError("listing " + state_dir_ + "/pods: " + ec.message());

  auto desired = ReadFile(state_dir_ + "/desired-pods");
  bool desired_known = false;
  uint32_t desired_n = 0;
  if (desired.ok()) {
    const std::string text = Trim(*desired);
    char* end = nullptr;
    const unsigned long v = std::strtoul(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v > kMaxPods) {
      return Status::Corruption(state_dir_ + "/desired-pods holds '" + text + "', not a pod count");
    }
    desired_n = static_cast<uint32_t>(v);
    desired_known = true;
  } else if (desired.status().code() != Status::Code::kNotFound) {
    return desired.status();
  } else {
    // Pods without a recorded count (a state directory from elsewhere): keep them all.
    for (uint32_t o : found) desired_n = std::max(desired_n, o + 1);
  }

  std::vector<uint32_t> to_remove;
  {
    std::lock_guard<std::mutex> lock(mu_);
    desired_ = desired_n;
    const auto now = clock_.SteadyNow();
    for (uint32_t ordinal : found) {
      Pod pod = MakePod(ordinal);
      pod.draining = fs::exists(pod.dir + "/draining", ec);
      pod.sidecar.wanted = true;
      pod.consumer.wanted = !opts_.consumer_binary.empty() && !pod.draining;
      for (bool sidecar : {true, false}) {
        const Role role = sidecar ? Role::kSidecar : Role::kConsumer;
        Proc& proc = sidecar ? pod.sidecar : pod.consumer;
        auto text = ReadFile(PidFile(pod, role));
        if (!text.ok()) continue;
        const pid_t pid = static_cast<pid_t>(std::atoi(Trim(*text).c_str()));
        // Adopt only the process this pod started: a pid of a process that is gone may belong
        // to another program now.
        if (pid > 0 && control::ProcessAlive(pid) && Matches(pod, role, pid)) {
          proc.pid = pid;
          proc.started_once = true;
          proc.started_at = now;
          Logger("platform")
              ->info("msg=\"adopted a running process\" pod={} role={} pid={}", pod.name.value(),
                     RoleName(sidecar), pid);
        }
      }
      if (desired_known && ordinal >= desired_n) to_remove.push_back(ordinal);
      pods_.emplace(ordinal, std::move(pod));
    }
  }
  // A removal that a crash interrupted: the count was recorded before the removal began.
  for (uint32_t ordinal : to_remove) SHOAL_RETURN_IF_ERROR(RemovePod(ordinal));
  // Pods below the count whose processes are gone start again; missing pods are created.
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t ordinal = 0; ordinal < desired_; ++ordinal) {
    auto it = pods_.find(ordinal);
    if (it == pods_.end()) {
      it = pods_.emplace(ordinal, MakePod(ordinal)).first;
      it->second.sidecar.wanted = true;
      it->second.consumer.wanted = !opts_.consumer_binary.empty();
    }
    Pod& pod = it->second;
    fs::create_directories(pod.dir + "/data", ec);
    if (ec) return Status::IoError("creating " + pod.dir + "/data: " + ec.message());
    if (pod.sidecar.wanted && pod.sidecar.pid <= 0) {
      SHOAL_RETURN_IF_ERROR(CheckBindable(pod.ip));
      SHOAL_RETURN_IF_ERROR(StartProc(pod, Role::kSidecar));
    }
    if (pod.consumer.wanted && pod.consumer.pid <= 0) {
      SHOAL_RETURN_IF_ERROR(StartProc(pod, Role::kConsumer));
    }
  }
  return Status::Ok();
}

LocalPlatform::Pod LocalPlatform::MakePod(uint32_t ordinal) const {
  Pod pod;
  pod.ordinal = ordinal;
  pod.name = PodName(opts_.topic + "-" + std::to_string(ordinal));
  pod.ip = PodIp(ordinal);
  pod.dir = PodDir(pod.name);
  return pod;
}

std::string LocalPlatform::PodDir(const PodName& pod) const {
  return state_dir_ + "/pods/" + pod.value();
}

std::string LocalPlatform::SeenFile(const PodName& pod) const {
  return state_dir_ + "/seen/" + pod.value() + ".jsonl";
}

std::string LocalPlatform::PodIp(uint32_t ordinal) const {
  return opts_.ip_prefix + "." + std::to_string(2 + ordinal);
}

std::string LocalPlatform::PidFile(const Pod& pod, Role role) const {
  return pod.dir + (role == Role::kSidecar ? "/sidecar.pid" : "/consumer.pid");
}

std::vector<std::string> LocalPlatform::Argv(const Pod& pod, Role role) const {
  if (role == Role::kSidecar) {
    std::vector<std::string> argv = {opts_.sidecar_binary,
                                     "--topic",
                                     opts_.topic,
                                     "--pod-name",
                                     pod.name.value(),
                                     "--wait-for-map",
                                     "--data-dir",
                                     pod.dir + "/data",
                                     "--bind",
                                     pod.ip,
                                     "--port",
                                     std::to_string(opts_.data_port),
                                     "--admin-port",
                                     std::to_string(opts_.admin_port),
                                     "--metrics-port",
                                     std::to_string(opts_.metrics_port),
                                     "--admin-token-file",
                                     state_dir_ + "/admin-token",
                                     "--fsync",
                                     opts_.fsync,
                                     "--log-level",
                                     opts_.log_level};
    argv.insert(argv.end(), opts_.sidecar_args.begin(), opts_.sidecar_args.end());
    return argv;
  }
  return {opts_.consumer_binary,
          "consume",
          "--target",
          "http://" + pod.ip + ":" + std::to_string(opts_.data_port),
          "--topic",
          opts_.topic,
          "--group",
          opts_.group,
          "--out",
          SeenFile(pod.name),
          "--append",
          "--cpu-us-per-event",
          std::to_string(opts_.cpu_us_per_event),
          "--service-us-per-event",
          std::to_string(opts_.service_us_per_event),
          "--service-us-per-batch",
          std::to_string(opts_.service_us_per_batch),
          "--concurrency",
          std::to_string(std::max(1, opts_.concurrency)),
          "--idle-exit",
          "0",
          "--max-seconds",
          "0"};
}

bool LocalPlatform::Matches(const Pod& pod, Role role, pid_t pid) const {
  const auto args = control::ProcessCmdline(pid);
  const std::string flag = role == Role::kSidecar ? "--data-dir" : "--out";
  const std::string want = role == Role::kSidecar ? pod.dir + "/data" : SeenFile(pod.name);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag && args[i + 1] == want) return true;
  }
  return false;
}

Status LocalPlatform::CheckBindable(const std::string& ip) const {
  const std::pair<uint16_t, const char*> ports[] = {
      {opts_.data_port, "data"}, {opts_.admin_port, "admin"}, {opts_.metrics_port, "metrics"}};
  for (const auto& [port, what] : ports) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::IoError("socket: " + Errno());
    int one = 1;
    // As the sidecar's listener does: a connection of a previous run in TIME_WAIT is no conflict.
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
      ::close(fd);
      return Status::InvalidArgument(ip + " is not an IPv4 address");
    }
    const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    const std::string why = rc != 0 ? Errno() : "";
    ::close(fd);
    if (rc != 0) {
      return Status::Unavailable("cannot bind " + ip + ":" + std::to_string(port) + " (the " +
                                 what + " port of a pod): " + why);
    }
  }
  return Status::Ok();
}

Status LocalPlatform::StartProc(Pod& pod, Role role) {
  const bool sidecar = role == Role::kSidecar;
  Proc& proc = sidecar ? pod.sidecar : pod.consumer;
  const std::string log = pod.dir + (sidecar ? "/sidecar.log" : "/consumer.log");
  control::ChildProcess::SpawnOptions so;
  so.new_session = true;  // the pod outlives this process, and a terminal's Ctrl-C
  auto child = control::ChildProcess::Spawn(Argv(pod, role), log, so);
  const auto now = clock_.SteadyNow();
  if (!child.ok()) {
    pod.last_error = child.status().message();
    return child.status().Annotate(std::string("pod ") + pod.name.value() + " " +
                                   RoleName(sidecar));
  }
  if (proc.started_once) ++proc.restarts;
  proc.pid = child->Release();
  proc.started_once = true;
  proc.started_at = now;
  if (auto st = WriteFileDurable(PidFile(pod, role), std::to_string(proc.pid) + "\n"); !st.ok()) {
    // The process runs and is supervised; only a later adoption would miss it.
    pod.last_error = st.message();
    Logger("platform")
        ->warn("msg=\"cannot record a pid\" pod={} reason=\"{}\"", pod.name.value(), st.message());
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Supervision.

void LocalPlatform::SupervisorLoop() {
  std::unique_lock<std::mutex> lock(supervisor_mu_);
  while (!supervisor_stop_) {
    supervisor_cv_.wait_for(lock, opts_.supervise_interval, [this] { return supervisor_stop_; });
    if (supervisor_stop_) break;
    lock.unlock();
    SuperviseOnce();
    lock.lock();
  }
}

void LocalPlatform::SuperviseOnce() {
  std::lock_guard<std::mutex> lock(mu_);
  SuperviseLocked(clock_.SteadyNow());
}

void LocalPlatform::SuperviseLocked(SteadyTime now) {
  for (auto& [ordinal, pod] : pods_) {
    if (pod.removing) continue;
    for (bool sidecar : {true, false}) {
      const Role role = sidecar ? Role::kSidecar : Role::kConsumer;
      Proc& proc = sidecar ? pod.sidecar : pod.consumer;
      if (proc.pid > 0) {
        std::optional<int> code;
        if (control::ProcessAlive(proc.pid, &code)) {
          // Ran long enough: the next failure starts from the shortest backoff again.
          if (now - proc.started_at >= opts_.restart_backoff_max) {
            proc.backoff = std::chrono::milliseconds(0);
          }
          continue;
        }
        proc.pid = -1;
        if (!proc.wanted) continue;  // stopped on purpose
        proc.backoff = proc.backoff.count() == 0
                           ? opts_.restart_backoff
                           : std::min(proc.backoff * 2, opts_.restart_backoff_max);
        // Not before the backoff, nor before the end of a hold (KillSidecar).
        proc.not_before = std::max(now + proc.backoff, proc.held_until);
        pod.last_error = std::string(RoleName(sidecar)) + " exited" +
                         (code ? " with code " + std::to_string(*code) : "") + "; see its log in " +
                         pod.dir;
        Logger("platform")
            ->warn(
                "msg=\"pod process exited; restarting\" pod={} role={} "
                "backoff_ms={} reason=\"{}\"",
                pod.name.value(), RoleName(sidecar),
                std::chrono::duration_cast<std::chrono::milliseconds>(proc.not_before - now)
                    .count(),
                pod.last_error);
      }
      if (!proc.wanted || proc.pid > 0 || now < proc.not_before || now < proc.held_until) {
        continue;
      }
      if (auto st = StartProc(pod, role); !st.ok()) {
        proc.backoff = proc.backoff.count() == 0
                           ? opts_.restart_backoff
                           : std::min(proc.backoff * 2, opts_.restart_backoff_max);
        proc.not_before = now + proc.backoff;
        Logger("platform")
            ->warn("msg=\"cannot start a pod process\" pod={} role={} reason=\"{}\"",
                   pod.name.value(), RoleName(sidecar), st.message());
      }
    }
  }
}

std::vector<LocalPodProcesses> LocalPlatform::Processes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LocalPodProcesses> out;
  for (const auto& [ordinal, pod] : pods_) {
    LocalPodProcesses p;
    p.name = pod.name;
    p.ordinal = ordinal;
    p.sidecar_pid = pod.sidecar.pid;
    p.consumer_pid = pod.consumer.pid;
    p.sidecar_restarts = pod.sidecar.restarts;
    p.consumer_restarts = pod.consumer.restarts;
    p.draining = pod.draining;
    p.last_error = pod.last_error;
    out.push_back(std::move(p));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Platform.

Result<pid_t> LocalPlatform::KillSidecar(const PodName& name,
                                         std::chrono::milliseconds restart_after) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return Status::FailedPrecondition("the local platform was shut down");
  auto it = std::find_if(pods_.begin(), pods_.end(),
                         [&](const auto& kv) { return kv.second.name == name; });
  if (it == pods_.end() || it->second.removing) return Status::NotFound("no pod " + name.value());
  Pod& pod = it->second;
  const pid_t pid = pod.sidecar.pid;
  // The recorded process, still the pod's sidecar (pids are reused).
  if (pid <= 0 || !control::ProcessAlive(pid) || !Matches(pod, Role::kSidecar, pid)) {
    return Status::Unavailable("the sidecar of pod " + name.value() + " is not running");
  }
  pod.sidecar.held_until = clock_.SteadyNow() + restart_after;
  if (::kill(pid, SIGKILL) != 0) {
    return Status::IoError("cannot kill the sidecar of pod " + name.value() + " (pid " +
                           std::to_string(pid) + "): " + Errno());
  }
  Logger("platform")
      ->warn("msg=\"pod sidecar killed on purpose\" pod={} pid={} restart_after_ms={}",
             name.value(), pid, restart_after.count());
  return pid;
}

Status LocalPlatform::SetDesiredPods(uint32_t n) {
  if (n > kMaxPods) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxPods) +
                                   " local pods (one loopback address each), not " +
                                   std::to_string(n));
  }
  std::lock_guard<std::mutex> op(op_mu_);
  std::vector<uint32_t> to_remove;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return Status::FailedPrecondition("the local platform was shut down");
    // Recorded before acting: a loop restarted in the middle finishes the change (Init).
    if (n != desired_) {
      SHOAL_RETURN_IF_ERROR(
          WriteFileDurable(state_dir_ + "/desired-pods", std::to_string(n) + "\n"));
      desired_ = n;
    }
    for (const auto& [ordinal, pod] : pods_) {
      if (ordinal >= n) to_remove.push_back(ordinal);
    }
  }
  // Removed pods were emptied and drained by the planner first; their processes stop (the
  // consumer before its sidecar) and their data goes.
  for (uint32_t ordinal : to_remove) SHOAL_RETURN_IF_ERROR(RemovePod(ordinal));

  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t ordinal = 0; ordinal < n; ++ordinal) {
    if (pods_.count(ordinal)) continue;
    Pod pod = MakePod(ordinal);
    // Say which address is taken before starting a sidecar that would only log it.
    SHOAL_RETURN_IF_ERROR(CheckBindable(pod.ip).Annotate("pod " + pod.name.value()));
    std::error_code ec;
    fs::create_directories(pod.dir + "/data", ec);
    if (ec) return Status::IoError("creating " + pod.dir + "/data: " + ec.message());
    fs::remove(pod.dir + "/draining", ec);
    pod.sidecar.wanted = true;
    pod.consumer.wanted = !opts_.consumer_binary.empty();
    Pod& p = pods_.emplace(ordinal, std::move(pod)).first->second;
    // Start failures stay wanted: the supervisor tries again with backoff.
    SHOAL_RETURN_IF_ERROR(StartProc(p, Role::kSidecar));
    if (p.consumer.wanted) SHOAL_RETURN_IF_ERROR(StartProc(p, Role::kConsumer));
    Logger("platform")->info("msg=\"pod created\" pod={} ip={}", p.name.value(), p.ip);
  }
  return Status::Ok();
}

Status LocalPlatform::RemovePod(uint32_t ordinal) {
  pid_t consumer = -1, sidecar = -1;
  std::string dir, name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pods_.find(ordinal);
    if (it == pods_.end()) return Status::Ok();
    Pod& pod = it->second;
    pod.removing = true;
    pod.sidecar.wanted = pod.consumer.wanted = false;
    if (pod.consumer.pid > 0 && Matches(pod, Role::kConsumer, pod.consumer.pid)) {
      consumer = pod.consumer.pid;
    }
    if (pod.sidecar.pid > 0 && Matches(pod, Role::kSidecar, pod.sidecar.pid)) {
      sidecar = pod.sidecar.pid;
    }
    dir = pod.dir;
    name = pod.name.value();
  }
  for (pid_t pid : {consumer, sidecar}) {
    if (pid <= 0) continue;
    if (!control::StopProcess(pid, opts_.stop_grace)) {
      return Status::Internal("pod " + name + ": process " + std::to_string(pid) +
                              " did not exit after SIGKILL");
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return Status::IoError("removing " + dir + ": " + ec.message());
  std::lock_guard<std::mutex> lock(mu_);
  pods_.erase(ordinal);
  Logger("platform")->info("msg=\"pod removed\" pod={}", name);
  return Status::Ok();
}

uint32_t LocalPlatform::DesiredPods() const {
  std::lock_guard<std::mutex> lock(mu_);
  return desired_;
}

Result<std::vector<PodInfo>> LocalPlatform::ListPods() {
  struct Snapshot {
    uint32_t ordinal;
    PodName name;
    std::string ip;
    bool draining;
    pid_t consumer;
  };
  std::vector<Snapshot> snap;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [ordinal, pod] : pods_) {
      snap.push_back({ordinal, pod.name, pod.ip, pod.draining, pod.consumer.pid});
    }
  }
  // Probe the pods concurrently (each probe may take up to ready_timeout), with at most 32
  // threads at a time.
  std::vector<int> codes(snap.size(), 0);
  {
    std::atomic<size_t> next{0};
    auto probe = [&] {
      for (size_t i; (i = next.fetch_add(1)) < snap.size();) {
        codes[i] = HttpStatus(snap[i].ip, opts_.metrics_port, "/readyz", opts_.ready_timeout);
      }
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < std::min<size_t>(snap.size(), 32); ++t) threads.emplace_back(probe);
    probe();
    for (auto& t : threads) t.join();
  }
  std::vector<PodInfo> out;
  for (size_t i = 0; i < snap.size(); ++i) {
    const auto& s = snap[i];
    PodInfo info;
    info.name = s.name;
    info.ordinal = s.ordinal;
    info.ip = s.ip;
    info.address = {s.ip + ":" + std::to_string(opts_.data_port),
                    s.ip + ":" + std::to_string(opts_.admin_port)};
    info.metrics = s.ip + ":" + std::to_string(opts_.metrics_port);
    info.ready = codes[i] == 200;
    info.draining = s.draining;
    if (s.consumer > 0) {
      const auto cpu = control::ProcessCpuTime(s.consumer);
      const auto now = clock_.SteadyNow();
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pods_.find(s.ordinal);
      if (cpu && it != pods_.end()) {
        CpuSample& prev = it->second.cpu;
        if (prev.pid != s.consumer) {
          prev = {s.consumer, *cpu, now, std::nullopt};  // a new consumer: start measuring
        } else if (now - prev.at >= kCpuInterval) {
          const double cpu_s = std::chrono::duration<double>(*cpu - prev.cpu).count();
          const double wall_s = std::chrono::duration<double>(now - prev.at).count();
          prev = {s.consumer, *cpu, now,
                  std::max(0.0, cpu_s / wall_s / opts_.cpu_request_cores)};
        }
        info.cpu_utilization = prev.utilization;
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

Status LocalPlatform::RestartPod(const PodInfo& pod) {
  return Status::FailedPrecondition(pod.name.value() +
                               ": local pods run no template that could be outdated");
}

Status LocalPlatform::DrainPod(const PodName& name) {
  std::lock_guard<std::mutex> op(op_mu_);
  pid_t consumer = -1;
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return Status::FailedPrecondition("the local platform was shut down");
    auto it = std::find_if(pods_.begin(), pods_.end(),
                           [&](const auto& kv) { return kv.second.name == name; });
    if (it == pods_.end() || it->second.removing) {
      return Status::NotFound("no pod " + name.value());
    }
    Pod& pod = it->second;
    dir = pod.dir;
    if (!pod.draining) {
      // Recorded first: a restarted loop must not start this consumer again either.
      SHOAL_RETURN_IF_ERROR(WriteFileDurable(pod.dir + "/draining", "draining\n"));
      pod.draining = true;
    }
    // The supervisor leaves an unwanted process stopped.
    pod.consumer.wanted = false;
    if (pod.consumer.pid > 0 && Matches(pod, Role::kConsumer, pod.consumer.pid)) {
      consumer = pod.consumer.pid;
    }
  }
  if (consumer > 0 && control::ProcessAlive(consumer)) {
    // SIGTERM: the consumer finishes its batch, records it, commits it and exits.
    ::kill(consumer, SIGTERM);
    if (!control::WaitProcessGone(consumer, opts_.drain_timeout)) {
      // What it recorded but did not commit is handed out again: a duplicate, never a loss.
      Logger("platform")
          ->warn(
              "msg=\"consumer did not finish its drain; killing it\" pod={} "
              "timeout_ms={}",
              name.value(), opts_.drain_timeout.count());
      ::kill(consumer, SIGKILL);
      if (!control::WaitProcessGone(consumer, std::chrono::seconds(10))) {
        return Status::Internal("pod " + name.value() + ": consumer " + std::to_string(consumer) +
                                " did not exit after SIGKILL");
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [ordinal, pod] : pods_) {
    if (pod.name == name && pod.consumer.pid == consumer) pod.consumer.pid = -1;
  }
  std::error_code ec;
  fs::remove(dir + "/consumer.pid", ec);
  return Status::Ok();
}

Status LocalPlatform::SaveState(const std::string& json) {
  return WriteFileDurable(state_dir_ + "/control-state.json", json);
}

Result<std::string> LocalPlatform::LoadState() {
  auto text = ReadFile(state_dir_ + "/control-state.json");
  if (!text.ok() && text.status().code() == Status::Code::kNotFound) {
    return Status::NotFound("no control state saved in " + state_dir_ + " yet");
  }
  return text;
}

std::string LocalPlatform::AdminToken() const { return token_; }

Status LocalPlatform::Shutdown() {
  std::lock_guard<std::mutex> op(op_mu_);
  std::vector<pid_t> consumers, sidecars;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    for (auto& [ordinal, pod] : pods_) {
      pod.sidecar.wanted = pod.consumer.wanted = false;
      if (pod.consumer.pid > 0 && Matches(pod, Role::kConsumer, pod.consumer.pid)) {
        consumers.push_back(pod.consumer.pid);
      }
      if (pod.sidecar.pid > 0 && Matches(pod, Role::kSidecar, pod.sidecar.pid)) {
        sidecars.push_back(pod.sidecar.pid);
      }
    }
  }
  // Consumers first: they commit what they recorded while their sidecars still answer.
  auto stuck = StopAll(consumers, opts_.stop_grace);
  auto stuck_sidecars = StopAll(sidecars, opts_.stop_grace);
  stuck.insert(stuck.end(), stuck_sidecars.begin(), stuck_sidecars.end());
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [ordinal, pod] : pods_) {
    for (Role role : {Role::kSidecar, Role::kConsumer}) {
      Proc& proc = role == Role::kSidecar ? pod.sidecar : pod.consumer;
      if (std::find(stuck.begin(), stuck.end(), proc.pid) != stuck.end()) continue;
      proc.pid = -1;
      std::error_code ec;
      fs::remove(PidFile(pod, role), ec);
    }
  }
  if (!stuck.empty()) {
    return Status::Internal(std::to_string(stuck.size()) +
                            " pod process(es) did not exit after SIGKILL");
  }
  return Status::Ok();
}

}  // namespace shoal::control
