// TLS for cpprestsdk's http_client with shoal/common/tls.h's files: header-only, for the
// libraries that use cpprestsdk (the sidecar's peer client, the client library).
#pragma once

#include <cpprest/http_client.h>

#include <stdexcept>
#include <string>

#include "shoal/common/tls.h"

namespace shoal {

// The URL of `host_port` with the scheme that `tls` asks for.
inline std::string BaseUrl(const std::string& host_port, const TlsClientFiles& tls) {
  return (tls.enabled() ? "https://" : "http://") + host_port;
}

// Each new connection of a client made with `config` loads the files again (a rotated
// certificate is taken without a restart); a file that cannot be loaded fails that request.
inline void UseTls(web::http::client::http_client_config& config, const TlsClientFiles& tls) {
  if (!tls.enabled()) return;
  config.set_ssl_context_callback([tls](boost::asio::ssl::context& ctx) {
    if (auto st = ConfigureTlsClient(ctx.native_handle(), tls); !st.ok()) {
      throw std::runtime_error(st.message());
    }
  });
}

// cpprestsdk checks the server's certificate against the request's Host header when it has one:
// the topic's peer name, where the address is a pod's IP.
inline void NameTheServer(web::http::http_request& req, const TlsClientFiles& tls) {
  if (tls.enabled()) req.headers().add("Host", tls.server_name);
}

}  // namespace shoal
