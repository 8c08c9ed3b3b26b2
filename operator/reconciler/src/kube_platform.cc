#include "shoal/reconciler/kube_platform.h"

#include <cpprest/asyncrt_utils.h>
#include <zlib.h>

#include <ctime>

#include "shoal/common/logging.h"
#include "shoal/reconciler/manifests.h"

namespace shoal::reconciler {
namespace {

using kubeapi::Json;
using web::json::value;

// "250m" -> 0.25, "2" -> 2, "1500000n" -> 0.0015 (cores).
std::optional<double> CpuCores(const std::string& q) {
  if (q.empty()) return std::nullopt;
  double scale = 1;
  std::string num = q;
  switch (q.back()) {
    case 'n': scale = 1e-9; num.pop_back(); break;
    case 'u': scale = 1e-6; num.pop_back(); break;
    case 'm': scale = 1e-3; num.pop_back(); break;
    default: break;
  }
  try {
    size_t used = 0;
    const double v = std::stod(num, &used);
    if (used != num.size()) return std::nullopt;
    return v * scale;
  } catch (...) {
    return std::nullopt;
  }
}

bool PodReady(const Json& pod) {
  if (kubeapi::At(pod, "metadata.deletionTimestamp").is_string()) return false;
  const Json conditions = kubeapi::At(pod, "status.conditions");
  if (!conditions.is_array()) return false;
  for (const auto& c : conditions.as_array()) {
    if (c.has_string_field("type") && c.at("type").as_string() == "Ready") {
      return c.has_string_field("status") && c.at("status").as_string() == "True";
    }
  }
  return false;
}

}  // namespace

std::string GzipBase64(const std::string& text) {
  z_stream zs{};
  deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::vector<unsigned char> out(deflateBound(&zs, static_cast<uLong>(text.size())) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return utility::conversions::to_base64(out);
}

Result<std::string> GunzipBase64(const std::string& data) {
  std::vector<unsigned char> in;
  try {
    in = utility::conversions::from_base64(data);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("status.partitionMap.data is not base64: ") +
                                   e.what());
  }
  z_stream zs{};
  inflateInit2(&zs, 15 + 16);
  zs.next_in = in.data();
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return Status::InvalidArgument("status.partitionMap.data is not gzip data");
  }
  return out;
}

KubePlatform::KubePlatform(kubeapi::KubeClient& client, kubeapi::Informer& pods,
                           kubeapi::Informer& sets, KubePlatformOptions options,
                           uint32_t desired_pods)
    : client_(client), pods_(pods), sets_(sets), opts_(std::move(options)), desired_(desired_pods) {}

namespace {

// The StatefulSet's spec.replicas from its scale subresource, and the scale's resourceVersion.
struct ScaleNow {
  uint32_t replicas = 0;
  std::string resource_version;
};

Result<ScaleNow> ReadScale(kubeapi::KubeClient& client, const std::string& ns,
                           const std::string& name) {
  auto scale = client.Get(kubeapi::StatefulSets(), ns, name, "scale");
  if (!scale.ok()) return scale.error().ToStatus();
  const Json live = kubeapi::At(scale.value(), "spec.replicas");
  ScaleNow out;
  out.replicas =
      live.is_number() ? static_cast<uint32_t>(std::max<int64_t>(0, live.as_number().to_int64()))
                       : 0;
  out.resource_version = kubeapi::ResourceVersion(scale.value());
  return out;
}

}  // namespace

Status KubePlatform::SetDesiredPods(uint32_t n) {
  MutexLock lock(scale_mu_);
  if (!opts_.may_act()) return Status::Unavailable("not the leader: not scaling");
  value patch = value::object();
  patch["spec"]["replicas"] = value::number(n);
  auto r = client_.MergePatch(kubeapi::StatefulSets(), opts_.ns, opts_.topic, patch, "scale");
  if (!r.ok()) {
    // A timeout may come after the server applied the patch: the count is whatever is there now
    // (HoldReplicas would otherwise set an applied scale back).
    auto now = ReadScale(client_, opts_.ns, opts_.topic);
    if (now.ok() && now->replicas == n) {
      desired_.store(n);
      return Status::Ok();
    }
    return r.error().ToStatus();
  }
  desired_.store(n);
  return Status::Ok();
}

Result<std::optional<uint32_t>> KubePlatform::HoldReplicas(uint32_t cached, uint32_t floor) {
  MutexLock lock(scale_mu_);
  if (floor > desired_.load()) {
    // Pods own partitions beyond the count this loop started with (the StatefulSet was scaled
    // down while no operator ran): those pods are needed, whatever the count said.
    Logger("platform")->warn("{}/{}: pods up to ordinal {} own partitions; the pod count is {}",
                             opts_.ns, opts_.topic, floor - 1, floor);
    desired_.store(floor);
  }
  const uint32_t want = desired_.load();
  if (cached == want) return std::optional<uint32_t>();
  if (!opts_.may_act()) return Status::Unavailable("not the leader: not scaling");
  auto now = ReadScale(client_, opts_.ns, opts_.topic);
  if (!now.ok()) return now.status();
  if (now->replicas == want) return std::optional<uint32_t>();  // the cache trailed our scale
  // Only over the scale read: a scale written since (by a new leader) is a 409, not overwritten.
  if (!opts_.may_act()) return Status::Unavailable("not the leader: not scaling");
  value patch = value::object();
  patch["metadata"]["resourceVersion"] = value::string(now->resource_version);
  patch["spec"]["replicas"] = value::number(want);
  auto r = client_.MergePatch(kubeapi::StatefulSets(), opts_.ns, opts_.topic, patch, "scale");
  if (!r.ok()) return r.error().ToStatus();
  return std::optional<uint32_t>(now->replicas);
}

uint32_t KubePlatform::DesiredPods() const { return desired_.load(); }

void KubePlatform::RefreshMetrics() {
  const auto now = std::chrono::steady_clock::now();
  {
    MutexLock lock(mu_);
    if (metrics_known_ && now - metrics_at_ < opts_.metrics_every) return;
    metrics_at_ = now;
  }
  // Every pod of the namespace (metrics-server copies labels, but not every implementation does);
  // ListPods looks up this topic's by name.
  auto list = client_.List(kubeapi::PodMetrics(), opts_.ns);
  std::map<std::string, double> usage;  // pod -> cores used by its app containers
  if (list.ok() && list->has_array_field("items")) {
    for (const auto& m : list->at("items").as_array()) {
      double cores = 0;
      const Json containers = kubeapi::At(m, "containers");
      if (!containers.is_array()) continue;
      for (const auto& c : containers.as_array()) {
        if (!c.has_string_field("name") || c.at("name").as_string() == kSidecarContainer) continue;
        const Json cpu = kubeapi::At(c, "usage.cpu");
        if (auto v = cpu.is_string() ? CpuCores(cpu.as_string()) : std::nullopt) cores += *v;
      }
      usage[kubeapi::Name(m)] = cores;
    }
  } else if (!list.ok() && !list.error().IsNotFound()) {
    Logger("platform")->debug("metrics.k8s.io: {}", list.error().ToString());
  }
  MutexLock lock(mu_);
  metrics_known_ = true;
  cpu_ = std::move(usage);
}

void KubePlatform::RefreshZones(const std::set<std::string>& nodes) {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& node : nodes) {
    {
      MutexLock lock(mu_);
      if (auto it = zones_.find(node);
          it != zones_.end() && now - it->second.at < opts_.zones_every) {
        continue;
      }
    }
    auto got = client_.Get(kubeapi::Nodes(), "", node);
    std::string zone;
    if (got.ok()) {
      const Json label = kubeapi::At(got.value(), "metadata.labels");
      if (label.is_object() && label.has_string_field(kZoneLabel)) {
        zone = label.at(kZoneLabel).as_string();
      }
    }
    MutexLock lock(mu_);
    if (!got.ok() && got.error().code == 403 && !zones_forbidden_said_) {
      zones_forbidden_said_ = true;
      Logger("platform")
          ->warn(
              "msg=\"cannot read nodes: copies are spread over nodes but not over zones (grant "
              "get on nodes to the operator)\" reason=\"{}\"",
              got.error().ToString());
    }
    zones_[node] = {zone, now};
  }
  // Nodes gone from every pod are forgotten.
  MutexLock lock(mu_);
  for (auto it = zones_.begin(); it != zones_.end();) {
    it = nodes.count(it->first) ? std::next(it) : zones_.erase(it);
  }
}

Result<std::vector<control::PodInfo>> KubePlatform::ListPods() {
  RefreshMetrics();
  std::vector<control::PodInfo> pods;
  const std::string prefix = opts_.topic + "-";
  // The template the pods should run: known once the StatefulSet controller observed the set's
  // latest generation (kubectl rollout status reads it the same way).
  std::string update_revision;
  if (auto set = sets_.Get(opts_.ns, opts_.topic)) {
    const Json observed = kubeapi::At(*set, "status.observedGeneration");
    const Json generation = kubeapi::At(*set, "metadata.generation");
    const Json revision = kubeapi::At(*set, "status.updateRevision");
    if (observed.is_number() && generation.is_number() && revision.is_string() &&
        observed.as_number().to_int64() >= generation.as_number().to_int64()) {
      update_revision = revision.as_string();
    }
  }
  // The zones of the nodes this topic's pods run on, read outside the lock (GETs).
  const std::vector<Json> listed = pods_.List();
  {
    std::set<std::string> nodes;
    for (const Json& pod : listed) {
      const Json label = kubeapi::At(pod, "metadata.labels");
      const Json node = kubeapi::At(pod, "spec.nodeName");
      if (kubeapi::Namespace(pod) == opts_.ns && label.is_object() &&
          label.has_string_field(kTopicLabel) && label.at(kTopicLabel).as_string() == opts_.topic &&
          node.is_string() && !node.as_string().empty()) {
        nodes.insert(node.as_string());
      }
    }
    RefreshZones(nodes);
  }
  MutexLock lock(mu_);
  for (const Json& pod : listed) {
    if (kubeapi::Namespace(pod) != opts_.ns) continue;
    const Json label = kubeapi::At(pod, "metadata.labels");
    if (!label.is_object() || !label.has_string_field(kTopicLabel) ||
        label.at(kTopicLabel).as_string() != opts_.topic) {
      continue;
    }
    const std::string name = kubeapi::Name(pod);
    if (name.rfind(prefix, 0) != 0) continue;
    control::PodInfo info;
    info.name = PodName(name);
    try {
      info.ordinal = static_cast<uint32_t>(std::stoul(name.substr(prefix.size())));
    } catch (...) {
      continue;
    }
    const Json ip = kubeapi::At(pod, "status.podIP");
    info.ip = ip.is_string() ? ip.as_string() : "";
    if (!info.ip.empty()) {
      info.address = {info.ip + ":" + std::to_string(kDataPort),
                      info.ip + ":" + std::to_string(kAdminPort)};
      info.metrics = info.ip + ":" + std::to_string(kMetricsPort);
    }
    info.ready = !info.ip.empty() && PodReady(pod);
    info.draining = draining_.count(name) > 0;
    const Json uid = kubeapi::At(pod, "metadata.uid");
    info.uid = uid.is_string() ? uid.as_string() : "";
    // Where it runs: copies of a partition go to distinct zones, then nodes (PlaceReplicas).
    const Json node = kubeapi::At(pod, "spec.nodeName");
    info.node = node.is_string() ? node.as_string() : "";
    if (auto z = zones_.find(info.node); z != zones_.end()) info.zone = z->second.name;
    const Json revision = kubeapi::At(pod, "metadata.labels.controller-revision-hash");
    info.outdated = !update_revision.empty() && revision.is_string() &&
                    revision.as_string() != update_revision;
    // CPU over the app containers' requests.
    double request = 0;
    const Json containers = kubeapi::At(pod, "spec.containers");
    if (containers.is_array()) {
      for (const auto& c : containers.as_array()) {
        if (!c.has_string_field("name") || c.at("name").as_string() == kSidecarContainer) continue;
        const Json req = kubeapi::At(c, "resources.requests.cpu");
        if (auto v = req.is_string() ? CpuCores(req.as_string()) : std::nullopt) request += *v;
      }
    }
    if (auto it = cpu_.find(name); it != cpu_.end() && request > 0) {
      info.cpu_utilization = it->second / request;
    }
    pods.push_back(std::move(info));
  }
  std::sort(pods.begin(), pods.end(),
            [](const auto& a, const auto& b) { return a.ordinal < b.ordinal; });
  // Forget drain marks of pods that are gone.
  for (auto it = draining_.begin(); it != draining_.end();) {
    const bool present = std::any_of(pods.begin(), pods.end(),
                                     [&](const auto& p) { return p.name.value() == *it; });
    it = present ? std::next(it) : draining_.erase(it);
  }
  return pods;
}

Status KubePlatform::DrainPod(const PodName& pod) {
  if (!opts_.may_act()) return Status::Unavailable("not the leader: not draining");
  MutexLock lock(mu_);
  draining_.insert(pod.value());
  return Status::Ok();
}

Status KubePlatform::RestartPod(const control::PodInfo& pod) {
  if (!opts_.may_act()) return Status::Unavailable("not the leader: not restarting pods");
  // This incarnation only: a pod the StatefulSet already recreated is not deleted again.
  auto r = client_.Delete(kubeapi::Pods(), opts_.ns, pod.name.value(), pod.uid);
  if (r.ok() || r.error().IsNotFound() || r.error().IsConflict()) return Status::Ok();
  return r.error().ToStatus();
}

Result<Json> KubePlatform::StateToStatus(const std::string& state_json) {
  Json state;
  try {
    state = value::parse(state_json);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("control state is not JSON: ") + e.what());
  }
  value status = value::object();
  const Json map = kubeapi::At(state, "map");
  if (map.is_object()) {
    status["partitionMap"]["epoch"] = kubeapi::At(map, "epoch");
    status["partitionMap"]["encoding"] = value::string("gzip+base64");
    status["partitionMap"]["data"] = value::string(GzipBase64(map.serialize()));
    status["epoch"] = kubeapi::At(map, "epoch");
  } else {
    status["partitionMap"] = value::null();
  }
  status["plan"] = kubeapi::At(state, "plan");  // null removes it (merge patch)
  status["nextPlanId"] = kubeapi::At(state, "next_plan_id");
  const Json d = kubeapi::At(state, "last_decision");
  if (d.is_object() && d.has_field("at_ms") && d.at("at_ms").as_number().to_int64() > 0) {
    value ld = value::object();
    ld["time"] = value::string(kubeapi::FormatTime(d.at("at_ms").as_number().to_int64(), 3));
    ld["reason"] = kubeapi::At(d, "reason");
    ld["kinds"] = kubeapi::At(d, "kinds");
    ld["partitions"] = kubeapi::At(d, "partitions");
    ld["replicas"] = kubeapi::At(d, "replicas");
    status["lastDecision"] = ld;
  }
  // Each schedule's current or next window, camelCased as the API's fields are.
  const Json schedules = kubeapi::At(state, "schedules");
  value list = value::array();
  if (schedules.is_array()) {
    size_t i = 0;
    for (const auto& sc : schedules.as_array()) {
      if (!sc.is_object()) continue;
      value e = value::object();
      for (const auto& [from, to] : {std::pair{"name", "name"},
                                     {"state", "state"},
                                     {"start", "start"},
                                     {"end", "end"},
                                     {"prepare_from", "prepareFrom"},
                                     {"min_partitions", "minPartitions"},
                                     {"min_replicas", "minReplicas"}}) {
        if (sc.has_field(from)) e[to] = sc.at(from);
      }
      list[i++] = e;
    }
  }
  status["schedules"] = list;
  return status;
}

Result<std::string> KubePlatform::StatusToState(const Json& status, const std::string& topic) {
  const Json pm = kubeapi::At(status, "partitionMap");
  const Json plan = kubeapi::At(status, "plan");
  if (!pm.is_object() && !plan.is_object()) {
    return Status::NotFound("the topic's status holds no control state yet");
  }
  value state = value::object();
  state["version"] = value::number(1);
  state["topic"] = value::string(topic);
  state["map"] = value::null();
  if (pm.is_object()) {
    const Json encoding = kubeapi::At(pm, "encoding");
    const Json data = kubeapi::At(pm, "data");
    if (!data.is_string()) return Status::InvalidArgument("status.partitionMap.data: missing");
    std::string text;
    if (encoding.is_string() && encoding.as_string() == "gzip+base64") {
      auto t = GunzipBase64(data.as_string());
      if (!t.ok()) return t.status();
      text = std::move(t).value();
    } else if (encoding.is_string() && encoding.as_string() == "json") {
      text = data.as_string();
    } else {
      return Status::InvalidArgument("status.partitionMap.encoding: unknown");
    }
    try {
      state["map"] = value::parse(text);
    } catch (const std::exception& e) {
      return Status::InvalidArgument(std::string("status.partitionMap: not JSON: ") + e.what());
    }
  }
  state["plan"] = plan.is_object() ? plan : value::null();
  const Json next = kubeapi::At(status, "nextPlanId");
  state["next_plan_id"] = next.is_number() ? next : value::number(1);
  const Json ld = kubeapi::At(status, "lastDecision");
  if (ld.is_object()) {
    value d = value::object();
    const Json t = kubeapi::At(ld, "time");
    d["at_ms"] = value::number(t.is_string() ? kubeapi::ParseTime(t.as_string()) : 0);
    d["reason"] = ld.has_string_field("reason") ? ld.at("reason") : value::string("");
    d["kinds"] = ld.has_array_field("kinds") ? ld.at("kinds") : value::array();
    d["partitions"] = ld.has_field("partitions") ? ld.at("partitions") : value::number(0);
    d["replicas"] = ld.has_field("replicas") ? ld.at("replicas") : value::number(0);
    state["last_decision"] = d;
  }
  return state.serialize();
}

namespace {
// status.controlRevision: how many times the control state was written.
int64_t ControlRevision(const Json& topic) {
  const Json r = kubeapi::At(topic, "status.controlRevision");
  return r.is_number() ? r.as_number().to_int64() : 0;
}
}  // namespace

// The control state is the authority's record (invariant 5: its write precedes every sidecar
// seeing a map), so it is written with optimistic concurrency. The status is read, and the write
// carries the resourceVersion read as its precondition, so it lands only on exactly what was read
// (the API server answers 409 otherwise). status.controlRevision counts the control state's
// writes: a revision other than the one this platform last wrote or loaded means another
// coordinator (a second leader, say a paused one that woke after its lease expired) wrote a
// record in between, and this write is refused with Conflict: the loop then re-reads instead of
// overwriting it. A 409 from any other writer of the status (the reconciler's conditions) is
// read again and retried.
Status KubePlatform::SaveState(const std::string& json) {
  if (!opts_.may_act()) return Status::Unavailable("not the leader: not saving the control state");
  auto status = StateToStatus(json);
  if (!status.ok()) return status.status();
  kubeapi::ApiError last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    // Asked again before each attempt: a leader that lost its lease meanwhile writes nothing.
    if (attempt > 0 && !opts_.may_act()) {
      return Status::Unavailable("not the leader: not saving the control state");
    }
    auto topic = client_.Get(kubeapi::PartitionedTopics(), opts_.ns, opts_.topic, "status");
    if (!topic.ok()) {
      last = topic.error();
      if (!last.IsRetryable()) break;
      continue;
    }
    const int64_t revision = ControlRevision(topic.value());
    {
      MutexLock lock(mu_);
      if (control_revision_ && revision != *control_revision_) {
        return Status::Conflict("the control state of " + opts_.ns + "/" + opts_.topic +
                                " was written by another coordinator (revision " +
                                std::to_string(revision) + ", this one last saw " +
                                std::to_string(*control_revision_) + ")");
      }
    }
    value patch = value::object();
    patch["metadata"]["resourceVersion"] = value::string(kubeapi::ResourceVersion(topic.value()));
    patch["status"] = status.value();
    patch["status"]["controlRevision"] = value::number(revision + 1);
    auto r = client_.MergePatch(kubeapi::PartitionedTopics(), opts_.ns, opts_.topic, patch, "status");
    if (r.ok()) {
      MutexLock lock(mu_);
      control_revision_ = revision + 1;
      return Status::Ok();
    }
    last = r.error();
    if (!last.IsConflict() && !last.IsRetryable()) break;
  }
  return last.ToStatus();
}

Result<std::string> KubePlatform::LoadState() {
  auto topic = client_.Get(kubeapi::PartitionedTopics(), opts_.ns, opts_.topic, "status");
  if (!topic.ok()) return topic.error().ToStatus();
  {
    MutexLock lock(mu_);
    control_revision_ = ControlRevision(topic.value());
  }
  return StatusToState(kubeapi::At(topic.value(), "status"), opts_.topic);
}

}  // namespace shoal::reconciler
