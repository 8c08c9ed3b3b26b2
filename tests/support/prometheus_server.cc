#include "support/prometheus_server.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/uri.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>

namespace shoal::testing {

using web::json::value;

namespace {

std::string Encode(const std::string& s) { return web::uri::encode_data_string(s); }

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Seconds(double t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", t);
  return buf;
}

}  // namespace

std::string PromAnswer::Describe() const {
  std::string s = "HTTP " + std::to_string(http_status) + ", ";
  if (status == "success") {
    s += "success, " + result_type;
    if (result_type == "vector" || result_type == "matrix") {
      s += " with " + std::to_string(series) + " series";
    }
    return s;
  }
  if (status.empty()) return s + "no JSON: " + body.substr(0, 300);
  return s + status + ": " + body.substr(0, 500);
}

Result<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(
    const PrometheusServerOptions& options) {
  std::unique_ptr<PrometheusServer> p(new PrometheusServer());
  p->work_dir_ = options.work_dir;
  const std::string config = options.work_dir + "/prometheus.yml";
  std::ofstream out(config);
  out << options.config_yaml;
  out.close();
  if (!out) return Status::IoError("cannot write " + config);
  auto port = control::FreePort();
  if (!port.ok()) return port.status();
  p->port_ = *port;
  auto proc = control::ChildProcess::Spawn(
      {options.binary, "--config.file=" + config,
       "--storage.tsdb.path=" + options.work_dir + "/data",
       "--web.listen-address=127.0.0.1:" + std::to_string(p->port_), "--log.level=info"},
      options.work_dir + "/prometheus.log");
  if (!proc.ok()) return proc.status();
  p->process_ = std::move(proc).value();
  p->http_ = std::make_unique<HttpTestClient>(p->base_url(), std::chrono::seconds(10));
  if (Status st = control::WaitForHttp("127.0.0.1", p->port_, "/-/ready", std::chrono::seconds(30));
      !st.ok()) {
    return Status::Unavailable(st.message() + "; prometheus log:\n" + p->LogTail());
  }
  return p;
}

PrometheusServer::~PrometheusServer() {
  if (process_.running()) process_.Stop(std::chrono::seconds(5));
}

std::string PrometheusServer::base_url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

std::string PrometheusServer::LogTail(size_t max_bytes) const {
  std::ifstream in(work_dir_ + "/prometheus.log");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

PromAnswer PrometheusServer::Parse(const HttpResponse& r) const {
  PromAnswer a;
  a.http_status = r.status;
  a.body = r.status == 0 ? r.error : r.body;
  value v;
  try {
    v = value::parse(r.body);
  } catch (const std::exception&) {  // cpprestsdk throws on malformed JSON: not an answer
    return a;
  }
  if (!v.is_object() || !v.has_string_field("status")) return a;
  a.status = v.at("status").as_string();
  if (v.has_field("data")) a.data = v.at("data");
  if (a.data.is_object() && a.data.has_string_field("resultType")) {
    a.result_type = a.data.at("resultType").as_string();
    if (a.data.has_array_field("result")) a.series = a.data.at("result").size();
  }
  return a;
}

PromAnswer PrometheusServer::Query(const std::string& expr) {
  HttpRequestOptions o;
  o.content_type = "application/x-www-form-urlencoded";
  return Parse(http_->Post("/api/v1/query", "query=" + Encode(expr), o));
}

PromAnswer PrometheusServer::QueryRange(const std::string& expr, std::chrono::seconds range,
                                        std::chrono::seconds step) {
  HttpRequestOptions o;
  o.content_type = "application/x-www-form-urlencoded";
  const double end = NowSeconds();
  const double start = end - static_cast<double>(range.count());
  return Parse(http_->Post("/api/v1/query_range",
                           "query=" + Encode(expr) + "&start=" + Seconds(start) +
                               "&end=" + Seconds(end) + "&step=" + std::to_string(step.count()),
                           o));
}

PromAnswer PrometheusServer::Api(const std::string& path_and_query) {
  return Parse(http_->Get(path_and_query));
}

}  // namespace shoal::testing
