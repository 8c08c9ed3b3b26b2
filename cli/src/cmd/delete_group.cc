// `shoal delete-group GROUP`: forgets a consumer group that is gone for good on the given sidecars
// (docs/admin-api.md, "Deleting a group"), so that it no longer holds back retention and the
// retirement of sealed partitions. Run it against every sidecar of the topic (--all finds them in
// the map); in a cluster, in a pod's sidecar container, where the defaults find the sidecar and
// its token.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "shoal/client/admin_client.h"

namespace shoal::cli {

void RegisterDeleteGroup(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "delete-group", "Forget a consumer group that is gone for good on the given sidecars");
  struct Opts {
    std::string group;
    std::vector<std::string> admins;  // empty: $POD_IP (or 127.0.0.1) and --admin-port
    uint16_t admin_port = 8081;
    std::string token_file = "/etc/shoal/admin/token";
    bool force = false;
    bool all = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("group", o->group, "The consumer group")->required();
  cmd->add_option("--admin", o->admins,
                  "A sidecar's admin address (host:port); repeat for each sidecar of the topic. "
                  "Default: this pod's sidecar ($POD_IP, or 127.0.0.1, and --admin-port)");
  cmd->add_option("--admin-port", o->admin_port, "The sidecar's admin port (with the default)");
  cmd->add_option("--token-file", o->token_file, "File holding the admin bearer token");
  cmd->add_flag("--all", o->all,
                "Also every other sidecar of the topic, as the map held by the first one lists "
                "them (retirement needs the group gone on every pod)");
  cmd->add_flag("--force", o->force,
                "Delete even while the group looks alive (a batch out, or a read or commit within "
                "the sidecar's --redelivery-ms): its consumers then start over as a new group");
  cmd->callback([o, &exit_code] {
    auto token = ReadTokenFile(o->token_file);
    if (!token.ok()) {
      std::fprintf(stderr, "shoal delete-group: %s (set --token-file)\n",
                   token.status().message().c_str());
      exit_code = 2;
      return;
    }
    const std::string t = *token;
    std::vector<std::string> admins = o->admins;
    if (admins.empty()) {
      const char* ip = std::getenv("POD_IP");
      admins.push_back(std::string(ip && *ip ? ip : "127.0.0.1") + ":" +
                       std::to_string(o->admin_port));
    }
    for (auto& admin : admins) {
      if (admin.rfind("http://", 0) == 0) admin = admin.substr(7);
    }
    client::AdminClient client(t);
    if (o->all) {
      auto map = client.GetMap(admins.front());
      if (!map.ok()) {
        std::fprintf(stderr, "shoal delete-group: reading the map from %s: %s\n",
                     admins.front().c_str(), map.status().message().c_str());
        exit_code = 1;
        return;
      }
      for (const auto& [pod, address] : map->peers()) {
        if (std::find(admins.begin(), admins.end(), address.admin) == admins.end()) {
          admins.push_back(address.admin);
        }
      }
    }
    exit_code = 0;
    for (const std::string& admin : admins) {
      auto answer = client.DeleteGroup(admin, o->group, o->force);
      if (answer.ok()) {
        std::printf("%s: %s\n", admin.c_str(), answer->c_str());
      } else {
        std::fprintf(stderr, "shoal delete-group: %s: %s\n", admin.c_str(),
                     answer.status().message().c_str());
        exit_code = 1;
      }
    }
  });
}

}  // namespace shoal::cli
