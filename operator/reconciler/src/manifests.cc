#include "shoal/reconciler/topic_status.h"
#include "shoal/reconciler/manifests.h"

#include <cpprest/asyncrt_utils.h>
#include <yaml-cpp/yaml.h>
#include <zlib.h>

#include <cstdio>
#include <set>

namespace shoal::reconciler {
namespace {

using web::json::value;

constexpr const char* kDataVolume = "shoal-data";
constexpr const char* kTokenVolume = "shoal-admin-token";
constexpr const char* kDataMount = "/var/lib/shoal";
constexpr const char* kTokenMount = "/etc/shoal/admin";

bool Dns1123Label(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

value Str(const std::string& s) { return value::string(s); }

value EnvFromField(const std::string& name, const std::string& field_path) {
  value e = value::object();
  e["name"] = Str(name);
  e["valueFrom"]["fieldRef"]["fieldPath"] = Str(field_path);
  return e;
}

value EnvValue(const std::string& name, const std::string& v) {
  value e = value::object();
  e["name"] = Str(name);
  e["value"] = Str(v);
  return e;
}

value Port(const std::string& name, uint16_t port) {
  value p = value::object();
  p["name"] = Str(name);
  p["containerPort"] = value::number(port);
  p["protocol"] = Str("TCP");
  return p;
}

value HttpProbe(const std::string& path, int period, int failures) {
  value p = value::object();
  p["httpGet"]["path"] = Str(path);
  p["httpGet"]["port"] = value::number(kMetricsPort);
  p["periodSeconds"] = value::number(period);
  p["failureThreshold"] = value::number(failures);
  return p;
}

value Mount(const std::string& name, const std::string& path, bool read_only) {
  value m = value::object();
  m["name"] = Str(name);
  m["mountPath"] = Str(path);
  if (read_only) m["readOnly"] = value::boolean(true);
  return m;
}

value StringArray(const std::vector<std::string>& items) {
  value a = value::array(items.size());
  for (size_t i = 0; i < items.size(); ++i) a[i] = Str(items[i]);
  return a;
}

bool HasEnv(const value& container, const std::string& name) {
  if (!container.has_array_field("env")) return false;
  for (const auto& e : container.at("env").as_array()) {
    if (e.has_string_field("name") && e.at("name").as_string() == name) return true;
  }
  return false;
}

value SidecarContainer(const TopicObject& t, const ManifestOptions& o, int64_t grace) {
  const TopicSpec& s = t.spec;
  std::vector<std::string> args = {"--topic",        s.name,
                                   "--pod-name",     "$(POD_NAME)",
                                   "--wait-for-map", "--data-dir",
                                   std::string(kDataMount) + "/data",
                                   "--bind",         "0.0.0.0",
                                   "--port",         std::to_string(kDataPort),
                                   "--admin-port",   std::to_string(kAdminPort),
                                   "--metrics-port", std::to_string(kMetricsPort),
                                   "--admin-token-file",
                                   std::string(kTokenMount) + "/token",
                                   "--fsync",        s.fsync,
                                   "--retention-ms", std::to_string(s.retention.ms),
                                   "--log-level",    o.log_level};
  if (TlsOn(t, o)) {
    // The pod's certificate, the topic's CA and the access file come with the admin token's
    // Secret (TopicOperator::EnsureTls); the pod's containers get a plain port on loopback.
    const std::string dir = kTokenMount;
    for (const std::string& a : std::vector<std::string>{
             "--tls-cert", dir + "/tls.crt", "--tls-key", dir + "/tls.key", "--tls-client-ca",
             dir + "/ca.crt", "--access-file", dir + "/access.json", "--local-port",
             std::to_string(kLocalPort), "--local-bind", "127.0.0.1"}) {
      args.push_back(a);
    }
  }
  if (s.replication.factor > 1) {
    args.push_back("--acks");
    args.push_back(s.replication.acks);
  }
  if (s.retention.bytes) {
    args.push_back("--retention-bytes");
    args.push_back(std::to_string(s.retention.bytes));
  }
  if (auto reserve = QuantityBytes(s.storage.reserve); !s.storage.reserve.empty() && reserve.ok()) {
    args.push_back("--disk-reserve-bytes");
    args.push_back(std::to_string(*reserve));
  }
  value c = value::object();
  c["name"] = Str(kSidecarContainer);
  c["image"] = Str(s.sidecar_image.empty() ? o.sidecar_image : s.sidecar_image);
  c["command"] = StringArray({"shoal-sidecar"});
  c["args"] = StringArray(args);
  value env = value::array();
  env[0] = EnvFromField("POD_NAME", "metadata.name");
  env[1] = EnvFromField("POD_IP", "status.podIP");
  c["env"] = env;
  value ports = value::array();
  ports[0] = Port("data", kDataPort);
  ports[1] = Port("admin", kAdminPort);
  ports[2] = Port("metrics", kMetricsPort);
  c["ports"] = ports;
  c["readinessProbe"] = HttpProbe("/readyz", 2, 3);
  c["livenessProbe"] = HttpProbe("/healthz", 10, 6);
  // Kubernetes runs preStop before SIGTERM: the pod stops only once it owns no partition (the
  // operator moved them away and their sealed ends were consumed), bounded by the grace period.
  const int64_t wait = std::max<int64_t>(1, grace - 5);
  // (A kubelet does not expand $(VAR) in hooks: wait-drained takes the address from $POD_IP.)
  std::vector<std::string> hook = {"shoal",        "wait-drained",
                                   "--admin-port", std::to_string(kAdminPort),
                                   "--token-file", std::string(kTokenMount) + "/token",
                                   "--timeout",    std::to_string(wait)};
  if (TlsOn(t, o)) {
    hook.insert(hook.end(), {"--tls-dir", kTokenMount, "--topic", s.name});
  }
  c["lifecycle"]["preStop"]["exec"]["command"] = StringArray(hook);
  value mounts = value::array();
  mounts[0] = Mount(kDataVolume, kDataMount, false);
  mounts[1] = Mount(kTokenVolume, kTokenMount, true);
  c["volumeMounts"] = mounts;
  value resources = value::object();
  for (const auto& [key, quantity] : s.sidecar_resources) {
    const size_t dot = key.find('.');
    if (dot == std::string::npos) continue;
    resources[key.substr(0, dot)][key.substr(dot + 1)] = Str(quantity);
  }
  if (resources.size() > 0) c["resources"] = resources;
  // What Pod Security "restricted" asks of every container (the user's are the user's).
  value& sc = c["securityContext"];
  sc["allowPrivilegeEscalation"] = value::boolean(false);
  sc["readOnlyRootFilesystem"] = value::boolean(true);
  sc["runAsNonRoot"] = value::boolean(true);
  sc["runAsUser"] = value::number(kSidecarUid);
  sc["runAsGroup"] = value::number(kSidecarUid);
  sc["capabilities"]["drop"] = StringArray({"ALL"});
  sc["seccompProfile"]["type"] = Str("RuntimeDefault");
  return c;
}

// Adds the topic's connection to an app container unless the user set it.
void InjectAppEnv(value& container, const std::string& topic, bool tls) {
  if (!container.has_array_field("env")) container["env"] = value::array();
  value& env = container["env"];
  auto add = [&](value e) {
    if (!HasEnv(container, e.at("name").as_string())) env[env.size()] = std::move(e);
  };
  add(EnvValue("SHOAL_URL", "http://localhost:" + std::to_string(tls ? kLocalPort : kDataPort)));
  add(EnvValue("SHOAL_TOPIC", topic));
}

void Canonical(const value& v, std::string& out) {
  if (v.is_object()) {
    std::map<std::string, const value*> sorted;
    for (const auto& kv : v.as_object()) sorted[kv.first] = &kv.second;
    out += '{';
    for (const auto& [k, child] : sorted) {
      out += k;
      out += ':';
      Canonical(*child, out);
      out += ',';
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (const auto& child : v.as_array()) {
      Canonical(child, out);
      out += ',';
    }
    out += ']';
  } else {
    out += v.serialize();
  }
}

value YamlNodeToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      value o = value::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlNodeToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      value a = value::array();
      size_t i = 0;
      for (const auto& item : n) a[i++] = YamlNodeToJson(item);
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return Str(s);  // quoted
      if (s == "true" || s == "True") return value::boolean(true);
      if (s == "false" || s == "False") return value::boolean(false);
      if (s == "null" || s == "~") return value::null();
      try {
        size_t used = 0;
        const long long i = std::stoll(s, &used);
        if (used == s.size()) return value::number(static_cast<int64_t>(i));
        const double d = std::stod(s, &used);
        if (used == s.size()) return value::number(d);
      } catch (...) {
      }
      return Str(s);
    }
    default:
      return value::null();
  }
}

}  // namespace

Result<Json> YamlToJson(const std::string& yaml) {
  try {
    return YamlNodeToJson(YAML::Load(yaml));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("not YAML: ") + e.what());
  }
}

namespace {

// The admin token is the sidecars' alone: an app container of the topic's pods may not mount its
// volume (or the data volume), nor read the token's Secret through env, envFrom or a volume of
// its own.
Status CheckNoAdminToken(const Json& spec, const std::string& p, const std::string& secret) {
  auto refers = [&](const value& v, const char* field) {
    return v.is_object() && v.has_string_field(field) && v.at(field).as_string() == secret;
  };
  const std::string why = "is the sidecars' admin token: app containers may not read it";
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.has_array_field(list)) continue;
    size_t i = 0;
    for (const auto& c : spec.at(list).as_array()) {
      const std::string at = p + ".spec." + list + "[" + std::to_string(i++) + "]";
      if (!c.is_object()) continue;
      if (c.has_array_field("volumeMounts")) {
        for (const auto& m : c.at("volumeMounts").as_array()) {
          if (!m.is_object() || !m.has_string_field("name")) continue;
          const std::string name = m.at("name").as_string();
          if (name == kTokenVolume || name == kDataVolume) {
            return Status::InvalidArgument(at + ".volumeMounts: \"" + name +
                                           "\" is the sidecar's volume; app containers may not "
                                           "mount it");
          }
        }
      }
      if (c.has_array_field("env")) {
        for (const auto& e : c.at("env").as_array()) {
          if (e.is_object() && e.has_object_field("valueFrom") &&
              refers(e.at("valueFrom").has_object_field("secretKeyRef")
                         ? e.at("valueFrom").at("secretKeyRef")
                         : value::null(),
                     "name")) {
            return Status::InvalidArgument(at + ".env: Secret " + secret + " " + why);
          }
        }
      }
      if (c.has_array_field("envFrom")) {
        for (const auto& e : c.at("envFrom").as_array()) {
          if (e.is_object() && e.has_object_field("secretRef") &&
              refers(e.at("secretRef"), "name")) {
            return Status::InvalidArgument(at + ".envFrom: Secret " + secret + " " + why);
          }
        }
      }
    }
  }
  if (spec.has_array_field("volumes")) {
    for (const auto& v : spec.at("volumes").as_array()) {
      if (!v.is_object()) continue;
      bool reads = v.has_object_field("secret") && refers(v.at("secret"), "secretName");
      if (v.has_object_field("projected") && v.at("projected").has_array_field("sources")) {
        for (const auto& s : v.at("projected").at("sources").as_array()) {
          reads = reads ||
                  (s.is_object() && s.has_object_field("secret") && refers(s.at("secret"), "name"));
        }
      }
      if (reads) return Status::InvalidArgument(p + ".spec.volumes: Secret " + secret + " " + why);
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePodTemplate(const Json& t, const std::string& topic) {
  const std::string p = "spec.consumer.template";
  if (!t.is_object()) return Status::InvalidArgument(p + ": expected an object (a pod template)");
  if (t.has_field("metadata")) {
    const value& m = t.at("metadata");
    if (!m.is_object()) return Status::InvalidArgument(p + ".metadata: expected an object");
    for (const char* field : {"labels", "annotations"}) {
      if (!m.has_field(field)) continue;
      if (!m.at(field).is_object()) {
        return Status::InvalidArgument(p + ".metadata." + field + ": expected a map of strings");
      }
      for (const auto& kv : m.at(field).as_object()) {
        if (!kv.second.is_string()) {
          return Status::InvalidArgument(p + ".metadata." + field + "." + kv.first +
                                         ": expected a string");
        }
      }
    }
  }
  if (t.has_field("spec") && t.at("spec").has_field("terminationGracePeriodSeconds") &&
      !t.at("spec").at("terminationGracePeriodSeconds").is_integer()) {
    return Status::InvalidArgument(p + ".spec.terminationGracePeriodSeconds: expected seconds");
  }
  if (!t.has_object_field("spec") || !t.at("spec").has_array_field("containers") ||
      t.at("spec").at("containers").size() == 0) {
    return Status::InvalidArgument(
        p + ".spec.containers: the consumer pod template needs at least one container (your "
            "app, which reads from $(SHOAL_URL))");
  }
  std::set<std::string> names;
  const auto& containers = t.at("spec").at("containers").as_array();
  size_t i = 0;
  for (const auto& c : containers) {
    const std::string at = p + ".spec.containers[" + std::to_string(i++) + "]";
    if (!c.is_object()) return Status::InvalidArgument(at + ": expected an object");
    if (!c.has_string_field("name") || !Dns1123Label(c.at("name").as_string())) {
      return Status::InvalidArgument(
          at + ".name: a container needs a name of lowercase letters, digits and '-'");
    }
    const std::string name = c.at("name").as_string();
    if (name == kSidecarContainer) {
      return Status::InvalidArgument(at + ".name: \"" + name +
                                     "\" is the container the operator adds; rename yours");
    }
    if (!names.insert(name).second) {
      return Status::InvalidArgument(at + ".name: \"" + name + "\" is used twice");
    }
    if (!c.has_string_field("image") || c.at("image").as_string().empty()) {
      return Status::InvalidArgument(at + ".image: container \"" + name + "\" needs an image");
    }
    if (c.has_field("env") && !c.at("env").is_array()) {
      return Status::InvalidArgument(at + ".env: expected a list of {name, value}");
    }
  }
  if (t.at("spec").has_field("volumes")) {
    if (!t.at("spec").at("volumes").is_array()) {
      return Status::InvalidArgument(p + ".spec.volumes: expected a list");
    }
    for (const auto& v : t.at("spec").at("volumes").as_array()) {
      if (v.has_string_field("name") &&
          (v.at("name").as_string() == kDataVolume || v.at("name").as_string() == kTokenVolume)) {
        return Status::InvalidArgument(p + ".spec.volumes: \"" + v.at("name").as_string() +
                                       "\" is a volume the operator adds; rename yours");
      }
    }
  }
  return CheckNoAdminToken(t.at("spec"), p, AdminSecretName(topic));
}

Result<TopicObject> ReadTopic(const Json& object) {
  TopicObject t;
  const value& meta = object.has_object_field("metadata") ? object.at("metadata") : value::null();
  if (!meta.is_object() || !meta.has_string_field("name")) {
    return Status::InvalidArgument("metadata.name: missing");
  }
  t.name = meta.at("name").as_string();
  t.ns = meta.has_string_field("namespace") ? meta.at("namespace").as_string() : "default";
  t.uid = meta.has_string_field("uid") ? meta.at("uid").as_string() : "";
  t.generation = meta.has_field("generation") ? meta.at("generation").as_number().to_int64() : 0;
  if (meta.has_object_field("annotations")) {
    const value& a = meta.at("annotations");
    t.paused = a.has_string_field(kPausedAnnotation) && a.at(kPausedAnnotation).as_string() == "true";
  }
  if (!object.has_object_field("spec")) return Status::InvalidArgument("spec: missing");
  value doc = value::object();
  doc["apiVersion"] = Str("shoal.dev/v1alpha1");
  doc["kind"] = Str("PartitionedTopic");
  doc["metadata"]["name"] = Str(t.name);
  doc["metadata"]["namespace"] = Str(t.ns);
  doc["spec"] = object.at("spec");
  auto spec = ParseTopic(doc.serialize());
  if (!spec.ok()) return spec.status();
  t.spec = std::move(spec).value();
  const value& spec_json = object.at("spec");
  t.spec_json = spec_json;
  if (spec_json.has_object_field("consumer") &&
      spec_json.at("consumer").has_field("template")) {
    t.consumer_template = spec_json.at("consumer").at("template");
  } else {
    return Status::InvalidArgument(
        "spec.consumer.template: missing: the pod template of your consumer app, to which the "
        "operator adds the sidecar");
  }
  SHOAL_RETURN_IF_ERROR(ValidatePodTemplate(t.consumer_template, t.name));
  return t;
}

Json Labels(const std::string& topic) {
  value l = SelectorLabels(topic);
  l["app.kubernetes.io/name"] = Str("shoal");
  l["app.kubernetes.io/component"] = Str("topic");
  l["app.kubernetes.io/part-of"] = Str("shoal");
  l["app.kubernetes.io/managed-by"] = Str("shoal-operator");
  return l;
}

Json SelectorLabels(const std::string& topic) {
  value l = value::object();
  l["app.kubernetes.io/instance"] = Str(topic);
  l[kTopicLabel] = Str(topic);
  return l;
}

std::string SelectorString(const std::string& topic) {
  return "app.kubernetes.io/instance=" + topic + "," + kTopicLabel + "=" + topic;
}

std::string AdminSecretName(const std::string& topic) { return topic + "-admin"; }

Json OwnerReference(const TopicObject& topic) {
  value r = value::object();
  r["apiVersion"] = Str("shoal.dev/v1alpha1");
  r["kind"] = Str("PartitionedTopic");
  r["name"] = Str(topic.name);
  r["uid"] = Str(topic.uid);
  r["controller"] = value::boolean(true);
  r["blockOwnerDeletion"] = value::boolean(true);
  return r;
}

bool OwnedBy(const Json& object, const TopicObject& topic) {
  if (!object.is_object() || !object.has_field("metadata")) return false;
  const Json& meta = object.at("metadata");
  if (!meta.is_object() || !meta.has_field("ownerReferences")) return false;
  const Json& owners = meta.at("ownerReferences");
  if (!owners.is_array()) return false;
  for (const auto& o : owners.as_array()) {
    if (!o.is_object() || !o.has_field("uid") || !o.at("uid").is_string()) continue;
    const bool controller = o.has_field("controller") && o.at("controller").is_boolean() &&
                            o.at("controller").as_bool();
    if (controller && o.at("uid").as_string() == topic.uid) return true;
  }
  return false;
}

std::string NotOwnedMessage(const std::string& kind, const std::string& name,
                            const TopicObject& topic) {
  return kind + " " + topic.ns + "/" + name + " exists and is not this topic's (it names no " +
         "controller PartitionedTopic " + topic.name + " with uid " + topic.uid +
         "): the operator neither changes nor deletes it; delete or rename it, or give the " +
         "topic another name";
}

namespace {
value Metadata(const TopicObject& t, const std::string& name) {
  value m = value::object();
  m["name"] = Str(name);
  m["namespace"] = Str(t.ns);
  m["labels"] = Labels(t.name);
  value owners = value::array();
  owners[0] = OwnerReference(t);
  m["ownerReferences"] = owners;
  return m;
}
}  // namespace

Json BuildStatefulSet(const TopicObject& t, const ManifestOptions& o, int64_t replicas) {
  value pod = t.consumer_template;  // validated
  value& spec = pod["spec"];
  int64_t grace = o.termination_grace_seconds;
  if (spec.has_field("terminationGracePeriodSeconds") &&
      spec.at("terminationGracePeriodSeconds").is_integer()) {
    grace = spec.at("terminationGracePeriodSeconds").as_number().to_int64();
  }
  spec["terminationGracePeriodSeconds"] = value::number(grace);
  // Pod-level defaults that Pod Security "restricted" and a fresh cloud disk need, where the
  // user's template does not say otherwise: non-root, the runtime's seccomp profile, and the
  // data volume group-owned by the sidecar's gid so that a non-root sidecar can write a
  // freshly formatted volume (fsGroup).
  value& psc = spec["securityContext"];
  if (!psc.is_object()) psc = value::object();
  if (!psc.has_field("runAsNonRoot")) psc["runAsNonRoot"] = value::boolean(true);
  if (!psc.has_field("seccompProfile")) psc["seccompProfile"]["type"] = Str("RuntimeDefault");
  if (!psc.has_field("fsGroup")) psc["fsGroup"] = value::number(kSidecarUid);
  if (!psc.has_field("fsGroupChangePolicy")) psc["fsGroupChangePolicy"] = Str("OnRootMismatch");
  // The operator's pull secrets, after the template's own (once each).
  if (!o.image_pull_secrets.empty()) {
    value& secrets = spec["imagePullSecrets"];
    if (!secrets.is_array()) secrets = value::array();
    for (const auto& name : o.image_pull_secrets) {
      bool present = false;
      for (const auto& ref : secrets.as_array()) {
        present |= ref.has_field("name") && ref.at("name").is_string() &&
                   ref.at("name").as_string() == name;
      }
      if (present) continue;
      value ref = value::object();
      ref["name"] = Str(name);
      secrets[secrets.size()] = ref;
    }
  }
  // Copies of a partition go to distinct zones and nodes (PlaceReplicas) only if the pods are
  // spread over them: the scheduler is asked to, softly (a one-node cluster still runs), unless
  // the template says how itself.
  if (!spec.has_field("topologySpreadConstraints")) {
    value spread = value::array();
    const char* keys[] = {kZoneLabel, "kubernetes.io/hostname"};
    for (size_t i = 0; i < 2; ++i) {
      value c = value::object();
      c["maxSkew"] = value::number(1);
      c["topologyKey"] = Str(keys[i]);
      c["whenUnsatisfiable"] = Str("ScheduleAnyway");
      c["labelSelector"]["matchLabels"] = SelectorLabels(t.name);
      spread[i] = c;
    }
    spec["topologySpreadConstraints"] = spread;
  }
  value& containers = spec["containers"];
  for (size_t i = 0; i < containers.size(); ++i) InjectAppEnv(containers[i], t.name, TlsOn(t, o));
  containers[containers.size()] = SidecarContainer(t, o, grace);
  if (!spec.has_array_field("volumes")) spec["volumes"] = value::array();
  value token = value::object();
  token["name"] = Str(kTokenVolume);
  token["secret"]["secretName"] = Str(AdminSecretName(t.name));
  token["secret"]["defaultMode"] = value::number(0440);
  spec["volumes"][spec["volumes"].size()] = token;
  // The user's labels stay; the selector's and the recommended ones win.
  value& labels = pod["metadata"]["labels"];
  if (!labels.is_object()) labels = value::object();
  const value ours = Labels(t.name);
  for (const auto& kv : ours.as_object()) labels[kv.first] = kv.second;
  value& annotations = pod["metadata"]["annotations"];
  if (!annotations.is_object()) annotations = value::object();
  annotations["prometheus.io/scrape"] = Str("true");
  annotations["prometheus.io/port"] = Str(std::to_string(kMetricsPort));

  value sts = value::object();
  sts["apiVersion"] = Str("apps/v1");
  sts["kind"] = Str("StatefulSet");
  sts["metadata"] = Metadata(t, t.name);
  sts["spec"]["replicas"] = value::number(replicas);
  sts["spec"]["serviceName"] = Str(t.name);
  // All pods at once: the operator decides which exist and empties them before they go.
  sts["spec"]["podManagementPolicy"] = Str("Parallel");
  sts["spec"]["selector"]["matchLabels"] = SelectorLabels(t.name);
  sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] = Str("Delete");
  sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"] = Str("Delete");
  // A new template reaches the pods through the control loop, one emptied pod at a time
  // (planner.h, MakeRollPlan), never through the controller restarting pods that own
  // partitions.
  sts["spec"]["updateStrategy"]["type"] = Str("OnDelete");
  sts["spec"]["template"] = pod;
  value claim = value::object();
  claim["metadata"]["name"] = Str(kDataVolume);
  claim["metadata"]["labels"] = SelectorLabels(t.name);
  claim["spec"]["accessModes"] = StringArray({"ReadWriteOnce"});
  const auto& storage = t.spec.storage;
  claim["spec"]["resources"]["requests"]["storage"] =
      Str(storage.size.empty() ? o.data_volume_size : storage.size);
  const std::string storage_class =
      storage.storage_class.empty() ? o.storage_class : storage.storage_class;
  if (!storage_class.empty()) claim["spec"]["storageClassName"] = Str(storage_class);
  value claims = value::array();
  claims[0] = claim;
  sts["spec"]["volumeClaimTemplates"] = claims;
  sts["metadata"]["annotations"][kAppliedSpecAnnotation] = Str(t.spec_json.serialize());
  sts["metadata"]["annotations"][kTemplateHashAnnotation] = Str(TemplateHash(sts));
  return sts;
}

Result<TopicObject> AppliedTopic(const Json& topic, const Json& statefulset) {
  if (!statefulset.has_object_field("metadata") ||
      !statefulset.at("metadata").has_object_field("annotations") ||
      !statefulset.at("metadata").at("annotations").has_string_field(kAppliedSpecAnnotation)) {
    return Status::NotFound("the StatefulSet records no applied spec");
  }
  value object = value::object();
  object["metadata"] = topic.has_object_field("metadata") ? topic.at("metadata") : value::object();
  try {
    object["spec"] = value::parse(
        statefulset.at("metadata").at("annotations").at(kAppliedSpecAnnotation).as_string());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("the applied spec is not JSON: ") + e.what());
  }
  return ReadTopic(object);
}

Json BuildService(const TopicObject& t) {
  value svc = value::object();
  svc["apiVersion"] = Str("v1");
  svc["kind"] = Str("Service");
  svc["metadata"] = Metadata(t, t.name);
  svc["spec"]["clusterIP"] = Str("None");
  svc["spec"]["publishNotReadyAddresses"] = value::boolean(true);
  svc["spec"]["selector"] = SelectorLabels(t.name);
  value ports = value::array();
  const std::pair<const char*, uint16_t> list[] = {
      {"data", kDataPort}, {"admin", kAdminPort}, {"metrics", kMetricsPort}};
  for (size_t i = 0; i < 3; ++i) {
    value p = value::object();
    p["name"] = Str(list[i].first);
    p["port"] = value::number(list[i].second);
    p["targetPort"] = Str(list[i].first);
    p["protocol"] = Str("TCP");
    ports[i] = p;
  }
  svc["spec"]["ports"] = ports;
  return svc;
}

Json BuildPodDisruptionBudget(const TopicObject& t) {
  value pdb = value::object();
  pdb["apiVersion"] = Str("policy/v1");
  pdb["kind"] = Str("PodDisruptionBudget");
  pdb["metadata"] = Metadata(t, t.name);
  pdb["spec"]["maxUnavailable"] = value::number(1);
  pdb["spec"]["selector"]["matchLabels"] = SelectorLabels(t.name);
  return pdb;
}

Json BuildSecret(const TopicObject& t, const std::string& admin_token) {
  value s = value::object();
  s["apiVersion"] = Str("v1");
  s["kind"] = Str("Secret");
  s["metadata"] = Metadata(t, AdminSecretName(t.name));
  s["type"] = Str("Opaque");
  // `data` is base64 (a real server turns stringData into it; so does every reader).
  s["data"]["token"] =
      Str(utility::conversions::to_base64(std::vector<unsigned char>(admin_token.begin(), admin_token.end())));
  return s;
}

bool RunsTls(const Json& statefulset) {
  const value* containers = &statefulset;
  for (const char* key : {"spec", "template", "spec", "containers"}) {
    if (!containers->is_object() || !containers->has_field(key)) return false;
    containers = &containers->at(key);
  }
  if (!containers->is_array()) return false;
  for (const auto& c : containers->as_array()) {
    if (!c.has_string_field("name") || c.at("name").as_string() != kSidecarContainer) continue;
    if (!c.has_array_field("args")) return false;
    for (const auto& a : c.at("args").as_array()) {
      if (a.is_string() && a.as_string() == "--tls-client-ca") return true;
    }
  }
  return false;
}

void KeepWhatRuns(TopicObject& t, const Json& statefulset) {
  if (!t.spec.security.tls && t.spec.security.principals.empty()) {
    t.spec.security.tls = RunsTls(statefulset);
  }
}

bool TlsOn(const TopicObject& t, const ManifestOptions& o) {
  // Principals are named by their certificates: listing one asks for TLS.
  return t.spec.security.tls.value_or(o.tls_default || !t.spec.security.principals.empty());
}

std::string CaSecretName(const std::string& topic) { return topic + "-ca"; }

std::string ClientSecretName(const std::string& topic, const std::string& principal) {
  return topic + "-client-" + principal;
}

Json BuildOwnedSecret(const TopicObject& t, const std::string& name,
                      const std::map<std::string, std::string>& data) {
  value s = value::object();
  s["apiVersion"] = Str("v1");
  s["kind"] = Str("Secret");
  s["metadata"] = Metadata(t, name);
  s["type"] = Str("Opaque");
  s["data"] = value::object();
  for (const auto& [key, bytes] : data) {
    s["data"][key] = Str(
        utility::conversions::to_base64(std::vector<unsigned char>(bytes.begin(), bytes.end())));
  }
  return s;
}

std::string AccessFileJson(const TopicSpec& spec) {
  value principals = value::object();
  for (const auto& who : spec.security.principals) {
    value grant = value::object();
    grant["produce"] = value::boolean(who.produce);
    grant["groups"] = StringArray(who.groups);
    principals[who.name] = grant;
  }
  value doc = value::object();
  doc["principals"] = principals;
  return doc.serialize();
}

std::string TemplateHash(const Json& sts) {
  // The pod template only: the claim templates cannot change once the StatefulSet exists.
  std::string canon;
  const value& spec = sts.has_object_field("spec") ? sts.at("spec") : value::null();
  if (spec.has_field("template")) Canonical(spec.at("template"), canon);
  const value& meta = sts.has_object_field("metadata") ? sts.at("metadata") : value::null();
  if (meta.has_object_field("annotations") &&
      meta.at("annotations").has_string_field(kAppliedSpecAnnotation)) {
    canon += meta.at("annotations").at(kAppliedSpecAnnotation).as_string();
  }
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(canon.data()),
                          static_cast<uInt>(canon.size()));
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08lx", static_cast<unsigned long>(crc));
  return buf;
}

}  // namespace shoal::reconciler
