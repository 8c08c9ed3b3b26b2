#include "http/http_util.h"

#include <charconv>

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
    case Status::Code::kConflict:
    case Status::Code::kStaleEpoch:
    case Status::Code::kSequenceUnknown:
    case Status::Code::kDataLost:
      return 409;
    case Status::Code::kUnauthenticated:
      return 401;
    case Status::Code::kPermissionDenied:
      return 403;
    case Status::Code::kUnavailable:
      return 503;
    case Status::Code::kNoSpace:
      return 507;
    default:
      return 500;
  }
}

pplx::task<void> ReplyJson(const http_request& req, int code, std::string body) {
  return ReplyBody(req, code, std::move(body), "application/json");
}

wire::Format FormatOfHeader(const http_request& req, const std::string& name) {
  auto it = req.headers().find(name);
  return it == req.headers().end() ? wire::Format::kJson : wire::FormatOf(it->second);
}

pplx::task<void> ReplyBody(const http_request& req, int code, std::string body,
                           const std::string& content_type) {
  try {
    web::http::http_response resp(static_cast<web::http::status_code>(code));
    resp.set_body(std::move(body), content_type);
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

Result<int64_t> IntParam(const std::map<std::string, std::string>& q, const std::string& name,
                         int64_t def, int64_t lo, int64_t hi) {
  auto it = q.find(name);
  if (it == q.end() || it->second.empty()) return def;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || p != it->second.data() + it->second.size() || v < lo || v > hi) {
    return Status::InvalidArgument(name + " must be an integer in [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
  }
  return v;
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
  std::string body;
  try {
    auto buf = req.body().streambuf();
    body.resize(buf.in_avail());
    body.resize(buf.getn(reinterpret_cast<uint8_t*>(body.data()), body.size()).get());
  } catch (const std::exception& e) {
    on_error(Status::InvalidArgument(std::string("the body cannot be read: ") + e.what()));
    return;
  }
  if (body.size() > max_bytes) {
    on_error(Status::TooLarge("the body is " + std::to_string(body.size()) +
                              " bytes; the limit here is " + std::to_string(max_bytes)));
    return;
  }
  then(std::move(body));
}

}  // namespace shoal::http
