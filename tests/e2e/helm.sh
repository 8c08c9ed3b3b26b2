#!/usr/bin/env bash
# The chart installed, upgraded and uninstalled by the real Helm 4 (scripts/install-kube-clients.sh)
# against the test cluster (build/tests/shoal-test-cluster): Helm 4's server-side apply of the CRD
# and of every rendered object, its release Secrets (protobuf-encoded by client-go), `helm
# upgrade` to the single-replica values, `helm history`, `helm uninstall` removing what it made.
# First, every object that every values combination renders is sent to the API as a server dry
# run with strict field validation: accepted by the schemas (the CRDs', the built-in kinds' from
# the Kubernetes OpenAPI), RBAC and admission.
# The operator's Deployment is stored, not run: the test kubelet runs StatefulSets only.
#
#   tests/e2e/helm.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build="$(realpath "${1:-build}")"
bin="$PWD/.tools/bin"
for b in "$bin/helm" "$bin/kubectl"; do
  [[ -x "$b" ]] || { echo "helm.sh: $b not found; run scripts/install-deps.sh --kube" >&2; exit 2; }
done
[[ -x "$build/tests/shoal-test-cluster" ]] || { echo "helm.sh: $build/tests/shoal-test-cluster not built" >&2; exit 2; }
work="$(mktemp -d)"
export KUBECONFIG="$work/kubeconfig"
cluster_pid=""
cleanup() {
  local rc=$?
  [[ -n "$cluster_pid" ]] && kill "$cluster_pid" 2>/dev/null && wait "$cluster_pid" 2>/dev/null
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
helm() { "$bin/helm" "$@"; }
kubectl() { "$bin/kubectl" "$@"; }
fail() { echo "helm.sh: FAIL: $*" >&2; exit 1; }
step() { echo; echo "== $*"; }

# shellcheck source=tests/e2e/test-cluster.sh
source tests/e2e/test-cluster.sh
start_test_cluster "$build" "$work" \
  --crd tests/e2e/crds/monitoring.coreos.com_servicemonitors.yaml \
  --crd tests/e2e/crds/monitoring.coreos.com_podmonitors.yaml \
  --crd tests/e2e/crds/monitoring.coreos.com_prometheusrules.yaml

step "every object of every values combination is accepted by the API (schemas, strict fields, admission)"
kubectl create namespace team-a
kubectl create namespace team-b
kubectl create namespace shoal-system
kubectl label namespace shoal-system pod-security.kubernetes.io/enforce=restricted
# The check can fail: an unknown field is refused under --validate=strict (fieldValidation=Strict).
if kubectl -n shoal-system apply --dry-run=server --validate=strict -f - 2>"$work/strict.txt" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: typo}
datta: {k: v}
YAML
then
  fail "the API accepted an unknown field under --validate=strict"
fi
grep -q 'unknown field "datta"' "$work/strict.txt" || { cat "$work/strict.txt" >&2; fail "the strict refusal does not name the field"; }
for values in "" helm/shoal/ci/*-values.yaml; do
  args=()
  [[ -n "$values" ]] && args=(-f "$values")
  helm template shoal helm/shoal -n shoal-system --include-crds "${args[@]}" >"$work/rendered.yaml"
  kubectl apply --dry-run=server --validate=strict -f "$work/rendered.yaml" \
    >"$work/accepted.txt" 2>"$work/refused.txt" ||
    { cat "$work/refused.txt" >&2; fail "the API refused an object rendered with ${values:-the default values}"; }
  ! grep -q . "$work/refused.txt" || { cat "$work/refused.txt" >&2; fail "warnings for ${values:-the default values}"; }
  echo "${values:-default values}: $(grep -c . "$work/accepted.txt") objects accepted (server dry run, strict)"
done
kubectl delete namespace shoal-system

step "helm install with values that the schema refuses: nothing is created"
if helm install shoal helm/shoal -n shoal-system --create-namespace --set operator.maxPartitions=70000 \
  2>"$work/refused.txt"; then
  fail "helm installed values the schema refuses"
fi
grep -q "maxPartitions" "$work/refused.txt" || { cat "$work/refused.txt" >&2; fail "the refusal does not name the value"; }
[[ -z "$(helm list -A -q)" ]] || fail "a refused install left a release"

step "helm install shoal helm/shoal (default values)"
helm install shoal helm/shoal -n shoal-system --create-namespace --wait=false >"$work/install.txt"
helm list -n shoal-system | tee "$work/list.txt"
grep -Eq '^shoal\s+shoal-system\s+1\s+.*deployed' "$work/list.txt" || fail "the release is not deployed"
kubectl get crd partitionedtopics.shoal.dev
kubectl -n shoal-system get deployment,serviceaccount,service,configmap
kubectl get clusterrole,clusterrolebinding shoal-operator
manager="$(kubectl -n shoal-system get deployment shoal-operator -o jsonpath='{.metadata.managedFields[0].manager}/{.metadata.managedFields[0].operation}')"
[[ "$manager" == "helm/Apply" ]] || fail "the Deployment is not Helm's by server-side apply (managedFields: $manager)"
kubectl -n shoal-system get deployment shoal-operator -o jsonpath='{.spec.replicas}' | grep -qx 2 ||
  fail "the default values run 2 operator replicas"

step "helm upgrade to the single-replica values"
helm upgrade shoal helm/shoal -n shoal-system -f helm/shoal/ci/single-replica-values.yaml >"$work/upgrade.txt"
kubectl -n shoal-system get deployment shoal-operator -o jsonpath='{.spec.replicas}' | grep -qx 1 ||
  fail "the upgrade did not apply operator.replicas 1"
[[ -z "$(kubectl -n shoal-system get configmap -o name)" ]] ||
  fail "the dashboard ConfigMap the new values turn off is still there"
helm history shoal -n shoal-system | tee "$work/history.txt"
grep -Eq '^2\s+.*deployed\s+.*Upgrade complete' "$work/history.txt" || fail "revision 2 is not deployed"

step "helm uninstall shoal"
helm uninstall shoal -n shoal-system
left="$(kubectl -n shoal-system get deployment,service,serviceaccount,configmap,secret -o name)"
[[ -z "$left" ]] || fail "helm uninstall left: $left"
[[ -z "$(kubectl get clusterrole,clusterrolebinding -o name | grep shoal-operator || true)" ]] ||
  fail "helm uninstall left the cluster RBAC"
kubectl get crd partitionedtopics.shoal.dev >/dev/null || fail "the CRD (crds/) must outlive the release"
echo "helm.sh: ok ($(helm version --short))"
