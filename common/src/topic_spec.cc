#include "shoal/common/topic_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "shoal/common/json.h"

namespace shoal {

namespace {
constexpr size_t kMaxSchedules = 16;
// Principals a topic grants, and group names or prefixes each may use.
constexpr size_t kMaxPrincipals = 64;
}  // namespace

namespace {

constexpr uint32_t kPartitionCap = 65536;
// The longest spec.scaling.drainSeconds: as the stabilization windows, an hour.
constexpr uint32_t kMaxDrainSeconds = 3600;

Status Unknown(const std::string& path, const YAML::Node& node,
               const std::set<std::string>& known) {
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return Status::InvalidArgument(path + "." + key + ": unknown field; " + path + " takes " +
                                     list);
    }
  }
  return Status::Ok();
}

template <typename T>
Status Read(const YAML::Node& node, const std::string& path, const char* key, T* out) {
  const YAML::Node v = node[key];
  if (!v) return Status::Ok();
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument(path + "." + key + ": expected " +
                                   (std::is_same_v<T, std::string> ? "a string"
                                    : std::is_same_v<T, bool>      ? "true or false"
                                    : std::is_floating_point_v<T>  ? "a number"
                                                                   : "a non-negative integer") +
                                   ", got \"" + YAML::Dump(v) + "\"");
  }
  return Status::Ok();
}

// `up`: scaleUp, which also has `predictive`.
Status ReadBehavior(const YAML::Node& n, const std::string& path, bool up, ScaleBehavior* b) {
  if (!n) return Status::Ok();
  if (!n.IsMap()) return Status::InvalidArgument(path + ": expected a mapping");
  std::set<std::string> known{"stabilizationWindowSeconds", "tolerance", "maxPartitionsPerStep"};
  if (up) known.insert("predictive");
  SHOAL_RETURN_IF_ERROR(Unknown(path, n, known));
  SHOAL_RETURN_IF_ERROR(
      Read(n, path, "stabilizationWindowSeconds", &b->stabilization_window_seconds));
  SHOAL_RETURN_IF_ERROR(Read(n, path, "tolerance", &b->tolerance));
  if (up) SHOAL_RETURN_IF_ERROR(Read(n, path, "predictive", &b->predictive));
  return Read(n, path, "maxPartitionsPerStep", &b->max_partitions_per_step);
}

Status ParseSpec(const YAML::Node& spec, TopicSpec* t) {
  const std::string p = "spec";
  if (!spec.IsMap()) return Status::InvalidArgument("spec: expected a mapping");
  SHOAL_RETURN_IF_ERROR(
      Unknown(p, spec,
              {"partitions", "replicas", "scaling", "behavior", "durability", "retention",
               "storage", "consumer", "sidecar", "replication", "security"}));
  if (auto n = spec["partitions"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".partitions", n, {"min", "max", "initial"}));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".partitions", "min", &t->partitions.min));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".partitions", "max", &t->partitions.max));
    t->partitions.initial = t->partitions.min;
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".partitions", "initial", &t->partitions.initial));
  }
  if (auto n = spec["replicas"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".replicas", n, {"min", "max"}));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".replicas", "min", &t->replicas.min));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".replicas", "max", &t->replicas.max));
  }
  if (auto n = spec["scaling"]) {
    const std::string q = p + ".scaling";
    SHOAL_RETURN_IF_ERROR(
        Unknown(q, n,
                {"targetEventsPerSecondPerPartition", "targetCPUUtilizationPercent",
                 "targetConsumerLag", "targetPartitionsPerReplica", "drainSeconds", "schedules"}));
    SHOAL_RETURN_IF_ERROR(Read(n, q, "targetEventsPerSecondPerPartition",
                               &t->scaling.events_per_second_per_partition));
    SHOAL_RETURN_IF_ERROR(
        Read(n, q, "targetCPUUtilizationPercent", &t->scaling.cpu_utilization_percent));
    SHOAL_RETURN_IF_ERROR(Read(n, q, "targetConsumerLag", &t->scaling.consumer_lag_events));
    SHOAL_RETURN_IF_ERROR(
        Read(n, q, "targetPartitionsPerReplica", &t->scaling.partitions_per_replica));
    SHOAL_RETURN_IF_ERROR(Read(n, q, "drainSeconds", &t->scaling.drain_seconds));
    if (auto list = n["schedules"]) {
      if (!list.IsSequence()) return Status::InvalidArgument(q + ".schedules: expected a list");
      if (list.size() > kMaxSchedules) {
        return Status::InvalidArgument(q + ".schedules: at most " + std::to_string(kMaxSchedules) +
                                       " schedules");
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string path = q + ".schedules[" + std::to_string(i) + "]";
        const YAML::Node e = list[i];
        if (!e.IsMap()) return Status::InvalidArgument(path + ": expected a mapping");
        SHOAL_RETURN_IF_ERROR(Unknown(path, e,
                                      {"name", "cron", "start", "timeZone", "durationSeconds",
                                       "readySeconds", "minPartitions", "minReplicas"}));
        ScheduleSpec sc;
        SHOAL_RETURN_IF_ERROR(Read(e, path, "name", &sc.name));
        SHOAL_RETURN_IF_ERROR(Read(e, path, "cron", &sc.cron));
        SHOAL_RETURN_IF_ERROR(Read(e, path, "start", &sc.start));
        SHOAL_RETURN_IF_ERROR(Read(e, path, "timeZone", &sc.time_zone));
        SHOAL_RETURN_IF_ERROR(Read(e, path, "durationSeconds", &sc.duration_seconds));
        SHOAL_RETURN_IF_ERROR(Read(e, path, "readySeconds", &sc.ready_seconds));
        SHOAL_RETURN_IF_ERROR(Read(e, path, "minPartitions", &sc.min_partitions));
        SHOAL_RETURN_IF_ERROR(Read(e, path, "minReplicas", &sc.min_replicas));
        t->scaling.schedules.push_back(std::move(sc));
      }
    }
  }
  if (auto n = spec["behavior"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".behavior", n, {"scaleUp", "scaleDown"}));
    SHOAL_RETURN_IF_ERROR(ReadBehavior(n["scaleUp"], p + ".behavior.scaleUp", true, &t->scale_up));
    SHOAL_RETURN_IF_ERROR(
        ReadBehavior(n["scaleDown"], p + ".behavior.scaleDown", false, &t->scale_down));
  }
  if (auto n = spec["durability"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".durability", n, {"fsync"}));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".durability", "fsync", &t->fsync));
  }
  if (auto n = spec["replication"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".replication", n, {"factor", "acks"}));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".replication", "factor", &t->replication.factor));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".replication", "acks", &t->replication.acks));
  }
  if (auto n = spec["security"]) {
    const std::string q = p + ".security";
    SHOAL_RETURN_IF_ERROR(Unknown(q, n, {"tls", "principals"}));
    if (n["tls"]) {
      bool tls = false;
      SHOAL_RETURN_IF_ERROR(Read(n, q, "tls", &tls));
      t->security.tls = tls;
    }
    if (auto list = n["principals"]) {
      if (!list.IsSequence()) return Status::InvalidArgument(q + ".principals: expected a list");
      if (list.size() > kMaxPrincipals) {
        return Status::InvalidArgument(q + ".principals: at most " +
                                       std::to_string(kMaxPrincipals) + " principals");
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string path = q + ".principals[" + std::to_string(i) + "]";
        const YAML::Node e = list[i];
        if (!e.IsMap()) return Status::InvalidArgument(path + ": expected a mapping");
        SHOAL_RETURN_IF_ERROR(Unknown(path, e, {"name", "produce", "groups"}));
        TopicSpec::Principal who;
        SHOAL_RETURN_IF_ERROR(Read(e, path, "name", &who.name));
        SHOAL_RETURN_IF_ERROR(Read(e, path, "produce", &who.produce));
        if (auto groups = e["groups"]) {
          if (!groups.IsSequence() || groups.size() > kMaxPrincipals) {
            return Status::InvalidArgument(path + ".groups: expected a list of at most " +
                                           std::to_string(kMaxPrincipals) + " group names");
          }
          for (const auto& g : groups) {
            if (!g.IsScalar()) return Status::InvalidArgument(path + ".groups: expected names");
            who.groups.push_back(g.Scalar());
          }
        }
        t->security.principals.push_back(std::move(who));
      }
    }
  }
  if (auto n = spec["retention"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".retention", n, {"bytes", "ms"}));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".retention", "bytes", &t->retention.bytes));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".retention", "ms", &t->retention.ms));
  }
  if (auto n = spec["storage"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".storage", n, {"size", "storageClassName", "reserve"}));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".storage", "reserve", &t->storage.reserve));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".storage", "size", &t->storage.size));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".storage", "storageClassName", &t->storage.storage_class));
  }
  if (auto n = spec["consumer"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".consumer", n, {"template"}));
    if (n["template"]) t->consumer_template_yaml = YAML::Dump(n["template"]);
  }
  if (auto n = spec["sidecar"]) {
    SHOAL_RETURN_IF_ERROR(Unknown(p + ".sidecar", n, {"image", "resources"}));
    SHOAL_RETURN_IF_ERROR(Read(n, p + ".sidecar", "image", &t->sidecar_image));
    if (auto r = n["resources"]) {
      for (const auto& kind : r) {
        for (const auto& kv : kind.second) {
          t->sidecar_resources[kind.first.as<std::string>() + "." + kv.first.as<std::string>()] =
              kv.second.as<std::string>();
        }
      }
    }
  }
  return Status::Ok();
}

bool Dns1123(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

}  // namespace

Result<TopicSpec> ParseTopic(std::string_view text) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("not YAML or JSON: ") + e.what());
  }
  if (!doc.IsMap()) return Status::InvalidArgument("a PartitionedTopic document is a mapping");
  TopicSpec t;
  try {
    SHOAL_RETURN_IF_ERROR(
        Unknown("(document)", doc, {"apiVersion", "kind", "metadata", "spec", "status"}));
    std::string api, kind;
    SHOAL_RETURN_IF_ERROR(Read(doc, "(document)", "apiVersion", &api));
    SHOAL_RETURN_IF_ERROR(Read(doc, "(document)", "kind", &kind));
    if (api != "shoal.dev/v1alpha1") {
      return Status::InvalidArgument("apiVersion: must be shoal.dev/v1alpha1, not \"" + api + "\"");
    }
    if (kind != "PartitionedTopic") {
      return Status::InvalidArgument("kind: must be PartitionedTopic, not \"" + kind + "\"");
    }
    const YAML::Node meta = doc["metadata"];
    if (!meta || !meta["name"]) return Status::InvalidArgument("metadata.name: required");
    SHOAL_RETURN_IF_ERROR(Read(meta, "metadata", "name", &t.name));
    SHOAL_RETURN_IF_ERROR(Read(meta, "metadata", "namespace", &t.namespace_name));
    if (!doc["spec"]) return Status::InvalidArgument("spec: required");
    SHOAL_RETURN_IF_ERROR(ParseSpec(doc["spec"], &t));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("malformed topic: ") + e.what());
  }
  SHOAL_RETURN_IF_ERROR(ValidateTopic(t));
  return t;
}

Status ValidateTopic(const TopicSpec& t) {
  if (!Dns1123(t.name)) {
    return Status::InvalidArgument(
        "metadata.name: \"" + t.name +
        "\" must be 1-63 lowercase letters, digits or '-', starting and ending alphanumeric");
  }
  const auto& p = t.partitions;
  if (p.min < 1) return Status::InvalidArgument("spec.partitions.min: must be at least 1");
  if (p.max > kPartitionCap) {
    return Status::InvalidArgument("spec.partitions.max: at most " + std::to_string(kPartitionCap));
  }
  if (p.min > p.max) {
    return Status::InvalidArgument("spec.partitions: min (" + std::to_string(p.min) +
                                   ") must not exceed max (" + std::to_string(p.max) + ")");
  }
  if (p.initial < p.min || p.initial > p.max) {
    return Status::InvalidArgument("spec.partitions.initial: " + std::to_string(p.initial) +
                                   " must lie within [min, max] = [" + std::to_string(p.min) +
                                   ", " + std::to_string(p.max) + "]");
  }
  if (t.replicas.min < 1 || t.replicas.min > t.replicas.max) {
    return Status::InvalidArgument("spec.replicas: need 1 <= min <= max, got min " +
                                   std::to_string(t.replicas.min) + ", max " +
                                   std::to_string(t.replicas.max));
  }
  if (!(t.scaling.events_per_second_per_partition > 0) ||
      !std::isfinite(t.scaling.events_per_second_per_partition)) {
    return Status::InvalidArgument(
        "spec.scaling.targetEventsPerSecondPerPartition: must be a positive number");
  }
  if (t.scaling.cpu_utilization_percent < 1 || t.scaling.cpu_utilization_percent > 100) {
    return Status::InvalidArgument(
        "spec.scaling.targetCPUUtilizationPercent: must be between 1 and 100");
  }
  if (t.scaling.partitions_per_replica < 1) {
    return Status::InvalidArgument(
        "spec.scaling.targetPartitionsPerReplica: must be at least 1 (e.g. 4)");
  }
  if (t.scaling.drain_seconds < 1 || t.scaling.drain_seconds > kMaxDrainSeconds) {
    return Status::InvalidArgument(
        "spec.scaling.drainSeconds: " + std::to_string(t.scaling.drain_seconds) +
        " must be between 1 and " + std::to_string(kMaxDrainSeconds) +
        ": the seconds a backlog above targetConsumerLag should be consumed in (e.g. 30)");
  }
  std::set<std::string> schedule_names;
  for (size_t i = 0; i < t.scaling.schedules.size(); ++i) {
    const ScheduleSpec& sc = t.scaling.schedules[i];
    const std::string path = "spec.scaling.schedules[" + std::to_string(i) + "]";
    SHOAL_RETURN_IF_ERROR(ValidateSchedule(sc, path));
    if (!schedule_names.insert(sc.name).second) {
      return Status::InvalidArgument(path + ".name: \"" + sc.name + "\" is used twice");
    }
    if (sc.min_partitions > t.partitions.max) {
      return Status::InvalidArgument(path + ".minPartitions: " + std::to_string(sc.min_partitions) +
                                     " is above spec.partitions.max (" +
                                     std::to_string(t.partitions.max) + ")");
    }
    if (sc.min_replicas > t.replicas.max) {
      return Status::InvalidArgument(path + ".minReplicas: " + std::to_string(sc.min_replicas) +
                                     " is above spec.replicas.max (" +
                                     std::to_string(t.replicas.max) + ")");
    }
  }
  for (const auto& [name, b] : {std::pair{"scaleUp", &t.scale_up}, {"scaleDown", &t.scale_down}}) {
    if (!(b->tolerance >= 0 && b->tolerance < 1)) {
      return Status::InvalidArgument(std::string("spec.behavior.") + name +
                                     ".tolerance: must be in [0, 1), e.g. 0.1");
    }
    if (b->stabilization_window_seconds > 3600) {
      return Status::InvalidArgument(std::string("spec.behavior.") + name +
                                     ".stabilizationWindowSeconds: at most 3600");
    }
  }
  if (t.fsync != "always" && t.fsync != "interval" && t.fsync != "never") {
    return Status::InvalidArgument(
        "spec.durability.fsync: must be always, interval or never, "
        "not \"" +
        t.fsync + "\"");
  }
  if (t.replication.factor < 1 || t.replication.factor > 5) {
    return Status::InvalidArgument("spec.replication.factor: must be 1 to 5, got " +
                                   std::to_string(t.replication.factor) +
                                   " (3 survives the loss of any one pod)");
  }
  if (t.replication.factor > t.replicas.max) {
    return Status::InvalidArgument(
        "spec.replication.factor: " + std::to_string(t.replication.factor) +
        " copies need as many pods, and spec.replicas.max is " + std::to_string(t.replicas.max) +
        "; raise replicas.max or lower the factor");
  }
  std::set<std::string> principals;
  for (size_t i = 0; i < t.security.principals.size(); ++i) {
    const auto& who = t.security.principals[i];
    const std::string path = "spec.security.principals[" + std::to_string(i) + "]";
    // A DNS label: the name goes into a Secret's name, and no principal can be named like the
    // topic's pods or its operator (those names have a dot).
    const bool label =
        !who.name.empty() && who.name.size() <= 40 &&
        std::all_of(
            who.name.begin(), who.name.end(),
            [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }) &&
        who.name.front() != '-' && who.name.back() != '-';
    if (!label) {
      return Status::InvalidArgument(path +
                                     ".name: must be 1 to 40 lowercase letters, digits and "
                                     "'-', not starting or ending with '-', got \"" +
                                     who.name + "\"");
    }
    if (!principals.insert(who.name).second) {
      return Status::InvalidArgument(path + ".name: \"" + who.name + "\" is listed twice");
    }
    for (const auto& g : who.groups) {
      const size_t star = g.find('*');
      if (g.empty() || g.size() > 255 || (star != std::string::npos && star + 1 != g.size())) {
        return Status::InvalidArgument(path + ".groups: \"" + g +
                                       "\" is not a group name or a prefix ending in *");
      }
    }
  }
  if (!t.security.principals.empty() && t.security.tls == false) {
    return Status::InvalidArgument(
        "spec.security.principals: callers are named by their TLS certificates; they need "
        "spec.security.tls (true or unset)");
  }
  if (t.replication.acks != "quorum" && t.replication.acks != "leader") {
    return Status::InvalidArgument(
        "spec.replication.acks: must be quorum (a majority of the copies holds an event before "
        "it is acknowledged) or leader (faster; a failover can lose acknowledged events), got \"" +
        t.replication.acks + "\"");
  }
  if (t.retention.ms < 0) return Status::InvalidArgument("spec.retention.ms: must be >= 0");
  if (!t.storage.size.empty()) {
    SHOAL_RETURN_IF_ERROR(RetentionFits(t, t.storage.size, "spec.storage.size"));
  }
  if (!t.storage.reserve.empty()) {
    auto reserve = QuantityBytes(t.storage.reserve);
    if (!reserve.ok()) return reserve.status().Annotate("spec.storage.reserve");
    if (!t.storage.size.empty()) {
      auto size = QuantityBytes(t.storage.size);
      if (size.ok() && *reserve > *size / 2) {
        return Status::InvalidArgument(
            "spec.storage.reserve: " + t.storage.reserve + " is more than half of spec.storage.size " +
            t.storage.size + "; the reserve is held back from produce, keep it a small part");
      }
    }
  }
  return Status::Ok();
}

Result<uint64_t> QuantityBytes(const std::string& q) {
  size_t digits = 0;
  while (digits < q.size() && std::isdigit(static_cast<unsigned char>(q[digits]))) ++digits;
  const std::string suffix = q.substr(digits);
  static const std::pair<const char*, uint64_t> kSuffixes[] = {
      {"", 1},
      {"k", 1000ULL},
      {"M", 1000ULL * 1000},
      {"G", 1000ULL * 1000 * 1000},
      {"T", 1000ULL * 1000 * 1000 * 1000},
      {"P", 1000ULL * 1000 * 1000 * 1000 * 1000},
      {"Ki", 1ULL << 10},
      {"Mi", 1ULL << 20},
      {"Gi", 1ULL << 30},
      {"Ti", 1ULL << 40},
      {"Pi", 1ULL << 50}};
  const auto bad = [&] {
    return Status::InvalidArgument("\"" + q +
                                   "\" is not a whole quantity of bytes (e.g. 20Gi, 500M)");
  };
  if (digits == 0 || digits > 18) return bad();
  for (const auto& [name, factor] : kSuffixes) {
    if (suffix != name) continue;
    const uint64_t n = std::stoull(q.substr(0, digits));
    if (n > UINT64_MAX / factor) return bad();
    return n * factor;
  }
  return bad();
}

Status RetentionFits(const TopicSpec& t, const std::string& size, const std::string& field) {
  auto bytes = QuantityBytes(size);
  if (!bytes.ok()) return Status::InvalidArgument(field + ": " + bytes.status().message());
  if (t.retention.bytes == 0) return Status::Ok();
  // Every copy is a partition's worth of bytes on its pod: with F copies a pod keeps F times
  // the partitions it leads, and at most one copy of each partition.
  const uint64_t factor = std::max<uint32_t>(1, t.replication.factor);
  const uint64_t copies = uint64_t{t.partitions.max} * factor;
  const uint64_t spread = (copies + t.replicas.max - 1) / std::max<uint32_t>(1, t.replicas.max);
  const uint64_t per_pod =
      std::min<uint64_t>(std::max<uint64_t>(1, t.partitions.max),
                         std::max<uint64_t>(t.scaling.partitions_per_replica * factor, spread));
  if (t.retention.bytes > *bytes / per_pod) {
    return Status::InvalidArgument(
        field + ": " + size + " cannot hold spec.retention.bytes (" +
        std::to_string(t.retention.bytes) + ") for each of the " + std::to_string(per_pod) +
        (factor > 1 ? " partition copies a pod can hold (replication.factor " +
                          std::to_string(factor) + ")"
                    : std::string(" partitions a pod can own")) +
        " (" + std::to_string(per_pod * t.retention.bytes) +
        " bytes); raise spec.storage.size or lower retention.bytes");
  }
  return Status::Ok();
}

namespace {
// Shortest form that reads back as the same double ("0.1", not "0.10000000000000001").
std::string Num(double v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

YAML::Node BehaviorNode(const ScaleBehavior& b, bool up) {
  YAML::Node n;
  n["stabilizationWindowSeconds"] = b.stabilization_window_seconds;
  n["tolerance"] = Num(b.tolerance);
  n["maxPartitionsPerStep"] = b.max_partitions_per_step;
  if (up) n["predictive"] = b.predictive;
  return n;
}

YAML::Node Document(const TopicSpec& t) {
  YAML::Node d;
  d["apiVersion"] = "shoal.dev/v1alpha1";
  d["kind"] = "PartitionedTopic";
  d["metadata"]["name"] = t.name;
  d["metadata"]["namespace"] = t.namespace_name;
  YAML::Node s;
  s["partitions"]["min"] = t.partitions.min;
  s["partitions"]["max"] = t.partitions.max;
  s["partitions"]["initial"] = t.partitions.initial;
  s["replicas"]["min"] = t.replicas.min;
  s["replicas"]["max"] = t.replicas.max;
  s["scaling"]["targetEventsPerSecondPerPartition"] =
      Num(t.scaling.events_per_second_per_partition);
  s["scaling"]["targetCPUUtilizationPercent"] = t.scaling.cpu_utilization_percent;
  s["scaling"]["targetConsumerLag"] = t.scaling.consumer_lag_events;
  s["scaling"]["targetPartitionsPerReplica"] = t.scaling.partitions_per_replica;
  s["scaling"]["drainSeconds"] = t.scaling.drain_seconds;
  for (const ScheduleSpec& sc : t.scaling.schedules) {
    YAML::Node e;
    e["name"] = sc.name;
    if (!sc.cron.empty()) e["cron"] = sc.cron;
    if (!sc.start.empty()) e["start"] = sc.start;
    e["timeZone"] = sc.time_zone;
    e["durationSeconds"] = sc.duration_seconds;
    e["readySeconds"] = sc.ready_seconds;
    e["minPartitions"] = sc.min_partitions;
    e["minReplicas"] = sc.min_replicas;
    s["scaling"]["schedules"].push_back(e);
  }
  s["behavior"]["scaleUp"] = BehaviorNode(t.scale_up, true);
  s["behavior"]["scaleDown"] = BehaviorNode(t.scale_down, false);
  s["durability"]["fsync"] = t.fsync;
  s["replication"]["factor"] = t.replication.factor;
  s["replication"]["acks"] = t.replication.acks;
  s["retention"]["bytes"] = t.retention.bytes;
  s["retention"]["ms"] = t.retention.ms;
  if (t.security.tls) s["security"]["tls"] = *t.security.tls;
  for (const auto& who : t.security.principals) {
    YAML::Node e;
    e["name"] = who.name;
    e["produce"] = who.produce;
    for (const auto& g : who.groups) e["groups"].push_back(g);
    s["security"]["principals"].push_back(e);
  }
  if (!t.consumer_template_yaml.empty()) {
    s["consumer"]["template"] = YAML::Load(t.consumer_template_yaml);
  }
  if (!t.storage.size.empty()) s["storage"]["size"] = t.storage.size;
  if (!t.storage.storage_class.empty()) s["storage"]["storageClassName"] = t.storage.storage_class;
  if (!t.storage.reserve.empty()) s["storage"]["reserve"] = t.storage.reserve;
  if (!t.sidecar_image.empty()) s["sidecar"]["image"] = t.sidecar_image;
  for (const auto& [k, v] : t.sidecar_resources) {
    const auto dot = k.find('.');
    s["sidecar"]["resources"][k.substr(0, dot)][k.substr(dot + 1)] = v;
  }
  d["spec"] = s;
  return d;
}
}  // namespace

std::string TopicToYaml(const TopicSpec& t) {
  YAML::Emitter out;
  out << Document(t);
  return std::string(out.c_str()) + "\n";
}

namespace {
// JSON from a YAML tree: scalars that read as numbers or booleans stay bare, others are strings.
void AppendJson(const YAML::Node& n, std::string& out) {
  if (n.IsMap()) {
    out += '{';
    bool first = true;
    for (const auto& kv : n) {
      if (!first) out += ',';
      first = false;
      json::AppendString(out, kv.first.as<std::string>());
      out += ':';
      AppendJson(kv.second, out);
    }
    out += '}';
  } else if (n.IsSequence()) {
    out += '[';
    for (size_t i = 0; i < n.size(); ++i) {
      if (i) out += ',';
      AppendJson(n[i], out);
    }
    out += ']';
  } else if (n.IsScalar()) {
    const std::string v = n.Scalar();
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    const bool number = !v.empty() && end && *end == '\0' && v.find_first_of("xXnN") == v.npos;
    if (number || v == "true" || v == "false") {
      out += v;
    } else {
      json::AppendString(out, v);
    }
  } else {
    out += "null";
  }
}
}  // namespace

std::string TopicToJson(const TopicSpec& t) {
  std::string out;
  AppendJson(Document(t), out);
  return out;
}

}  // namespace shoal
