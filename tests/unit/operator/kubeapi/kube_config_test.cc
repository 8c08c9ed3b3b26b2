// Where KubeConfig comes from: the service account volume and KUBERNETES_SERVICE_* inside a pod
// (IPv6 in brackets; each missing piece named in the error), and kubeconfig files (token,
// tokenFile, client certificate and key as files or base64 data, the CA, contexts by name or
// current-context, the context's namespace, relative paths from the file's directory, exec
// plugins refused). Everything runs in a temp dir; the environment is set and restored per
// test.
#include <gtest/gtest.h>
#include <stdlib.h>

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/asyncrt_utils.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "shoal/kubeapi/kube_client.h"
#include "support/temp_dir.h"

namespace shoal::kubeapi {
namespace {

using shoal::testing::TempDir;

// Sets (or with nullopt unsets) an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string Base64(const std::string& s) {
  return utility::conversions::to_base64(std::vector<unsigned char>(s.begin(), s.end()));
}

constexpr char kCaPem[] = "-----BEGIN CERTIFICATE-----\nCA-FOR-TESTS\n-----END CERTIFICATE-----\n";
constexpr char kCertPem[] = "-----BEGIN CERTIFICATE-----\nCLIENT-CERT\n-----END CERTIFICATE-----\n";
constexpr char kKeyPem[] = "-----BEGIN PRIVATE KEY-----\nCLIENT-KEY\n-----END PRIVATE KEY-----\n";

// --- In-cluster ------------------------------------------------------------------------------

class KubeConfigInClusterTest : public ::testing::Test {
 protected:
  void WriteAll() {
    Write(dir_.path() + "/token", "sa-token\n");
    Write(dir_.path() + "/ca.crt", kCaPem);
    Write(dir_.path() + "/namespace", "shoal-system\n");
  }
  TempDir dir_{"kube-config"};
};

TEST_F(KubeConfigInClusterTest, ReadsServiceAccountAndEnvironment) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  WriteAll();
  auto config = InClusterConfig(dir_.path());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token_file, dir_.path() + "/token");
  EXPECT_TRUE(config->token.empty());  // read (and re-read) from the file by the client
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_EQ(config->ns, "shoal-system");
  EXPECT_FALSE(config->insecure_skip_tls_verify);
}

TEST_F(KubeConfigInClusterTest, PutsIpv6HostInBrackets) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  WriteAll();
  auto config = InClusterConfig(dir_.path());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://[fd00:10:96::1]:6443");
}

TEST_F(KubeConfigInClusterTest, NamesMissingEnvironment) {
  WriteAll();
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", std::nullopt);
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
    auto config = InClusterConfig(dir_.path());
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
    EXPECT_NE(config.status().message().find("--kubeconfig"), std::string::npos);
  }
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", std::nullopt);
    auto config = InClusterConfig(dir_.path());
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("KUBERNETES_SERVICE_PORT"), std::string::npos);
  }
}

TEST_F(KubeConfigInClusterTest, NamesEachMissingFile) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  for (const std::string missing : {"token", "ca.crt", "namespace"}) {
    SCOPED_TRACE(missing);
    WriteAll();
    ASSERT_EQ(std::remove((dir_.path() + "/" + missing).c_str()), 0);
    auto config = InClusterConfig(dir_.path());
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find(dir_.path() + "/" + missing), std::string::npos)
        << config.status().message();
    EXPECT_NE(config.status().message().find("mount"), std::string::npos)
        << config.status().message();
  }
  // An empty token is as good as none.
  WriteAll();
  Write(dir_.path() + "/token", "");
  auto config = InClusterConfig(dir_.path());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("token"), std::string::npos);
}

// --- Kubeconfig ------------------------------------------------------------------------------

class KubeConfigFileTest : public ::testing::Test {
 protected:
  std::string WriteConfig(const std::string& yaml) {
    const std::string path = dir_.path() + "/config";
    Write(path, yaml);
    return path;
  }
  TempDir dir_{"kube-config"};
};

TEST_F(KubeConfigFileTest, TokenUserAndCurrentContext) {
  const std::string path = WriteConfig(R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://dev.example.com:6443/
    certificate-authority-data: )" + Base64(kCaPem) +
                                       R"(
- name: prod-cluster
  cluster:
    server: https://prod.example.com
    insecure-skip-tls-verify: true
users:
- name: dev-user
  user:
    token: dev-token
- name: prod-user
  user:
    token: prod-token
contexts:
- name: dev
  context:
    cluster: dev-cluster
    user: dev-user
- name: prod
  context:
    cluster: prod-cluster
    user: prod-user
    namespace: shoal-system
)");
  auto dev = LoadKubeconfig(path);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(dev->server, "https://dev.example.com:6443");
  EXPECT_EQ(dev->token, "dev-token");
  EXPECT_EQ(dev->ca_pem, kCaPem);
  EXPECT_EQ(dev->ns, "default");  // the context has none
  EXPECT_FALSE(dev->insecure_skip_tls_verify);

  auto prod = LoadKubeconfig(path, "prod");
  ASSERT_TRUE(prod.ok()) << prod.status().ToString();
  EXPECT_EQ(prod->server, "https://prod.example.com");
  EXPECT_EQ(prod->token, "prod-token");
  EXPECT_TRUE(prod->ca_pem.empty());
  EXPECT_TRUE(prod->insecure_skip_tls_verify);
  EXPECT_EQ(prod->ns, "shoal-system");

  // ResolveConfig takes an explicit kubeconfig before anything else.
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  auto resolved = ResolveConfig(path, "prod");
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(resolved->server, "https://prod.example.com");
}

TEST_F(KubeConfigFileTest, UnknownContextListsTheKnownOnes) {
  const std::string path = WriteConfig(R"(clusters:
- name: c
  cluster: {server: "https://c"}
contexts:
- name: alpha
  context: {cluster: c}
- name: beta
  context: {cluster: c}
current-context: alpha
)");
  auto config = LoadKubeconfig(path, "gamma");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("\"gamma\""), std::string::npos);
  EXPECT_NE(config.status().message().find("alpha, beta"), std::string::npos);
}

TEST_F(KubeConfigFileTest, WithoutCurrentContextAsksForOne) {
  const std::string path = WriteConfig(R"(clusters:
- name: c
  cluster: {server: "https://c"}
contexts:
- name: alpha
  context: {cluster: c}
)");
  auto config = LoadKubeconfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("current-context"), std::string::npos);
}

TEST_F(KubeConfigFileTest, ClientCertificateDataIsDecoded) {
  const std::string path = WriteConfig(R"(current-context: x
clusters:
- name: c
  cluster:
    server: https://c:6443
    certificate-authority-data: )" + Base64(kCaPem) +
                                       R"(
users:
- name: u
  user:
    client-certificate-data: )" + Base64(kCertPem) +
                                       R"(
    client-key-data: )" + Base64(kKeyPem) +
                                       R"(
contexts:
- name: x
  context: {cluster: c, user: u, namespace: team}
)");
  auto config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->client_cert_pem, kCertPem);
  EXPECT_EQ(config->client_key_pem, kKeyPem);
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_TRUE(config->token.empty());
  EXPECT_EQ(config->ns, "team");
}

TEST_F(KubeConfigFileTest, RelativeFilesComeFromTheKubeconfigDirectory) {
  ASSERT_TRUE(std::filesystem::create_directories(dir_.path() + "/pki"));
  Write(dir_.path() + "/pki/ca.crt", kCaPem);
  Write(dir_.path() + "/pki/client.crt", kCertPem);
  Write(dir_.path() + "/pki/client.key", kKeyPem);
  Write(dir_.path() + "/token.txt", "file-token\n");
  const std::string path = WriteConfig(R"(current-context: x
clusters:
- name: c
  cluster:
    server: https://c:6443
    certificate-authority: pki/ca.crt
users:
- name: cert
  user:
    client-certificate: pki/client.crt
    client-key: )" + dir_.path() + R"(/pki/client.key
- name: tokenfile
  user:
    tokenFile: token.txt
contexts:
- name: x
  context: {cluster: c, user: cert}
- name: y
  context: {cluster: c, user: tokenfile}
)");
  auto cert = LoadKubeconfig(path);
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  EXPECT_EQ(cert->ca_pem, kCaPem);
  EXPECT_EQ(cert->client_cert_pem, kCertPem);
  EXPECT_EQ(cert->client_key_pem, kKeyPem);

  auto token = LoadKubeconfig(path, "y");
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->token_file, dir_.path() + "/token.txt");
  EXPECT_TRUE(token->token.empty());

  // A relative file that is not there is named with the directory it was looked for in.
  ASSERT_EQ(std::remove((dir_.path() + "/pki/ca.crt").c_str()), 0);
  auto missing = LoadKubeconfig(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir_.path() + "/pki/ca.crt"), std::string::npos)
      << missing.status().message();
}

TEST_F(KubeConfigFileTest, RefusesExecPlugins) {
  const std::string path = WriteConfig(R"(current-context: eks
clusters:
- name: c
  cluster: {server: "https://c"}
users:
- name: aws
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token, --cluster-name, c]
contexts:
- name: eks
  context: {cluster: c, user: aws}
)");
  auto config = LoadKubeconfig(path);
  ASSERT_FALSE(config.ok());
  const std::string& msg = config.status().message();
  EXPECT_NE(msg.find("exec plugins are not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("token"), std::string::npos) << msg;
  EXPECT_NE(msg.find("client certificate"), std::string::npos) << msg;
}

TEST_F(KubeConfigFileTest, NamesMissingClusterUserAndFile) {
  const std::string path = WriteConfig(R"(current-context: a
clusters:
- name: c
  cluster: {server: "https://c"}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: nope, user: u}
- name: b
  context: {cluster: c, user: nobody}
)");
  auto a = LoadKubeconfig(path);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("cluster \"nope\""), std::string::npos);
  auto b = LoadKubeconfig(path, "b");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("user \"nobody\""), std::string::npos);
  auto none = LoadKubeconfig(dir_.path() + "/absent");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(dir_.path() + "/absent"), std::string::npos);
}

TEST_F(KubeConfigFileTest, ResolveUsesKubeconfigEnvOutsideACluster) {
  const std::string path = WriteConfig(R"(current-context: x
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:8080"}
contexts:
- name: x
  context: {cluster: c}
)");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", std::nullopt);
  ScopedEnv env("KUBECONFIG", path);
  auto config = ResolveConfig("", "");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "http://127.0.0.1:8080");

  ScopedEnv no_env("KUBECONFIG", std::nullopt);
  ScopedEnv home("HOME", dir_.path() + "/no-home");
  auto nothing = ResolveConfig("", "");
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.status().message().find("KUBECONFIG"), std::string::npos);
  EXPECT_NE(nothing.status().message().find("--kubeconfig"), std::string::npos);
}

}  // namespace
}  // namespace shoal::kubeapi
