// Helpers every HTTP frontend of the sidecar shares: answering JSON, mapping Status codes to HTTP
// codes, reading the body with a size limit, splitting the path and the query. cpprestsdk throws;
// these helpers catch at this edge so nothing throws past a frontend. Thread-safe.
#pragma once

#include <cpprest/http_listener.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::http {

using web::http::http_request;

int HttpCode(const Status& s);
// Answers with a JSON body. The task completes once the answer is sent or could not be sent; it
// never throws.
pplx::task<void> ReplyJson(const http_request& req, int code, std::string body);
// Replies {"error","reason"} with the code that fits the status; returns the code.
int ReplyError(const http_request& req, const Status& status);
int ReplyError(const http_request& req, int code, const std::string& error,
               const std::string& reason);

std::vector<std::string> PathSegments(const http_request& req);
std::map<std::string, std::string> Query(const http_request& req);

// Reads the whole body and calls `then` with it on a pool thread, or `on_error` with why not.
//
// cpprestsdk dispatches a request once its headers are in and keeps reading the body into the
// request's buffer whether or not anyone reads it, so a limit checked after the read is no limit.
// Here memory stays bounded below it:
//   - a body without Content-Length (chunked) is taken piece by piece; past max_bytes nothing
//     more is kept;
//   - a body over max_bytes is read no further than a discard limit (4 x max_bytes, at least
//     16 MiB): a Content-Length above it is refused before a byte of the body is read, a chunked
//     body is stopped there. Below it the rest is read and thrown away piece by piece, so that a
//     client that is still sending gets its 413 instead of a reset connection;
//   - a body that has not arrived `timeout` after its headers (a client that stalls mid-body) is
//     given up, so it does not hold the connection and its memory.
// A body given up is stopped by closing its stream: the connection stops reading at its next
// piece, or is stopped 1 s later if no piece comes, and only then sends the answer (413, or 400
// for a stalled or broken body) and closes the socket; never while it may still be starting a
// read on it (a crash). The answer carries "Connection: close": the rest of that body is never
// read, so the connection cannot carry another request.
void ReadBody(const http_request& req, size_t max_bytes, std::chrono::milliseconds timeout,
              std::function<void(std::string body)> then,
              std::function<void(const Status&)> on_error);

// Opens a listener on http://host:port; returns the error as a Status.
Status OpenListener(web::http::experimental::listener::http_listener& listener);

}  // namespace shoal::http
