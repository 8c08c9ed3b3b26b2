#include "shoal/console/console_server.h"

#include "shoal/common/json.h"

namespace shoal::console {

using control::GetAnswer;
using control::GetRequest;

namespace {

// Compared in time that does not depend on where they differ.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

bool IsLoopback(std::string host) {
  if (const auto colon = host.rfind(':'); colon != std::string::npos && host.back() != ']') {
    host.resize(colon);  // the port
  }
  return host == "localhost" || host == "[::1]" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

GetAnswer ServeConsole(Console& console, const std::string& token, const GetRequest& r) {
  if (r.path.rfind("/api/", 0) == 0 && !token.empty() &&
      !SameSecret(r.authorization, "Bearer " + token)) {
    return GetAnswer::Error(
        Status::Unauthenticated("the console's API needs Authorization: Bearer <token>; open "
                                "the address `shoal console` printed"));
  }
  if (r.path == "/api/state") return GetAnswer::Json(console.StateJson());
  if (r.path == "/api/events") {
    auto events = console.EventsJson(r.query);
    return events.ok() ? GetAnswer::Json(std::move(*events)) : GetAnswer::Error(events.status());
  }
  if (r.path == "/healthz") return GetAnswer::Json("{\"status\":\"ok\"}");
  if (const Asset* a = FindAsset(r.path)) {
    return {200, std::string(a->body), std::string(a->content_type)};
  }
  return GetAnswer::Error(
      Status::NotFound("the console serves /, /api/state, /api/events and /healthz"));
}

control::GetOnlyPort::Headers ConsoleHeaders() {
  return {{"X-Content-Type-Options", "nosniff"},
          {"Content-Security-Policy",
           "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'"}};
}

ConsoleServer::ConsoleServer(std::string host, uint16_t port, Console& console, std::string token)
    : host_(host),
      port_number_(port),
      token_(std::move(token)),
      port_(
          std::move(host), port,
          [&console, this](const GetRequest& r) {
            // On a loopback address, only names of this machine: a web page that rebinds its
            // own name to 127.0.0.1 reaches the port with its name in Host, and is refused.
            if (IsLoopback(host_) && !IsLoopback(r.host)) {
              return GetAnswer::Error(Status::PermissionDenied(
                  "the console answers only addresses of this machine (Host " + r.host + ")"));
            }
            return ServeConsole(console, token_, r);
          },
          ConsoleHeaders()) {}

ConsoleServer::~ConsoleServer() { Close(); }

std::string ConsoleServer::Address() const {
  return "http://" + host_ + ":" + std::to_string(port_number_) + "/" +
         (token_.empty() ? "" : "#token=" + token_);
}

Status ConsoleServer::Open() { return port_.Open(); }

void ConsoleServer::Close() { port_.Close(); }

}  // namespace shoal::console
