#include "support/http_test_client.h"

#include <cpprest/containerstream.h>
#include <cpprest/http_client.h>

#include <exception>
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <vector>

namespace shoal::testing {

namespace client = web::http::client;

std::string HttpResponse::Describe() const {
  if (status == 0) return "no answer: " + error;
  return std::to_string(status) + " " + body.substr(0, 300);
}

HttpTestClient::HttpTestClient(const std::string& base_url, std::chrono::milliseconds timeout)
    : base_url_(base_url) {
  client::http_client_config config;
  config.set_timeout(timeout);
  client_ = std::make_unique<client::http_client>(base_url, config);
}

HttpTestClient::~HttpTestClient() = default;

HttpResponse HttpTestClient::Get(const std::string& path_and_query,
                                 const HttpRequestOptions& options) {
  return Send("GET", path_and_query, "", options);
}

HttpResponse HttpTestClient::Post(const std::string& path_and_query, const std::string& body,
                                  const HttpRequestOptions& options) {
  return Send("POST", path_and_query, body, options);
}

HttpResponse HttpTestClient::Send(const std::string& method, const std::string& path_and_query,
                                  const std::string& body, const HttpRequestOptions& options) {
  HttpResponse out;
  try {
    web::http::http_request req(method);
    req.set_request_uri(web::uri(path_and_query));
    for (const auto& [name, value] : options.headers) req.headers().add(name, value);
    if (!body.empty() || method == "POST" || method == "PUT") {
      if (options.chunked) {
        // A stream of unknown length: cpprestsdk sends it chunked, without Content-Length.
        auto stream = concurrency::streams::bytestream::open_istream(body);
        req.set_body(stream, options.content_type);
      } else {
        req.set_body(body, options.content_type);
      }
    }
    web::http::http_response resp = client_->request(req).get();
    out.status = resp.status_code();
    for (const auto& [name, value] : resp.headers()) out.headers[name] = value;
    std::vector<unsigned char> bytes = resp.extract_vector().get();
    out.body.assign(bytes.begin(), bytes.end());
  } catch (const std::exception& e) {
    out.status = 0;
    out.body.clear();
    out.error = e.what();
  }
  return out;
}

}  // namespace shoal::testing
