// TestPki: a CA and certificates signed by it, made with the openssl command in a temporary
// directory, as the operator issues them for a topic (docs/security.md): the topic's pods one
// certificate named shoal-peer.<topic> for server and client use, every other caller a client
// certificate named after it. Shell: a command's exit code and what it printed. Test-only; not
// thread-safe.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>

#include "support/temp_dir.h"

namespace shoal::testing {

// A shell command's exit code and what it printed (stdout and stderr).
inline std::pair<int, std::string> Shell(const std::string& command) {
  std::string out;
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int status = ::pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class TestPki {
 public:
  TestPki() {
    const auto [code, out] = Shell("cd " + dir_.path() +
                                   " && openssl req -x509 -newkey ec -pkeyopt "
                                   "ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
                                   "-out ca.pem -days 2 -subj /CN=shoal-test-ca");
    EXPECT_EQ(code, 0) << out;
  }
  // Makes NAME.pem and NAME.key with common name `cn` and the extensions `ext` (openssl x509
  // -extfile lines; by default a name of 127.0.0.1 and localhost, for any use).
  void Issue(const std::string& name, const std::string& cn,
             const std::string& ext = "subjectAltName=IP:127.0.0.1,DNS:localhost") {
    const auto [code, out] =
        Shell("cd " + dir_.path() + " && openssl req -newkey ec -pkeyopt " +
              "ec_paramgen_curve:prime256v1 -nodes -keyout " + name + ".key.new -out " + name +
              ".csr -subj /CN=" + cn + " && printf '" + ext + "\\n' > " + name + ".ext" +
              " && openssl x509 -req -in " + name +
              ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -out " + name +
              ".pem.new -days 2 -extfile " + name + ".ext" + " && mv " + name + ".key.new " + name +
              ".key && mv " + name + ".pem.new " + name + ".pem");
    EXPECT_EQ(code, 0) << out;
  }
  // The topic's pods' certificate, as the operator issues it.
  void IssuePeer(const std::string& name, const std::string& topic) {
    Issue(name, "shoal-peer." + topic,
          "subjectAltName=DNS:shoal-peer." + topic + "\\nextendedKeyUsage=serverAuth,clientAuth");
  }
  // A caller's client certificate (no server use: it cannot pass for a pod).
  void IssueClient(const std::string& name) { Issue(name, name, "extendedKeyUsage=clientAuth"); }
  std::string Path(const std::string& file) const { return dir_.path() + "/" + file; }
  // curl's flags to call as NAME (its certificate and key, the CA).
  std::string Curl(const std::string& name) const {
    return "curl -sS --cacert " + Path("ca.pem") + " --cert " + Path(name + ".pem") + " --key " +
           Path(name + ".key") + " ";
  }

 private:
  TempDir dir_;
};

}  // namespace shoal::testing
