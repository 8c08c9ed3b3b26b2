// Helpers every HTTP frontend of the sidecar shares: answering JSON, mapping Status codes to HTTP
// codes, taking the body, splitting the path and the query. cpprestsdk throws;
// these helpers catch at this edge so nothing throws past a frontend. Thread-safe.
#pragma once

#include <cpprest/http_msg.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "shoal/common/status.h"
#include "shoal/common/wire.h"

namespace shoal::http {

using web::http::http_request;

int HttpCode(const Status& s);
// Answers with a JSON body. The task completes once the answer is sent or could not be sent; it
// never throws.
pplx::task<void> ReplyJson(const http_request& req, int code, std::string body);
// An answer of any type (the data plane's binary batches).
pplx::task<void> ReplyBody(const http_request& req, int code, std::string body,
                           const std::string& content_type);
// The format a request's header (Content-Type or Accept) asks for.
wire::Format FormatOfHeader(const http_request& req, const std::string& name);
// Replies {"error","reason"} with the code that fits the status; returns the code.
int ReplyError(const http_request& req, const Status& status);
int ReplyError(const http_request& req, int code, const std::string& error,
               const std::string& reason);

std::vector<std::string> PathSegments(const http_request& req);
std::map<std::string, std::string> Query(const http_request& req);
// Query parameter `name` as an integer in [lo, hi] (digits, an optional '-'), `def` when absent or
// empty; InvalidArgument naming the range otherwise.
Result<int64_t> IntParam(const std::map<std::string, std::string>& q, const std::string& name,
                         int64_t def, int64_t lo, int64_t hi);

// Calls `then` with the request's body, on the calling thread, or `on_error` if it is over
// max_bytes. GuardedListener has read the body whole, within its limits and its time, before the
// handler runs.
void ReadBody(const http_request& req, size_t max_bytes, std::function<void(std::string body)> then,
              std::function<void(const Status&)> on_error);

}  // namespace shoal::http
