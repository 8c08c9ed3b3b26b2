// What the operator makes of a PartitionedTopic: the objects it owns, as pure functions of the
// topic object and the operator's settings (docs/kubernetes.md "What the operator creates"):
//   - StatefulSet <topic>: the user's consumer pod template plus the injected shoal-sidecar
//     container (its data on a volume claim, the admin token from the Secret, probes, a preStop
//     that waits until the operator drained the pod), pods labelled for the headless Service;
//   - Service <topic>: headless, the pods' stable DNS names and ports;
//   - Secret <topic>-admin: the bearer token of the sidecars' admin planes.
// Every object carries the recommended labels and a controller ownerReference to the topic.
// The sidecar listens on all of the pod's addresses: the app containers read from localhost
// (docs/design.md), as $(SHOAL_URL) says, which the operator injects into every app container; the
// operator and the other sidecars reach it at the pod's IP.
// Pure and thread-safe.
#pragma once

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/json.h>

#include <cstdint>
#include <map>
#include <string>

#include "shoal/common/status.h"
#include "shoal/common/topic_spec.h"

namespace shoal::reconciler {

using Json = web::json::value;

// Ports every sidecar uses on its pod's address.
inline constexpr uint16_t kDataPort = 8080;
inline constexpr uint16_t kAdminPort = 8081;
inline constexpr uint16_t kMetricsPort = 9090;
// With TLS on, the plain data port of the pod's own containers, on the pod's loopback.
inline constexpr uint16_t kLocalPort = 8082;
inline constexpr const char* kSidecarContainer = "shoal-sidecar";
// The sidecar's uid and gid (the image's USER, distroless "nonroot"), also the pods' default
// fsGroup so that the sidecar can write its data volume.
inline constexpr int64_t kSidecarUid = 65532;
inline constexpr const char* kFinalizer = "shoal.dev/cleanup";
inline constexpr const char* kTopicLabel = "shoal.dev/topic";
// The well-known label of a node's zone (copies of a partition go to distinct zones first).
inline constexpr const char* kZoneLabel = "topology.kubernetes.io/zone";

// The operator's settings that shape the objects.
struct ManifestOptions {
  std::string data_volume_size = "1Gi";
  std::string storage_class;  // empty: the cluster's default
  // Seconds the pod gets to stop; the preStop drain wait takes all but 5 of them. Used when
  // the user's template sets none.
  int64_t termination_grace_seconds = 60;
  std::string log_level = "info";
  // The sidecar's image when the topic's spec.sidecar.image is empty: the operator's own.
  std::string sidecar_image = "shoal:latest";
  // Secrets every topic pod pulls its images with (added to the template's imagePullSecrets).
  std::vector<std::string> image_pull_secrets;
  // TLS for topics whose spec.security.tls is unset (shoal-operator --tls-default).
  bool tls_default = false;
};

// A PartitionedTopic as read from the API: its identity and its parsed spec; `consumer_template`
// is spec.consumer.template exactly as stored (JSON).
struct TopicObject {
  std::string name, ns, uid;
  int64_t generation = 0;
  bool paused = false;  // metadata.annotations["shoal.dev/paused"] == "true" (topic_status.h)
  TopicSpec spec;
  Json consumer_template;
  Json spec_json;  // spec as stored: what the StatefulSet records as applied
};

// Reads a PartitionedTopic object (JSON from the API) into a TopicObject: the spec through
// ParseTopic (the same rules as `shoal up`) and the pod template checked by
// ValidatePodTemplate. InvalidArgument with a message naming the field and the fix.
Result<TopicObject> ReadTopic(const Json& object);

// A consumer pod template must be an object whose spec has a non-empty list of containers,
// each with a DNS-label name (unique, not "shoal-sidecar") and an image; volumes must not use
// the names the operator adds.
// `topic`: its name (the admin token's Secret is named after it).
Status ValidatePodTemplate(const Json& pod_template, const std::string& topic);

// Labels of everything a topic owns; the selector labels are the subset that picks its pods.
Json Labels(const std::string& topic);
Json SelectorLabels(const std::string& topic);
// "app.kubernetes.io/instance=T,shoal.dev/topic=T" (status.selector, pod lists).
std::string SelectorString(const std::string& topic);
std::string AdminSecretName(const std::string& topic);

Json OwnerReference(const TopicObject& topic);
// Whether `object` is the topic's: its ownerReferences name the topic (by uid) as controller. The
// operator updates, scales and deletes only such objects; one of the same name that is not the
// topic's (a user's, another controller's) is left alone.
bool OwnedBy(const Json& object, const TopicObject& topic);
// What the topic's status says of such an object: which it is and what to do.
std::string NotOwnedMessage(const std::string& kind, const std::string& name,
                            const TopicObject& topic);
Json BuildStatefulSet(const TopicObject& topic, const ManifestOptions& options, int64_t replicas);
Json BuildService(const TopicObject& topic);
// At most one of the topic's pods voluntarily disrupted at a time (a node drain, an eviction):
// each pod holds partitions, and its drain waits for the operator to move them.
Json BuildPodDisruptionBudget(const TopicObject& topic);
Json BuildSecret(const TopicObject& topic, const std::string& admin_token);
// Whether the topic's pods speak TLS only (spec.security.tls; unset, on when the topic lists
// principals or the operator's default says so).
bool TlsOn(const TopicObject& topic, const ManifestOptions& options);
// Whether a topic's StatefulSet runs its sidecars TLS only.
bool RunsTls(const Json& statefulset);
// A running topic keeps what it runs where its spec does not say: spec.security.tls unset and
// no principals take the running StatefulSet's TLS (an operator upgraded to a TLS default does
// not roll a plain topic into pods that cannot call each other while it rolls).
void KeepWhatRuns(TopicObject& topic, const Json& statefulset);
// The Secret of the topic's CA (<topic>-ca: ca.crt, ca.key), the operator's alone: no pod mounts
// it. And the Secret of a principal's client certificate (<topic>-client-<name>: ca.crt,
// tls.crt, tls.key), for the user to hand to that caller.
std::string CaSecretName(const std::string& topic);
std::string ClientSecretName(const std::string& topic, const std::string& principal);
// A Secret the topic owns, named `name`, with `data` (key -> bytes, base64-encoded here).
Json BuildOwnedSecret(const TopicObject& topic, const std::string& name,
                      const std::map<std::string, std::string>& data);
// The sidecars' access file (sidecar --access-file) for the topic's principals.
std::string AccessFileJson(const TopicSpec& spec);

// A stable hash of what BuildStatefulSet puts in spec.template and of the applied spec (the
// claim templates cannot change): the reconciler updates the StatefulSet only when it changes
// (annotation shoal.dev/template-hash); a spec change that leaves the pods alone changes only
// the StatefulSet's annotations, which restarts nothing.
std::string TemplateHash(const Json& statefulset);
inline constexpr const char* kTemplateHashAnnotation = "shoal.dev/template-hash";
// The topic spec the StatefulSet was last made from (JSON). When the topic's spec becomes
// invalid, an operator that starts (or takes over) runs the topic's loop on this one, so a plan
// in progress is finished instead of waiting for the user's fix.
inline constexpr const char* kAppliedSpecAnnotation = "shoal.dev/applied-spec";
// The topic as last applied: `topic`'s identity with the spec of `statefulset`'s annotation.
Result<TopicObject> AppliedTopic(const Json& topic, const Json& statefulset);

// Converts YAML text (a pod template in a YAML topic file) to JSON: quoted scalars stay
// strings, plain ones become numbers, booleans or null where they read as such.
Result<Json> YamlToJson(const std::string& yaml);

}  // namespace shoal::reconciler
