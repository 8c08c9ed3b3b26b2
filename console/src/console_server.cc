#include "shoal/console/console_server.h"

#include "shoal/common/json.h"

namespace shoal::console {

using control::GetAnswer;
using control::GetRequest;

GetAnswer ServeConsole(Console& console, const std::string& token, const GetRequest& r) {
  if (r.path.rfind("/api/", 0) == 0 && !token.empty() && r.authorization != "Bearer " + token) {
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
          [&console, this](const GetRequest& r) { return ServeConsole(console, token_, r); },
          ConsoleHeaders()) {}

ConsoleServer::~ConsoleServer() { Close(); }

std::string ConsoleServer::Address() const {
  return "http://" + host_ + ":" + std::to_string(port_number_) + "/" +
         (token_.empty() ? "" : "#token=" + token_);
}

Status ConsoleServer::Open() { return port_.Open(); }

void ConsoleServer::Close() { port_.Close(); }

}  // namespace shoal::console
