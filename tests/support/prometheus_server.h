// PrometheusServer: a real `prometheus` process for tests, on 127.0.0.1 and a free port, with a
// configuration the test writes and its TSDB in the test's directory; and the HTTP API calls a
// test needs (instant and range queries, targets, rules), answered as parsed JSON.
//
// Lifecycle: Start() writes the configuration, spawns the process and returns once /-/ready
// answers 200; the destructor stops it (SIGTERM, then SIGKILL after 5 s). Thread-safe for the
// queries (cpprestsdk's client); one owner. Not copyable.
#pragma once

#include <cpprest/json.h>

#include <chrono>
#include <memory>
#include <string>

#include "shoal/control/process.h"
#include "shoal/common/status.h"
#include "support/http_test_client.h"

namespace shoal::testing {

struct PrometheusServerOptions {
  std::string binary;  // the prometheus executable
  // Holds prometheus.yml, data/ (the TSDB) and prometheus.log. Must exist.
  std::string work_dir;
  // The whole configuration file (YAML).
  std::string config_yaml;
};

// One answer of the query API.
struct PromAnswer {
  int http_status = 0;
  std::string status;       // "success" or "error" (empty when no JSON came back)
  std::string result_type;  // vector, matrix, scalar, string
  size_t series = 0;        // series of a vector or matrix
  web::json::value data;    // "data" of the answer
  std::string body;         // raw, for messages

  bool success() const { return status == "success"; }
  // A scalar or string always counts as data; a vector or matrix needs a series.
  bool non_empty() const {
    return success() && (result_type == "scalar" || result_type == "string" || series > 0);
  }
  // "HTTP 200, success, vector with 0 series" or "HTTP 400, error bad_data: <message>".
  std::string Describe() const;
};

class PrometheusServer {
 public:
  static Result<std::unique_ptr<PrometheusServer>> Start(const PrometheusServerOptions& options);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  std::string base_url() const;
  // The last `max_bytes` of its log, for failure messages.
  std::string LogTail(size_t max_bytes = 4000) const;

  // /api/v1/query at the current time.
  PromAnswer Query(const std::string& expr);
  // /api/v1/query_range over the last `range`, one point per `step`.
  PromAnswer QueryRange(const std::string& expr, std::chrono::seconds range,
                        std::chrono::seconds step);
  // GET of an API path ("/api/v1/targets?state=active"), with the JSON parsed like a query.
  PromAnswer Api(const std::string& path_and_query);

 private:
  PrometheusServer() = default;
  PromAnswer Parse(const HttpResponse& r) const;

  std::string work_dir_;
  uint16_t port_ = 0;
  control::ChildProcess process_;
  std::unique_ptr<HttpTestClient> http_;
};

}  // namespace shoal::testing
