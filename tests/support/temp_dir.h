// TempDir: a fresh directory under $TMPDIR (or /tmp), removed with everything in it when the
// object goes away (unless Keep() was called, to look at a failure). Not thread-safe; one owner.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace shoal::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "shoal-test") {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      // Nothing sensible to continue with: tests would write into a shared place.
      std::fprintf(stderr, "mkdtemp(%s): %s\n", tmpl.c_str(), std::strerror(errno));
      std::abort();
    }
    path_ = buf.data();
  }
  ~TempDir() {
    if (keep_ || path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

}  // namespace shoal::testing
