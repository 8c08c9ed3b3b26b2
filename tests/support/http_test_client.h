// HttpTestClient: a small blocking HTTP client for integration tests, over cpprestsdk's
// web::http::client::http_client. cpprestsdk throws on transport errors; this class catches at
// that edge and reports them as status 0 with the error text, so a test can tell "the sidecar
// refused the request" (a 4xx/5xx status) from "the sidecar is gone" (status 0).
//
// Lifecycle: construct with a base URL (http://127.0.0.1:PORT); call from any thread. Thread-
// safe: cpprestsdk's client may run concurrent requests. Owned by the test that made it. Not
// copyable (it owns a connection pool).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace web::http::client {
class http_client;
}  // namespace web::http::client

namespace shoal::testing {

struct HttpResponse {
  int status = 0;     // HTTP status code; 0 when no answer arrived (connection error, timeout)
  std::string body;   // the answer's body, raw bytes
  std::string error;  // when status == 0: what went wrong
  std::map<std::string, std::string> headers;

  bool ok() const { return status == 200; }
  // "<status> <first 300 bytes of body or the error>", for assertion messages.
  std::string Describe() const;
};

struct HttpRequestOptions {
  std::map<std::string, std::string> headers;
  std::string content_type = "application/json";
  // Send the body with Transfer-Encoding: chunked and no Content-Length.
  bool chunked = false;
};

class HttpTestClient {
 public:
  // `timeout` bounds every request (connect, send, answer); keep it above any wait_ms used.
  explicit HttpTestClient(const std::string& base_url,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~HttpTestClient();
  HttpTestClient(const HttpTestClient&) = delete;
  HttpTestClient& operator=(const HttpTestClient&) = delete;

  // `path_and_query` is relative to the base URL, e.g. "/v1/topics/t/events?group=g".
  HttpResponse Get(const std::string& path_and_query, const HttpRequestOptions& options = {});
  HttpResponse Post(const std::string& path_and_query, const std::string& body,
                    const HttpRequestOptions& options = {});
  // Any method ("PUT", "DELETE", ...); an empty body sends none.
  HttpResponse Send(const std::string& method, const std::string& path_and_query,
                    const std::string& body, const HttpRequestOptions& options = {});

  const std::string& base_url() const { return base_url_; }

 private:
  const std::string base_url_;
  std::unique_ptr<web::http::client::http_client> client_;
};

}  // namespace shoal::testing
