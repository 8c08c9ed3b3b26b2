#include "shoal/control/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "shoal/common/raw_http.h"

extern char** environ;

namespace shoal::control {

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = o.pid_;
    o.pid_ = -1;
  }
  return *this;
}

Result<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                         const std::string& log_path) {
  return Spawn(argv, log_path, SpawnOptions{});
}

Result<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                         const std::string& log_path, const SpawnOptions& options) {
  if (argv.empty()) return Status::InvalidArgument("starting a process: no program given");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  // A detached child must not keep this program's sockets and files open after it is gone.
  if (options.new_session) posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // The child must not inherit signal masks of the parent's threads (sidecars sigwait).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  short flags = POSIX_SPAWN_SETSIGMASK;
  sigset_t defaults;
  sigemptyset(&defaults);
  if (options.new_session) {
    // Nor the stop signals' dispositions: an ignored SIGTERM would survive the exec.
    flags |= POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attr, &defaults);
  }
  posix_spawnattr_setflags(&attr, flags);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::IoError("starting " + argv[0] + ": " + std::strerror(rc));
  ChildProcess p;
  p.pid_ = pid;
  return p;
}

void ChildProcess::Signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      return -1;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);  // polling a child's exit: no event to wait on
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

int ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  Signal(SIGTERM);
  if (auto code = Wait(grace)) return *code;
  Signal(SIGKILL);
  return Wait(std::chrono::seconds(10)).value_or(-1);
}

bool ProcessAlive(pid_t pid, std::optional<int>* exit_code) {
  if (pid <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) {
    if (exit_code) {
      if (WIFEXITED(status)) *exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) *exit_code = 128 + WTERMSIG(status);
    }
    return false;
  }
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  // kill(pid, 0) succeeds on a zombie: an exited process that another parent has not reaped yet.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  const char state = stat[paren + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

bool WaitProcessGone(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (ProcessAlive(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);  // polling a process's exit: no event to wait on
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return true;
}

bool StopProcess(pid_t pid, std::chrono::milliseconds grace) {
  if (!ProcessAlive(pid)) return true;
  ::kill(pid, SIGTERM);
  if (WaitProcessGone(pid, grace)) return true;
  ::kill(pid, SIGKILL);
  return WaitProcessGone(pid, std::chrono::seconds(10));
}

std::vector<std::string> ProcessCmdline(pid_t pid) {
  std::vector<std::string> args;
  if (pid <= 0) return args;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  return args;
}

std::optional<std::chrono::nanoseconds> ProcessCpuTime(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  // Fields after "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15; ++i) {
    if (!(fields >> field)) return std::nullopt;
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (ticks <= 0) return std::nullopt;
  return std::chrono::nanoseconds((utime + stime) * 1'000'000'000ull /
                                  static_cast<uint64_t>(ticks));
}

namespace {

// Whether `port` can be bound on `host` right now.
bool CanBind(const std::string& host, uint16_t port, uint16_t* bound) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  addr.sin_port = htons(port);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (ok && bound) *bound = ntohs(addr.sin_port);
  return ok;
}

// The lowest port the kernel hands out to outgoing connections (32768 by default).
uint16_t EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  unsigned low = 0, high = 0;
  if (in >> low >> high && low > 0 && low < 65536) return static_cast<uint16_t>(low);
  return 32768;
}

}  // namespace

// A port chosen below the kernel's ephemeral range, so that the many outgoing connections of a
// busy machine cannot take it between this check and the child's bind; port 0 (the kernel's
// choice) only when that range is too small to draw from.
Result<uint16_t> FreePort(const std::string& host) {
  constexpr uint16_t kLow = 20000;
  const uint16_t high = EphemeralLow();
  if (high > kLow + 1000) {
    static thread_local std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(kLow, high - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const auto port = static_cast<uint16_t>(pick(rng));
      if (CanBind(host, port, nullptr)) return port;
    }
  }
  uint16_t port = 0;
  if (!CanBind(host, 0, &port)) return Status::IoError("cannot bind a free port on " + host);
  return port;
}

Status WaitForHttp(const std::string& host, uint16_t port, const std::string& path,
                   std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(5);
  while (true) {
    RawHttpConnection conn(host, port);
    auto code = conn.Request("GET", path, "", nullptr);
    if (code.ok() && *code == 200) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable("no 200 from http://" + host + ":" + std::to_string(port) + path +
                                 " within " + std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(pause);  // the server is starting; nothing to wait on but time
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

std::string FindSidecarBinary() {
  if (const char* env = std::getenv("SHOAL_SIDECAR"); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& cand : {self.parent_path() / "shoal-sidecar",
                             self.parent_path().parent_path() / "sidecar" / "shoal-sidecar"}) {
      if (std::filesystem::exists(cand, ec)) return cand.string();
    }
  }
  return "shoal-sidecar";
}

}  // namespace shoal::control

namespace shoal::control {

namespace {

// Whether the log, from byte `from` on, reports a listen that failed on a busy port.
bool LogSaysPortBusy(const std::string& log_path, uintmax_t from) {
  std::ifstream in(log_path, std::ios::binary);
  if (!in) return false;
  in.seekg(static_cast<std::streamoff>(from));
  std::stringstream text;
  text << in.rdbuf();
  return text.str().find("Address already in use") != std::string::npos;
}

}  // namespace

Result<LocalSidecar> LocalSidecar::Start(const LocalSidecarOptions& o) {
  LocalSidecar s;
  s.host = o.host;
  s.data_dir = o.data_dir;
  std::error_code ec;
  std::filesystem::create_directories(o.data_dir, ec);
  if (ec) return Status::IoError("creating " + o.data_dir + ": " + ec.message());
  s.log_path = o.data_dir + "/sidecar.log";
  // Another program may still take a chosen port before the child binds it; then the child says
  // so in its log and exits, and it is started again on other ports.
  for (int attempt = 1;; ++attempt) {
    // Three different ports: drawn independently, two could be the same number (the child
    // would then fail with "http_listener is already registered for this path").
    std::set<uint16_t> taken;
    for (uint16_t* p : {&s.port, &s.admin_port, &s.metrics_port}) {
      Result<uint16_t> port = FreePort(o.host);
      for (int draw = 0; port.ok() && taken.count(*port) && draw < 64; ++draw) {
        port = FreePort(o.host);
      }
      if (!port.ok()) return port.status();
      if (taken.count(*port)) return Status::IoError("cannot find three free ports on " + o.host);
      taken.insert(*port);
      *p = *port;
    }
    std::vector<std::string> argv = {o.binary.empty() ? FindSidecarBinary() : o.binary,
                                     "--topic",
                                     o.topic,
                                     "--partitions",
                                     std::to_string(o.partitions),
                                     "--data-dir",
                                     o.data_dir,
                                     "--bind",
                                     o.host,
                                     "--port",
                                     std::to_string(s.port),
                                     "--admin-port",
                                     std::to_string(s.admin_port),
                                     "--metrics-port",
                                     std::to_string(s.metrics_port),
                                     "--fsync",
                                     o.fsync};
    argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
    s.argv = argv;
    std::error_code size_ec;
    const auto log_before = std::filesystem::file_size(s.log_path, size_ec);
    Status st = s.Restart();
    if (st.ok()) return s;
    if (attempt >= 4 || !LogSaysPortBusy(s.log_path, size_ec ? 0 : log_before)) return st;
  }
}

Status LocalSidecar::Restart() {
  auto child = ChildProcess::Spawn(argv, log_path);
  if (!child.ok()) return child.status();
  process = std::move(child).value();
  return WaitReady();
}

Status LocalSidecar::WaitReady() {
  LocalSidecar& s = *this;
  // Wait for readiness, but notice at once a sidecar that exits (bad flags, a busy port).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    // The metrics port: plain HTTP whatever the data port requires (--tls-client-ca).
    if (WaitForHttp(s.host, s.metrics_port, "/readyz", std::chrono::milliseconds(250)).ok()) {
      return Status::Ok();
    }
    if (auto code = s.process.Wait(std::chrono::milliseconds(0))) {
      return Status::Unavailable("the sidecar exited with code " + std::to_string(*code) +
                                 " before it was ready (its log: " + s.log_path + ")");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable(
          "the sidecar did not become ready within 30 s (its log: " + s.log_path + ")");
    }
  }
}

Result<std::vector<LocalSidecar>> StartPods(int n, const std::string& dir,
                                            const LocalSidecarOptions& base,
                                            const std::string& token,
                                            const std::string& log_level) {
  std::vector<LocalSidecar> pods;
  for (int i = 0; i < n; ++i) {
    LocalSidecarOptions so = base;
    so.data_dir = dir + "/pod-" + std::to_string(i);
    so.extra_args.insert(so.extra_args.end(),
                         {"--pod-name", "pod-" + std::to_string(i), "--admin-token", token,
                          "--wait-for-map", "--log-level", log_level});
    auto s = LocalSidecar::Start(so);
    if (!s.ok()) return s.status();
    pods.push_back(std::move(s).value());
  }
  return pods;
}

PartitionMap WithPeers(PartitionMap map, const std::vector<LocalSidecar>& pods) {
  for (size_t i = 0; i < pods.size(); ++i) {
    map = map.WithPeer(PodName("pod-" + std::to_string(i)),
                       {pods[i].data_address(), pods[i].admin_address()});
  }
  return map;
}

}  // namespace shoal::control
