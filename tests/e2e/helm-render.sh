#!/usr/bin/env bash
# The chart through the real Helm 4 (scripts/install-kube-clients.sh installs it): `helm lint
# --strict` and `helm template` with the default values and with every helm/shoal/ci/*-values.yaml
# (the combinations the tests install), each rendering the kinds it should; and values that the
# schema or the templates refuse, refused with the message that says what to fix.
#
#   tests/e2e/helm-render.sh [helm]     helm: the binary (default .tools/bin/helm)
set -euo pipefail
cd "$(dirname "$0")/../.."
helm="${1:-.tools/bin/helm}"
[[ -x "$helm" ]] || { echo "helm-render: $helm not found; run scripts/install-deps.sh --kube" >&2; exit 2; }
"$helm" version --short | grep -q '^v4\.' || { echo "helm-render: $helm is not Helm 4" >&2; exit 2; }
chart=helm/shoal
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
fail() { echo "helm-render: FAIL: $*" >&2; exit 1; }

kinds() {  # rendered file -> "N Kind" lines, sorted
  grep '^kind: ' "$1" | sort | uniq -c | awk '{print $1, $3}'
}

check() {  # name values-file(or "") expected-kinds...
  local name="$1" values="$2"
  shift 2
  local args=()
  [[ -n "$values" ]] && args=(-f "$values")
  echo "== $name"
  "$helm" lint --strict "$chart" "${args[@]}" >"$out/$name.lint" 2>&1 || {
    cat "$out/$name.lint" >&2
    fail "helm lint --strict $name"
  }
  "$helm" template shoal "$chart" --namespace shoal-system --include-crds "${args[@]}" >"$out/$name.yaml" \
    2>"$out/$name.err" || { cat "$out/$name.err" >&2; fail "helm template $name"; }
  [[ -s "$out/$name.err" ]] && { cat "$out/$name.err" >&2; fail "helm template $name warned"; }
  local got want
  got="$(kinds "$out/$name.yaml")"
  want="$(printf '%s\n' "$@" | sort -k2)"
  if [[ "$(sort -k2 <<<"$got")" != "$want" ]]; then
    printf 'want:\n%s\ngot:\n%s\n' "$want" "$got" >&2
    fail "$name renders other kinds"
  fi
  echo "$got" | paste -sd, -
}

refuse() {  # name message --set... : helm template must fail and say `message`
  local name="$1" message="$2"
  shift 2
  echo "== refused: $name"
  if "$helm" template shoal "$chart" "$@" >"$out/refused.yaml" 2>"$out/refused.err"; then
    fail "$name was rendered; it should be refused"
  fi
  grep -qF -- "$message" "$out/refused.err" || {
    cat "$out/refused.err" >&2
    fail "$name: the error does not say \"$message\""
  }
  head -3 "$out/refused.err"
}

check default "" "1 CustomResourceDefinition" "3 ClusterRole" "1 ClusterRoleBinding" "1 ConfigMap" "1 Deployment" \
  "1 NetworkPolicy" "1 Pod" "1 Service" "1 ServiceAccount"
check namespaced-monitoring "$chart/ci/namespaced-monitoring-values.yaml" "2 ClusterRole" "1 CustomResourceDefinition" "1 ConfigMap" \
  "1 Deployment" "2 NetworkPolicy" "1 Pod" "1 PodMonitor" "1 PrometheusRule" "3 Role" \
  "3 RoleBinding" "1 Service" "1 ServiceAccount" "1 ServiceMonitor"
# Every alert links its runbook where runbookBaseUrl says (docs/runbooks.md has a section each).
alerts=$(grep -c '^ *- alert: ' prometheus/shoal-rules.yaml)
urls=$(grep -c 'runbook_url: https://git.example.com/shoal/blob/main/docs/runbooks.md#shoal' "$out/namespaced-monitoring.yaml")
((alerts > 0 && urls == alerts)) || fail "$urls of $alerts alerts carry the runbookBaseUrl's runbook_url"
check single-replica "$chart/ci/single-replica-values.yaml" "1 CustomResourceDefinition" "3 ClusterRole" \
  "1 ClusterRoleBinding" "1 Deployment" "1 NetworkPolicy" "1 Pod" "1 Service"
# Every combination a test installs has its file (the quickstart installs these).
n=$(find "$chart/ci" -name '*-values.yaml' | wc -l)
((n == 2)) || fail "helm/shoal/ci has $n values files; check each one above"

refuse max-partitions "at '/operator/maxPartitions': maximum: got 70,000, want 65,536" \
  --set operator.maxPartitions=70000
refuse unknown-value "additional properties 'bogus' not allowed" --set bogus=1
refuse replicas-without-election "operator.replicas above 1 needs operator.leaderElection.enabled" \
  --set operator.replicas=2 --set operator.leaderElection.enabled=false
echo "helm-render: ok ($("$helm" version --short))"
