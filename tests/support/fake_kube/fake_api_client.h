// A fake API server and a KubeClient that speaks to it as the server's admin: what the unit
// tests of the operator's Kubernetes side (the platform, the Event recorder) start from. The
// client is destroyed before the server (member order). Owned by the test.
#pragma once

#include <memory>

#include "shoal/common/status.h"
#include "shoal/kubeapi/kube_client.h"
#include "support/fake_kube/fake_api_server.h"

namespace shoal::testing {

struct FakeApiWithClient {
  std::unique_ptr<FakeApiServer> server;
  std::unique_ptr<kubeapi::KubeClient> client;
};

Result<FakeApiWithClient> StartFakeApiWithClient();

}  // namespace shoal::testing
