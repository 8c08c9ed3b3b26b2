// GetOnlyPort: a read-only HTTP port over cpprestsdk's listener, for the ports that only show
// state (the control loop's /status and /metrics, the console). Anything but GET is 405 with a
// JSON reason; every GET is answered by `serve`, with `Cache-Control: no-store` and the headers
// given at construction. Open, then Close (or destroy). Thread-safe: `serve` runs on the
// listener's threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shoal/common/status.h"

namespace web::http::experimental::listener {
class http_listener;
}

namespace shoal::control {

struct GetRequest {
  std::string path;
  std::map<std::string, std::string> query;  // decoded
  std::string authorization;                 // the Authorization header, if any
  std::string host;                          // the Host header, if any
};

struct GetAnswer {
  int code = 200;
  std::string body;
  std::string type = "application/json";

  static GetAnswer Json(std::string body) { return {200, std::move(body), "application/json"}; }
  // A JSON error body ({"error","reason"}) with the HTTP code of `st` (400, 401, 403, 404; 503
  // for the rest).
  static GetAnswer Error(const Status& st);
};

class GetOnlyPort {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;
  GetOnlyPort(std::string host, uint16_t port, std::function<GetAnswer(const GetRequest&)> serve,
              Headers headers = {});
  ~GetOnlyPort();
  GetOnlyPort(const GetOnlyPort&) = delete;
  GetOnlyPort& operator=(const GetOnlyPort&) = delete;

  Status Open();
  void Close();

 private:
  const std::string host_;
  const uint16_t port_;
  const std::function<GetAnswer(const GetRequest&)> serve_;
  const Headers headers_;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
};

}  // namespace shoal::control
