// KubeClient over cpprestsdk's http_client. cpprestsdk reports failures by throwing; every call
// into it is wrapped here and turned into an ApiError (code 0, reason "Transport"), so that no
// exception leaves this file.
#include "shoal/kubeapi/kube_client.h"  // first; it includes <utility> before any cpprest header

#include <cpprest/base_uri.h>
#include <cpprest/containerstream.h>
#include <cpprest/http_client.h>

#include <condition_variable>
#include <fstream>
#include <ctime>
#include <mutex>
#include <sstream>
#include <thread>

namespace shoal::kubeapi {

using web::http::client::http_client;
using web::http::client::http_client_config;

// --- Resource kinds --------------------------------------------------------------------------

std::string ResourceKind::CollectionPath(const std::string& ns) const {
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) path += "/namespaces/" + ns;
  return path + "/" + plural;
}

std::string ResourceKind::ObjectPath(const std::string& ns, const std::string& name,
                                     const std::string& subresource) const {
  std::string path = CollectionPath(ns) + "/" + name;
  if (!subresource.empty()) path += "/" + subresource;
  return path;
}

const ResourceKind& PartitionedTopics() {
  static const ResourceKind k{"shoal.dev", "v1alpha1", "partitionedtopics", "PartitionedTopic"};
  return k;
}
const ResourceKind& StatefulSets() {
  static const ResourceKind k{"apps", "v1", "statefulsets", "StatefulSet"};
  return k;
}
const ResourceKind& Services() {
  static const ResourceKind k{"", "v1", "services", "Service"};
  return k;
}
const ResourceKind& PodDisruptionBudgets() {
  static const ResourceKind k{"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"};
  return k;
}
const ResourceKind& Secrets() {
  static const ResourceKind k{"", "v1", "secrets", "Secret"};
  return k;
}
const ResourceKind& Pods() {
  static const ResourceKind k{"", "v1", "pods", "Pod"};
  return k;
}
const ResourceKind& Nodes() {
  static const ResourceKind k{"", "v1", "nodes", "Node", /*namespaced=*/false};
  return k;
}
const ResourceKind& Leases() {
  static const ResourceKind k{"coordination.k8s.io", "v1", "leases", "Lease"};
  return k;
}
const ResourceKind& Events() {
  static const ResourceKind k{"events.k8s.io", "v1", "events", "Event"};
  return k;
}
const ResourceKind& PodMetrics() {
  static const ResourceKind k{"metrics.k8s.io", "v1beta1", "pods", "PodMetrics"};
  return k;
}

// --- Errors ----------------------------------------------------------------------------------

bool ApiError::IsRetryable() const {
  if (code == 0) return !reason.empty();  // a transport failure; code 0 and no reason is ok
  return code == 429 || code == 500 || code == 503 || code == 504;
}

std::string ApiError::ToString() const {
  if (code == 0 && reason.empty()) return "OK";
  std::string out = code != 0 ? std::to_string(code) + " " + reason : reason;
  if (!message.empty()) out += ": " + message;
  return out;
}

Status ApiError::ToStatus() const {
  if (code == 0 && reason.empty()) return Status::Ok();
  const std::string msg = ToString();
  switch (code) {
    case 400:
    case 415:
    case 422:
      return Status::InvalidArgument(msg);
    case 401:
    case 403:  // shoal::Status has no PermissionDenied; both mean "these credentials cannot".
      return Status::Unauthenticated(msg);
    case 404:
      return Status::NotFound(msg);
    case 409:
    case 410:
      return Status::FailedPrecondition(msg);
    case 413:
      return Status::TooLarge(msg);
    default:
      break;
  }
  if (IsRetryable()) return Status::Unavailable(msg);
  return Status::Internal(msg);
}

// --- JSON accessors --------------------------------------------------------------------------

Json At(const Json& object, const std::string& dotted) {
  const Json* cur = &object;
  size_t start = 0;
  while (start <= dotted.size()) {
    const size_t dot = std::min(dotted.find('.', start), dotted.size());
    const std::string key = dotted.substr(start, dot - start);
    start = dot + 1;
    if (key.empty()) continue;
    if (!cur->is_object()) return Json::null();
    const auto& obj = cur->as_object();
    auto it = obj.find(key);
    if (it == obj.end()) return Json::null();
    cur = &it->second;
  }
  return *cur;
}

namespace {

std::string StringAt(const Json& object, const std::string& dotted) {
  const Json v = At(object, dotted);
  return v.is_string() ? v.as_string() : "";
}

}  // namespace

std::string Name(const Json& object) { return StringAt(object, "metadata.name"); }
std::string Namespace(const Json& object) { return StringAt(object, "metadata.namespace"); }
std::string ResourceVersion(const Json& object) {
  return StringAt(object, "metadata.resourceVersion");
}
std::string Uid(const Json& object) { return StringAt(object, "metadata.uid"); }
int64_t Generation(const Json& object) {
  const Json v = At(object, "metadata.generation");
  return v.is_number() && v.as_number().is_int64() ? v.as_number().to_int64() : 0;
}

// --- The client ------------------------------------------------------------------------------

namespace {

constexpr size_t kMaxErrorBody = 512;

std::string Truncate(const std::string& s, size_t n = kMaxErrorBody) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

ApiError TransportError(const std::string& what, const std::exception& e) {
  return ApiError{0, "Transport", what + ": " + e.what()};
}

// A Status object (an error body or the object of an ERROR watch event) as an ApiError;
// `http_code` when the Status carries none.
std::optional<ApiError> FromStatus(const Json& status, int http_code) {
  if (!status.is_object() || StringAt(status, "kind") != "Status") return std::nullopt;
  ApiError e;
  const Json code = At(status, "code");
  e.code =
      code.is_number() && code.as_number().is_int32() ? code.as_number().to_int32() : http_code;
  e.reason = StringAt(status, "reason");
  if (e.reason.empty()) e.reason = "Unknown";
  e.message = StringAt(status, "message");
  return e;
}

ApiError DecodeError(int http_code, const std::string& body) {
  std::error_code ec;
  const Json j = Json::parse(body, ec);
  if (!ec) {
    if (auto e = FromStatus(j, http_code)) return *e;
  }
  return ApiError{http_code, "Unknown", Truncate(body)};
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string TrimToken(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string QueryParam(const std::string& key, const std::string& value) {
  return key + "=" + web::uri::encode_data_string(value);
}

// Cancels `cts` once `stop` turns true. Polls every 100 ms (std::atomic<bool> cannot be waited
// on with a deadline in C++20) until destroyed. Owned by one Watch call; the thread ends in the
// destructor.
class StopWatcher {
 public:
  StopWatcher(const std::atomic<bool>& stop, pplx::cancellation_token_source cts)
      : thread_([this, &stop, cts]() {
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_) {
            if (stop.load()) {
              cts.cancel();
              return;
            }
            cv_.wait_for(lock, std::chrono::milliseconds(100));
          }
        }) {}
  ~StopWatcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  StopWatcher(const StopWatcher&) = delete;
  StopWatcher& operator=(const StopWatcher&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;   // guarded by mu_
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

// Owns the http_client of ordinary requests (watches get their own, see Watch) and the bearer
// token cache. Thread-safe: http_client is, and the token is guarded by token_mu_.
class KubeClient::Impl {
 public:
  Impl(KubeConfig config, KubeClientOptions options)
      : config_(std::move(config)), opts_(std::move(options)) {}

  Status Init() {
    try {
      web::uri base(config_.server);
      if (base.scheme() != "http" && base.scheme() != "https") {
        return Status::InvalidArgument("API server URL " + config_.server +
                                       " must start with https:// (or http://)");
      }
      if (base.scheme() == "https") {
        // Fail now, not on the first request, when a PEM does not load.
        boost::asio::ssl::context probe(boost::asio::ssl::context::sslv23);
        ConfigureTls(probe);
      }
      http_ = std::make_unique<http_client>(config_.server, HttpConfig(opts_.request_timeout));
    } catch (const std::exception& e) {
      return Status::InvalidArgument("cannot set up a client for " + config_.server + ": " +
                                     e.what());
    }
    if (!config_.token_file.empty()) {
      auto token = ReadFile(config_.token_file);
      if (!token) return Status::NotFound("cannot read the token file " + config_.token_file);
      token_ = TrimToken(*token);
      token_read_ = std::chrono::steady_clock::now();
    } else {
      token_ = config_.token;
    }
    return Status::Ok();
  }

  const KubeConfig& config() const { return config_; }
  const KubeClientOptions& options() const { return opts_; }

  // Waits for a token of the rate limit (options.qps, options.burst).
  void TakeToken() {
    if (opts_.qps <= 0) return;
    std::unique_lock<std::mutex> lock(limit_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (limit_at_ == std::chrono::steady_clock::time_point{}) {
      tokens_ = opts_.burst;
    } else {
      tokens_ = std::min<double>(
          opts_.burst,
          tokens_ + opts_.qps * std::chrono::duration<double>(now - limit_at_).count());
    }
    limit_at_ = now;
    tokens_ -= 1;  // may go negative: this request waits for its share
    if (tokens_ < 0) {
      const auto wait = std::chrono::duration<double>(-tokens_ / opts_.qps);
      lock.unlock();
      std::this_thread::sleep_for(wait);  // the rate limit's wait
    }
  }

  // One request and its JSON answer (2xx) or its decoded error.
  ApiResult<Json> Call(const std::string& method, const std::string& path_and_query,
                       const Json* body, const std::string& content_type) {
    TakeToken();
    try {
      web::http::http_request req = NewRequest(method, path_and_query);
      if (body != nullptr) req.set_body(body->serialize(), content_type);
      web::http::http_response resp = http_->request(req).get();
      const int code = resp.status_code();
      const std::string text = resp.extract_utf8string(true).get();
      if (code < 200 || code >= 300) return DecodeError(code, text);
      if (text.empty()) return Json::null();
      std::error_code ec;
      Json out = Json::parse(text, ec);
      if (ec) {
        return ApiError{
            code, "Unknown",
            "undecodable answer to " + method + " " + path_and_query + ": " + Truncate(text)};
      }
      return out;
    } catch (const std::exception& e) {
      return TransportError(method + " " + config_.server + path_and_query, e);
    }
  }

  ApiError Watch(const std::string& path_and_query, std::chrono::seconds timeout,
                 const std::function<void(const WatchEvent&)>& on_event,
                 const std::atomic<bool>& stop) {
    if (stop.load()) return ApiError{};
    // cpprestsdk's timeout is an inactivity timer, reset by every chunk of the body (asio
    // client, 2.10.18): a quiet watch would be cut at request_timeout. The server ends the
    // stream at `timeout`, so this client waits a margin longer; `stop` ends it earlier.
    const auto margin = std::max(opts_.request_timeout, std::chrono::seconds(30));
    const auto client_timeout = timeout.count() > 0 ? timeout + margin : std::chrono::hours(24);
    const std::string what = "watch " + config_.server + path_and_query;
    pplx::cancellation_token_source cts;
    StopWatcher watcher(stop, cts);
    try {
      http_client client(config_.server, HttpConfig(client_timeout));
      web::http::http_response resp =
          client.request(NewRequest("GET", path_and_query), cts.get_token()).get();
      const int code = resp.status_code();
      if (code != 200) return DecodeError(code, resp.extract_utf8string(true).get());
      concurrency::streams::istream body = resp.body();
      while (!stop.load()) {
        concurrency::streams::stringstreambuf line;
        body.read_line(line).get();
        const std::string& text = line.collection();
        if (text.empty()) {
          if (body.is_eof()) return ApiError{};  // the server ended the stream
          continue;
        }
        std::error_code ec;
        const Json event = Json::parse(text, ec);
        const std::string type = ec ? "" : StringAt(event, "type");
        if (type.empty() || !event.has_field("object")) {
          return ApiError{200, "Unknown", "undecodable watch event: " + Truncate(text)};
        }
        const Json& object = event.at("object");
        if (type == "ERROR") {
          if (auto e = FromStatus(object, 500)) return *e;
          return ApiError{500, "Unknown", "watch ERROR event: " + Truncate(object.serialize())};
        }
        on_event(WatchEvent{type, object});
      }
      return ApiError{};
    } catch (const std::exception& e) {
      if (stop.load()) return ApiError{};  // cancelled on purpose
      return TransportError(what, e);
    }
  }

 private:
  web::http::http_request NewRequest(const std::string& method, const std::string& path_and_query) {
    web::http::http_request req(method);
    req.set_request_uri(path_and_query);
    req.headers().add("Accept", "application/json");
    req.headers().add("User-Agent", opts_.user_agent);
    if (const std::string token = Token(); !token.empty()) {
      req.headers().add("Authorization", "Bearer " + token);
    }
    return req;
  }

  // The bearer token; a token file is read again once token_reload has passed (service account
  // tokens are rotated by the kubelet). A failed read keeps the token read last.
  std::string Token() {
    if (config_.token_file.empty()) return token_;
    std::lock_guard<std::mutex> lock(token_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - token_read_ >= config_.token_reload) {
      if (auto token = ReadFile(config_.token_file)) {
        if (const std::string t = TrimToken(*token); !t.empty()) token_ = t;
      }
      token_read_ = now;
    }
    return token_;
  }

  http_client_config HttpConfig(std::chrono::microseconds timeout) const {
    http_client_config c;
    c.set_timeout(timeout);
    c.set_validate_certificates(!config_.insecure_skip_tls_verify);
    if (!config_.ca_pem.empty() || !config_.client_cert_pem.empty()) {
      const KubeConfig tls = config_;
      c.set_ssl_context_callback([tls](boost::asio::ssl::context& ctx) { ConfigureTls(tls, ctx); });
    }
    return c;
  }

  void ConfigureTls(boost::asio::ssl::context& ctx) const { ConfigureTls(config_, ctx); }

  // Throws boost::system::system_error when a PEM does not load.
  static void ConfigureTls(const KubeConfig& config, boost::asio::ssl::context& ctx) {
    if (!config.ca_pem.empty()) {
      ctx.add_certificate_authority(
          boost::asio::const_buffer(config.ca_pem.data(), config.ca_pem.size()));
    }
    if (!config.client_cert_pem.empty()) {
      ctx.use_certificate_chain(
          boost::asio::const_buffer(config.client_cert_pem.data(), config.client_cert_pem.size()));
      ctx.use_private_key(
          boost::asio::const_buffer(config.client_key_pem.data(), config.client_key_pem.size()),
          boost::asio::ssl::context::pem);
    }
  }

  const KubeConfig config_;
  const KubeClientOptions opts_;
  std::mutex limit_mu_;
  double tokens_ = 0;
  std::chrono::steady_clock::time_point limit_at_{};
  std::unique_ptr<http_client> http_;

  std::mutex token_mu_;
  std::string token_;                                 // guarded by token_mu_ when from a file
  std::chrono::steady_clock::time_point token_read_;  // guarded by token_mu_
};

Result<std::unique_ptr<KubeClient>> KubeClient::Create(KubeConfig config,
                                                       KubeClientOptions options) {
  if (config.server.empty()) return Status::InvalidArgument("no API server URL configured");
  auto impl = std::make_unique<Impl>(std::move(config), std::move(options));
  SHOAL_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<KubeClient>(new KubeClient(std::move(impl)));
}

KubeClient::KubeClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeClient::~KubeClient() = default;

const KubeConfig& KubeClient::config() const { return impl_->config(); }

ApiResult<Json> KubeClient::Get(const ResourceKind& kind, const std::string& ns,
                                const std::string& name, const std::string& subresource) {
  return impl_->Call("GET", kind.ObjectPath(ns, name, subresource), nullptr, "");
}

ApiResult<Json> KubeClient::List(const ResourceKind& kind, const std::string& ns,
                                 const ListOptions& options) {
  std::string query;
  auto add = [&](const char* key, const std::string& value) {
    if (value.empty()) return;
    query += (query.empty() ? "?" : "&") + QueryParam(key, value);
  };
  add("labelSelector", options.label_selector);
  add("fieldSelector", options.field_selector);
  return impl_->Call("GET", kind.CollectionPath(ns) + query, nullptr, "");
}

ApiResult<Json> KubeClient::Create(const ResourceKind& kind, const std::string& ns,
                                   const Json& object) {
  Json body = object;
  if (body.is_object()) {
    if (!body.has_field("apiVersion")) body["apiVersion"] = Json::string(kind.api_version());
    if (!body.has_field("kind")) body["kind"] = Json::string(kind.kind);
  }
  return impl_->Call("POST", kind.CollectionPath(ns), &body, "application/json");
}

ApiResult<Json> KubeClient::Update(const ResourceKind& kind, const std::string& ns,
                                   const std::string& name, const Json& object,
                                   const std::string& subresource) {
  return impl_->Call("PUT", kind.ObjectPath(ns, name, subresource), &object, "application/json");
}

ApiResult<Json> KubeClient::MergePatch(const ResourceKind& kind, const std::string& ns,
                                       const std::string& name, const Json& patch,
                                       const std::string& subresource) {
  return impl_->Call("PATCH", kind.ObjectPath(ns, name, subresource), &patch,
                     "application/merge-patch+json");
}

ApiResult<Json> KubeClient::UpdateWithRetry(const ResourceKind& kind, const std::string& ns,
                                            const std::string& name,
                                            const std::function<bool(Json&)>& mutate,
                                            const std::string& subresource) {
  ApiError last;
  for (int attempt = 0; attempt <= impl_->options().conflict_retries; ++attempt) {
    auto read = Get(kind, ns, name, subresource);
    if (!read.ok()) return read;
    Json object = read.value();
    if (!mutate(object)) return read;
    // The RV read is the precondition that turns a concurrent write into a 409.
    if (object.is_object()) {
      if (!object.has_field("metadata") || !object.at("metadata").is_object()) {
        object["metadata"] = Json::object();
      }
      object["metadata"]["resourceVersion"] = Json::string(ResourceVersion(read.value()));
    }
    auto written = Update(kind, ns, name, object, subresource);
    if (written.ok() || !written.error().IsConflict()) return written;
    last = written.error();
  }
  return last;
}

ApiResult<Json> KubeClient::Delete(const ResourceKind& kind, const std::string& ns,
                                   const std::string& name, const std::string& precondition_uid) {
  if (precondition_uid.empty()) return impl_->Call("DELETE", kind.ObjectPath(ns, name), nullptr, "");
  Json options = Json::object();
  options["apiVersion"] = Json::string("v1");
  options["kind"] = Json::string("DeleteOptions");
  options["preconditions"]["uid"] = Json::string(precondition_uid);
  return impl_->Call("DELETE", kind.ObjectPath(ns, name), &options, "application/json");
}

ApiError KubeClient::Watch(const ResourceKind& kind, const std::string& ns,
                           const WatchOptions& options,
                           const std::function<void(const WatchEvent&)>& on_event,
                           const std::atomic<bool>& stop) {
  std::string query = "?watch=1";
  if (!options.resource_version.empty()) {
    query += "&" + QueryParam("resourceVersion", options.resource_version);
  }
  if (options.bookmarks) query += "&allowWatchBookmarks=true";
  if (options.timeout.count() > 0) {
    query += "&timeoutSeconds=" + std::to_string(options.timeout.count());
  }
  if (!options.label_selector.empty()) {
    query += "&" + QueryParam("labelSelector", options.label_selector);
  }
  if (!options.field_selector.empty()) {
    query += "&" + QueryParam("fieldSelector", options.field_selector);
  }
  return impl_->Watch(kind.CollectionPath(ns) + query, options.timeout, on_event, stop);
}

std::string FormatTime(int64_t unix_ms, int fraction_digits) {
  const int64_t ms = ((unix_ms % 1000) + 1000) % 1000;
  const std::time_t secs = static_cast<std::time_t>((unix_ms - ms) / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (fraction_digits == 3) {
    n += std::snprintf(buf + n, sizeof buf - n, ".%03d", static_cast<int>(ms));
  } else if (fraction_digits == 6) {
    n += std::snprintf(buf + n, sizeof buf - n, ".%06d", static_cast<int>(ms) * 1000);
  }
  std::snprintf(buf + n, sizeof buf - n, "Z");
  return buf;
}

int64_t ParseTime(const std::string& text) {
  std::tm tm{};
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
    return 0;
  }
  int ms = 0;
  if (text.size() > 20 && text[19] == '.') ms = std::atoi(text.substr(20, 3).c_str());
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

}  // namespace shoal::kubeapi
