// `shoal console`: the live console of a topic whose sidecars this machine reaches (a topic
// started elsewhere with `shoal up --no-load`, or one the operator runs, behind `kubectl
// port-forward` to a pod's admin port), served on a local port (docs/console.md). `shoal up`
// serves the same console for the topic it runs.
#include "shoal/console/console.h"

#include <csignal>
#include <cstdio>
#include <thread>

#include "commands.h"
#include "shoal/client/admin_client.h"
#include "shoal/common/clock.h"
#include "shoal/console/console_server.h"

namespace shoal::cli {

namespace {
std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop.store(true); }
}  // namespace

void RegisterConsole(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("console", "Serve the live console of a running topic");
  struct Opts {
    std::vector<std::string> sidecars;
    std::string token_file;
    std::string topic;
    std::string host = "127.0.0.1";
    uint16_t port = 9401;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--sidecars", o->sidecars,
                  "Admin addresses (host:port) of some of the topic's sidecars; the map they hold "
                  "names the rest")
      ->required()
      ->delimiter(',');
  cmd->add_option("--token-file", o->token_file,
                  "File holding the topic's admin token (`shoal up` writes it in its state "
                  "directory; the operator keeps it in Secret <topic>-admin)")
      ->required();
  cmd->add_option("--topic", o->topic, "Only this topic's map (default: whichever they hold)");
  cmd->add_option("--host", o->host, "Where the console listens");
  cmd->add_option("--port", o->port, "The console's port");
  cmd->callback([o, &exit_code] {
    auto token = ReadTokenFile(o->token_file);
    if (!token.ok()) {
      std::fprintf(stderr, "shoal console: %s (set --token-file)\n",
                   token.status().message().c_str());
      exit_code = 2;
      return;
    }
    const std::string t = *token;
    for (auto& s : o->sidecars) {
      if (s.rfind("http://", 0) == 0) s = s.substr(7);
    }
    client::AdminClient admin(t);
    console::ConsoleOptions co;
    co.topic = o->topic;
    co.seeds = [o] { return o->sidecars; };
    console::Console console(co, admin, SystemClock::Instance());
    console.Sample();
    if (console.StateJson().find("\"map\":null") != std::string::npos) {
      std::fprintf(stderr,
                   "shoal console: none of %zu sidecars answered with a partition map; check "
                   "--sidecars (their admin ports) and --token-file\n",
                   o->sidecars.size());
      exit_code = 1;
      return;
    }
    console::ConsoleServer server(o->host, o->port, console);
    if (Status st = server.Open(); !st.ok()) {
      std::fprintf(stderr, "shoal console: %s (choose another --port)\n", st.message().c_str());
      exit_code = 1;
      return;
    }
    console.Start();
    std::printf("console at %s (Ctrl-C stops it)\n", server.Address().c_str());
    std::fflush(stdout);
    std::signal(SIGINT, OnStop);
    std::signal(SIGTERM, OnStop);
    while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.Close();
    console.Stop();
    exit_code = 0;
  });
}

}  // namespace shoal::cli
