#include "support/fake_kube/pod_security.h"

#include <algorithm>
#include <set>

namespace shoal::testing {
namespace {

using web::json::value;

const value* Get(const value& v, const std::string& key) {
  return v.is_object() && v.has_field(key) ? &v.at(key) : nullptr;
}
std::string Str(const value* v) { return v && v->is_string() ? v->as_string() : ""; }
bool True(const value* v) { return v && v->is_boolean() && v->as_bool(); }
bool False(const value* v) { return v && v->is_boolean() && !v->as_bool(); }
const value* Path(const value& v, std::initializer_list<const char*> keys) {
  const value* cur = &v;
  for (const char* k : keys) {
    cur = Get(*cur, k);
    if (!cur) return nullptr;
  }
  return cur;
}

struct Container {
  std::string name;
  const value* spec;
};

std::vector<Container> AllContainers(const value& spec) {
  std::vector<Container> out;
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    const value* cs = Get(spec, list);
    if (!cs || !cs->is_array()) continue;
    for (const auto& c : cs->as_array()) out.push_back({Str(Get(c, "name")), &c});
  }
  return out;
}

// `container "a"` or `containers "a", "b"`, as the plugin lists them.
std::string Containers(const std::vector<std::string>& names) {
  std::string out = names.size() == 1 ? "container " : "containers ";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", \"" : "\"") + names[i] + "\"";
  return out;
}

// Capabilities the baseline level allows to add (policy/check_capabilities_baseline.go).
const std::set<std::string>& BaselineCapabilities() {
  static const std::set<std::string> caps = {
      "AUDIT_WRITE", "CHOWN",  "DAC_OVERRIDE", "FOWNER",   "FSETID",     "KILL",   "MKNOD",
      "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"};
  return caps;
}

void Baseline(const value& spec, const std::vector<Container>& cs, std::vector<std::string>& out) {
  std::vector<std::string> host;
  for (const char* f : {"hostNetwork", "hostPID", "hostIPC"}) {
    if (True(Get(spec, f))) host.push_back(std::string(f) + "=true");
  }
  if (!host.empty()) {
    std::string list;
    for (const auto& h : host) list += (list.empty() ? "" : ", ") + h;
    out.push_back("host namespaces (" + list + ")");
  }
  std::vector<std::string> privileged;
  for (const auto& c : cs) {
    if (True(Path(*c.spec, {"securityContext", "privileged"}))) privileged.push_back(c.name);
  }
  if (!privileged.empty()) {
    out.push_back("privileged (" + Containers(privileged) +
                  " must not set securityContext.privileged=true)");
  }
  for (const auto& c : cs) {
    const value* add = Path(*c.spec, {"securityContext", "capabilities", "add"});
    if (!add || !add->is_array()) continue;
    for (const auto& cap : add->as_array()) {
      if (cap.is_string() && !BaselineCapabilities().count(cap.as_string())) {
        out.push_back("non-default capabilities (container \"" + c.name + "\" must not include \"" +
                      cap.as_string() + "\" in securityContext.capabilities.add)");
      }
    }
  }
  const value* volumes = Get(spec, "volumes");
  std::vector<std::string> host_paths;
  if (volumes && volumes->is_array()) {
    for (const auto& v : volumes->as_array()) {
      if (Get(v, "hostPath")) host_paths.push_back("\"" + Str(Get(v, "name")) + "\"");
    }
  }
  if (!host_paths.empty()) {
    std::string list;
    for (const auto& h : host_paths) list += (list.empty() ? "" : ", ") + h;
    out.push_back(std::string("hostPath ") + (host_paths.size() == 1 ? "volume " : "volumes ") +
                  list);
  }
  for (const auto& c : cs) {
    const value* ports = Get(*c.spec, "ports");
    if (!ports || !ports->is_array()) continue;
    for (const auto& p : ports->as_array()) {
      const value* hp = Get(p, "hostPort");
      if (hp && hp->is_integer() && hp->as_integer() != 0) {
        out.push_back("hostPort (container \"" + c.name + "\" uses hostPort " +
                      std::to_string(hp->as_integer()) + ")");
      }
    }
  }
  if (Str(Path(spec, {"securityContext", "seccompProfile", "type"})) == "Unconfined") {
    out.push_back("seccompProfile (pod must not set securityContext.seccompProfile.type to "
                  "\"Unconfined\")");
  }
}

void Restricted(const value& spec, const std::vector<Container>& cs,
                std::vector<std::string>& out) {
  // Volume types (check_restrictedVolumes.go).
  static const std::set<std::string> allowed = {"configMap", "csi", "downwardAPI", "emptyDir",
                                                "ephemeral", "persistentVolumeClaim", "projected",
                                                "secret"};
  const value* volumes = Get(spec, "volumes");
  if (volumes && volumes->is_array()) {
    for (const auto& v : volumes->as_array()) {
      if (!v.is_object()) continue;
      for (const auto& [k, _] : v.as_object()) {
        if (k == "name" || allowed.count(k)) continue;
        out.push_back("restricted volume types (volume \"" + Str(Get(v, "name")) +
                      "\" uses restricted volume type \"" + k + "\")");
      }
    }
  }
  std::vector<std::string> escalation, caps, non_root, seccomp;
  const bool pod_non_root = True(Path(spec, {"securityContext", "runAsNonRoot"}));
  const std::string pod_seccomp = Str(Path(spec, {"securityContext", "seccompProfile", "type"}));
  for (const auto& c : cs) {
    if (!False(Path(*c.spec, {"securityContext", "allowPrivilegeEscalation"}))) {
      escalation.push_back(c.name);
    }
    const value* drop = Path(*c.spec, {"securityContext", "capabilities", "drop"});
    const bool drops_all =
        drop && drop->is_array() &&
        std::any_of(drop->as_array().begin(), drop->as_array().end(),
                    [](const value& d) { return d.is_string() && d.as_string() == "ALL"; });
    if (!drops_all) caps.push_back(c.name);
    const value* add = Path(*c.spec, {"securityContext", "capabilities", "add"});
    if (add && add->is_array()) {
      for (const auto& cap : add->as_array()) {
        if (cap.is_string() && cap.as_string() != "NET_BIND_SERVICE") {
          out.push_back("unrestricted capabilities (container \"" + c.name +
                        "\" must not include \"" + cap.as_string() +
                        "\" in securityContext.capabilities.add)");
        }
      }
    }
    const value* nr = Path(*c.spec, {"securityContext", "runAsNonRoot"});
    if (False(nr) || (!nr && !pod_non_root)) non_root.push_back(c.name);
    const std::string sc = Str(Path(*c.spec, {"securityContext", "seccompProfile", "type"}));
    const std::string effective = sc.empty() ? pod_seccomp : sc;
    if (effective != "RuntimeDefault" && effective != "Localhost") seccomp.push_back(c.name);
    const value* uid = Path(*c.spec, {"securityContext", "runAsUser"});
    if (uid && uid->is_integer() && uid->as_integer() == 0) {
      out.push_back("runAsUser=0 (container \"" + c.name + "\" must not set runAsUser=0)");
    }
  }
  if (!escalation.empty()) {
    out.push_back("allowPrivilegeEscalation != false (" + Containers(escalation) +
                  " must set securityContext.allowPrivilegeEscalation=false)");
  }
  if (!caps.empty()) {
    out.push_back("unrestricted capabilities (" + Containers(caps) +
                  " must set securityContext.capabilities.drop=[\"ALL\"])");
  }
  if (False(Path(spec, {"securityContext", "runAsNonRoot"}))) {
    out.push_back("runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)");
  } else if (!non_root.empty()) {
    out.push_back("runAsNonRoot != true (pod or " + Containers(non_root) +
                  " must set securityContext.runAsNonRoot=true)");
  }
  const value* pod_uid = Path(spec, {"securityContext", "runAsUser"});
  if (pod_uid && pod_uid->is_integer() && pod_uid->as_integer() == 0) {
    out.push_back("runAsUser=0 (pod must not set runAsUser=0)");
  }
  if (!seccomp.empty()) {
    out.push_back("seccompProfile (pod or " + Containers(seccomp) +
                  " must set securityContext.seccompProfile.type to \"RuntimeDefault\" or "
                  "\"Localhost\")");
  }
}

}  // namespace

std::vector<std::string> PodSecurityViolations(const value& pod, const std::string& level) {
  std::vector<std::string> out;
  if (level != "baseline" && level != "restricted") return out;
  const value* spec = Get(pod, "spec");
  if (!spec) return out;
  const auto cs = AllContainers(*spec);
  Baseline(*spec, cs, out);
  if (level == "restricted") Restricted(*spec, cs, out);
  return out;
}

std::string PodSecurityMessage(const std::string& pod_name, const std::string& level,
                               const std::vector<std::string>& violations) {
  std::string list;
  for (const auto& v : violations) list += (list.empty() ? "" : ", ") + v;
  return "pods \"" + pod_name + "\" is forbidden: violates PodSecurity \"" + level +
         ":latest\": " + list;
}

}  // namespace shoal::testing
