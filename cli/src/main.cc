// shoal: the command-line tool. Local demo, benchmarks; later the local cluster, load, verify.
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <CLI/CLI.hpp>

#include "cmd/commands.h"
#include "shoal/common/logging.h"
#include "shoal/common/version.h"

int main(int argc, char** argv) {
  CLI::App app{
      "shoal: elastic partitioned topics (demo, load, consume, verify, simulate, torture, benchmarks)"};
  app.set_version_flag("--version", "shoal " + shoal::Version());
  app.require_subcommand(1);
  int exit_code = 0;
  shoal::cli::RegisterDemo(app, exit_code);
  shoal::cli::RegisterTorture(app, exit_code);
  shoal::cli::RegisterLoadVerify(app, exit_code);
  shoal::cli::RegisterSimulate(app, exit_code);
  shoal::cli::RegisterUp(app, exit_code);
  shoal::cli::RegisterControl(app, exit_code);
  shoal::cli::RegisterWaitDrained(app, exit_code);
  shoal::cli::RegisterDeleteGroup(app, exit_code);
  shoal::cli::RegisterConsole(app, exit_code);
  auto* bench = app.add_subcommand("bench", "Benchmarks against real sidecars");
  bench->require_subcommand(1);
  shoal::cli::RegisterBenchIngest(*bench, exit_code);
  shoal::cli::RegisterBenchPause(*bench, exit_code);
  shoal::cli::RegisterBenchDrain(*bench, exit_code);
  shoal::cli::RegisterBenchPeers(*bench, exit_code);
  shoal::cli::RegisterBenchProducer(*bench, exit_code);
  shoal::cli::RegisterBenchConsumer(*bench, exit_code);
  (void)shoal::InitLogging("warn");
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
