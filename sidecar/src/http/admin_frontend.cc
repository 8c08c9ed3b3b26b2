#include "http/admin_frontend.h"

#include "http/http_util.h"

namespace shoal::http {

using web::http::http_request;
using web::http::methods;

AdminFrontend::AdminFrontend(AdminFrontendOptions options, broker::Topic& topic,
                             broker::SidecarProbe& probe)
    : opts_(std::move(options)), topic_(topic), probe_(probe) {}

AdminFrontend::~AdminFrontend() { Close(); }

Status AdminFrontend::Open() {
  const std::string uri = "http://" + opts_.host + ":" + std::to_string(opts_.port);
  listener_ = std::make_unique<web::http::experimental::listener::http_listener>(uri);
  listener_->support([this](http_request req) { Handle(std::move(req)); });
  return OpenListener(*listener_);
}

void AdminFrontend::Close() {
  if (!listener_) return;
  try {
    listener_->close().wait();
  } catch (...) {
  }
  listener_.reset();
}

bool AdminFrontend::Authorized(const http_request& req) const {
  auto it = req.headers().find("Authorization");
  if (it == req.headers().end()) return false;
  const std::string& got = it->second;
  const std::string want = "Bearer " + opts_.token;
  // Compare in time independent of where the first difference is.
  unsigned diff = got.size() ^ want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    diff |= static_cast<unsigned char>(want[i]) ^
            static_cast<unsigned char>(i < got.size() ? got[i] : 0);
  }
  return diff == 0 && !opts_.token.empty();
}

void AdminFrontend::Handle(http_request req) {
  if (!Authorized(req)) {
    const int code = ReplyError(req, 401, "unauthenticated",
                                "the admin plane needs Authorization: Bearer <admin token>");
    probe_.Request("admin", code);
    probe_.Rejected("unauthenticated");
    return;
  }
  const auto path = PathSegments(req);
  if (path.size() == 3 && path[0] == "v1" && path[1] == "admin" && path[2] == "map") {
    if (req.method() != methods::GET) {
      probe_.Request("admin", ReplyError(req, 405, "method_not_allowed", "use GET"));
      return;
    }
    ReplyJson(req, 200, topic_.map().ToJson());
    probe_.Request("admin", 200);
    return;
  }
  probe_.Request("admin", ReplyError(req, Status::NotFound("no such admin endpoint")));
}

}  // namespace shoal::http
