// Finding and starting the programs the peer benchmark runs: the peers' servers (redis-server,
// nats-server) from Debian's packages, and this project's own binaries from the build tree.
// Servers are control::ChildProcess children: a server still running when its ChildProcess is
// destroyed is killed, so none outlives the benchmark.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "peer_system.h"
#include "shoal/control/process.h"
#include "shoal/common/status.h"

namespace shoal::bench {

// `program` on PATH or in /usr/sbin, /usr/bin (Debian installs nats-server in /usr/sbin); else
// NotFound naming the Debian package that has it and the script that installs it.
Result<std::string> FindServerBinary(const std::string& program, const std::string& package);

// A binary of this project: $env_var when set, next to this program, <build>/<build_dir>/<name>
// when this program runs from <build>/bench/peers, else `name` (PATH).
std::string FindProjectBinary(const std::string& name, const std::string& env_var,
                              const std::string& build_dir);

// Starts a server that listens on one TCP port of 127.0.0.1: argv_for(port) is its command line
// (stdout and stderr go to log_path). Ready when a connection to the port succeeds. A port taken
// by someone else between choosing and binding it (the log says "already in use") is retried on
// another port; a server that exits before it is ready, or is not ready in `timeout`, is an
// error naming its log. On success *port is the port it listens on.
Result<control::ChildProcess> StartServer(
    const std::function<std::vector<std::string>(uint16_t port)>& argv_for,
    const std::string& log_path, std::chrono::milliseconds timeout, uint16_t* port);

// The servers this program runs, for a crash: no destructor runs then, so a handler of the fatal
// signals (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) kills the registered ones before the program
// dies. Register after starting a server and unregister before stopping it; async-signal-safe.
void RegisterServer(pid_t pid);
void UnregisterServer(pid_t pid);
// Installs that handler; once, from main.
void KillServersOnCrash();

// A PeerSystem whose server is one child process listening on one port of 127.0.0.1 (Redis,
// JetStream): what starting, stopping and the "started?" check have in common.
class ServerPeerSystem : public PeerSystem {
 public:
  ~ServerPeerSystem() override { Stop(); }
  void Stop() final;

 protected:
  explicit ServerPeerSystem(std::string binary) : binary_(std::move(binary)) {}
  // StartServer, keeping the child and its port.
  Status StartServerProcess(const std::function<std::vector<std::string>(uint16_t port)>& argv_for,
                            const std::string& log_path);
  // OK once the server runs, else FailedPrecondition.
  Status Started() const;

  const std::string binary_;
  uint16_t port_ = 0;

 private:
  std::optional<control::ChildProcess> server_;
};

}  // namespace shoal::bench
