// ConsoleServer: the console's HTTP port (docs/console.md): the page and its script and style,
// built into the binary (console/assets, embedded at build time: nothing is fetched from
// elsewhere at run time), GET /api/state and GET /api/events (Console), GET /healthz. Read-only:
// anything but GET is 405. With a token, /api/* needs `Authorization: Bearer <token>` (the page
// takes it from the address's #token=... fragment, which browsers do not send). A
// GetOnlyPort. Open, then Close (or destroy). Thread-safe; the Console outlives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "shoal/common/status.h"
#include "shoal/console/console.h"
#include "shoal/control/get_only_port.h"

namespace shoal::console {

// An asset built into the binary, by its path ("/", "/console.js", ...); nullptr when none.
struct Asset {
  std::string_view path;
  std::string_view content_type;
  std::string_view body;
};
const Asset* FindAsset(std::string_view path);

// One console's answer to a GET whose path is relative to the console's root ("/",
// "/console.js", "/api/state", "/api/events"); with a token, /api/* needs it. What a port serving
// one console (ConsoleServer) or many (the operator's, one per topic under /t/<ns>/<name>/) runs.
control::GetAnswer ServeConsole(Console& console, const std::string& token,
                                const control::GetRequest& request);

// The headers every answer of a console's port carries: nothing but its own assets may load.
control::GetOnlyPort::Headers ConsoleHeaders();

class ConsoleServer {
 public:
  ConsoleServer(std::string host, uint16_t port, Console& console, std::string token = "");
  ~ConsoleServer();
  ConsoleServer(const ConsoleServer&) = delete;
  ConsoleServer& operator=(const ConsoleServer&) = delete;

  Status Open();
  void Close();
  // http://host:port/ (with #token=... when a token is needed).
  std::string Address() const;

 private:
  const std::string host_;
  const uint16_t port_number_;
  const std::string token_;
  control::GetOnlyPort port_;
};

}  // namespace shoal::console
