// The layering of Shoal's modules, checked on the source tree: every `#include` line and every
// CMake link and include-directory line of a module may name only the modules beneath it.
//
//   common  <-  sidecar, client, operator/kubeapi
//   client  <-  operator/control  <-  operator/reconciler
//   client, operator/control  <-  console, harness;  console  <-  operator/reconciler
//   cli and bench use any library; nothing includes or links cli.
//
// A header of another module is named by its include directory (`shoal/<module>/...`); a quoted
// include is otherwise relative to the module's own folders and must not climb out of them
// (`../`). A CMake target belongs to the module whose CMakeLists.txt defines it.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Module {
  std::string dir;                  // relative to the source root
  std::string include_name;         // shoal/<include_name>/, empty when it has no public headers
  std::set<std::string> may_use;    // include names of the modules it may depend on
};

// The layering, one line per module.
std::vector<Module> Layering() {
  return {
      {"common", "common", {}},
      {"sidecar", "sidecar", {"common"}},
      {"client", "client", {"common"}},
      {"operator/kubeapi", "kubeapi", {"common"}},
      {"operator/control", "control", {"common", "client"}},
      {"operator/reconciler", "reconciler", {"common", "client", "control", "kubeapi", "console"}},
      {"console", "console", {"common", "client", "control"}},
      {"harness", "harness", {"common", "client", "control"}},
      {"bench", "", {"common", "client", "control", "harness", "sidecar"}},
      {"cli", "", {"common", "client", "control", "console", "harness"}},
  };
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool IsUnder(const std::string& rel, const std::string& dir) {
  return rel == dir || rel.rfind(dir + "/", 0) == 0;
}

// The module a file (path relative to the root) belongs to: the longest matching folder.
const Module* OwnerOf(const std::vector<Module>& mods, const std::string& rel) {
  const Module* best = nullptr;
  for (const auto& m : mods) {
    if (IsUnder(rel, m.dir) && (!best || m.dir.size() > best->dir.size())) best = &m;
  }
  return best;
}

// The statements `name( ... )` of a CMake file, with comments removed, as token lists.
std::vector<std::vector<std::string>> CMakeCalls(const std::string& text, const std::string& name) {
  std::string clean;
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    const auto hash = l.find('#');
    clean += (hash == std::string::npos ? l : l.substr(0, hash)) + "\n";
  }
  std::vector<std::vector<std::string>> calls;
  size_t pos = 0;
  while ((pos = clean.find(name + "(", pos)) != std::string::npos) {
    if (pos > 0 && (std::isalnum(static_cast<unsigned char>(clean[pos - 1])) || clean[pos - 1] == '_')) {
      pos += name.size();
      continue;
    }
    const auto open = pos + name.size() + 1;
    const auto close = clean.find(')', open);
    if (close == std::string::npos) break;
    std::istringstream toks(clean.substr(open, close - open));
    std::vector<std::string> call;
    for (std::string t; toks >> t;) call.push_back(t);
    calls.push_back(call);
    pos = close;
  }
  return calls;
}

// Every way a module reaches above its layer, one line each ("file: what").
std::vector<std::string> LayeringViolations(const fs::path& root, const std::vector<Module>& mods) {
  std::vector<std::string> out;
  std::map<std::string, const Module*> by_include;
  for (const auto& m : mods) {
    if (!m.include_name.empty()) by_include[m.include_name] = &m;
  }
  const Module* cli = nullptr;
  for (const auto& m : mods) {
    if (m.dir == "cli") cli = &m;
  }

  // Which module defines each CMake target.
  std::map<std::string, const Module*> target_owner;
  std::vector<std::pair<std::string, const Module*>> cmake_files;
  for (const auto& m : mods) {
    if (!fs::exists(root / m.dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / m.dir)) {
      if (!e.is_regular_file() || e.path().filename() != "CMakeLists.txt") continue;
      const auto rel = fs::relative(e.path(), root).generic_string();
      const Module* owner = OwnerOf(mods, rel);
      cmake_files.emplace_back(rel, owner);
      const auto text = ReadFile(e.path());
      for (const char* def : {"add_library", "add_executable"}) {
        for (const auto& call : CMakeCalls(text, def)) {
          if (!call.empty()) target_owner[call[0]] = owner;
        }
      }
    }
  }
  auto may_use = [](const Module& user, const Module& used) {
    return &user == &used || (!used.include_name.empty() && user.may_use.count(used.include_name));
  };

  // Includes.
  const std::regex shoal_include(R"re(^\s*#\s*include\s*[<"]shoal/([a-z_]+)/)re");
  const std::regex quoted_include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  for (const auto& m : mods) {
    if (!fs::exists(root / m.dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / m.dir)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
      const auto rel = fs::relative(e.path(), root).generic_string();
      const Module* owner = OwnerOf(mods, rel);
      if (owner != &m) continue;  // visited as part of its own (nested) module
      std::istringstream lines(ReadFile(e.path()));
      int n = 0;
      for (std::string l; std::getline(lines, l);) {
        ++n;
        std::smatch sm;
        const std::string where = rel + ":" + std::to_string(n) + ": ";
        if (std::regex_search(l, sm, shoal_include)) {
          const auto it = by_include.find(sm[1]);
          if (it == by_include.end()) {
            out.push_back(where + "includes shoal/" + sm[1].str() + "/, which no library provides");
          } else if (!may_use(m, *it->second)) {
            out.push_back(where + m.dir + " includes " + it->second->dir + " (shoal/" +
                          sm[1].str() + "/)");
          }
        } else if (std::regex_search(l, sm, quoted_include)) {
          const std::string path = sm[1];
          const auto target = (e.path().parent_path() / path).lexically_normal();
          const auto target_rel = fs::relative(target, root).generic_string();
          if (path.find("..") != std::string::npos && !IsUnder(target_rel, m.dir)) {
            out.push_back(where + m.dir + " climbs out of its folder to \"" + path + "\"");
          }
          if (cli && &m != cli && (IsUnder(path, "cli") || IsUnder(target_rel, "cli"))) {
            out.push_back(where + m.dir + " includes the CLI's \"" + path + "\"");
          }
        }
      }
    }
  }

  // Links and include directories.
  for (const auto& [rel, owner] : cmake_files) {
    if (!owner) continue;
    const auto text = ReadFile(root / rel);
    for (const auto& call : CMakeCalls(text, "target_link_libraries")) {
      for (size_t i = 1; i < call.size(); ++i) {
        const auto it = target_owner.find(call[i]);
        if (it != target_owner.end() && it->second && !may_use(*owner, *it->second)) {
          out.push_back(rel + ": " + call[0] + " links " + call[i] + " of " + it->second->dir);
        }
      }
    }
    for (const auto& call : CMakeCalls(text, "target_include_directories")) {
      for (size_t i = 1; i < call.size(); ++i) {
        const auto& dir = call[i];
        for (const auto& m : mods) {
          const std::string marker = "${PROJECT_SOURCE_DIR}/" + m.dir;
          if (dir.rfind(marker, 0) == 0 && !may_use(*owner, m)) {
            out.push_back(rel + ": " + call[0] + " includes the folder " + dir);
          }
        }
        if (dir.find("..") != std::string::npos) {
          const auto target =
              ((root / rel).parent_path() /
               std::regex_replace(dir, std::regex(R"(\$\{CMAKE_CURRENT_SOURCE_DIR\}/?)"), ""))
                  .lexically_normal();
          if (!IsUnder(fs::relative(target, root).generic_string(), owner->dir)) {
            out.push_back(rel + ": " + call[0] + " includes the folder " + dir +
                          " outside " + owner->dir);
          }
        }
      }
    }
  }
  return out;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += "  " + l + "\n";
  return s;
}

TEST(LayeringTest, NoModuleIncludesOrLinksAboveItsLayer) {
  const auto violations = LayeringViolations(SHOAL_SOURCE_DIR, Layering());
  EXPECT_TRUE(violations.empty()) << "layering broken:\n" << Joined(violations);
}

TEST(LayeringTest, EveryModuleOfTheLayeringExistsAndHasSources) {
  for (const auto& m : Layering()) {
    SCOPED_TRACE(m.dir);
    ASSERT_TRUE(fs::exists(fs::path(SHOAL_SOURCE_DIR) / m.dir / "CMakeLists.txt"));
    if (!m.include_name.empty() && m.dir != "sidecar") {
      EXPECT_TRUE(fs::exists(fs::path(SHOAL_SOURCE_DIR) / m.dir / "include/shoal" / m.include_name))
          << "the include directory is named after the module";
    }
  }
}

// The scanner itself, on a small tree made for it: each kind of violation is seen.
class LayeringScannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("shoal-layering-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    Write("common/CMakeLists.txt", "add_library(shoal_common src/a.cc)\n");
    Write("common/src/a.cc", "#include \"shoal/common/a.h\"\n");
    Write("client/CMakeLists.txt",
          "add_library(shoal_client src/c.cc)\n"
          "target_link_libraries(shoal_client PUBLIC shoal_common)\n");
    Write("client/src/c.cc", "#include \"shoal/common/a.h\"\n#include \"shoal/client/c.h\"\n");
    Write("cli/CMakeLists.txt",
          "add_executable(shoal src/main.cc)\ntarget_link_libraries(shoal PRIVATE shoal_client)\n");
    Write("cli/src/main.cc", "#include \"shoal/client/c.h\"\n#include \"cmd/x.h\"\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  std::vector<std::string> Scan() {
    return LayeringViolations(root_, {{"common", "common", {}},
                                      {"client", "client", {"common"}},
                                      {"cli", "", {"common", "client"}}});
  }
  fs::path root_;
};

TEST_F(LayeringScannerTest, ACleanTreeHasNoViolations) {
  EXPECT_TRUE(Scan().empty()) << Joined(Scan());
}

TEST_F(LayeringScannerTest, AnIncludeOfAHigherModuleIsSeen) {
  Write("common/src/b.cc", "#include <shoal/client/c.h>\n");
  const auto v = Scan();
  ASSERT_EQ(v.size(), 1u) << Joined(v);
  EXPECT_NE(v[0].find("common/src/b.cc:1: common includes client"), std::string::npos) << v[0];
}

TEST_F(LayeringScannerTest, AnIncludeClimbingIntoTheCliIsSeen) {
  Write("client/src/d.cc", "// reaches into the CLI\n#include \"../../cli/src/cmd/x.h\"\n");
  const auto v = Scan();
  ASSERT_EQ(v.size(), 2u) << Joined(v);
  EXPECT_NE(v[0].find("client/src/d.cc:2: client climbs out"), std::string::npos) << v[0];
  EXPECT_NE(v[1].find("includes the CLI's"), std::string::npos) << v[1];
}

TEST_F(LayeringScannerTest, ALinkOfAHigherTargetIsSeenAcrossLines) {
  Write("common/CMakeLists.txt",
        "add_library(shoal_common src/a.cc)\n"
        "target_link_libraries(shoal_common PUBLIC  # a comment ( with a paren\n"
        "                      zlib\n                      shoal_client)\n");
  const auto v = Scan();
  ASSERT_EQ(v.size(), 1u) << Joined(v);
  EXPECT_NE(v[0].find("shoal_common links shoal_client of client"), std::string::npos) << v[0];
}

TEST_F(LayeringScannerTest, AnIncludeDirectoryOfTheCliIsSeen) {
  Write("client/CMakeLists.txt",
        "add_library(shoal_client src/c.cc)\n"
        "target_include_directories(shoal_client PRIVATE ${PROJECT_SOURCE_DIR}/cli/src)\n");
  const auto v = Scan();
  ASSERT_EQ(v.size(), 1u) << Joined(v);
  EXPECT_NE(v[0].find("includes the folder ${PROJECT_SOURCE_DIR}/cli/src"), std::string::npos)
      << v[0];
}

TEST_F(LayeringScannerTest, AnUnknownShoalIncludeIsSeen) {
  Write("client/src/e.cc", "#include \"shoal/operator/x.h\"\n");
  const auto v = Scan();
  ASSERT_EQ(v.size(), 1u) << Joined(v);
  EXPECT_NE(v[0].find("which no library provides"), std::string::npos) << v[0];
}

}  // namespace
