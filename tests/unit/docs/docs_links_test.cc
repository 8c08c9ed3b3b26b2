// A user has the repository and nothing beside it: every link in README.md, docs/ and the module
// READMEs must resolve to a file or directory inside the repository (an anchor after '#' is not
// checked), and no page may send the reader to the sibling directory the developers keep their
// design notes in, which users do not have. Links to
// http(s) and mailto are outside this check.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = fs::weakly_canonical(SHOAL_SOURCE_DIR);

// The pages a user reads: README.md, docs/*.md and every README.md below the top level (build and
// tool directories aside).
std::vector<fs::path> Pages() {
  std::vector<fs::path> out = {kRoot / "README.md"};
  for (const auto& e : fs::directory_iterator(kRoot / "docs")) {
    if (e.path().extension() == ".md") out.push_back(e.path());
  }
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() &&
        (name == "build" || name.rfind('.', 0) == 0 || name == "node_modules")) {
      it.disable_recursion_pending();
      continue;
    }
    if (name == "README.md" && it->path().parent_path() != kRoot) out.push_back(it->path());
  }
  return out;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether `p` is `kRoot` or below it.
bool Inside(const fs::path& p) {
  const std::string root = kRoot.string(), s = p.string();
  return s == root || s.rfind(root + "/", 0) == 0;
}

TEST(DocsLinksTest, EveryLinkResolvesInsideTheRepository) {
  const std::regex link(R"(\]\(([^)\s]+)\))");
  size_t checked = 0;
  const auto pages = Pages();
  ASSERT_GE(pages.size(), 10u);
  for (const fs::path& page : pages) {
    const std::string text = Read(page);
    const std::string name = fs::relative(page, kRoot).string();
    const std::string sibling = std::string("..") + "/" + "shared";
    EXPECT_EQ(text.find(sibling), std::string::npos) << name << " points to " << sibling;
    for (auto m = std::sregex_iterator(text.begin(), text.end(), link); m != std::sregex_iterator();
         ++m) {
      std::string target = (*m)[1].str();
      if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 ||
          target.rfind("mailto:", 0) == 0 || target.rfind('#', 0) == 0) {
        continue;
      }
      if (const size_t hash = target.find('#'); hash != std::string::npos) target.resize(hash);
      const fs::path resolved = fs::weakly_canonical(page.parent_path() / target);
      ++checked;
      EXPECT_TRUE(Inside(resolved)) << name << ": " << target << " points outside the repository";
      EXPECT_TRUE(fs::exists(resolved)) << name << ": " << target << " does not exist";
    }
  }
  EXPECT_GE(checked, 20u) << "the pattern finds too few links to be checking anything";
}

// The code cites invariants by number ("invariant 3", "invariants 2 and 5"); each number it cites
// has its entry in docs/guarantees.md ("## 3." or "**9.").
TEST(DocsLinksTest, EveryInvariantTheCodeCitesIsInTheGuarantees) {
  const std::string guarantees = Read(kRoot / "docs" / "guarantees.md");
  const std::regex cite(R"([Ii]nvariants? (\d+)((?:(?:, | and | or )\d+)*))");
  const std::regex number(R"(\d+)");
  std::set<int> cited;
  for (const char* dir : {"common", "sidecar", "client", "operator", "cli", "tests", "bench"}) {
    for (const auto& e : fs::recursive_directory_iterator(kRoot / dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cc" && ext != ".h") continue;
      const std::string text = Read(e.path());
      for (auto m = std::sregex_iterator(text.begin(), text.end(), cite);
           m != std::sregex_iterator(); ++m) {
        const std::string all = (*m)[1].str() + (*m)[2].str();
        for (auto n = std::sregex_iterator(all.begin(), all.end(), number);
             n != std::sregex_iterator(); ++n) {
          cited.insert(std::stoi((*n).str()));
        }
      }
    }
  }
  ASSERT_GE(cited.size(), 10u);
  for (int n : cited) {
    const std::string id = std::to_string(n) + ". ";
    EXPECT_TRUE(guarantees.find("## " + id) != std::string::npos ||
                guarantees.find("**" + id) != std::string::npos)
        << "the code cites invariant " << n << "; docs/guarantees.md has no entry for it";
  }
}

}  // namespace
