#!/usr/bin/env bash
# The topic's life as a user drives it with the real kubectl 1.35 (scripts/install-kube-clients.sh)
# against the test cluster (build/tests/shoal-test-cluster: the fake API server over TLS and the
# test kubelet running the built binaries as pods, with one shoal-operator beside it):
# Pod Security "restricted" on the namespace (a pod that keeps its capabilities is refused, the
# topic's pods are accepted), kubectl apply of examples/quickstart.yaml, kubectl wait for Ready, kubectl get ptopic with the
# CRD's printer columns, keyed load through a topic pod, kubectl scale ptopic (the scale
# subresource), the verifier's zeros, kubectl describe, and kubectl delete (the finalizer
# removes what the topic owned). The Helm install of the operator is tests/e2e/quickstart.sh's.
#
#   tests/e2e/kubectl.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build="$(realpath "${1:-build}")"
kubectl_bin="$PWD/.tools/bin/kubectl"
[[ -x "$kubectl_bin" ]] || { echo "kubectl.sh: $kubectl_bin not found; run scripts/install-deps.sh --kube" >&2; exit 2; }
for b in "$build/tests/shoal-test-cluster" "$build/cli/shoal"; do
  [[ -x "$b" ]] || { echo "kubectl.sh: $b not built" >&2; exit 2; }
done
shoal="$build/cli/shoal"
work="$(mktemp -d)"
export KUBECONFIG="$work/kubeconfig"
cluster_pid=""
cleanup() {
  local rc=$?
  if ((rc != 0)); then
    echo "kubectl.sh: FAILED; the cluster's state:" >&2
    kubectl get ptopic,statefulsets,pods -o wide >&2 || true
    tail -n 30 "$work"/operator-0.log >&2 || true
  fi
  [[ -n "$cluster_pid" ]] && kill "$cluster_pid" 2>/dev/null && wait "$cluster_pid" 2>/dev/null
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
kubectl() { "$kubectl_bin" "$@"; }
fail() { echo "kubectl.sh: FAIL: $*" >&2; exit 1; }
step() { echo; echo "== $*"; }

step "starting the test cluster"
# shellcheck source=tests/e2e/test-cluster.sh
source tests/e2e/test-cluster.sh
# The quickstart's consumer is the Python client's (in the image under /opt/shoal/python).
start_test_cluster "$build" "$work" --operators 1 --image "python3=$(command -v python3)" \
  --image-path "/opt/shoal/python=$PWD/clients/python"
cat "$work/cluster.out"
kubectl version
kubectl version -o json | grep -q '"minor": "35"' || fail "the client or the server is not 1.35"
kubectl api-resources --api-group shoal.dev
kubectl api-resources --api-group shoal.dev | grep -q 'partitionedtopics  *ptopic  *shoal.dev/v1alpha1  *true  *PartitionedTopic' ||
  fail "discovery does not list partitionedtopics with its short name"

step "Pod Security restricted on the namespace"
kubectl label namespace default pod-security.kubernetes.io/enforce=restricted
expect_restricted_refusal default

step "kubectl apply -f examples/quickstart.yaml"
kubectl apply -f examples/quickstart.yaml
kubectl wait --for=condition=Ready ptopic/quickstart --timeout=90s

step "kubectl get ptopic"
expect_quickstart_listed default

step "keyed load through a topic pod"
ip="$(kubectl get pod quickstart-0 -o jsonpath='{.status.podIP}')"
[[ -n "$ip" ]] || fail "quickstart-0 has no pod IP"
# The topic lists a principal, so it speaks TLS: loadgen's certificate, as a user takes it.
for key in ca.crt tls.crt tls.key; do
  kubectl get secret quickstart-client-loadgen -o go-template="{{index .data \"$key\" | base64decode}}" >"$work/$key"
done
"$shoal" load --targets "https://$ip:8080" --tls-dir "$work" --topic quickstart --producers 2 --keys 500 --batch 50 \
  --rate 2000 --duration 5 --seed 7 --acked-out "$work/acked.jsonl" --json | tee "$work/load.json"

step "kubectl scale ptopic quickstart --replicas 2"
kubectl scale ptopic quickstart --replicas 2
kubectl get ptopic quickstart -o jsonpath='{.spec.replicas.min}' | grep -qx 2 ||
  fail "kubectl scale did not set spec.replicas.min through the scale subresource"
kubectl wait --for=jsonpath='{.status.replicas}'=2 ptopic/quickstart --timeout=90s
kubectl wait --for=condition=Ready ptopic/quickstart --timeout=90s
kubectl get ptopic quickstart

step "the verifier: every acknowledged event seen, in order per key"
verify_seen "$shoal" "$work/acked.jsonl" "$work/node/pods"
echo "verified $(wc -l < "$work/acked.jsonl") acknowledged events"

step "kubectl annotate ptopic quickstart shoal.dev/paused=true"
kubectl annotate ptopic quickstart shoal.dev/paused=true
kubectl wait --for=condition=Paused ptopic/quickstart --timeout=30s
kubectl get ptopic quickstart
kubectl annotate ptopic quickstart shoal.dev/paused-
kubectl wait --for=condition=Paused=false ptopic/quickstart --timeout=30s

step "retention that its volume cannot hold is Degraded"
kubectl apply -f - <<'YAML'
apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata: {name: too-big}
spec:
  retention: {bytes: 1073741824}
  consumer:
    template:
      spec:
        containers: [{name: app, image: shoal:latest, command: [shoal, consume]}]
YAML
kubectl wait --for=condition=Degraded ptopic/too-big --timeout=30s
degraded="$(kubectl get ptopic too-big -o jsonpath='{.status.conditions[?(@.type=="Degraded")].message}')"
echo "$degraded"
[[ "$degraded" == *"--data-volume-size"*"cannot hold spec.retention.bytes"* ]] ||
  fail "the Degraded message does not say that the retention cannot fit the volume"
[[ -z "$(kubectl get statefulsets -l app.kubernetes.io/instance=too-big -o name)" ]] ||
  fail "a topic whose retention cannot fit got pods"
kubectl delete ptopic too-big --timeout=30s

step "kubectl describe ptopic quickstart"
kubectl describe ptopic quickstart | tee "$work/describe.txt" | head -40
grep -q 'Type: *Ready' "$work/describe.txt" || fail "describe shows no Ready condition"

step "kubectl delete ptopic quickstart"
owned="$(kubectl get statefulsets,services -l app.kubernetes.io/instance=quickstart -o name)"
echo "$owned"
[[ "$owned" == *statefulset.apps/quickstart* ]] || fail "the topic's StatefulSet does not carry its instance label"
kubectl delete ptopic quickstart --timeout=60s
for _ in $(seq 1 100); do
  [[ -z "$(kubectl get statefulsets,services -l app.kubernetes.io/instance=quickstart -o name)" ]] && break
  sleep 0.1
done
left="$(kubectl get statefulsets,services -l app.kubernetes.io/instance=quickstart -o name)"
[[ -z "$left" ]] || fail "the topic's objects outlived it: $left"
echo "kubectl.sh: ok"
