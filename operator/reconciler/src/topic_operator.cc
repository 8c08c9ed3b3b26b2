#include "shoal/reconciler/topic_operator.h"

#include <cpprest/asyncrt_utils.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "shoal/client/admin_client.h"
#include "shoal/common/certificates.h"
#include "shoal/common/files.h"
#include "shoal/common/logging.h"
#include "shoal/common/metrics.h"
#include "shoal/console/console.h"
#include "shoal/console/console_server.h"
#include "shoal/control/metrics_observer.h"
#include "shoal/control/planner.h"
#include "shoal/reconciler/kube_platform.h"
#include "shoal/reconciler/topic_status.h"

namespace shoal::reconciler {
namespace {

using kubeapi::Json;
using web::json::value;

constexpr const char* kManagedSelector = "app.kubernetes.io/managed-by=shoal-operator";

std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const size_t slash = key.find('/');
  return {key.substr(0, slash), key.substr(slash + 1)};
}

bool HasFinalizer(const Json& obj) {
  const Json f = kubeapi::At(obj, "metadata.finalizers");
  if (!f.is_array()) return false;
  for (const auto& v : f.as_array()) {
    if (v.is_string() && v.as_string() == kFinalizer) return true;
  }
  return false;
}

// Sets one condition in status.conditions, keeping its lastTransitionTime while its status
// stays the same.
void SetCondition(value& status, const Condition& cond, int64_t generation, int64_t now_ms) {
  const std::string type = ToString(cond.type);
  const std::string state = ToString(cond.status);
  const std::string& reason = cond.reason;
  const std::string& message = cond.message;
  if (!status.has_array_field("conditions")) status["conditions"] = value::array();
  value& list = status["conditions"];
  value* slot = nullptr;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].has_string_field("type") && list[i].at("type").as_string() == type) {
      slot = &list[i];
    }
  }
  value c = value::object();
  c["type"] = value::string(type);
  c["status"] = value::string(state);
  c["observedGeneration"] = value::number(generation);
  c["reason"] = value::string(reason);
  c["message"] = value::string(message.substr(0, 32768));
  const bool same = slot && slot->has_string_field("status") &&
                    slot->at("status").as_string() == state &&
                    slot->has_string_field("lastTransitionTime");
  c["lastTransitionTime"] =
      same ? slot->at("lastTransitionTime") : value::string(kubeapi::FormatTime(now_ms, 0));
  if (slot) {
    *slot = c;
  } else {
    list[list.size()] = c;
  }
}

}  // namespace

struct TopicOperator::Worker {
  std::string key;
  int64_t generation = 0;
  std::unique_ptr<KubePlatform> platform;
  std::unique_ptr<control::MetricsObserver> observer;
  std::unique_ptr<client::AdminClient> admin;
  bool tls = false;  // its clients speak TLS to the sidecars
  std::unique_ptr<control::ControlLoop> loop;
  std::atomic<bool> stop{false};
  std::atomic<bool> started{false};
  Mutex mu;
  CondVar cv;
  std::thread thread;
  std::string start_error GUARDED_BY(mu);
  // Reconcile's thread only.
  int64_t decision_reported_ms = 0;
  bool decision_noted = false;
  std::set<std::string> data_loss_reported;  // pods whose lost data an Event said
  std::set<std::string> pod_problems_reported;  // "pod/reason" an Event said (PodProblems)
  std::set<std::string> losses_reported;      // "pod@epoch" of losses an Event said
  // The topic's console (options.console), behind its admin token; declared last: it reads
  // through `admin` and `loop`, so it goes first.
  std::string token;
  std::unique_ptr<console::Console> console;
};

TopicOperator::TopicOperator(kubeapi::KubeClient& client, TopicOperatorOptions options,
                             Clock& clock)
    : client_(client),
      opts_(std::move(options)),
      clock_(clock),
      queue_(clock, opts_.backoff_start, opts_.backoff_max),
      events_(client, clock,
              {.controller = "shoal.dev/operator",
               .instance = opts_.identity,
               .regarding_api_version = kubeapi::PartitionedTopics().api_version(),
               .regarding_kind = kubeapi::PartitionedTopics().kind}),
      registry_(std::make_shared<prometheus::Registry>()) {
  metrics::RegisterBuildInfo(*registry_, "operator");
  reconcile_duration_ = &prometheus::BuildHistogram()
                             .Name("shoal_operator_reconcile_duration_seconds")
                             .Help("Time one reconcile of a PartitionedTopic took, whatever its result")
                             .Register(*registry_)
                             .Add({}, metrics::LatencyBuckets());
  reconciles_ = &prometheus::BuildCounter()
                     .Name("shoal_operator_reconciles_total")
                     .Help("Reconciles of PartitionedTopics by result (ok, error, requeue) and, "
                           "for errors, the step that failed (reason)")
                     .Register(*registry_);
  leader_ = &prometheus::BuildGauge()
                 .Name("shoal_operator_leader")
                 .Help("1 while this operator holds the leader lease")
                 .Register(*registry_)
                 .Add({});
  topics_gauge_ = &prometheus::BuildGauge()
                       .Name("shoal_operator_topics")
                       .Help("PartitionedTopics whose control loop runs in this operator")
                       .Register(*registry_)
                       .Add({});
  std::vector<std::string> namespaces = opts_.namespaces;
  if (namespaces.empty()) namespaces.push_back("");
  auto enqueue_topic = [this](const std::string&, const Json& obj) {
    Enqueue(Key(kubeapi::Namespace(obj), kubeapi::Name(obj)));
  };
  auto enqueue_owner = [this](const std::string&, const Json& obj) { EnqueueOwner(obj); };
  for (const auto& ns : namespaces) {
    kubeapi::InformerOptions io;
    io.ns = ns;
    io.watch_timeout = opts_.watch_timeout;
    topics_.push_back(std::make_unique<kubeapi::Informer>(client_, kubeapi::PartitionedTopics(), io,
                                                       enqueue_topic));
    io.label_selector = kManagedSelector;
    statefulsets_.push_back(
        std::make_unique<kubeapi::Informer>(client_, kubeapi::StatefulSets(), io, enqueue_owner));
    pods_.push_back(std::make_unique<kubeapi::Informer>(client_, kubeapi::Pods(), io, enqueue_owner));
  }
}

TopicOperator::~TopicOperator() { StopAllWorkers(); }

namespace {

// The informer of `ns` among one per watched namespace (one of all namespaces when none named).
kubeapi::Informer& OfNamespace(const std::vector<std::unique_ptr<kubeapi::Informer>>& informers,
                               const std::vector<std::string>& namespaces, const std::string& ns) {
  for (size_t i = 0; i < namespaces.size(); ++i) {
    if (namespaces[i] == ns) return *informers[i];
  }
  return *informers.front();
}

}  // namespace

kubeapi::Informer& TopicOperator::PodsOf(const std::string& ns) {
  return OfNamespace(pods_, opts_.namespaces, ns);
}

kubeapi::Informer& TopicOperator::SetsOf(const std::string& ns) {
  return OfNamespace(statefulsets_, opts_.namespaces, ns);
}

bool TopicOperator::synced() const {
  for (const auto* list : {&topics_, &statefulsets_, &pods_}) {
    for (const auto& inf : *list) {
      if (!inf->synced()) return false;
    }
  }
  return true;
}

void TopicOperator::Enqueue(const std::string& key) { queue_.Add(key); }

void TopicOperator::EnqueueOwner(const Json& obj) {
  const Json labels = kubeapi::At(obj, "metadata.labels");
  if (labels.is_object() && labels.has_string_field(kTopicLabel)) {
    Enqueue(Key(kubeapi::Namespace(obj), labels.at(kTopicLabel).as_string()));
  }
}

void TopicOperator::StartLeading(std::function<bool()> is_leader) {
  {
    MutexLock lock(mu_);
    is_leader_ = std::move(is_leader);
    term_.fetch_add(1);
    leading_.store(true);
    for (const auto& inf : topics_) {
      for (const auto& t : inf->List()) queue_.Add(Key(kubeapi::Namespace(t), kubeapi::Name(t)));
    }
  }
  leader_->Set(1);
  Logger("operator")->info("leading: reconciling every topic");
  leading_cv_.notify_all();
}

void TopicOperator::StopLeading() {
  {
    MutexLock lock(mu_);
    term_.fetch_add(1);
    leading_.store(false);
  }
  leader_->Set(0);
  Logger("operator")->warn("no longer leading: stopping every topic's control loop");
  StopAllWorkers();
}

void TopicOperator::Run(const std::atomic<bool>& stop) {
  // How long Run waits at most before it looks at `stop`, the resync and leadership again.
  constexpr std::chrono::milliseconds kPoll{200};
  std::vector<std::thread> threads;
  for (const auto* list : {&topics_, &statefulsets_, &pods_}) {
    for (const auto& inf : *list) {
      threads.emplace_back([&inf, &stop] { inf->Run(stop); });
    }
  }
  auto next_resync = clock_.SteadyNow() + opts_.resync;
  while (!stop.load()) {
    const auto now = clock_.SteadyNow();
    if (now >= next_resync) {
      next_resync = now + opts_.resync;
      Resync();
    }
    // Nothing is reconciled before every informer listed once: a decision on a partial
    // cache (no StatefulSet yet, no pods) would be a wrong one. Keys wait in the queue.
    if (!leading_.load() || !synced()) {
      MutexLock lock(mu_);
      leading_cv_.wait_for(lock, kPoll);
      continue;
    }
    const auto wait = std::min<std::chrono::milliseconds>(
        kPoll, std::chrono::ceil<std::chrono::milliseconds>(next_resync - now));
    if (auto key = queue_.Get(wait)) ProcessKey(*key);
  }
  queue_.ShutDown();
  StopAllWorkers();
  for (auto& t : threads) t.join();
}

void TopicOperator::Resync() {
  if (!leading_.load()) return;
  for (const auto& inf : topics_) {
    for (const auto& t : inf->List()) queue_.Add(Key(kubeapi::Namespace(t), kubeapi::Name(t)));
  }
  MutexLock lock(mu_);
  for (const auto& [k, w] : workers_) queue_.Add(k);
}

void TopicOperator::ProcessKey(const std::string& key) {
  ReconcileResult result;
  const auto began = clock_.SteadyNow();
  try {
    result = Reconcile(key);
  } catch (const std::exception& e) {
    result = ReconcileResult::Retry(RetryReason::kException, e.what());
  }
  reconcile_duration_->Observe(std::chrono::duration<double>(clock_.SteadyNow() - began).count());
  using Kind = ReconcileResult::Kind;
  switch (result.kind) {
    case Kind::kDone:
      reconciles_->Add({{"result", "ok"}}).Increment();
      queue_.Forget(key);
      break;
    case Kind::kRequeueAfter:
      reconciles_->Add({{"result", "requeue"}}).Increment();
      queue_.Forget(key);
      queue_.AddAfter(key, result.after);
      break;
    case Kind::kRetry: {
      reconciles_->Add({{"result", "error"}, {"reason", std::string(ToString(result.reason))}})
          .Increment();
      const auto delay = queue_.AddRateLimited(key);
      const auto level =
          result.reason == RetryReason::kException ? spdlog::level::err : spdlog::level::warn;
      Logger("operator")->log(level, "{}: {}; retrying in {} ms", key, result.cause, delay.count());
      break;
    }
  }
  queue_.Done(key);
}

std::optional<Json> TopicOperator::CachedStatefulSet(const std::string& ns,
                                                     const std::string& name) const {
  for (const auto& inf : statefulsets_) {
    if (auto sts = inf->Get(ns, name)) return sts;
  }
  return std::nullopt;
}

std::optional<Json> TopicOperator::CachedTopic(const std::string& key) const {
  const auto [ns, name] = SplitKey(key);
  for (const auto& inf : topics_) {
    if (auto t = inf->Get(ns, name)) return t;
  }
  return std::nullopt;
}

ReconcileResult TopicOperator::Reconcile(const std::string& key) {
  std::function<bool()> is_leader;
  uint64_t term = 0;
  {
    MutexLock lock(mu_);
    is_leader = is_leader_;
    term = term_.load();
  }
  if (!leading_.load() || !is_leader || !is_leader()) return ReconcileResult::Done();
  auto cached = CachedTopic(key);
  if (!cached) {
    StopWorker(key);
    return ReconcileResult::Done();
  }
  Json topic = *cached;
  if (kubeapi::At(topic, "metadata.deletionTimestamp").is_string()) return Cleanup(topic);
  if (!HasFinalizer(topic)) {
    Json finalizers = kubeapi::At(topic, "metadata.finalizers");
    if (!finalizers.is_array()) finalizers = value::array();
    finalizers[finalizers.size()] = value::string(kFinalizer);
    value patch = value::object();
    patch["metadata"]["finalizers"] = finalizers;
    patch["metadata"]["resourceVersion"] = value::string(kubeapi::ResourceVersion(topic));
    auto r = client_.MergePatch(kubeapi::PartitionedTopics(), kubeapi::Namespace(topic),
                                kubeapi::Name(topic), patch);
    if (!r.ok()) {
      return ReconcileResult::Retry(RetryReason::kFinalizer,
                                    "adding the finalizer: " + r.error().ToString());
    }
    topic = std::move(r).value();
  }
  auto t = ReadTopic(topic);
  if (t.ok() && t->spec.partitions.max > opts_.max_partitions) {
    t = Status::InvalidArgument("spec.partitions.max: " + std::to_string(t->spec.partitions.max) +
                                " is above this operator's limit of " +
                                std::to_string(opts_.max_partitions) +
                                " partitions per topic (--max-partitions); lower it");
  }
  if (t.ok() && t->spec.storage.size.empty()) {
    // The operator's volume size applies: retention must fit it too.
    if (Status fits = RetentionFits(t->spec, opts_.manifests.data_volume_size,
                                    "spec.retention.bytes (with this operator's --data-volume-size)");
        !fits.ok()) {
      t = fits;
    }
  }
  if (!t.ok()) {
    ReportInvalid(topic, t.status().message());
    ResumeLastApplied(topic, term);
    return ReconcileResult::Done();  // nothing to retry: the user edits the spec
  }
  if (auto sts = CachedStatefulSet(t->ns, t->name)) KeepWhatRuns(*t, *sts);
  return Apply(topic, *t, term);
}

void TopicOperator::ReportInvalid(const Json& topic, const std::string& message) {
  // Warned once per generation; the status says which generation it judged.
  Report(topic, "InvalidSpec", message, std::to_string(kubeapi::Generation(topic)),
         InvalidConditions(message), /*observed=*/true);
}

void TopicOperator::ReportNotOwned(const Json& topic, const std::string& message) {
  Report(topic, "ObjectNotOwned", message, message, NotOwnedConditions(message),
         /*observed=*/false);
}

void TopicOperator::Report(const Json& topic, const std::string& reason,
                           const std::string& message, const std::string& once_per,
                           const std::vector<Condition>& conditions, bool observed) {
  const std::string key = Key(kubeapi::Namespace(topic), kubeapi::Name(topic));
  const int64_t gen = kubeapi::Generation(topic);
  Logger("operator")->warn("{}: {} (generation {}): {}", key, reason, gen, message);
  bool warn = false;
  {
    MutexLock lock(mu_);
    auto [it, fresh] = reported_.emplace(std::make_pair(key, reason), once_per);
    warn = fresh || it->second != once_per;
    it->second = once_per;
  }
  if (warn) events_.Event(topic, "Warning", reason, "Reconcile", message);
  const int64_t now = clock_.NowMs();
  const Status written = WriteStatus(topic, [&](value& status) {
    if (observed) status["observedGeneration"] = value::number(gen);
    for (const auto& c : conditions) SetCondition(status, c, gen, now);
  });
  // Not retried: the next resync writes it again.
  if (!written.ok()) Logger("operator")->warn("{}: {}", key, written.message());
}

namespace {

// A Secret's data, decoded; keys whose value is not base64 are left out.
std::map<std::string, std::string> SecretData(const Json& secret) {
  std::map<std::string, std::string> out;
  const Json data = kubeapi::At(secret, "data");
  if (!data.is_object()) return out;
  for (const auto& [key, value] : data.as_object()) {
    if (!value.is_string()) continue;
    try {
      const auto bytes = utility::conversions::from_base64(value.as_string());
      out[key] = std::string(bytes.begin(), bytes.end());
    } catch (...) {
    }
  }
  return out;
}

// The CA a <topic>-ca Secret's data holds; an error naming the Secret when it lacks a part.
Result<CertifiedKey> CaOf(const std::map<std::string, std::string>& data, const std::string& name) {
  auto cert = data.find("ca.crt");
  auto key = data.find("ca.key");
  if (cert == data.end() || key == data.end()) {
    return Status::InvalidArgument("Secret " + name +
                                   " has no ca.crt and ca.key; delete it to get a new CA");
  }
  return CertifiedKey{cert->second, key->second};
}

}  // namespace

Result<std::string> TopicOperator::EnsureSecret(const Json& topic, const TopicObject& t,
                                                std::string* not_owned) {
  const std::string name = AdminSecretName(t.name);
  auto got = client_.Get(kubeapi::Secrets(), t.ns, name);
  if (got.ok() && !OwnedBy(got.value(), t)) {
    // Someone else's Secret: its token is not handed to the topic's pods.
    *not_owned = NotOwnedMessage("Secret", name, t);
    return Status::FailedPrecondition(*not_owned);
  }
  if (got.ok()) {
    const auto data = SecretData(got.value());
    if (auto token = data.find("token"); token != data.end()) return token->second;
    return Status::InvalidArgument("Secret " + name + " has no token; delete it to get a new one");
  }
  if (!got.error().IsNotFound()) return got.error().ToStatus();
  auto token = RandomToken();
  if (!token.ok()) return token.status();
  auto made = client_.Create(kubeapi::Secrets(), t.ns, BuildSecret(t, *token));
  if (!made.ok() && !made.error().IsAlreadyExists()) return made.error().ToStatus();
  if (made.ok()) {
    events_.Event(topic, "Normal", "Created", "Create",
                  "created Secret " + name + " (sidecars' admin token)");
  }
  return EnsureSecret(topic, t, not_owned);
}

namespace {

constexpr std::chrono::hours kCaValid{24 * 365 * 10};
constexpr std::chrono::hours kCertValid{24 * 30};
constexpr const char* kRotateAnnotation = "shoal.dev/rotate-certificates";

// Whether a certificate of `ca_cert` in `data` (tls.crt) may stay: signed by that CA, with more
// than a third of its life left, and issued for the rotation asked for now.
bool CertStays(const std::map<std::string, std::string>& data, const std::string& ca_cert,
               const std::string& rotation) {
  auto cert = data.find("tls.crt");
  auto key = data.find("tls.key");
  auto ca = data.find("ca.crt");
  auto for_rotation = data.find("rotated-for");
  if (cert == data.end() || key == data.end() || ca == data.end() || ca->second != ca_cert ||
      !SignedBy(cert->second, ca_cert)) {
    return false;
  }
  if ((for_rotation == data.end() ? "" : for_rotation->second) != rotation) return false;
  auto end = NotAfter(cert->second);
  return end.ok() && *end - std::chrono::system_clock::now() > kCertValid / 3;
}

}  // namespace

Result<TlsClientFiles> TopicOperator::EnsureTls(const Json& topic, const TopicObject& t,
                                                std::string* not_owned) {
  if (!TlsOn(t, opts_.manifests)) return TlsClientFiles{};
  // The CA: made once, kept in a Secret no pod mounts.
  const std::string ca_name = CaSecretName(t.name);
  auto got = client_.Get(kubeapi::Secrets(), t.ns, ca_name);
  if (got.ok() && !OwnedBy(got.value(), t)) {
    *not_owned = NotOwnedMessage("Secret", ca_name, t);
    return Status::FailedPrecondition(*not_owned);
  }
  if (!got.ok() && !got.error().IsNotFound()) return got.error().ToStatus();
  if (!got.ok()) {
    auto ca = MakeCa("shoal-ca." + t.name, kCaValid);
    if (!ca.ok()) return ca.status();
    auto made = client_.Create(
        kubeapi::Secrets(), t.ns,
        BuildOwnedSecret(t, ca_name, {{"ca.crt", ca->cert_pem}, {"ca.key", ca->key_pem}}));
    if (!made.ok() && !made.error().IsAlreadyExists()) return made.error().ToStatus();
    if (made.ok()) {
      events_.Event(topic, "Normal", "Created", "Create",
                    "created Secret " + ca_name + " (the topic's certificate authority)");
    }
    return EnsureTls(topic, t, not_owned);
  }
  auto found = CaOf(SecretData(got.value()), ca_name);
  if (!found.ok()) return found.status();
  const CertifiedKey ca = *found;
  // (The annotation's name has a dot: not a path for At.)
  const Json annotations = kubeapi::At(topic, "metadata.annotations");
  const std::string rotation =
      annotations.is_object() && annotations.has_string_field(kRotateAnnotation)
          ? annotations.at(kRotateAnnotation).as_string()
          : "";

  // The pods' certificate, the CA and the access file, beside the admin token.
  const std::string admin_name = AdminSecretName(t.name);
  auto admin = client_.Get(kubeapi::Secrets(), t.ns, admin_name);
  if (!admin.ok()) return admin.error().ToStatus();  // EnsureSecret made it just before
  auto data = SecretData(admin.value());
  const std::string access = AccessFileJson(t.spec);
  const bool renew = !CertStays(data, ca.cert_pem, rotation);
  if (renew || data["access.json"] != access) {
    if (renew) {
      auto pod = IssueCertificate(ca, PeerName(t.name), {PeerName(t.name)}, true, kCertValid);
      if (!pod.ok()) return pod.status();
      data["tls.crt"] = pod->cert_pem;
      data["tls.key"] = pod->key_pem;
      data["ca.crt"] = ca.cert_pem;
      data["rotated-for"] = rotation;
    }
    data["access.json"] = access;
    Json want = admin.value();
    want["data"] = BuildOwnedSecret(t, admin_name, data).at("data");
    auto r = client_.Update(kubeapi::Secrets(), t.ns, admin_name, want);
    if (!r.ok()) return r.error().ToStatus();
    if (renew) {
      events_.Event(
          topic, "Normal", "CertificateIssued", "Issue",
          "issued the pods' certificate " + PeerName(t.name) + " (Secret " + admin_name + ")");
    }
  }

  // Each principal's client certificate, for the user to hand to that caller.
  for (const auto& who : t.spec.security.principals) {
    const std::string name = ClientSecretName(t.name, who.name);
    auto live = client_.Get(kubeapi::Secrets(), t.ns, name);
    if (live.ok() && !OwnedBy(live.value(), t)) {
      *not_owned = NotOwnedMessage("Secret", name, t);
      return Status::FailedPrecondition(*not_owned);
    }
    if (!live.ok() && !live.error().IsNotFound()) return live.error().ToStatus();
    if (live.ok() && CertStays(SecretData(live.value()), ca.cert_pem, rotation)) continue;
    auto cert = IssueCertificate(ca, who.name, {}, false, kCertValid);
    if (!cert.ok()) return cert.status();
    const Json want = BuildOwnedSecret(t, name,
                                       {{"ca.crt", ca.cert_pem},
                                        {"tls.crt", cert->cert_pem},
                                        {"tls.key", cert->key_pem},
                                        {"rotated-for", rotation}});
    if (live.ok()) {
      Json update = live.value();
      update["data"] = want.at("data");
      auto r = client_.Update(kubeapi::Secrets(), t.ns, name, update);
      if (!r.ok()) return r.error().ToStatus();
    } else {
      auto r = client_.Create(kubeapi::Secrets(), t.ns, want);
      if (!r.ok() && !r.error().IsAlreadyExists()) return r.error().ToStatus();
    }
    events_.Event(topic, "Normal", "CertificateIssued", "Issue",
                  "issued the client certificate of \"" + who.name + "\" (Secret " + name + ")");
  }
  return OperatorFiles(t, ca.cert_pem, ca.key_pem);
}

Result<TlsClientFiles> TopicOperator::OperatorFiles(const TopicObject& t,
                                                    const std::string& ca_cert,
                                                    const std::string& ca_key) {
  const std::string key = Key(t.ns, t.name);
  {
    MutexLock lock(mu_);
    auto it = operator_certs_.find(key);
    if (it != operator_certs_.end() && it->second.ca_cert == ca_cert &&
        it->second.not_after - std::chrono::system_clock::now() > kCertValid / 3) {
      return it->second.files;
    }
  }
  auto cert = IssueCertificate({ca_cert, ca_key}, OperatorName(t.name), {}, false, kCertValid);
  if (!cert.ok()) return cert.status();
  std::string base = opts_.cert_dir;
  if (base.empty()) {
    base =
        (std::filesystem::temp_directory_path() / ("shoal-operator-" + std::to_string(::getpid())))
            .string();
  }
  const std::string dir = base + "/" + t.ns + "/" + t.name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot make " + dir + ": " + ec.message());
  TlsClientFiles files{dir + "/ca.crt", dir + "/tls.crt", dir + "/tls.key", PeerName(t.name)};
  // The key first: a connection made between the writes fails, never pairs a new cert with an
  // old key silently (OpenSSL checks the pair).
  for (const auto& [path, content] :
       std::vector<std::pair<std::string, std::string>>{{files.key_file, cert->key_pem},
                                                        {files.cert_file, cert->cert_pem},
                                                        {files.ca_file, ca_cert}}) {
    SHOAL_RETURN_IF_ERROR(WriteFileDurable(path, content, 0600));
  }
  auto end = NotAfter(cert->cert_pem);
  MutexLock lock(mu_);
  operator_certs_[key] = {ca_cert, end.ok() ? *end : std::chrono::system_clock::now(), files};
  return files;
}

Result<std::optional<Json>> TopicOperator::LiveOrCreate(const kubeapi::ResourceKind& kind,
                                                        const TopicObject& t, const Json& want,
                                                        const char* what, std::string* not_owned) {
  auto got = client_.Get(kind, t.ns, t.name);
  if (got.ok() && !OwnedBy(got.value(), t)) {
    *not_owned = NotOwnedMessage(what, t.name, t);
    return Status::FailedPrecondition(*not_owned);
  }
  if (got.ok()) return std::optional<Json>(std::move(got).value());
  if (!got.error().IsNotFound()) {
    return got.error().ToStatus().Annotate(std::string("reading its ") + what);
  }
  auto made = client_.Create(kind, t.ns, want);
  if (!made.ok() && !made.error().IsAlreadyExists()) {
    return made.error().ToStatus().Annotate(std::string("creating its ") + what);
  }
  return std::optional<Json>();
}

Status TopicOperator::EnsureService(const TopicObject& t, std::string* not_owned) {
  const Json want = BuildService(t);
  auto got = LiveOrCreate(kubeapi::Services(), t, want, "Service", not_owned);
  if (!got.ok() || !got->has_value()) return got.status();
  Json live = std::move(**got);
  bool same = true;
  for (const char* field : {"selector", "ports", "clusterIP", "publishNotReadyAddresses"}) {
    if (kubeapi::At(live, std::string("spec.") + field).serialize() !=
        want.at("spec").at(field).serialize()) {
      same = false;
    }
  }
  if (same) return Status::Ok();
  for (const char* field : {"selector", "ports", "publishNotReadyAddresses"}) {
    live["spec"][field] = want.at("spec").at(field);
  }
  auto r = client_.Update(kubeapi::Services(), t.ns, t.name, live);
  return r.ok() ? Status::Ok() : r.error().ToStatus().Annotate("updating its Service");
}

Status TopicOperator::EnsurePodDisruptionBudget(const TopicObject& t, std::string* not_owned) {
  const Json want = BuildPodDisruptionBudget(t);
  auto got =
      LiveOrCreate(kubeapi::PodDisruptionBudgets(), t, want, "PodDisruptionBudget", not_owned);
  if (!got.ok() || !got->has_value()) return got.status();
  Json live = std::move(**got);
  if (kubeapi::At(live, "spec").serialize() == want.at("spec").serialize()) return Status::Ok();
  live["spec"] = want.at("spec");  // set back when changed by hand
  auto r = client_.Update(kubeapi::PodDisruptionBudgets(), t.ns, t.name, live);
  return r.ok() ? Status::Ok() : r.error().ToStatus().Annotate("updating its PodDisruptionBudget");
}

Status TopicOperator::EnsureStatefulSet(const Json& topic, const TopicObject& t,
                                        std::string* refused, std::string* not_owned) {
  std::optional<Json> live = CachedStatefulSet(t.ns, t.name);
  if (live && !OwnedBy(*live, t)) {
    *not_owned = NotOwnedMessage("StatefulSet", t.name, t);
    return Status::FailedPrecondition(*not_owned);
  }
  if (!live) {
    // Replicas start at 0: the control loop asks for the first pods through the scale
    // subresource once it has read (or found no) control state.
    auto made = client_.Create(kubeapi::StatefulSets(), t.ns, BuildStatefulSet(t, opts_.manifests, 0));
    if (!made.ok() && !made.error().IsAlreadyExists()) {
      if (made.error().IsInvalid()) *refused = made.error().message;
      return made.error().ToStatus().Annotate("creating its StatefulSet");
    }
    if (made.ok()) {
      events_.Event(topic, "Normal", "Created", "Create", "created StatefulSet " + t.name);
    }
    return Status::Ok();
  }
  const Json replicas = kubeapi::At(*live, "spec.replicas");
  Json want = BuildStatefulSet(t, opts_.manifests, replicas.is_number() ? replicas.as_number().to_int64() : 0);
  const Json annotations = kubeapi::At(*live, "metadata.annotations");
  const Json have_hash = annotations.is_object() && annotations.has_field(kTemplateHashAnnotation)
                             ? annotations.at(kTemplateHashAnnotation)
                             : Json::null();
  if (have_hash.is_string() &&
      have_hash.as_string() == want.at("metadata").at("annotations").at(kTemplateHashAnnotation).as_string()) {
    return Status::Ok();
  }
  // Paused: the pods keep the template they have until the annotation goes.
  if (t.paused) return Status::Ok();
  want["metadata"]["resourceVersion"] = value::string(kubeapi::ResourceVersion(*live));
  // volumeClaimTemplates (and the selector) are immutable: the pods' volumes stay as created
  // (a new --data-volume-size applies to new topics).
  const Json claims = kubeapi::At(*live, "spec.volumeClaimTemplates");
  if (claims.is_array()) want["spec"]["volumeClaimTemplates"] = claims;
  const Json selector = kubeapi::At(*live, "spec.selector");
  if (selector.is_object()) want["spec"]["selector"] = selector;
  auto r = client_.Update(kubeapi::StatefulSets(), t.ns, t.name, want);
  if (!r.ok()) {
    if (r.error().IsInvalid()) *refused = r.error().message;
    return r.error().ToStatus().Annotate("updating its StatefulSet");
  }
  events_.Event(topic, "Normal", "Updated", "Update",
                "updated StatefulSet " + t.name + " to the new spec");
  return Status::Ok();
}

std::shared_ptr<TopicOperator::Worker> TopicOperator::EnsureWorker(const TopicObject& t,
                                                                   const std::string& token,
                                                                   const TlsClientFiles& tls,
                                                                   uint64_t term) {
  const std::string key = Key(t.ns, t.name);
  std::shared_ptr<Worker> w;
  {
    MutexLock lock(mu_);
    auto it = workers_.find(key);
    if (it != workers_.end()) w = it->second;
  }
  if (w && w->tls != tls.enabled()) {
    // TLS turned on or off: the loop's clients are made again.
    StopWorker(key);
    w = nullptr;
  }
  if (w && w->generation != t.generation) {
    w->loop->UpdateSpec(t.spec);
    w->generation = t.generation;
  }
  if (w) w->loop->SetPaused(t.paused);
  if (!w) {
    // The pods asked for now, from the synced cache: never guessed (a loop that believed in
    // fewer pods than exist would plan a "scale-up" that removes pods still owning partitions).
    std::optional<Json> sts = CachedStatefulSet(t.ns, t.name);
    const Json replicas = sts ? kubeapi::At(*sts, "spec.replicas") : Json::null();
    if (!replicas.is_number()) {
      Logger("operator")->debug("{}: waiting for its StatefulSet in the cache", key);
      return nullptr;
    }
    const uint32_t desired = static_cast<uint32_t>(replicas.as_number().to_int64());
    auto worker = std::make_shared<Worker>();
    worker->key = key;
    worker->generation = t.generation;
    worker->tls = tls.enabled();
    std::function<bool()> is_leader;
    {
      MutexLock lock(mu_);
      is_leader = is_leader_;
    }
    auto may_act = [this, is_leader, term] {
      return leading_.load() && term_.load() == term && is_leader && is_leader();
    };
    KubePlatformOptions po;
    po.ns = t.ns;
    po.topic = t.name;
    po.admin_token = token;
    po.may_act = may_act;
    worker->platform =
        std::make_unique<KubePlatform>(client_, PodsOf(t.ns), SetsOf(t.ns), std::move(po),
                                       desired);
    control::MetricsObserver::Options observe;
    observe.tls = tls;
    worker->observer = std::make_unique<control::MetricsObserver>(clock_, token, observe);
    worker->admin = std::make_unique<client::AdminClient>(token, tls);
    control::ControlLoopOptions lo = opts_.loop;
    lo.executor.may_act = may_act;  // every request to a sidecar, also inside a long retry
    worker->loop = std::make_unique<control::ControlLoop>(
        t.spec, *worker->platform, *worker->observer, *worker->admin, clock_, lo);
    worker->loop->SetPaused(t.paused);
    if (opts_.console) {
      console::ConsoleOptions co;
      co.topic = t.name;
      control::ControlLoop* loop = worker->loop.get();
      co.seeds = [loop] {
        std::vector<std::string> admins;
        const PartitionMap map = loop->map();
        for (const auto& [pod, peer] : map.peers()) admins.push_back(peer.admin);
        return admins;
      };
      co.status = [loop] { return loop->StatusJson(); };
      worker->token = token;
      worker->console = std::make_unique<console::Console>(co, *worker->admin, clock_);
      worker->console->Start();
    }
    {
      // Registered and started under the lock, and only in the term that decided to: a
      // StopLeading meanwhile (which stops the workers it finds) leaves no loop behind.
      MutexLock lock(mu_);
      if (!leading_.load() || term_.load() != term) return nullptr;
      workers_[key] = worker;
      topics_gauge_->Set(static_cast<double>(workers_.size()));
      worker->thread = std::thread([this, raw = worker.get(), may_act] { RunWorker(*raw, may_act); });
    }
    w = worker;
    Logger("operator")->info("{}: control loop started ({} pods asked for now)", key, desired);
  }
  return w;
}

void TopicOperator::ResumeLastApplied(const Json& topic, uint64_t term) {
  const std::string ns = kubeapi::Namespace(topic), name = kubeapi::Name(topic);
  {
    MutexLock lock(mu_);
    if (workers_.count(Key(ns, name))) return;  // runs already, on its last valid spec
  }
  std::optional<Json> sts = CachedStatefulSet(ns, name);
  if (!sts) return;  // never applied: nothing runs that would need finishing
  auto applied = AppliedTopic(topic, *sts);
  if (!applied.ok()) {
    Logger("operator")->warn("{}/{}: cannot resume its loop: {}", ns, name,
                             applied.status().message());
    return;
  }
  auto secret = client_.Get(kubeapi::Secrets(), ns, AdminSecretName(name));
  if (!secret.ok()) return;
  const auto data = SecretData(secret.value());
  if (!data.count("token")) return;
  KeepWhatRuns(*applied, *sts);
  TlsClientFiles tls;
  if (TlsOn(*applied, opts_.manifests)) {
    auto ca_secret = client_.Get(kubeapi::Secrets(), ns, CaSecretName(name));
    if (!ca_secret.ok()) return;
    auto ca = CaOf(SecretData(ca_secret.value()), CaSecretName(name));
    if (!ca.ok()) return;
    auto files = OperatorFiles(*applied, ca->cert_pem, ca->key_pem);
    if (!files.ok()) return;
    tls = *files;
  }
  if (EnsureWorker(*applied, data.at("token"), tls, term)) {
    Logger("operator")->info("{}/{}: running its loop on the last applied spec (generation {})",
                             ns, name, applied->generation);
  }
}

ReconcileResult TopicOperator::Apply(const Json& topic, const TopicObject& t, uint64_t term) {
  const std::string key = Key(t.ns, t.name);
  // An object in the way that is not the topic's stops the topic here, reported, and is looked
  // at again with backoff (the user may delete it).
  std::string not_owned;
  auto blocked = [&] {
    ReportNotOwned(topic, not_owned);
    return ReconcileResult::Retry(RetryReason::kNotOwned, not_owned);
  };
  auto token = EnsureSecret(topic, t, &not_owned);
  if (!not_owned.empty()) return blocked();
  if (!token.ok()) {
    return ReconcileResult::Retry(RetryReason::kSecret, "its Secret: " + token.status().message());
  }
  auto tls = EnsureTls(topic, t, &not_owned);
  if (!not_owned.empty()) return blocked();
  if (!tls.ok()) {
    return ReconcileResult::Retry(RetryReason::kSecret,
                                  "its certificates: " + tls.status().message());
  }
  if (Status st = EnsureService(t, &not_owned); !st.ok()) {
    if (!not_owned.empty()) return blocked();
    return ReconcileResult::Retry(RetryReason::kService, st.message());
  }
  if (Status st = EnsurePodDisruptionBudget(t, &not_owned); !st.ok()) {
    if (!not_owned.empty()) return blocked();
    return ReconcileResult::Retry(RetryReason::kPodDisruptionBudget, st.message());
  }
  std::string refused;
  if (Status st = EnsureStatefulSet(topic, t, &refused, &not_owned); !st.ok()) {
    if (!not_owned.empty()) return blocked();
    // The API server refused the pod template (what Kubernetes checks on a Pod): the user's
    // to fix, reported like an invalid spec.
    if (!refused.empty()) {
      ReportInvalid(topic, "the API server refused the topic's StatefulSet: " + refused);
      ResumeLastApplied(topic, term);
      return ReconcileResult::Done();
    }
    return ReconcileResult::Retry(RetryReason::kStatefulSet, st.message());
  }
  {
    MutexLock lock(mu_);
    reported_.erase({key, "InvalidSpec"});
    reported_.erase({key, "ObjectNotOwned"});
  }

  // The topic's control loop.
  std::shared_ptr<Worker> w = EnsureWorker(t, *token, *tls, term);
  if (!w) {
    if (!leading_.load() || term_.load() != term) return ReconcileResult::Done();  // not ours
    // Its StatefulSet is not in the cache yet: the informer catches up within moments.
    return ReconcileResult::RequeueAfter(std::chrono::milliseconds(200));
  }

  // The pod count is the loop's: a StatefulSet scaled by anyone else (`kubectl scale sts`)
  // would start pods that own nothing or stop pods with their partitions, undrained. It is set
  // back, as a Deployment's controller sets back a ReplicaSet.
  if (w->started.load()) {
    std::optional<Json> sts = CachedStatefulSet(t.ns, t.name);
    const Json replicas = sts ? kubeapi::At(*sts, "spec.replicas") : Json::null();
    if (replicas.is_number()) {
      const auto cached =
          static_cast<uint32_t>(std::max<int64_t>(0, replicas.as_number().to_int64()));
      // Never below the pods that own partitions (active, or sealed and not yet retired).
      uint32_t floor = 0;
      const PartitionMap owned = w->loop->map();
      for (const auto& p : owned.partitions()) {
        const int64_t ordinal = control::OrdinalOf(t.name, p.owner);
        if (ordinal >= 0) floor = std::max<uint32_t>(floor, static_cast<uint32_t>(ordinal) + 1);
      }
      auto held = w->platform->HoldReplicas(cached, floor);
      if (!held.ok()) {
        // The next pass tries again; the status below is written all the same.
        Logger("operator")->warn("{}: setting its StatefulSet's replicas back: {}", key,
                                 held.status().message());
      } else if (held->has_value()) {
        const std::string want = std::to_string(w->platform->DesiredPods());
        Logger("operator")->warn("{}: StatefulSet scaled to {} by someone else; set back to {}",
                                 key, **held, want);
        events_.Event(
            topic, "Warning", "ReplicasReverted", "Scale",
            "StatefulSet " + t.name + " was scaled to " + std::to_string(**held) +
                " outside the operator; set back to " + want +
                " (the control loop owns the pod count: set spec.replicas.min/max or use kubectl "
                "scale ptopic)");
      }
    }
  }

  // A new decision is an Event. The first look after the loop started only notes the decision
  // it loaded from the status (the previous leader's, already reported).
  if (w->started.load()) {
    const control::DecisionRecord d = w->loop->last_decision();
    const bool changes = std::any_of(d.kinds.begin(), d.kinds.end(),
                                     [](control::DecisionKind k) { return k != control::DecisionKind::kHold; });
    if (w->decision_noted && changes && d.at_ms > w->decision_reported_ms) {
      events_.Event(topic, "Normal", "Scaled", "Scale",
                    "partitions " + std::to_string(d.partitions) + ", pods " +
                        std::to_string(d.replicas) + ": " + d.reason);
    }
    w->decision_reported_ms = std::max(w->decision_reported_ms, d.at_ms);
    w->decision_noted = true;
  }

  // Status: gathered here, decided by ComputeTopicStatus (topic_status.h).
  TopicObservation o;
  o.desired_pods = w->platform->DesiredPods();
  std::set<std::string> ready_pods;
  if (auto pods = w->platform->ListPods(); pods.ok()) {
    for (const auto& p : *pods) {
      if (p.ready) ready_pods.insert(p.name.value());
    }
    o.ready_pods = static_cast<uint32_t>(ready_pods.size());
  }
  {
    // What the topic's pods report that keeps them from running: a condition and, once per pod
    // and cause, a Warning Event (as CloudNativePG and Strimzi surface their pods' failures).
    std::vector<Json> pods;
    for (const Json& p : PodsOf(t.ns).List()) {
      const Json labels = kubeapi::At(p, "metadata.labels");
      if (kubeapi::Namespace(p) == t.ns && labels.is_object() &&
          labels.has_string_field(kTopicLabel) && labels.at(kTopicLabel).as_string() == t.name) {
        pods.push_back(p);
      }
    }
    o.pod_problems = PodProblems(pods);
    std::set<std::string> now;
    for (const auto& p : o.pod_problems) {
      const std::string key = p.pod + "/" + p.reason;
      now.insert(key);
      if (!w->pod_problems_reported.insert(key).second) continue;
      events_.Event(topic, "Warning", p.reason, "Observe",
                    "pod " + p.pod + " cannot run: " + p.message);
    }
    std::erase_if(w->pod_problems_reported, [&](const std::string& k) { return !now.count(k); });
  }
  if (w->started.load()) {
    o.pods_without_data = w->loop->pods_without_data();
    for (const auto& [pod, d] : w->loop->pods_under_disk_pressure()) {
      o.disk_pressure[pod] = {d.free_bytes, d.reserve_bytes, d.reserve_in_use};
    }
    for (const auto& [pod, ids] : o.pods_without_data) {
      if (!w->data_loss_reported.insert(pod).second) continue;
      events_.Event(topic, "Warning", "PodLostData", "Observe",
                    "pod " + pod + " came back without its data: partitions " + JoinIds(ids) +
                        " take no writes; their events are gone with the volume");
    }
    std::erase_if(w->data_loss_reported,
                  [&](const std::string& pod) { return !o.pods_without_data.count(pod); });
  }
  const PartitionMap map = w->loop->map();
  if (w->started.load()) {
    for (const auto& loss : w->loop->losses()) {
      bool in_map = false;
      for (PartitionId id : loss.partitions) in_map |= map.Find(id) != nullptr;
      if (in_map) o.losses.push_back({loss.pod, loss.partitions, loss.events});
      const std::string key = loss.pod + "@" + std::to_string(loss.epoch.value());
      if (!in_map || !w->losses_reported.insert(key).second) continue;
      events_.Event(topic, "Warning", "PartitionsLost", "Recover",
                    "partitions " + JoinIds(loss.partitions) + " were declared lost with pod " +
                        loss.pod + "'s volume at epoch " + std::to_string(loss.epoch.value()) +
                        " (" + std::to_string(loss.events) + " events, " +
                        std::to_string(loss.unconsumed) + " not yet read by some group); " +
                        "partitions " + JoinIds(loss.successors) + " take their ranges' writes");
    }
  }
  for (const auto& p : map.partitions()) {
    (p.state == PartitionState::kActive ? o.active : o.sealed) += 1;
    // A pod that came back without its data is ready but serves nothing of what it held.
    if (p.state == PartitionState::kActive && (ready_pods.count(p.owner.value()) == 0 ||
                                               o.pods_without_data.count(p.owner.value()))) {
      ++o.unserved;
    }
  }
  o.epoch = map.epoch();
  o.plan_in_progress = w->loop->plan_in_progress();
  o.paused = w->loop->paused();
  {
    MutexLock lock(w->mu);
    o.start_error = w->start_error;
  }
  const TopicStatus computed = ComputeTopicStatus(o);
  const int64_t gen = t.generation;
  const int64_t now = clock_.NowMs();
  // The next leader writes it.
  if (!leading_.load() || term_.load() != term) return ReconcileResult::Done();
  const Status written = WriteStatus(topic, [&](value& status) {
    status["observedGeneration"] = value::number(gen);
    status["replicas"] = value::number(computed.replicas);
    status["readyReplicas"] = value::number(computed.ready_replicas);
    status["selector"] = value::string(SelectorString(t.name));
    if (computed.epoch) status["epoch"] = value::number(computed.epoch->value());
    if (computed.partitions) status["partitions"] = value::number(*computed.partitions);
    if (computed.sealed_partitions) {
      status["sealedPartitions"] = value::number(*computed.sealed_partitions);
    }
    for (const auto& c : computed.conditions) SetCondition(status, c, gen, now);
  });
  if (!written.ok()) return ReconcileResult::Retry(RetryReason::kStatus, written.message());
  return ReconcileResult::Done();
}

void TopicOperator::RunWorker(Worker& w, const std::function<bool()>& may_act) {
  auto backoff = std::chrono::milliseconds(200);
  std::string shown;  // what the status shows of this loop, to reconcile when it changes
  while (!w.stop.load()) {
    auto wait = opts_.loop.interval;
    try {
      if (!w.started.load()) {
        if (may_act()) {
          Status st = w.loop->Start();
          MutexLock lock(w.mu);
          if (st.ok()) {
            w.started.store(true);
            w.start_error.clear();
          } else {
            Logger("operator")->warn("{}: starting its control loop: {}", w.key, st.ToString());
            w.start_error = st.ToString();
            wait = backoff;
            backoff = std::min(backoff * 2, std::chrono::milliseconds(10'000));
          }
        }
      } else if (may_act()) {
        (void)w.loop->Tick();
        // A change the status should show (epoch, plan, pods) reconciles the topic now rather
        // than at the next resync.
        const auto seen = w.loop->last_observed();
        const std::string now = std::to_string(w.loop->map().epoch().value()) + "/" +
                                (w.loop->plan_in_progress() ? "plan" : "-") + "/" +
                                std::to_string(seen.ready_pods) + "/" +
                                std::to_string(w.platform->DesiredPods());
        if (now != shown) {
          shown = now;
          Enqueue(w.key);
        }
      }
    } catch (const std::exception& e) {
      // Never the whole operator for one topic: reported, retried at the next turn.
      Logger("operator")->error("{}: control loop: {}", w.key, e.what());
      MutexLock lock(w.mu);
      w.start_error = std::string("control loop: ") + e.what();
    }
    MutexLock lock(w.mu);
    w.cv.wait_for(lock, wait, [&w] { return w.stop.load(); });
  }
}

Status TopicOperator::WriteStatus(const Json& topic, const std::function<void(value&)>& fill) {
  auto r = client_.UpdateWithRetry(
      kubeapi::PartitionedTopics(), kubeapi::Namespace(topic), kubeapi::Name(topic),
      [&](Json& obj) {
        const std::string before = kubeapi::At(obj, "status").serialize();
        if (!obj.has_object_field("status")) obj["status"] = value::object();
        fill(obj["status"]);
        return obj.at("status").serialize() != before;
      },
      "status");
  if (!r.ok() && !r.error().IsNotFound()) return r.error().ToStatus().Annotate("writing status");
  return Status::Ok();
}

ReconcileResult TopicOperator::Cleanup(const Json& topic) {
  const std::string ns = kubeapi::Namespace(topic), name = kubeapi::Name(topic);
  StopWorker(Key(ns, name));
  if (!HasFinalizer(topic)) return ReconcileResult::Done();
  // Owned objects would also go by garbage collection; deleting them here makes the topic's
  // deletion wait until its pods are asked to stop and its token is gone.
  const std::pair<const kubeapi::ResourceKind*, std::string> owned[] = {
      {&kubeapi::StatefulSets(), name},
      {&kubeapi::Services(), name},
      {&kubeapi::PodDisruptionBudgets(), name},
      {&kubeapi::Secrets(), AdminSecretName(name)}};
  // Only the uid matters here: a topic whose spec is invalid is cleaned up all the same.
  TopicObject self;
  self.ns = ns;
  self.name = name;
  const Json uid = kubeapi::At(topic, "metadata.uid");
  self.uid = uid.is_string() ? uid.as_string() : "";
  for (const auto& [kind, object] : owned) {
    std::optional<Json> live;
    if (kind == &kubeapi::StatefulSets()) {
      live = CachedStatefulSet(ns, object);  // watched already: no get needed
    } else {
      auto got = client_.Get(*kind, ns, object);
      if (!got.ok() && !got.error().IsNotFound()) {
        return ReconcileResult::Retry(
            RetryReason::kCleanup,
            "reading " + kind->kind + " " + object + ": " + got.error().ToString());
      }
      if (got.ok()) live = std::move(got).value();
    }
    if (!live) continue;
    if (self.uid.empty() || !OwnedBy(*live, self)) {
      Logger("operator")
          ->warn("{}/{}: left {} {} in place: it is not the topic's", ns, name, kind->kind, object);
      continue;
    }
    auto r = client_.Delete(*kind, ns, object);
    if (!r.ok() && !r.error().IsNotFound()) {
      return ReconcileResult::Retry(RetryReason::kCleanup, "deleting " + kind->kind + " " + object +
                                                               ": " + r.error().ToString());
    }
  }
  events_.Event(topic, "Normal", "Deleted", "Delete",
                "deleted the topic's StatefulSet, Service, PodDisruptionBudget and Secret (those "
                "that were the topic's)");
  value rest = value::array();
  const Json f = kubeapi::At(topic, "metadata.finalizers");
  for (const auto& v : f.as_array()) {
    if (!(v.is_string() && v.as_string() == kFinalizer)) rest[rest.size()] = v;
  }
  value patch = value::object();
  patch["metadata"]["finalizers"] = rest;
  patch["metadata"]["resourceVersion"] = value::string(kubeapi::ResourceVersion(topic));
  auto r = client_.MergePatch(kubeapi::PartitionedTopics(), ns, name, patch);
  if (!r.ok() && !r.error().IsNotFound()) {
    return ReconcileResult::Retry(RetryReason::kFinalizer,
                                  "removing the finalizer: " + r.error().ToString());
  }
  Logger("operator")->info("{}/{}: cleaned up", ns, name);
  return ReconcileResult::Done();
}

void TopicOperator::StopWorker(const std::string& key) {
  std::shared_ptr<Worker> w;
  {
    MutexLock lock(mu_);
    auto it = workers_.find(key);
    if (it == workers_.end()) return;
    w = std::move(it->second);
    workers_.erase(it);
    topics_gauge_->Set(static_cast<double>(workers_.size()));
  }
  w->stop.store(true);
  w->cv.notify_all();
  if (w->thread.joinable()) w->thread.join();
  if (w->console) w->console->Stop();
}

control::GetAnswer TopicOperator::ServeConsole(const control::GetRequest& request) {
  if (request.path == "/") {
    // The topics, each a link to its console.
    std::vector<std::string> keys;
    {
      MutexLock lock(mu_);
      for (const auto& [k, w] : workers_) {
        if (w->console) keys.push_back(k);
      }
    }
    std::string html =
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Shoal "
        "topics</title></head><body><h1>Topics this operator runs</h1><ul>";
    for (const auto& k : keys) {
      std::string escaped;
      for (char c : k) {  // namespaces and names are DNS labels; escaped all the same
        if (c == '<')
          escaped += "&lt;";
        else if (c == '>')
          escaped += "&gt;";
        else if (c == '&')
          escaped += "&amp;";
        else if (c == '"')
          escaped += "&quot;";
        else
          escaped += c;
      }
      html += "<li><a href=\"t/" + escaped + "/\">" + escaped + "</a></li>";
    }
    if (keys.empty()) html += "<li>none yet (this operator may not be the leader)</li>";
    html +=
        "</ul><p>A topic's console asks for its admin token: open it as "
        "<code>t/&lt;namespace&gt;/&lt;name&gt;/#token=&lt;token&gt;</code> with the token of "
        "Secret <code>&lt;name&gt;-admin</code>.</p></body></html>";
    return {200, html, "text/html; charset=utf-8"};
  }
  // /t/<ns>/<name>/<rest>
  if (request.path.rfind("/t/", 0) != 0) {
    return control::GetAnswer::Error(Status::NotFound(
        "the operator's console port serves / (the topics) and /t/<namespace>/<name>/"));
  }
  const size_t ns_end = request.path.find('/', 3);
  const size_t name_end =
      ns_end == std::string::npos ? std::string::npos : request.path.find('/', ns_end + 1);
  if (name_end == std::string::npos) {
    return control::GetAnswer::Error(
        Status::NotFound("a topic's console is /t/<namespace>/<name>/ (with the last slash)"));
  }
  const std::string key = request.path.substr(3, name_end - 3);
  std::shared_ptr<Worker> w;
  {
    MutexLock lock(mu_);
    if (auto it = workers_.find(key); it != workers_.end()) w = it->second;
  }
  if (!w || !w->console) {
    return control::GetAnswer::Error(
        Status::NotFound("this operator runs no topic " + key + " (or is not the leader)"));
  }
  control::GetRequest inner = request;
  inner.path = request.path.substr(name_end);
  return console::ServeConsole(*w->console, w->token, inner);
}

void TopicOperator::StopAllWorkers() {
  std::vector<std::string> keys;
  {
    MutexLock lock(mu_);
    for (const auto& [k, w] : workers_) keys.push_back(k);
  }
  for (const auto& k : keys) StopWorker(k);
}

std::string TopicOperator::MetricsText() const {
  std::vector<std::shared_ptr<prometheus::Collectable>> all = {registry_};
  MutexLock lock(mu_);
  for (const auto& [k, w] : workers_) {
    // Topics of one name in two namespaces would give identical series: each loop's series
    // also carry the topic's namespace, under the label name the sidecars' series have it
    // (Prometheus' target label; the ServiceMonitor honours the operator's own).
    auto registry = w->loop->registry();
    const std::string ns = SplitKey(k).first;
    all.push_back(std::make_shared<metrics::CallbackCollectable>([registry, ns] {
      auto families = registry->Collect();
      for (auto& f : families) {
        for (auto& m : f.metric) m.label.push_back({"namespace", ns});
      }
      return families;
    }));
  }
  return metrics::Serialize(all);
}

}  // namespace shoal::reconciler
