#include "server_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace shoal::bench {

namespace {

// Slots of RegisterServer: a pid, or 0.
std::atomic<pid_t> g_servers[32];

void OnFatalSignal(int sig) {
  for (auto& slot : g_servers) {
    if (const pid_t pid = slot.load(); pid > 0) ::kill(pid, SIGKILL);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

bool Executable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Whether a TCP connection to 127.0.0.1:port succeeds now.
bool Accepts(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Whether the log, from byte `from` on, says a listen failed on a taken port (Redis writes
// "Address already in use", Go's net package "address already in use").
bool PortWasTaken(const std::string& log_path, std::streamoff from) {
  std::ifstream in(log_path, std::ios::binary);
  if (!in) return false;
  in.seekg(from);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s.find("already in use") != std::string::npos;
}

}  // namespace

void RegisterServer(pid_t pid) {
  for (auto& slot : g_servers) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, pid)) return;
  }
}

void UnregisterServer(pid_t pid) {
  for (auto& slot : g_servers) {
    pid_t mine = pid;
    if (slot.compare_exchange_strong(mine, 0)) return;
  }
}

void KillServersOnCrash() {
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, OnFatalSignal);
}

Result<std::string> FindServerBinary(const std::string& program, const std::string& package) {
  std::vector<std::filesystem::path> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string d; std::getline(ss, d, ':');) {
      if (!d.empty()) dirs.emplace_back(d);
    }
  }
  dirs.emplace_back("/usr/sbin");
  dirs.emplace_back("/usr/bin");
  for (const auto& d : dirs) {
    if (Executable(d / program)) return (d / program).string();
  }
  return Status::NotFound(program + " is not installed (Debian package " + package +
                          "); ./scripts/install-deps.sh --peers installs the peers' servers and "
                          "clients");
}

std::string FindProjectBinary(const std::string& name, const std::string& env_var,
                              const std::string& build_dir) {
  if (const char* env = std::getenv(env_var.c_str()); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // <build>/bench/peers/shoal-bench-peers -> <build>/<build_dir>/<name>
    for (const auto& cand : {self.parent_path() / name,
                             self.parent_path().parent_path().parent_path() / build_dir / name}) {
      if (Executable(cand)) return cand.string();
    }
  }
  return name;
}

Result<control::ChildProcess> StartServer(
    const std::function<std::vector<std::string>(uint16_t port)>& argv_for,
    const std::string& log_path, std::chrono::milliseconds timeout, uint16_t* port) {
  for (int attempt = 1;; ++attempt) {
    auto free_port = control::FreePort("127.0.0.1");
    if (!free_port.ok()) return free_port.status();
    const auto argv = argv_for(*free_port);
    std::error_code ec;
    const auto log_before =
        std::filesystem::exists(log_path, ec)
            ? static_cast<std::streamoff>(std::filesystem::file_size(log_path, ec))
            : 0;
    auto child = control::ChildProcess::Spawn(argv, log_path);
    if (!child.ok()) return child.status();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(2);
    std::optional<int> exited;
    while (!Accepts(*free_port)) {
      if ((exited = child->Wait(std::chrono::milliseconds(0)))) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        child->Stop(std::chrono::seconds(5));
        return Status::Unavailable(
            argv[0] + " did not listen on 127.0.0.1:" + std::to_string(*free_port) + " within " +
            std::to_string(timeout.count()) + " ms (its log: " + log_path + ")");
      }
      std::this_thread::sleep_for(pause);  // the server is starting; nothing to wait on but time
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    if (!exited) {
      *port = *free_port;
      return child;
    }
    if (attempt >= 4 || !PortWasTaken(log_path, log_before)) {
      return Status::Unavailable(argv[0] + " exited with code " + std::to_string(*exited) +
                                 " before it listened (its log: " + log_path + ")");
    }
  }
}

void ServerPeerSystem::Stop() {
  if (!server_) return;
  UnregisterServer(server_->pid());
  server_->Stop(std::chrono::seconds(10));
  server_.reset();
}

Status ServerPeerSystem::StartServerProcess(
    const std::function<std::vector<std::string>(uint16_t port)>& argv_for,
    const std::string& log_path) {
  auto child = StartServer(argv_for, log_path, std::chrono::seconds(30), &port_);
  if (!child.ok()) return child.status();
  server_.emplace(std::move(child).value());
  RegisterServer(server_->pid());
  return Status::Ok();
}

Status ServerPeerSystem::Started() const {
  return server_ ? Status::Ok() : Status::FailedPrecondition(name() + " is not started");
}

}  // namespace shoal::bench
