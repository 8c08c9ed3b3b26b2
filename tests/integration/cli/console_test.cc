// The live console (issue 27): `shoal up` prints its address; headless Chromium (Debian's
// package) opens it during a flash sale and the page shows the split on the ring and in the
// lineage, the group's lag per partition and a decision's reason, and browses a key's events,
// with no error in the page, and the numbers it shows agree with the sidecars' admin planes.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "shoal/client/admin_client.h"
#include "shoal/control/process.h"
#include "short_sale.h"
#include "support/http_test_client.h"
#include "support/loopback.h"
#include "support/sidecar_process.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace shoal {
namespace {

using namespace std::chrono_literals;

using testing::ReadAll;

std::string Chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

// Headless Chromium on `url`: the DOM once the page's scripts ran (`--dump-dom`), or a
// screenshot; its own log (console messages included) in `log`.
Result<std::string> RunChromium(const std::string& dir, const std::string& url,
                                const std::string& what, const std::string& log) {
  // Through sh, for the DOM on stdout apart from the log on stderr; every word is the test's own.
  const std::string out = dir + "/chromium.out";
  const std::string command = Chromium() +
                              " --headless --no-sandbox --disable-gpu --no-first-run"
                              " --user-data-dir='" +
                              dir + "/chromium-profile' --enable-logging=stderr --v=0" +
                              " --window-size=1400,1800 --virtual-time-budget=6000 '" + what +
                              "' '" + url + "' > '" + out + "'";
  auto p = control::ChildProcess::Spawn({"/bin/sh", "-c", command}, log);
  if (!p.ok()) return p.status();
  const auto code = p->Wait(90s);
  if (!code) return Status::Unavailable("chromium did not finish in 90 s; see " + log);
  if (*code != 0) return Status::Unavailable("chromium exited " + std::to_string(*code));
  return ReadAll(out);
}

// Every value of `attr` in the elements whose opening tag matches `tag_pattern`.
std::vector<std::string> Attrs(const std::string& dom, const std::string& tag_pattern,
                               const std::string& attr) {
  std::vector<std::string> out;
  const std::regex tag("<" + tag_pattern + "[^>]*>");
  const std::regex value(attr + "=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), tag); it != std::sregex_iterator();
       ++it) {
    std::smatch m;
    const std::string t = it->str();
    if (std::regex_search(t, m, value)) out.push_back(m[1]);
  }
  return out;
}

TEST(ConsoleTest, ChromiumSeesTheSplitTheLagADecisionAndAKeysEventsDuringAFlashSale) {
  ASSERT_FALSE(Chromium().empty())
      << "headless Chromium is needed: scripts/install-deps.sh --observe installs it";
  testing::TempDir dir("shoal-console");
  // The group's lag stays in view: no shrinking back within the test's minute.
  const std::string topic = testing::WriteShortSaleTopic(dir.path(), "", 60);
  auto ports = testing::PickFreePorts(1);
  ASSERT_TRUE(ports.ok()) << ports.status().message();
  const std::string port = std::to_string((*ports)[0]);
  const std::string state = dir.path() + "/state";
  auto up = control::ChildProcess::Spawn(
      {SHOAL_BIN, "up", topic, "--duration", "60", "--rate", "400", "--state-dir", state,
       "--report", dir.path() + "/report", "--control-port", "0", "--console-port", port,
       "--ip-prefix", testing::RandomLoopbackPrefix(), "--unannounced", "--fresh"},
      dir.path() + "/up.log");
  ASSERT_TRUE(up.ok()) << up.status().message();
  struct Stop {
    control::ChildProcess& p;
    ~Stop() {
      p.Signal(SIGINT);
      if (!p.Wait(60s)) p.Stop(1s);
    }
  } stop{*up};

  // `shoal up` prints the console's address.
  const std::string base = "http://127.0.0.1:" + port + "/";
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return ReadAll(dir.path() + "/up.log").find("console at " + base) != std::string::npos;
      },
      60s))
      << ReadAll(dir.path() + "/up.log");

  // The surge splits the topic: wait (on the console's API) until the lineage holds a partition
  // made by a split, the group has lag somewhere and a decision with its reason was recorded.
  testing::HttpTestClient api("http://127.0.0.1:" + port);
  simdjson::dom::parser parser;
  std::string state_json;
  const bool split = testing::WaitFor(
      [&] {
        testing::HttpResponse r = api.Get("/api/state");
        if (r.status != 200) return false;
        state_json = r.body;
        simdjson::dom::element doc;
        simdjson::dom::array decisions, parts;
        if (parser.parse(simdjson::padded_string(state_json)).get(doc) ||
            doc["decisions"].get(decisions) || doc["map"]["partitions"].get(parts)) {
          return false;
        }
        bool successor = false;
        for (auto p : parts) {
          simdjson::dom::array parents;
          if (!p["parents"].get(parents) && parents.size() > 0) successor = true;
        }
        return successor && decisions.size() > 0 &&
               state_json.find("\"groups\":[\"app\"]") != std::string::npos;
      },
      90s);
  ASSERT_TRUE(split) << state_json.substr(0, 3000) << "\n" << ReadAll(dir.path() + "/up.log");

  const std::string token = ReadAll(state + "/admin-token");
  client::AdminClient admin(std::string(token.substr(0, token.find_last_not_of("\n ") + 1)));
  const std::string key = "key-7";
  std::string dom;
  Result<PartitionMap> map = Status::Unavailable("not read");
  // The pod the console read its map from (the first of the map's peers): its admin plane.
  std::string first_admin;
  {
    simdjson::dom::element doc;
    ASSERT_FALSE(parser.parse(simdjson::padded_string(state_json)).get(doc));
    for (auto [pod, peer] : doc["map"]["peers"].get_object()) {
      std::string_view a;
      ASSERT_FALSE(peer["admin"].get(a));
      first_admin = std::string(a);
      break;
    }
  }
  // The admin plane's map is read just before and just after Chromium loads the page: the page
  // drew one of the two when its epoch is one of theirs. During the surge the map changes every
  // few seconds, as long as a page load takes: then both are read again.
  std::string page_epoch, seen_epochs;
  for (int attempt = 0; attempt < 10 && !map.ok(); ++attempt) {
    auto before = admin.GetMap(first_admin);
    ASSERT_TRUE(before.ok()) << before.status().message();
    auto page =
        RunChromium(dir.path(), base + "?key=" + key, "--dump-dom", dir.path() + "/chromium.log");
    ASSERT_TRUE(page.ok()) << page.status().message() << "\n"
                           << ReadAll(dir.path() + "/chromium.log");
    auto after = admin.GetMap(first_admin);
    ASSERT_TRUE(after.ok()) << after.status().message();
    dom = *page;
    const auto epochs = Attrs(dom, "svg id=\"ring\"", "data-epoch");
    ASSERT_EQ(epochs.size(), 1u) << dom;
    page_epoch = epochs[0];
    seen_epochs += " " + std::to_string(before->epoch().value()) + "/" + page_epoch + "/" +
                   std::to_string(after->epoch().value());
    // The same epoch before and after: no change in between, so that map is the page's.
    if (before->epoch() == after->epoch() &&
        std::to_string(after->epoch().value()) == page_epoch) {
      map = std::move(after);
    }
  }
  ASSERT_TRUE(map.ok()) << "the map changed during every page load (before/page/after epochs:"
                        << seen_epochs << ")";
  ASSERT_TRUE(map.ok());
  SCOPED_TRACE(dom);

  // No error in the page: its own error box is empty, and Chromium logged no console error.
  EXPECT_EQ(Attrs(dom, "div id=\"errors\"", "data-count"), std::vector<std::string>{"0"});
  EXPECT_EQ(Attrs(dom, "body", "data-loaded"), std::vector<std::string>{"1"});
  const std::string chromium_log = ReadAll(dir.path() + "/chromium.log");
  EXPECT_EQ(chromium_log.find(":CONSOLE"), std::string::npos) << chromium_log;

  // The ring: one arc per active partition of the admin plane's map, each on its owner.
  std::set<std::string> arcs, active;
  std::map<std::string, std::string> arc_owner;
  const auto arc_ids = Attrs(dom, "path[^>]*class=\"arc\"", "data-partition");
  const auto arc_owners = Attrs(dom, "path[^>]*class=\"arc\"", "data-owner");
  ASSERT_EQ(arc_ids.size(), arc_owners.size());
  for (size_t i = 0; i < arc_ids.size(); ++i) {
    arcs.insert(arc_ids[i]);
    arc_owner[arc_ids[i]] = arc_owners[i];
  }
  for (const auto& p : map->partitions()) {
    if (p.state != PartitionState::kActive) continue;
    const std::string id = std::to_string(p.id.value());
    active.insert(id);
    EXPECT_EQ(arc_owner[id], p.owner.value()) << "partition " << id;
  }
  EXPECT_EQ(arcs, active);
  EXPECT_GT(arcs.size(), 2u) << "the ring does not show the split";

  // The lineage: a split's successors beside their parent (sealed, or retired once read).
  const auto states = Attrs(dom, "g class=\"node[^\"]*\"", "data-state");
  EXPECT_GT(std::count(states.begin(), states.end(), "sealed") +
                std::count(states.begin(), states.end(), "retired"),
            0)
      << "the lineage shows no parent";
  EXPECT_GE(static_cast<size_t>(std::count(states.begin(), states.end(), "active")), active.size());

  // The group's lag per partition: a cell for every partition of the map. The console's map
  // may be one sample older than the admin plane's at the same epoch: partitions retired since
  // (retirement keeps the epoch) may still have their cells, and only those.
  const auto lag_cells = Attrs(dom, "td class=\"num lag[^\"]*\"", "data-partition");
  const std::set<std::string> cells(lag_cells.begin(), lag_cells.end());
  std::set<std::string> in_map;
  for (const auto& p : map->partitions()) {
    in_map.insert(std::to_string(p.id.value()));
    EXPECT_TRUE(cells.count(std::to_string(p.id.value()))) << "no lag cell for #" << p.id.value();
  }
  for (const auto& c : cells) {
    if (in_map.count(c)) continue;
    auto id = std::stoul(c);
    EXPECT_LT(id, map->NextId().value()) << "a lag cell for #" << c << ", which the map never had";
    EXPECT_FALSE(map->Find(PartitionId(static_cast<uint32_t>(id))))
        << "#" << c << " is in the map";
  }
  EXPECT_EQ(lag_cells.size(), cells.size()) << "a partition with two lag cells";
  EXPECT_NE(dom.find("<tr data-group=\"app\">"), std::string::npos);

  // A decision with its reason.
  const std::regex reason("<span class=\"reason\">([^<]+)</span>");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, reason)) << "no decision shown";
  EXPECT_NE(m[1].str().find("arrival"), std::string::npos) << m[1].str();

  // A key's events: each of that key, in offset order per partition, the first one what the
  // admin plane browses first for that key.
  EXPECT_EQ(Attrs(dom, "body", "data-browsed"), std::vector<std::string>{"1"});
  const auto parts = Attrs(dom, "tr class=\"event\"", "data-partition");
  const auto offsets = Attrs(dom, "tr class=\"event\"", "data-offset");
  ASSERT_FALSE(parts.empty()) << "no event of " << key << " shown";
  const std::regex key_cell("<td class=\"key\">([^<]*)</td>");
  size_t keys = 0;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), key_cell);
       it != std::sregex_iterator(); ++it, ++keys) {
    EXPECT_EQ((*it)[1].str(), key);
  }
  EXPECT_EQ(keys, parts.size());
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == parts[i - 1]) {
      EXPECT_LT(std::stoull(offsets[i - 1]), std::stoull(offsets[i]));
    }
  }
  const PartitionInfo* first = map->Find(PartitionId(static_cast<uint32_t>(std::stoul(parts[0]))));
  if (first) {  // still in the map (not retired between the two reads)
    auto browse =
        admin.Get(map->Peer(first->owner)->admin,
                  "/v1/admin/partitions/" + parts[0] + "/events?key=" + key + "&max=1", true);
    ASSERT_TRUE(browse.ok()) << browse.status().message();
    EXPECT_NE(browse->find("\"offset\":" + offsets[0] + ","), std::string::npos) << *browse;
  }

  // A picture of the page during the split, kept with the test's files.
  auto shot = RunChromium(dir.path(), base, "--screenshot=" + dir.path() + "/console.png",
                          dir.path() + "/chromium-shot.log");
  EXPECT_TRUE(shot.ok()) << shot.status().message();
  EXPECT_TRUE(std::filesystem::file_size(dir.path() + "/console.png") > 10000);
}

}  // namespace
}  // namespace shoal
