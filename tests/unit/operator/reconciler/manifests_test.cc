// The objects the operator makes of a PartitionedTopic (reconciler/src/manifests.cc): the
// StatefulSet with the injected sidecar, the headless Service, the Secret; what ReadTopic
// refuses and how it says so; YAML pod templates as JSON; the template hash.
#include "shoal/reconciler/manifests.h"

#include <gtest/gtest.h>

#include <cpprest/asyncrt_utils.h>

#include "support/fake_kube/pod_security.h"

namespace shoal::reconciler {
namespace {

using web::json::value;

value Topic(const std::string& containers = R"([{"name":"app","image":"example/app:1",
    "env":[{"name":"SHOAL_TOPIC","value":"mine"}]}])") {
  return value::parse(R"({"apiVersion":"shoal.dev/v1alpha1","kind":"PartitionedTopic",
    "metadata":{"name":"orders","namespace":"shop","uid":"u-1","generation":3,
                "resourceVersion":"17","finalizers":["shoal.dev/cleanup"]},
    "spec":{"partitions":{"min":2,"max":32,"initial":4},"durability":{"fsync":"always"},
            "retention":{"bytes":1000000,"ms":60000},
            "consumer":{"template":{"metadata":{"labels":{"team":"a"}},
                                    "spec":{"containers":)" + containers + R"(}}},
            "sidecar":{"image":"shoal:1.2","resources":{"requests":{"cpu":"100m"}}}},
    "status":{"observedGeneration":2}})");
}

value EnvOf(const value& container, const std::string& name) {
  for (const auto& e : container.at("env").as_array()) {
    if (e.at("name").as_string() == name) return e;
  }
  return value::null();
}

TEST(ReadTopicTest, ReadsIdentitySpecAndTemplate) {
  auto t = ReadTopic(Topic());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->name, "orders");
  EXPECT_EQ(t->ns, "shop");
  EXPECT_EQ(t->uid, "u-1");
  EXPECT_EQ(t->generation, 3);
  EXPECT_EQ(t->spec.partitions.initial, 4u);
  EXPECT_EQ(t->spec.fsync, "always");
  EXPECT_EQ(t->consumer_template.at("spec").at("containers").size(), 1u);
}

TEST(ReadTopicTest, RefusesWhatTheSchemaCannotSeeWithTheFieldAndTheFix) {
  struct Case {
    std::string containers, expect;
  };
  const Case cases[] = {
      {R"([{"name":"shoal-sidecar","image":"x"}])",
       "containers[0].name: \"shoal-sidecar\" is the container the operator adds"},
      {R"([{"name":"app","image":"x"},{"name":"app","image":"y"}])",
       "containers[1].name: \"app\" is used twice"},
      {R"([{"name":"App_1","image":"x"}])", "containers[0].name: a container needs a name"},
      {R"([{"name":"app"}])", "containers[0].image: container \"app\" needs an image"},
      {R"([])", "needs at least one container"},
      {R"("app")", "needs at least one container"},
      // The admin token is the sidecars' alone.
      {R"([{"name":"app","image":"x","volumeMounts":[{"name":"shoal-admin-token","mountPath":"/t"}]}])",
       "containers[0].volumeMounts: \"shoal-admin-token\" is the sidecar's volume"},
      {R"([{"name":"app","image":"x","env":[{"name":"T","valueFrom":{"secretKeyRef":{"name":"orders-admin","key":"token"}}}]}])",
       "containers[0].env: Secret orders-admin is the sidecars' admin token"},
      {R"([{"name":"app","image":"x","envFrom":[{"secretRef":{"name":"orders-admin"}}]}])",
       "containers[0].envFrom: Secret orders-admin"},
  };
  for (const auto& c : cases) {
    auto t = ReadTopic(Topic(c.containers));
    ASSERT_FALSE(t.ok()) << c.containers;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
  value bad = Topic();
  bad["spec"]["partitions"]["min"] = value::number(40);
  auto t = ReadTopic(bad);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("spec.partitions"), std::string::npos);
  value secret_volume = Topic();
  secret_volume["spec"]["consumer"]["template"]["spec"]["volumes"] = value::parse(
      R"([{"name":"mine","projected":{"sources":[{"secret":{"name":"orders-admin"}}]}}])");
  auto v = ReadTopic(secret_volume);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find(".spec.volumes: Secret orders-admin"), std::string::npos)
      << v.status().message();
  value no_template = Topic();
  no_template["spec"].as_object().erase("consumer");
  EXPECT_FALSE(ReadTopic(no_template).ok());
}

TEST(ManifestsTest, StatefulSetInjectsTheSidecarAndKeepsTheUsersPod) {
  auto t = ReadTopic(Topic());
  ASSERT_TRUE(t.ok());
  const value sts = BuildStatefulSet(*t, ManifestOptions{}, 3);
  EXPECT_EQ(sts.at("metadata").at("name").as_string(), "orders");
  EXPECT_EQ(sts.at("metadata").at("namespace").as_string(), "shop");
  const value owner = sts.at("metadata").at("ownerReferences").at(0);
  EXPECT_EQ(owner.at("uid").as_string(), "u-1");
  EXPECT_TRUE(owner.at("controller").as_bool());
  EXPECT_TRUE(owner.at("blockOwnerDeletion").as_bool());
  const value& spec = sts.at("spec");
  EXPECT_EQ(spec.at("replicas").as_integer(), 3);
  EXPECT_EQ(spec.at("serviceName").as_string(), "orders");
  EXPECT_EQ(spec.at("podManagementPolicy").as_string(), "Parallel");
  // The selector picks exactly the labels the pods get.
  const value& pod_labels = spec.at("template").at("metadata").at("labels");
  for (const auto& kv : spec.at("selector").at("matchLabels").as_object()) {
    EXPECT_EQ(pod_labels.at(kv.first), kv.second) << kv.first;
  }
  EXPECT_EQ(pod_labels.at("team").as_string(), "a");
  const value& containers = spec.at("template").at("spec").at("containers");
  ASSERT_EQ(containers.size(), 2u);
  const value& app = containers.at(0);
  EXPECT_EQ(EnvOf(app, "SHOAL_TOPIC").at("value").as_string(), "mine") << "the user's value stays";
  // The app reads from localhost (docs/design.md): the sidecar listens on all the pod's addresses.
  EXPECT_EQ(EnvOf(app, "SHOAL_URL").at("value").as_string(), "http://localhost:8080");
  const value& side = containers.at(1);
  EXPECT_EQ(side.at("name").as_string(), "shoal-sidecar");
  EXPECT_EQ(side.at("image").as_string(), "shoal:1.2");
  EXPECT_EQ(side.at("resources").at("requests").at("cpu").as_string(), "100m");
  const std::string args = side.at("args").serialize();
  for (const char* want : {"\"--fsync\",\"always\"", "\"--retention-bytes\",\"1000000\"",
                           "\"--bind\",\"0.0.0.0\"", "\"--pod-name\",\"$(POD_NAME)\"",
                           "\"--wait-for-map\"", "\"--admin-token-file\",\"/etc/shoal/admin/token\""}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " in " << args;
  }
  EXPECT_EQ(side.at("readinessProbe").at("httpGet").at("path").as_string(), "/readyz");
  EXPECT_EQ(side.at("lifecycle").at("preStop").at("exec").at("command").at(1).as_string(),
            "wait-drained");
  const value& volumes = spec.at("template").at("spec").at("volumes");
  EXPECT_EQ(volumes.at(0).at("secret").at("secretName").as_string(), "orders-admin");
  EXPECT_EQ(spec.at("volumeClaimTemplates").at(0).at("metadata").at("name").as_string(),
            "shoal-data");
  EXPECT_EQ(spec.at("persistentVolumeClaimRetentionPolicy").at("whenScaled").as_string(),
            "Delete");
  // The pods are spread over zones, then nodes, softly, so that copies can be (PlaceReplicas).
  const value& spread = spec.at("template").at("spec").at("topologySpreadConstraints");
  ASSERT_EQ(spread.size(), 2u);
  EXPECT_EQ(spread.at(0).at("topologyKey").as_string(), "topology.kubernetes.io/zone");
  EXPECT_EQ(spread.at(1).at("topologyKey").as_string(), "kubernetes.io/hostname");
  EXPECT_EQ(spread.at(0).at("whenUnsatisfiable").as_string(), "ScheduleAnyway");
  EXPECT_EQ(spread.at(0).at("labelSelector").at("matchLabels"), spec.at("selector").at("matchLabels"));
  // A template that says how to spread keeps its own.
  value own = Topic();
  own["spec"]["consumer"]["template"]["spec"]["topologySpreadConstraints"] = value::array();
  auto mine = ReadTopic(own);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(BuildStatefulSet(*mine, ManifestOptions{}, 3)
                .at("spec").at("template").at("spec").at("topologySpreadConstraints").size(),
            0u);
}

// A topic that names no sidecar image gets the operator's own (--sidecar-image); one that names
// one keeps it. The operator's pull secrets reach every topic pod, after the template's own.
TEST(ManifestsTest, SidecarImageDefaultsToTheOperatorsAndPullSecretsReachThePods) {
  value without = Topic();
  without["spec"]["sidecar"].erase("image");
  without["spec"]["consumer"]["template"]["spec"]["imagePullSecrets"] =
      value::parse(R"([{"name":"team-registry"},{"name":"shared"}])");
  auto t = ReadTopic(without);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->spec.sidecar_image, "");
  ManifestOptions o;
  o.sidecar_image = "registry.example.com/shoal:0.3.1";
  o.image_pull_secrets = {"shared", "release-registry"};
  const value pod = BuildStatefulSet(*t, o, 1).at("spec").at("template").at("spec");
  const value& containers = pod.at("containers");
  EXPECT_EQ(containers.at(containers.size() - 1).at("image").as_string(),
            "registry.example.com/shoal:0.3.1");
  EXPECT_EQ(pod.at("imagePullSecrets").serialize(),
            R"([{"name":"team-registry"},{"name":"shared"},{"name":"release-registry"}])");

  auto named = ReadTopic(Topic());
  ASSERT_TRUE(named.ok());
  const value named_pod = BuildStatefulSet(*named, o, 1).at("spec").at("template").at("spec");
  const value& named_containers = named_pod.at("containers");
  EXPECT_EQ(named_containers.at(named_containers.size() - 1).at("image").as_string(), "shoal:1.2");
}

// spec.storage sets the claim's size and class; without it the operator's flags do.
TEST(ManifestsTest, TheTopicsStorageSizesItsClaimsElseTheOperatorsFlags) {
  ManifestOptions o;
  o.data_volume_size = "5Gi";
  o.storage_class = "standard";
  auto plain = ReadTopic(Topic());
  ASSERT_TRUE(plain.ok());
  const value claim = BuildStatefulSet(*plain, o, 1).at("spec").at("volumeClaimTemplates").at(0);
  EXPECT_EQ(claim.at("spec").at("resources").at("requests").at("storage").as_string(), "5Gi");
  EXPECT_EQ(claim.at("spec").at("storageClassName").as_string(), "standard");
  value sized = Topic();
  sized["spec"]["storage"] =
      value::parse(R"({"size":"50Gi","storageClassName":"fast-ssd","reserve":"1Gi"})");
  auto t = ReadTopic(sized);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const value set = BuildStatefulSet(*t, o, 1);
  const value own = set.at("spec").at("volumeClaimTemplates").at(0);
  EXPECT_EQ(own.at("spec").at("resources").at("requests").at("storage").as_string(), "50Gi");
  EXPECT_EQ(own.at("spec").at("storageClassName").as_string(), "fast-ssd");
  // The disk reserve goes to the sidecar in bytes; without it the sidecar's default holds.
  const std::string args =
      set.at("spec").at("template").at("spec").at("containers").at(1).at("args").serialize();
  EXPECT_NE(args.find("\"--disk-reserve-bytes\",\"1073741824\""), std::string::npos) << args;
  const std::string plain_args = BuildStatefulSet(*plain, o, 1)
                                     .at("spec").at("template").at("spec").at("containers").at(1)
                                     .at("args").serialize();
  EXPECT_EQ(plain_args.find("--disk-reserve-bytes"), std::string::npos) << plain_args;
}

// One pod at a time may go by a voluntary disruption (a node drain): the budget selects exactly
// the StatefulSet's pods.
TEST(ManifestsTest, PodDisruptionBudgetLetsOnePodOfTheTopicGoAtATime) {
  auto t = ReadTopic(Topic());
  ASSERT_TRUE(t.ok());
  const value pdb = BuildPodDisruptionBudget(*t);
  EXPECT_EQ(pdb.at("apiVersion").as_string(), "policy/v1");
  EXPECT_EQ(pdb.at("metadata").at("name").as_string(), "orders");
  EXPECT_EQ(pdb.at("metadata").at("namespace").as_string(), "shop");
  EXPECT_EQ(pdb.at("metadata").at("ownerReferences").at(0).at("uid").as_string(), "u-1");
  EXPECT_EQ(pdb.at("spec").at("maxUnavailable").as_integer(), 1);
  const value sts = BuildStatefulSet(*t, ManifestOptions{}, 2);
  EXPECT_EQ(pdb.at("spec").at("selector").serialize(), sts.at("spec").at("selector").serialize());
}

TEST(ManifestsTest, ServiceIsHeadlessAndSecretHoldsTheTokenInBase64) {
  auto t = ReadTopic(Topic());
  ASSERT_TRUE(t.ok());
  const value svc = BuildService(*t);
  EXPECT_EQ(svc.at("spec").at("clusterIP").as_string(), "None");
  EXPECT_EQ(svc.at("spec").at("ports").size(), 3u);
  EXPECT_EQ(svc.at("spec").at("selector"), SelectorLabels("orders"));
  const value secret = BuildSecret(*t, "s3cret");
  EXPECT_EQ(secret.at("metadata").at("name").as_string(), "orders-admin");
  const auto bytes = utility::conversions::from_base64(secret.at("data").at("token").as_string());
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "s3cret");
}

TEST(ManifestsTest, TemplateHashFollowsTheTemplateNotTheReplicas) {
  auto t = ReadTopic(Topic());
  ASSERT_TRUE(t.ok());
  const std::string a = TemplateHash(BuildStatefulSet(*t, {}, 1));
  EXPECT_EQ(a, TemplateHash(BuildStatefulSet(*t, {}, 5)));
  t->spec.fsync = "never";
  EXPECT_NE(a, TemplateHash(BuildStatefulSet(*t, {}, 1)));
}

TEST(ManifestsTest, TheStatefulSetRecordsTheAppliedSpecForAResume) {
  auto t = ReadTopic(Topic());
  ASSERT_TRUE(t.ok());
  const value sts = BuildStatefulSet(*t, {}, 2);
  // A later, invalid version of the topic: its identity with the recorded spec.
  value now = Topic(R"([])");
  now["metadata"]["generation"] = value::number(9);
  auto applied = AppliedTopic(now, sts);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(applied->generation, 9);
  EXPECT_EQ(applied->spec.fsync, "always");
  EXPECT_EQ(applied->consumer_template.at("spec").at("containers").size(), 1u);
  EXPECT_EQ(AppliedTopic(now, value::object()).status().code(), Status::Code::kNotFound);
  // A change that leaves the pods alone still changes the hash (the annotation is rewritten,
  // the pods are not restarted).
  t->spec_json["scaling"]["targetConsumerLag"] = value::number(1);
  EXPECT_NE(TemplateHash(sts), TemplateHash(BuildStatefulSet(*t, {}, 2)));
}

TEST(YamlToJsonTest, KeepsQuotedStringsAndTypesPlainScalars) {
  auto j = YamlToJson("a: 1\nb: '1'\nc: true\nd: [x, 2.5]\ne: ~\nf: \"yes\"\n");
  ASSERT_TRUE(j.ok());
  EXPECT_TRUE(j->at("a").is_integer());
  EXPECT_EQ(j->at("b").as_string(), "1");
  EXPECT_TRUE(j->at("c").as_bool());
  EXPECT_EQ(j->at("d").at(0).as_string(), "x");
  EXPECT_DOUBLE_EQ(j->at("d").at(1).as_double(), 2.5);
  EXPECT_TRUE(j->at("e").is_null());
  EXPECT_EQ(j->at("f").as_string(), "yes");
  EXPECT_FALSE(YamlToJson("a: [").ok());
}

TEST(ManifestsTest, TopicPodsMeetPodSecurityRestrictedWhenTheAppContainerDoes) {
  // The user's container as the quickstart writes it; everything else is the operator's.
  auto t = ReadTopic(Topic(R"([{"name":"app","image":"example/app:1","securityContext":{
      "allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},
      "runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}}}])"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const value sts = BuildStatefulSet(*t, ManifestOptions{}, 1);
  const value& pod = sts.at("spec").at("template");
  EXPECT_EQ(testing::PodSecurityViolations(pod, "restricted"), std::vector<std::string>{});
  // A fresh volume is writable by the non-root sidecar: its gid owns it.
  const value& psc = pod.at("spec").at("securityContext");
  EXPECT_EQ(psc.at("fsGroup").as_integer(), kSidecarUid);
  EXPECT_TRUE(psc.at("runAsNonRoot").as_bool());
  EXPECT_EQ(psc.at("seccompProfile").at("type").as_string(), "RuntimeDefault");

  // The user's own pod-level choices stay.
  auto mine = ReadTopic(value::parse(Topic().serialize()));
  ASSERT_TRUE(mine.ok());
  mine->consumer_template["spec"]["securityContext"]["fsGroup"] = value::number(1000);
  const value kept = BuildStatefulSet(*mine, ManifestOptions{}, 1);
  EXPECT_EQ(kept.at("spec").at("template").at("spec").at("securityContext").at("fsGroup").as_integer(),
            1000);
  // A user container that keeps its capabilities is the one the admission names.
  const auto v = testing::PodSecurityViolations(kept.at("spec").at("template"), "restricted");
  ASSERT_FALSE(v.empty());
  for (const auto& reason : v) EXPECT_NE(reason.find("\"app\""), std::string::npos) << reason;
}

// With TLS on (the operator's default here, or the spec's), the sidecar gets the pods'
// certificate, the topic's CA and the access file from the admin Secret it alone mounts, a plain
// port on the pod's loopback that the app containers are given, and its preStop hook the
// certificate too; the access file lists the principals' grants; a StatefulSet tells whether it
// runs TLS (a running topic keeps what it runs when the spec does not say).
TEST(ManifestsTest, WithTlsTheSidecarIsGivenTheTopicsCertificatesAndTheAppsTheLocalPort) {
  auto t = ReadTopic(Topic());
  ASSERT_TRUE(t.ok());
  ManifestOptions tls;
  tls.tls_default = true;
  const value plain_sts = BuildStatefulSet(*t, ManifestOptions{}, 2);
  const value tls_sts = BuildStatefulSet(*t, tls, 2);
  EXPECT_FALSE(RunsTls(plain_sts));
  EXPECT_TRUE(RunsTls(tls_sts));
  const value& containers = tls_sts.at("spec").at("template").at("spec").at("containers");
  EXPECT_EQ(EnvOf(containers.at(0), "SHOAL_URL").at("value").as_string(), "http://localhost:8082");
  const value& side = containers.at(1);
  const std::string args = side.at("args").serialize();
  for (const char* want :
       {"\"--tls-cert\",\"/etc/shoal/admin/tls.crt\"", "\"--tls-key\",\"/etc/shoal/admin/tls.key\"",
        "\"--tls-client-ca\",\"/etc/shoal/admin/ca.crt\"",
        "\"--access-file\",\"/etc/shoal/admin/access.json\"", "\"--local-port\",\"8082\"",
        "\"--local-bind\",\"127.0.0.1\""}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " in " << args;
  }
  const std::string hook = side.at("lifecycle").at("preStop").at("exec").at("command").serialize();
  EXPECT_NE(hook.find("\"--tls-dir\",\"/etc/shoal/admin\",\"--topic\",\"orders\""),
            std::string::npos)
      << hook;
  // The spec says otherwise: off.
  t->spec.security.tls = false;
  EXPECT_FALSE(RunsTls(BuildStatefulSet(*t, tls, 2)));
  // Principals ask for TLS, and are what the access file grants.
  t->spec.security.tls.reset();
  t->spec.security.principals = {{"loadgen", true, {}}, {"billing", false, {"billing", "audit-*"}}};
  EXPECT_TRUE(RunsTls(BuildStatefulSet(*t, ManifestOptions{}, 2)));
  EXPECT_EQ(AccessFileJson(t->spec),
            R"({"principals":{"billing":{"groups":["billing","audit-*"],"produce":false},)"
            R"("loadgen":{"groups":[],"produce":true}}})");
}

}  // namespace
}  // namespace shoal::reconciler
