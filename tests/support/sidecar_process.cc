#include "support/sidecar_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

extern char** environ;

namespace shoal::testing {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollEvery = std::chrono::milliseconds(20);
constexpr int kStartAttempts = 3;

Status Errno(const std::string& what) {
  return Status::Internal(what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::vector<uint16_t>> PickFreePorts(size_t n) {
  // Below the kernel's ephemeral range (ip_local_port_range, 32768 by default): a port picked
  // from that range can be taken by some client's outgoing connection while its sidecar is down,
  // and a Restart on the same ports then finds it in use.
  int low = 32768;
  {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    int l = 0;
    if (range >> l && l > 11000) low = l;
  }
  static std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(10000, low - 1);
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  Status st;
  for (int attempt = 0; ports.size() < n && attempt < 1000 && st.ok(); ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      st = Errno("socket");
      break;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(pick(rng)));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);  // taken: another
      continue;
    }
    fds.push_back(fd);  // held until all are picked, so that they differ
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) ::close(fd);
  if (!st.ok()) return st;
  if (ports.size() < n) return Status::Unavailable("no free ports below " + std::to_string(low));
  return ports;
}

double SumMetric(const std::string& exposition, const std::string& name) {
  double sum = 0;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || !line.starts_with(name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;  // a longer name that starts the same
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    sum += std::strtod(line.c_str() + space + 1, nullptr);
  }
  return sum;
}

SidecarProcess::SidecarProcess(SidecarOptions options) : opts_(std::move(options)) {
  if (opts_.data_dir.empty()) {
    owned_dir_ = std::make_unique<TempDir>("shoal-sidecar");
    data_dir_ = owned_dir_->path();
  } else {
    data_dir_ = opts_.data_dir;
  }
}

SidecarProcess::~SidecarProcess() { Kill9(); }

Status SidecarProcess::Start() {
  if (pid_ > 0) return Status::FailedPrecondition("the sidecar is already running");
  Status st;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    auto ports = PickFreePorts(3);
    if (!ports.ok()) return ports.status();
    port_ = (*ports)[0];
    admin_port_ = (*ports)[1];
    metrics_port_ = (*ports)[2];
    st = Spawn();
    if (st.ok()) st = WaitReady();
    if (st.ok()) return st;
    // Most likely a port was taken between picking and binding: try new ones, unless the child
    // is still running (then it is not a start-up failure, just slow).
    if (Running()) {
      Kill9();
      return st;
    }
  }
  return st;
}

Status SidecarProcess::Restart() {
  if (Running()) return Status::FailedPrecondition("the sidecar is still running");
  if (port_ == 0) return Status::FailedPrecondition("Restart before Start");
  SHOAL_RETURN_IF_ERROR(Spawn());
  return WaitReady();
}

Status SidecarProcess::Spawn() {
  std::vector<std::string> args = {opts_.binary,
                                   "--topic",
                                   opts_.topic,
                                   "--partitions",
                                   std::to_string(opts_.partitions),
                                   "--data-dir",
                                   data_dir_,
                                   "--bind",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(port_),
                                   "--admin-port",
                                   std::to_string(admin_port_),
                                   "--metrics-port",
                                   std::to_string(metrics_port_),
                                   "--fsync",
                                   opts_.fsync,
                                   "--log-level",
                                   opts_.log_level};
  if (!opts_.admin_token.empty()) {
    args.push_back("--admin-token");
    args.push_back(opts_.admin_token);
  }
  args.insert(args.end(), opts_.extra_args.begin(), opts_.extra_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The child sees only the flags: variables the sidecar reads as defaults are dropped.
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view v(*e);
    if (v.starts_with("SHOAL_ADMIN_TOKEN=") || v.starts_with("POD_NAME=")) continue;
    envp.push_back(*e);
  }
  envp.push_back(nullptr);

  const std::string log = log_path();
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Errno("opening " + log);
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) {
    ::close(log_fd);
    return Errno("opening /dev/null");
  }
  {
    std::ofstream mark(log, std::ios::app);
    mark << "---- test harness: starting " << opts_.binary << " on ports " << port_ << "/"
         << admin_port_ << "/" << metrics_port_ << "\n";
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(devnull);
    return Errno("fork");
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until execve.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    // The test runner may have blocked signals the sidecar waits for; start it with none blocked.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    static const char kMsg[] = "test harness: execve of the sidecar failed\n";
    (void)!::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(devnull);
  pid_ = pid;
  last_exit_code_ = -1;
  return Status::Ok();
}

Status SidecarProcess::WaitReady() {
  const auto deadline = Clock::now() + opts_.ready_timeout;
  // The metrics port's /readyz: plain HTTP whatever the data port requires.
  HttpTestClient client(metrics_url(), std::chrono::seconds(2));
  while (true) {
    int code = 0;
    if (Reap(false, &code)) {
      return Status::Unavailable("the sidecar exited with code " + std::to_string(code) +
                                 " before it was ready\n" + Describe());
    }
    HttpResponse r = client.Get("/readyz");
    if (r.status == 200) return Status::Ok();
    if (Clock::now() >= deadline) {
      return Status::Unavailable("the sidecar was not ready within " +
                                 std::to_string(opts_.ready_timeout.count()) +
                                 " ms; last /readyz: " + r.Describe() + "\n" + Describe());
    }
    std::this_thread::sleep_for(kPollEvery);
  }
}

bool SidecarProcess::Reap(bool block, int* exit_code) {
  if (pid_ <= 0) return false;
  int wstatus = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &wstatus, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  int code = -1;
  if (r == pid_) {
    if (WIFEXITED(wstatus)) code = WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus)) code = 128 + WTERMSIG(wstatus);
  }
  pid_ = -1;
  last_exit_code_ = code;
  if (exit_code) *exit_code = code;
  return true;
}

bool SidecarProcess::Running() {
  if (pid_ <= 0) return false;
  return !Reap(false, nullptr);
}

void SidecarProcess::Kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  Reap(true, nullptr);
}

Result<int> SidecarProcess::Terminate(std::chrono::milliseconds deadline) {
  if (pid_ <= 0) return Status::FailedPrecondition("the sidecar is not running");
  if (::kill(pid_, SIGTERM) != 0) return Errno("kill SIGTERM");
  const auto until = Clock::now() + deadline;
  int code = 0;
  while (!Reap(false, &code)) {
    if (Clock::now() >= until) {
      Kill9();
      return Status::Unavailable("the sidecar did not exit within " +
                                 std::to_string(deadline.count()) + " ms of SIGTERM\n" +
                                 Describe());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return code;
}

std::unique_ptr<HttpTestClient> SidecarProcess::DataClient(
    std::chrono::milliseconds timeout) const {
  return std::make_unique<HttpTestClient>(data_url(), timeout);
}

std::unique_ptr<HttpTestClient> SidecarProcess::AdminClient() const {
  return std::make_unique<HttpTestClient>(admin_url(), std::chrono::seconds(10));
}

std::unique_ptr<HttpTestClient> SidecarProcess::MetricsClient() const {
  return std::make_unique<HttpTestClient>(metrics_url(), std::chrono::seconds(10));
}

std::string SidecarProcess::Describe(size_t lines) const {
  std::ostringstream out;
  out << "sidecar pid=" << pid_ << " last_exit=" << last_exit_code_ << " ports=" << port_ << "/"
      << admin_port_ << "/" << metrics_port_ << " dir=" << data_dir_ << "\n";
  std::ifstream in(log_path());
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  out << "last " << tail.size() << " lines of " << log_path() << ":\n";
  for (const auto& l : tail) out << "  " << l << "\n";
  return out.str();
}

}  // namespace shoal::testing
