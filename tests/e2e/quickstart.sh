#!/usr/bin/env bash
# The README's Kubernetes quickstart, command for command, with the real Helm 4 and kubectl 1.35
# (scripts/install-kube-clients.sh) against the test cluster run in-cluster
# (build/tests/shoal-test-cluster --in-cluster: the fake API server over TLS, the test kubelet
# running the built binaries as pods with ServiceAccount tokens, prometheus-operator's CRDs
# loaded). The operator itself runs from the chart's Deployment, authorized only by the RBAC the
# chart created:
#
#   1. the release namespace with Pod Security "restricted"; helm install (default values) --wait;
#      kubectl rollout status; helm test
#   2. a pod that keeps its capabilities is refused by the same admission
#   3. kubectl apply -f examples/quickstart.yaml, get ptopic (printer columns), describe ptopic,
#      keyed load through a topic pod over TLS (the chart's default) with the certificate of the
#      topic's principal loadgen, a plain request to a pod refused, kubectl scale ptopic, the verifier's zeros, kubectl patch
#      ptopic with a new pod template under load (the StatefulSet updates OnDelete: the operator
#      rolls the pods, each emptied first) and the verifier again, kubectl delete ptopic (the
#      finalizer removes what the topic owned)
#   4. helm upgrade with helm/shoal/ci/namespaced-monitoring-values.yaml (watchNamespaces
#      team-a and team-b: Roles instead of the ClusterRole; ServiceMonitor, PodMonitor,
#      PrometheusRule, NetworkPolicies): the new operator pods run a topic in team-a, which a
#      user bound to the default "view" role reads but cannot scale, and one bound to "edit"
#      scales and deletes (the chart's aggregated ClusterRoles; tokens by kubectl create token)
#   5. helm uninstall --wait: the operator and its objects are gone
#
#   tests/e2e/quickstart.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build="$(realpath "${1:-build}")"
tools="$PWD/.tools/bin"
for t in helm kubectl; do
  [[ -x "$tools/$t" ]] || { echo "quickstart.sh: $tools/$t not found; run scripts/install-deps.sh --kube" >&2; exit 2; }
done
for b in "$build/tests/shoal-test-cluster" "$build/cli/shoal"; do
  [[ -x "$b" ]] || { echo "quickstart.sh: $b not built" >&2; exit 2; }
done
wget_bin="$(command -v wget)" || { echo "quickstart.sh: wget (the chart's test image) is not installed" >&2; exit 2; }
python_bin="$(command -v python3)" || { echo "quickstart.sh: python3 (the quickstart's consumer) is not installed" >&2; exit 2; }
shoal="$build/cli/shoal"
work="$(mktemp -d)"
export KUBECONFIG="$work/kubeconfig"
# Helm's own state (repositories, cache) stays in the work directory.
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" HELM_DATA_HOME="$work/helm/data"
cluster_pid=""
cleanup() {
  local rc=$?
  if ((rc != 0)); then
    echo "quickstart.sh: FAILED; the cluster's state:" >&2
    "$tools/kubectl" get ptopic,deployments,statefulsets,pods -A >&2 || true
    for log in "$work"/node/pods/shoal-system/*/operator.log; do
      [[ -f "$log" ]] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
    done
    tail -n 30 "$work/node/kubelet.log" >&2 || true
  fi
  [[ -n "$cluster_pid" ]] && kill "$cluster_pid" 2>/dev/null && wait "$cluster_pid" 2>/dev/null
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
helm() { "$tools/helm" "$@"; }
kubectl() { "$tools/kubectl" "$@"; }
fail() { echo "quickstart.sh: FAIL: $*" >&2; exit 1; }
step() { echo; echo "== $*"; }

# verify NS: the verifier over the consumers of topic quickstart in NS (test-cluster.sh).
verify() {
  local dir="$work/node/pods"
  [[ "$1" == default ]] || dir="$dir/$1"
  verify_seen "$shoal" "$work/acked-$1.jsonl" "$dir"
}

# load NS [SECONDS] [NAME]: keyed load through the topic's pods in NS (producers NAME-*, 4 s by
# default); acknowledged events are added to acked-NS.jsonl.
load() {
  local ns="$1" seconds="${2:-4}" name="${3:-prod}" targets certs="$work/certs-$1" key
  # TLS (the chart's default): the principal loadgen's certificate, as a user takes it.
  mkdir -p "$certs"
  for key in ca.crt tls.crt tls.key; do
    kubectl -n "$ns" get secret quickstart-client-loadgen \
      -o go-template="{{index .data \"$key\" | base64decode}}" >"$certs/$key"
  done
  targets="$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=quickstart \
    -o jsonpath='{range .items[*]}https://{.status.podIP}:8080,{end}')"
  [[ "$targets" == https://?* ]] || fail "the topic's pods in $ns have no pod IP"
  "$shoal" load --targets "${targets%,}" --tls-dir "$certs" --topic quickstart --producers 2 --keys 500 --batch 50 \
    --rate 2000 --duration "$seconds" --seed 7 --producer-prefix "$name" \
    --acked-out "$work/acked-$ns-$name.jsonl" --json
  cat "$work/acked-$ns-$name.jsonl" >>"$work/acked-$ns.jsonl"
}

step "the test cluster"
# shellcheck source=tests/e2e/test-cluster.sh
source tests/e2e/test-cluster.sh
start_test_cluster "$build" "$work" --in-cluster --namespaces default,shoal-system,team-a,team-b \
  --crd tests/e2e/crds/monitoring.coreos.com_servicemonitors.yaml \
  --crd tests/e2e/crds/monitoring.coreos.com_podmonitors.yaml \
  --crd tests/e2e/crds/monitoring.coreos.com_prometheusrules.yaml \
  --image "wget=$wget_bin" --image "python3=$python_bin" \
  --image-path "/opt/shoal/python=$PWD/clients/python" --keep-ended-empty-dirs
cat "$work/cluster.out"
helm version --short
kubectl version

step "helm install shoal helm/shoal --namespace shoal-system (Pod Security restricted)"
kubectl create namespace shoal-system
kubectl label namespace shoal-system pod-security.kubernetes.io/enforce=restricted
helm install shoal helm/shoal --namespace shoal-system --wait --timeout 120s
kubectl -n shoal-system rollout status deployment/shoal-operator --timeout=60s
kubectl -n shoal-system get deployments,replicasets,pods
ready="$(kubectl -n shoal-system get deployment shoal-operator -o jsonpath='{.status.readyReplicas}')"
[[ "$ready" == 2 ]] || fail "the operator Deployment has $ready ready replicas, want 2"
helm test shoal --namespace shoal-system --timeout 60s | tee "$work/helm-test.txt"
grep -q 'Phase: *Succeeded' "$work/helm-test.txt" || fail "helm test did not succeed"

step "the operators run in-cluster: a leader through the Lease, ServiceAccount credentials"
holder=""
for _ in $(seq 1 100); do
  holder="$(kubectl -n shoal-system get lease shoal-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)"
  [[ -n "$holder" ]] && break
  sleep 0.1
done
echo "leader: $holder"
[[ "$holder" == shoal-operator-* ]] || fail "no operator pod holds the Lease (holder: '$holder')"

step "Pod Security restricted refuses a pod that keeps its capabilities"
kubectl label namespace default pod-security.kubernetes.io/enforce=restricted
expect_restricted_refusal default

step "kubectl apply -f examples/quickstart.yaml"
kubectl apply -f examples/quickstart.yaml
kubectl wait --for=condition=Ready ptopic/quickstart --timeout=90s

step "kubectl get ptopic"
expect_quickstart_listed default

step "keyed load through a topic pod, over TLS with loadgen's certificate"
load default
pod_ip="$(kubectl get pod quickstart-0 -o jsonpath='{.status.podIP}')"
refused="$(curl -s "http://$pod_ip:8080/v1/topics/quickstart" || true)"
echo "plain HTTP to quickstart-0: $refused"
[[ "$refused" == *tls_required* ]] || fail "a plain request to a topic pod was not refused: $refused"

step "kubectl scale ptopic quickstart --replicas 2"
kubectl scale ptopic quickstart --replicas 2
kubectl wait --for=jsonpath='{.status.replicas}'=2 ptopic/quickstart --timeout=90s
kubectl wait --for=condition=Ready ptopic/quickstart --timeout=90s
kubectl get ptopic quickstart

step "the verifier: every acknowledged event seen, in order per key"
verify default

step "kubectl patch ptopic quickstart (a new pod template): the operator rolls the pods, each emptied first"
before="$(revisions default quickstart)"
echo "before: $before"
kubectl patch ptopic quickstart --type merge -p '{"spec":{"durability":{"fsync":"always"}}}'
load default 12 roll &
load_pid=$!
expect_rolled default quickstart "$before" 60
wait "$load_pid" || fail "the load during the roll failed"
verify default

step "kubectl describe ptopic quickstart"
kubectl describe ptopic quickstart | tee "$work/describe.txt" | head -40
grep -q 'Type: *Ready' "$work/describe.txt" || fail "describe shows no Ready condition"

step "kubectl delete ptopic quickstart"
kubectl get poddisruptionbudget quickstart -o jsonpath='{.spec.maxUnavailable}' | grep -qx 1 ||
  fail "the topic has no PodDisruptionBudget with maxUnavailable 1"
kubectl delete ptopic quickstart --timeout=60s
owned=statefulsets,services,poddisruptionbudgets
for _ in $(seq 1 100); do
  [[ -z "$(kubectl get "$owned" -l app.kubernetes.io/instance=quickstart -o name)" ]] && break
  sleep 0.1
done
left="$(kubectl get "$owned" -l app.kubernetes.io/instance=quickstart -o name)"
[[ -z "$left" ]] || fail "the topic's objects outlived it: $left"

step "helm upgrade: watchNamespaces team-a and team-b, monitors, rules, network policies"
kubectl create namespace team-a
kubectl create namespace team-b
helm upgrade shoal helm/shoal --namespace shoal-system \
  -f helm/shoal/ci/namespaced-monitoring-values.yaml --wait --timeout 120s
kubectl -n shoal-system rollout status deployment/shoal-operator --timeout=60s
kubectl -n shoal-system get replicasets -o jsonpath='{range .items[*]}{.metadata.name}{" replicas="}{.spec.replicas}{" ready="}{.status.readyReplicas}{"\n"}{end}' |
  tee "$work/rs.txt"
[[ "$(grep -c 'replicas=0' "$work/rs.txt")" == 1 && "$(grep -c 'replicas=2 ready=2' "$work/rs.txt")" == 1 ]] ||
  fail "the rollout did not leave the old ReplicaSet at 0 and the new one at 2 ready"
kubectl get roles,rolebindings -A -l app.kubernetes.io/instance=shoal
kubectl get servicemonitors,podmonitors,prometheusrules,networkpolicies -A -l app.kubernetes.io/instance=shoal |
  tee "$work/monitoring.txt"
for kind in servicemonitor podmonitor prometheusrule networkpolicy; do
  grep -q "$kind" "$work/monitoring.txt" || fail "the upgrade created no $kind"
done
[[ -z "$(kubectl get clusterrolebindings -l app.kubernetes.io/instance=shoal -o name | grep -v aggregate || true)" ]] ||
  fail "the operator's ClusterRoleBinding outlived the switch to watchNamespaces"
kubectl -n shoal-system get pods -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.containers[0].args}{"\n"}{end}' \
  >"$work/operator-args.txt"
grep -q -- '--namespaces=team-a,team-b' "$work/operator-args.txt" ||
  fail "the operator pods were not rolled to the new arguments: $(cat "$work/operator-args.txt")"

step "a topic in team-a, run by the namespaced operator"
kubectl label namespace team-a pod-security.kubernetes.io/enforce=restricted
kubectl -n team-a apply -f examples/quickstart.yaml
kubectl -n team-a wait --for=condition=Ready ptopic/quickstart --timeout=90s
kubectl -n team-a get ptopic
load team-a
verify team-a

step "namespace users: \"edit\" manages topics, \"view\" reads them (aggregated ClusterRoles)"
kubectl -n team-a apply -f - <<'YAML'
apiVersion: v1
kind: ServiceAccount
metadata: {name: developer}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: auditor}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: developer-edit}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: ServiceAccount, name: developer, namespace: team-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: auditor-view}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: auditor, namespace: team-a}]
YAML
developer="$(kubectl -n team-a create token developer)"
auditor="$(kubectl -n team-a create token auditor)"
kubectl --token="$auditor" -n team-a get ptopic quickstart
if kubectl --token="$auditor" -n team-a scale ptopic quickstart --replicas 2 2>"$work/view.err"; then
  fail "a \"view\" user scaled a topic"
fi
cat "$work/view.err"
grep -q 'cannot patch resource "partitionedtopics/scale"' "$work/view.err" ||
  fail "the view user's refusal does not name partitionedtopics/scale"
if kubectl --token="$developer" -n team-b get ptopic 2>/dev/null; then
  fail "a user bound in team-a read topics of team-b"
fi
kubectl --token="$developer" -n team-a scale ptopic quickstart --replicas 2
kubectl --token="$developer" -n team-a delete ptopic quickstart --timeout=60s

step "helm uninstall shoal"
helm uninstall shoal --namespace shoal-system --wait --timeout 60s
for _ in $(seq 1 100); do
  [[ -z "$(kubectl -n shoal-system get pods -o name)" ]] && break
  sleep 0.1
done
left="$(kubectl get deployments,replicasets,pods,services,serviceaccounts -n shoal-system -o name | grep -v serviceaccount/default || true)"
[[ -z "$left" ]] || fail "helm uninstall left: $left"
echo "quickstart.sh: ok"
