// Where the operator finds its API server and credentials: inside a pod (the service account
// volume and the KUBERNETES_SERVICE_* variables) or in a kubeconfig file. Every error says what
// is missing and what to do about it, because it is the first thing an operator user sees when
// the deployment is wrong.
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/asyncrt_utils.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "shoal/kubeapi/kube_client.h"

namespace shoal::kubeapi {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return out.str();
}

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(s.find_last_not_of(ws) + 1);
  s.erase(0, s.find_first_not_of(ws));
  return s;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// A kubeconfig scalar, or "" when absent or not a scalar.
std::string Scalar(const YAML::Node& node, const char* key) {
  if (!node || !node.IsMap()) return "";
  const YAML::Node v = node[key];
  return v && v.IsScalar() ? v.as<std::string>() : "";
}

// The `what` entry named `name` in the list `list` (clusters, users, contexts), or an invalid
// node.
YAML::Node Named(const YAML::Node& list, const std::string& name, const char* what) {
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& entry : list) {
    if (Scalar(entry, "name") == name) return entry[what];
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::string Names(const YAML::Node& list) {
  std::string out;
  if (!list || !list.IsSequence()) return out;
  for (const auto& entry : list) out += (out.empty() ? "" : ", ") + Scalar(entry, "name");
  return out;
}

// The PEM (or token) from `<key>-data` (base64) or the file `<key>` (relative to the
// kubeconfig's directory); "" when neither is set.
Result<std::string> DataOrFile(const YAML::Node& node, const std::string& key,
                               const std::filesystem::path& dir, const std::string& where) {
  const std::string data = Scalar(node, (key + "-data").c_str());
  if (!data.empty()) {
    try {
      const auto bytes = utility::conversions::from_base64(data);
      return std::string(bytes.begin(), bytes.end());
    } catch (const std::exception&) {
      return Status::InvalidArgument(where + ": " + key + "-data is not valid base64");
    }
  }
  const std::string file = Scalar(node, key.c_str());
  if (file.empty()) return std::string();
  const std::filesystem::path path = dir / file;  // an absolute `file` replaces `dir`
  auto text = ReadFile(path.string());
  if (!text) {
    return Status::NotFound(where + ": cannot read " + key + " file " + path.string() +
                            " (relative paths are taken from the kubeconfig's directory)");
  }
  return *text;
}

}  // namespace

Result<KubeConfig> InClusterConfig(const std::string& sa_dir) {
  const std::string host = Env("KUBERNETES_SERVICE_HOST");
  const std::string port = Env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return Status::FailedPrecondition(
        std::string("not running inside a Kubernetes pod: ") +
        (host.empty() ? "KUBERNETES_SERVICE_HOST" : "KUBERNETES_SERVICE_PORT") +
        " is not set; outside a cluster pass --kubeconfig (or set KUBECONFIG)");
  }
  KubeConfig config;
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  config.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;

  const std::string token_path = sa_dir + "/token";
  auto token = ReadFile(token_path);
  if (!token || Trim(*token).empty()) {
    return Status::NotFound("service account token " + token_path +
                            " is missing or empty: mount the ServiceAccount token into the pod "
                            "(automountServiceAccountToken: true)");
  }
  config.token_file = token_path;

  const std::string ca_path = sa_dir + "/ca.crt";
  auto ca = ReadFile(ca_path);
  if (!ca || Trim(*ca).empty()) {
    return Status::NotFound("cluster CA " + ca_path +
                            " is missing or empty: mount the ServiceAccount volume (it carries "
                            "ca.crt) into the pod");
  }
  config.ca_pem = *ca;

  const std::string ns_path = sa_dir + "/namespace";
  auto ns = ReadFile(ns_path);
  if (!ns || Trim(*ns).empty()) {
    return Status::NotFound("service account namespace " + ns_path +
                            " is missing or empty: mount the ServiceAccount volume (it carries "
                            "the namespace) into the pod");
  }
  config.ns = Trim(*ns);
  return config;
}

Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Status::NotFound("cannot read kubeconfig " + path +
                            ": no such file or not readable; pass --kubeconfig or set KUBECONFIG");
  } catch (const std::exception& e) {
    return Status::InvalidArgument("kubeconfig " + path + " is not valid YAML: " + e.what());
  }
  const std::string where = "kubeconfig " + path;
  const std::filesystem::path dir = std::filesystem::absolute(path).parent_path();

  try {
    const std::string ctx_name = context.empty() ? Scalar(root, "current-context") : context;
    if (ctx_name.empty()) {
      return Status::InvalidArgument(where +
                                     " has no current-context: pass a context name (--context) "
                                     "or run `kubectl config use-context NAME`");
    }
    const YAML::Node ctx = Named(root["contexts"], ctx_name, "context");
    if (!ctx || !ctx.IsMap()) {
      return Status::NotFound(where + " has no context \"" + ctx_name +
                              "\" (contexts: " + Names(root["contexts"]) + ")");
    }
    const std::string cluster_name = Scalar(ctx, "cluster");
    const std::string user_name = Scalar(ctx, "user");
    KubeConfig config;
    if (const std::string ns = Scalar(ctx, "namespace"); !ns.empty()) config.ns = ns;

    const YAML::Node cluster = Named(root["clusters"], cluster_name, "cluster");
    if (!cluster || !cluster.IsMap()) {
      return Status::NotFound(where + ": context \"" + ctx_name + "\" names cluster \"" +
                              cluster_name + "\", which is not in clusters (" +
                              Names(root["clusters"]) + ")");
    }
    config.server = Scalar(cluster, "server");
    if (config.server.empty()) {
      return Status::InvalidArgument(where + ": cluster \"" + cluster_name +
                                     "\" has no server URL");
    }
    while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
    auto ca = DataOrFile(cluster, "certificate-authority", dir, where);
    if (!ca.ok()) return ca.status();
    config.ca_pem = *ca;
    config.insecure_skip_tls_verify =
        cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>(false);

    if (user_name.empty()) return config;  // no credentials: anonymous
    const YAML::Node user = Named(root["users"], user_name, "user");
    if (!user || !user.IsMap()) {
      return Status::NotFound(where + ": context \"" + ctx_name + "\" names user \"" + user_name +
                              "\", which is not in users (" + Names(root["users"]) + ")");
    }
    if (user["exec"]) {
      return Status::InvalidArgument(
          where + ": user \"" + user_name +
          "\" uses an exec credential plugin; exec plugins are not supported: use a user with "
          "a token (token or tokenFile) or a client certificate and key");
    }
    if (user["auth-provider"]) {
      return Status::InvalidArgument(
          where + ": user \"" + user_name +
          "\" uses an auth-provider, which is not supported: use a user with a token (token "
          "or tokenFile) or a client certificate and key");
    }
    config.token = Scalar(user, "token");
    if (const std::string file = Scalar(user, "tokenFile"); !file.empty() && config.token.empty()) {
      const std::filesystem::path p = dir / file;
      if (!ReadFile(p.string())) {
        return Status::NotFound(where + ": user \"" + user_name + "\": cannot read tokenFile " +
                                p.string());
      }
      config.token_file = p.string();
    }
    auto cert = DataOrFile(user, "client-certificate", dir, where);
    if (!cert.ok()) return cert.status();
    auto key = DataOrFile(user, "client-key", dir, where);
    if (!key.ok()) return key.status();
    if (cert->empty() != key->empty()) {
      return Status::InvalidArgument(
          where + ": user \"" + user_name + "\" has a client " +
          (cert->empty() ? "key but no certificate" : "certificate but no key") +
          ": set both client-certificate[-data] and client-key[-data]");
    }
    config.client_cert_pem = *cert;
    config.client_key_pem = *key;
    return config;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(where + " is malformed: " + e.what());
  }
}

Result<KubeConfig> ResolveConfig(const std::string& kubeconfig, const std::string& context) {
  if (!kubeconfig.empty()) return LoadKubeconfig(kubeconfig, context);
  if (!Env("KUBERNETES_SERVICE_HOST").empty()) return InClusterConfig();
  std::string path = Env("KUBECONFIG");
  // A list of files (merged by kubectl): the first one is taken.
  if (auto colon = path.find(':'); colon != std::string::npos) path.resize(colon);
  if (path.empty()) {
    const std::string home = Env("HOME");
    if (home.empty() || !std::filesystem::exists(home + "/.kube/config")) {
      return Status::NotFound(
          "no Kubernetes configuration: not inside a pod (KUBERNETES_SERVICE_HOST is not set), "
          "KUBECONFIG is not set and ~/.kube/config does not exist; pass --kubeconfig");
    }
    path = home + "/.kube/config";
  }
  return LoadKubeconfig(path, context);
}

}  // namespace shoal::kubeapi
