#include "support/fake_kube/fake_api_client.h"

namespace shoal::testing {

Result<FakeApiWithClient> StartFakeApiWithClient() {
  constexpr char kAdminToken[] = "admin";
  FakeApiServerOptions options;
  options.admin_token = kAdminToken;
  auto server = FakeApiServer::Start(options);
  if (!server.ok()) return server.status();
  kubeapi::KubeConfig config;
  config.server = server.value()->base_url();
  config.token = kAdminToken;
  auto client = kubeapi::KubeClient::Create(config);
  if (!client.ok()) return client.status();
  return FakeApiWithClient{std::move(server).value(), std::move(client).value()};
}

}  // namespace shoal::testing
