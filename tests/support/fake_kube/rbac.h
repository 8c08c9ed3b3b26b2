// Kubernetes RBAC for the fake API server: PolicyRule lists as a ClusterRole or Role holds them,
// loaded from one YAML file (deploy/rbac/operator-rules.yaml, which the Helm chart also renders),
// and the authorizer's rule matching (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac).
//
// Values and free functions; thread-safe as values are.
#pragma once

#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::testing {

// One rule of a Role: the verbs it grants on the resources of the API groups. "*" matches any
// group, resource or verb; "*/status" any resource's status subresource; resources name a
// subresource as "plural/sub". Empty resource_names grants every object.
struct PolicyRule {
  std::vector<std::string> api_groups;
  std::vector<std::string> resources;
  std::vector<std::string> verbs;
  std::vector<std::string> resource_names;
};

// What one request asks for, in the authorizer's terms. `resource` is the plural, `subresource`
// empty for the main resource; `name` empty for list, watch and create.
struct ResourceAttributes {
  std::string verb = "";  // get list watch create update patch delete
  std::string group = "";
  std::string resource = "";
  std::string subresource = "";
  std::string name = "";
  std::string namespace_ = "";  // empty: cluster scope
};

// Parses `rules: [{apiGroups, resources, verbs, resourceNames}]` from YAML text.
Result<std::vector<PolicyRule>> ParsePolicyRules(const std::string& yaml_text);
// Reads and parses a rules file.
Result<std::vector<PolicyRule>> LoadPolicyRules(const std::string& path);

// Whether any rule grants the request.
bool RulesAllow(const std::vector<PolicyRule>& rules, const ResourceAttributes& request);

// The API server's message for a denied request, e.g.
// `partitionedtopics.shoal.dev "x" is forbidden: User "u" cannot update resource
// "partitionedtopics/status" in API group "shoal.dev" in the namespace "default"`.
std::string ForbiddenMessage(const std::string& user, const ResourceAttributes& request);
// Only the reason part after "is forbidden: ": `User "u" cannot ... in the namespace "default"`.
std::string ForbiddenReason(const std::string& user, const ResourceAttributes& request);

}  // namespace shoal::testing
