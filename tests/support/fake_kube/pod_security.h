// Pod Security admission as the real API server's PodSecurity plugin applies it
// (k8s.io/pod-security-admission, policy/check_*.go; the Pod Security Standards at
// https://kubernetes.io/docs/concepts/security/pod-security-standards/): a namespace labelled
// `pod-security.kubernetes.io/enforce: baseline|restricted` refuses pods that break that level
// (403 Forbidden, `violates PodSecurity "restricted:latest": ...`), and the `warn` label turns the
// same findings into Warning headers. Only pods are enforced; workload objects are not checked
// (the real plugin only warns on their templates). Pure functions; values.
#pragma once

#include <cpprest/json.h>

#include <string>
#include <vector>

namespace shoal::testing {

inline constexpr char kPodSecurityEnforceLabel[] = "pod-security.kubernetes.io/enforce";
inline constexpr char kPodSecurityWarnLabel[] = "pod-security.kubernetes.io/warn";

// The checks a pod fails at `level` ("privileged": none; "baseline"; "restricted", which
// includes baseline), each in the plugin's words: `allowPrivilegeEscalation != false
// (container "app" must set securityContext.allowPrivilegeEscalation=false)`.
std::vector<std::string> PodSecurityViolations(const web::json::value& pod,
                                               const std::string& level);

// The whole refusal: `pods "NAME" is forbidden: violates PodSecurity "LEVEL:latest": a, b`.
std::string PodSecurityMessage(const std::string& pod_name, const std::string& level,
                               const std::vector<std::string>& violations);

}  // namespace shoal::testing
