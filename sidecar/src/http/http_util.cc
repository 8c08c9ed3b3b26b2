#include "http/http_util.h"

#include "shoal/common/json.h"

namespace shoal::http {

int HttpCode(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk:
      return 200;
    case Status::Code::kInvalidArgument:
      return 400;
    case Status::Code::kNotFound:
      return 404;
    case Status::Code::kTooLarge:
      return 413;
    case Status::Code::kFailedPrecondition:
      return 409;
    case Status::Code::kUnauthenticated:
      return 401;
    case Status::Code::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

pplx::task<void> ReplyJson(const http_request& req, int code, std::string body) {
  try {
    web::http::http_response resp(static_cast<web::http::status_code>(code));
    resp.set_body(std::move(body), "application/json");
    return req.reply(resp).then([](pplx::task<void> t) {
      try {
        t.get();
      } catch (...) {
        // The client went away; nothing to answer.
      }
    });
  } catch (...) {
    return pplx::task_from_result();
  }
}

int ReplyError(const http_request& req, const Status& status) {
  const int code = HttpCode(status);
  ReplyJson(req, code, json::ErrorBody(status.code_name(), status.message()));
  return code;
}

int ReplyError(const http_request& req, int code, const std::string& error,
               const std::string& reason) {
  ReplyJson(req, code, json::ErrorBody(error, reason));
  return code;
}

std::vector<std::string> PathSegments(const http_request& req) {
  std::vector<std::string> out;
  try {
    for (auto& s : web::uri::split_path(req.relative_uri().path())) {
      out.push_back(web::uri::decode(s));
    }
  } catch (...) {
    out.clear();
  }
  return out;
}

std::map<std::string, std::string> Query(const http_request& req) {
  std::map<std::string, std::string> out;
  try {
    for (auto& [k, v] : web::uri::split_query(req.relative_uri().query())) {
      out[web::uri::decode(k)] = web::uri::decode(v);
    }
  } catch (...) {
  }
  return out;
}

void ReadBody(const http_request& req, size_t max_bytes, std::function<void(std::string)> then,
              std::function<void(const Status&)> on_error) {
  const auto declared = req.headers().content_length();
  if (declared > max_bytes) {
    on_error(Status::TooLarge("body is " + std::to_string(declared) + " bytes; the limit is " +
                              std::to_string(max_bytes) + " (--max-body-bytes)"));
    return;
  }
  auto request = req;  // a handle; keeps the request alive in the continuation
  request.extract_vector().then(
      [request, max_bytes, then = std::move(then),
       on_error = std::move(on_error)](pplx::task<std::vector<unsigned char>> t) {
        std::vector<unsigned char> bytes;
        try {
          bytes = t.get();
        } catch (const std::exception& e) {
          on_error(Status::InvalidArgument(std::string("cannot read the body: ") + e.what()));
          return;
        }
        if (bytes.size() > max_bytes) {
          on_error(Status::TooLarge("body is " + std::to_string(bytes.size()) +
                                    " bytes; the limit is " + std::to_string(max_bytes)));
          return;
        }
        then(std::string(bytes.begin(), bytes.end()));
      });
}

Status OpenListener(web::http::experimental::listener::http_listener& listener) {
  try {
    listener.open().wait();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot listen on " + listener.uri().to_string() + ": " + e.what());
  }
}

}  // namespace shoal::http
