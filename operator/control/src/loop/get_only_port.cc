// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include "shoal/control/get_only_port.h"

#include <cpprest/http_listener.h>

#include "shoal/common/json.h"

namespace shoal::control {

GetAnswer GetAnswer::Error(const Status& st) {
  int code = 503;
  switch (st.code()) {
    case Status::Code::kInvalidArgument:
      code = 400;
      break;
    case Status::Code::kUnauthenticated:
      code = 401;
      break;
    case Status::Code::kPermissionDenied:
      code = 403;
      break;
    case Status::Code::kNotFound:
      code = 404;
      break;
    default:
      break;
  }
  return {code, json::ErrorBody(st.code_name(), st.message()), "application/json"};
}

GetOnlyPort::GetOnlyPort(std::string host, uint16_t port,
                         std::function<GetAnswer(const GetRequest&)> serve, Headers headers)
    : host_(std::move(host)), port_(port), serve_(std::move(serve)), headers_(std::move(headers)) {}

GetOnlyPort::~GetOnlyPort() { Close(); }

Status GetOnlyPort::Open() {
  const std::string uri = "http://" + host_ + ":" + std::to_string(port_);
  try {
    listener_ = std::make_unique<web::http::experimental::listener::http_listener>(uri);
    listener_->support([this](web::http::http_request req) {
      GetAnswer a;
      if (req.method() != web::http::methods::GET) {
        a = {405, json::ErrorBody("method_not_allowed", "this port only answers GET"),
             "application/json"};
      } else {
        GetRequest r;
        try {
          r.path = req.relative_uri().path();
          for (auto& [k, v] : web::uri::split_query(req.relative_uri().query())) {
            r.query[web::uri::decode(k)] = web::uri::decode(v);
          }
          if (auto h = req.headers().find("Authorization"); h != req.headers().end()) {
            r.authorization = h->second;
          }
          if (auto h = req.headers().find("Host"); h != req.headers().end()) r.host = h->second;
          a = serve_(r);
        } catch (const std::exception& e) {
          a = GetAnswer::Error(Status::InvalidArgument(std::string("a bad request: ") + e.what()));
        }
      }
      try {
        web::http::http_response resp(static_cast<web::http::status_code>(a.code));
        resp.set_body(std::move(a.body), a.type);
        resp.headers().add("Cache-Control", "no-store");
        for (const auto& [k, v] : headers_) resp.headers().add(k, v);
        req.reply(resp).then([](pplx::task<void> t) {
          try {
            t.get();
          } catch (...) {  // the client went away
          }
        });
      } catch (...) {
      }
    });
    listener_->open().wait();
  } catch (const std::exception& e) {
    listener_.reset();
    return Status::Unavailable("cannot listen on " + uri + ": " + e.what());
  }
  return Status::Ok();
}

void GetOnlyPort::Close() {
  if (!listener_) return;
  try {
    listener_->close().wait();
  } catch (...) {
  }
  listener_.reset();
}

}  // namespace shoal::control
