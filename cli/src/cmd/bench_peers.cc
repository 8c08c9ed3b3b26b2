// shoal bench peers [ARGS...]: runs shoal-bench-peers (bench/peers), Shoal against Redis Streams
// and NATS JetStream, with ARGS passed through (`shoal bench peers --help` lists them). The
// benchmark is its own program because it links the peers' C clients, which the main build does
// not need; this command finds it ($SHOAL_BENCH_PEERS, next to `shoal`, or in the build tree) and
// replaces itself with it, telling it where `shoal` and shoal-sidecar are.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cmd/commands.h"
#include "shoal/control/process.h"

namespace shoal::cli {

namespace {

std::string FindBenchPeers() {
  if (const char* env = std::getenv("SHOAL_BENCH_PEERS"); env && *env) return env;
  const std::filesystem::path self = SelfPath();
  std::error_code ec;
  // <build>/cli/shoal -> <build>/bench/peers/shoal-bench-peers
  for (const auto& cand :
       {self.parent_path() / "shoal-bench-peers",
        self.parent_path().parent_path() / "bench" / "peers" / "shoal-bench-peers"}) {
    if (std::filesystem::exists(cand, ec)) return cand.string();
  }
  return "shoal-bench-peers";  // PATH
}

int RunBenchPeers(const std::vector<std::string>& args) {
  const std::string binary = FindBenchPeers();
  ::setenv("SHOAL_CLI", SelfPath().c_str(), /*overwrite=*/0);
  ::setenv("SHOAL_SIDECAR", control::FindSidecarBinary().c_str(), /*overwrite=*/0);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(binary.c_str(), argv.data());
  std::cerr << "shoal bench peers: cannot run " << binary
            << ": it is built only when libhiredis-dev and libnats-dev are installed "
               "(./scripts/install-deps.sh --peers, then build again)\n";
  return 127;
}

}  // namespace

void RegisterBenchPeers(CLI::App& bench, int& exit_code) {
  auto* cmd = bench.add_subcommand(
      "peers", "Shoal against Redis Streams and NATS JetStream (runs shoal-bench-peers)");
  // Everything after `peers`, --help included, belongs to shoal-bench-peers.
  cmd->prefix_command();
  cmd->set_help_flag();
  cmd->callback([cmd, &exit_code] { exit_code = RunBenchPeers(cmd->remaining()); });
}

}  // namespace shoal::cli
