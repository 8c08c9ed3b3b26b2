// Discovery documents of the fake API server, built from the resource types it serves, in the
// shapes the real kube-apiserver answers (k8s.io/apimachinery/pkg/apis/meta/v1 types.go:
// APIVersions, APIGroupList, APIResourceList; /version is version.Info): what kubectl and Helm
// read before any request ("kubectl get ptopic" resolves the short name through it). Only the
// legacy (unaggregated) discovery is served: clients that ask for the aggregated
// apidiscovery.k8s.io/v2 form accept application/json as well, and fall back to this one when
// the answer is not aggregated (client-go discovery_client.go, "fallback to legacy").
// Pure functions; values.
#pragma once

#include <cpprest/json.h>

#include <optional>
#include <string>
#include <vector>

#include "support/fake_kube/fake_api_server.h"

namespace shoal::testing {

// The version the fake claims (kubectl warns when its minor is more than one away).
inline constexpr int kFakeKubeMinor = 35;

// The document for a GET of `path` ("/api", "/api/v1", "/apis", "/apis/apps/v1", "/version"), or
// nullopt when `path` is not a discovery path. `server_address` is host:port, for /api's
// serverAddressByClientCIDRs.
std::optional<web::json::value> DiscoveryDocument(const std::vector<ResourceType>& types,
                                                  const std::string& path,
                                                  const std::string& server_address);

// The OpenAPI v3 documents for a GET of `path`: the index at /openapi/v3 (one entry per
// group-version, with its serverRelativeURL) and /openapi/v3/api/v1, /openapi/v3/apis/G/V, or
// nullopt. Each resource's paths carry their operations with x-kubernetes-group-version-kind
// and the query parameters the server accepts (fieldValidation, fieldManager, dryRun, force),
// which is how kubectl decides to validate on the server (cli-runtime
// query_param_verifier_v3.go: it looks for "fieldValidation" among the PATCH operation's
// parameters). `schemas[i]` is type i's structural schema (a CRD's openAPIV3Schema) or null;
// it becomes the kind's entry in components.schemas (kubectl explain).
std::optional<web::json::value> OpenApiDocument(const std::vector<ResourceType>& types,
                                                const std::vector<web::json::value>& schemas,
                                                const std::string& path);

}  // namespace shoal::testing
