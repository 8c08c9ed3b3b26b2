#!/usr/bin/env bash
# End-to-end test of the Helm chart on a kind cluster, for a machine with Docker, kind, kubectl
# and helm (CI's machine has no Docker; tests/e2e/quickstart.sh runs the same quickstart steps
# with real helm and kubectl against the test cluster there):
#
#   1. create a kind cluster (one node: the verifier's files live in a hostPath on it)
#   2. docker build the image (Dockerfile at the repository root) and kind load it
#   3. the README's quickstart, as quickstart.sh runs it (checks from tests/e2e/checks.sh): the
#      release namespace with Pod Security "restricted", helm install helm/shoal --wait (the CRD
#      from the chart's crds/), kubectl rollout status, helm test; in a restricted namespace, a
#      pod that keeps its capabilities refused, kubectl apply -f examples/quickstart.yaml (with
#      the built image), kubectl get ptopic (printer columns), kubectl scale ptopic, kubectl patch
#      ptopic with a new pod template (the operator rolls the pods, each emptied first),
#      kubectl describe, kubectl delete ptopic (the finalizer removes what it owned)
#   4. apply examples/flash-sale.yaml with the built image as the sidecar and a consumer that
#      really consumes (`shoal consume`, recording what it sees per pod)
#   5. run a flash sale (`shoal load --profile surge`) from a pod, wait for the topic to scale up
#   6. verify with `shoal verify`: nothing lost, no key out of order
#   7. wait for the way back down, helm uninstall --wait, tear down (also on failure or Ctrl-C)
#
# Usage: tests/e2e/kind.sh [--cluster NAME] [--keep-cluster] [--image NAME:TAG] [--skip-build]
#                          [--duration S] [--rate R] [--print-topic]
#   --cluster NAME   kind cluster name (env SHOAL_E2E_CLUSTER, default shoal-e2e); an existing
#                    cluster of that name is used and never deleted
#   --keep-cluster   leave the cluster running at the end (env SHOAL_E2E_KEEP_CLUSTER=1)
#   --image REF      image to build and load (env SHOAL_E2E_IMAGE, default shoal:e2e)
#   --skip-build     use the image already in the local Docker
#   --duration S     seconds of load (default 80; the surge is 10x from 30% to 50% of it)
#   --rate R         events/s at rest (default 700, as `shoal up`'s flash sale)
#   --print-topic    print the PartitionedTopic it applies and exit (needs nothing installed)
set -euo pipefail

cd "$(dirname "$0")/../.."

cluster="${SHOAL_E2E_CLUSTER:-shoal-e2e}"
keep_cluster="${SHOAL_E2E_KEEP_CLUSTER:-0}"
image="${SHOAL_E2E_IMAGE:-shoal:e2e}"
build=1
duration=80
rate=700
print_topic=0

release=shoal
release_ns=shoal-system
topic=orders
topic_ns=default
example=examples/flash-sale.yaml
# On the kind node: acked.jsonl from the load pod, seen/<pod>.jsonl from each consumer. A
# hostPath outlives the pods, so what a pod removed by a scale-down saw is still verified.
node_dir=/var/lib/shoal-e2e

usage() {
  sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
}

while (($#)); do
  case "$1" in
    --cluster)
      cluster="${2:?--cluster needs a name}"
      shift
      ;;
    --keep-cluster) keep_cluster=1 ;;
    --image)
      image="${2:?--image needs NAME:TAG}"
      shift
      ;;
    --skip-build) build=0 ;;
    --duration)
      duration="${2:?--duration needs seconds}"
      shift
      ;;
    --rate)
      rate="${2:?--rate needs events/s}"
      shift
      ;;
    --print-topic) print_topic=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "kind.sh: unknown argument '$1'" >&2
      usage >&2
      exit 2
      ;;
  esac
  shift
done

if [[ "$image" != *:* ]]; then
  echo "kind.sh: --image needs a tag (NAME:TAG), got '$image'" >&2
  exit 2
fi
if ! [[ "$duration" =~ ^[0-9]+$ && "$rate" =~ ^[0-9]+$ ]] || ((duration < 20 || rate < 1)); then
  echo "kind.sh: --duration must be an integer of at least 20 s and --rate a positive integer" >&2
  exit 2
fi

log() { printf '\n== %s\n' "$*"; }
fail() {
  printf 'kind.sh: FAILED: %s\n' "$*" >&2
  exit 1
}
# The quickstart's checks (shared with quickstart.sh); their files go to $work.
# shellcheck source=tests/e2e/checks.sh
source tests/e2e/checks.sh
qs_ns=shoal-quickstart

# The example topic with the built image as its sidecar and, instead of the example's app
# (an image that does not exist), `shoal consume` on the pod's sidecar
# (SHOAL_URL, which the operator injects) recording into the node's hostPath. Everything else
# (partitions, replicas, scaling targets, behavior) is the example's.
topic_manifest() {
  [[ -f "$example" ]] || fail "$example not found"
  # Drop spec.consumer and spec.sidecar (two-space keys with their indented blocks); spec is
  # the last top-level key of the example, so the replacements below land inside it.
  awk '
    /^  [A-Za-z]+:/ { skip = ($1 == "consumer:" || $1 == "sidecar:") }
    /^[^ #]/ { skip = 0 }
    !skip { print }
  ' "$example"
  cat <<EOF
  # The load pod below calls the topic's Service in plain HTTP (TLS and grants are the
  # quickstart's part: tests/e2e/quickstart.sh).
  security: {tls: false}
  consumer:
    template:
      spec:
        terminationGracePeriodSeconds: 30
        containers:
          - name: app
            image: $image
            imagePullPolicy: IfNotPresent
            command: ["shoal"]
            args: ["consume", "--target", "\$(SHOAL_URL)", "--topic", "$topic", "--group", "app",
                   "--out", "/seen/\$(POD_NAME).jsonl", "--append", "--idle-exit", "0",
                   "--max-seconds", "0"]
            env:
              - name: POD_NAME
                valueFrom: {fieldRef: {fieldPath: metadata.name}}
            resources:
              requests: {cpu: 100m, memory: 64Mi}
            volumeMounts:
              - {name: seen, mountPath: /seen}
        volumes:
          - name: seen
            hostPath: {path: $node_dir/seen, type: Directory}
  sidecar:
    image: $image
    resources:
      requests: {cpu: 100m, memory: 128Mi}
EOF
}

if ((print_topic)); then
  topic_manifest
  exit 0
fi

# A pod of the shoal image with the node's directory at /e2e, running `sh -c SCRIPT`.
tool_pod() {
  local name="$1" script="$2"
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: $topic_ns
  labels: {app.kubernetes.io/name: shoal-e2e}
spec:
  restartPolicy: Never
  containers:
    - name: main
      image: $image
      imagePullPolicy: IfNotPresent
      command:
        - sh
        - -c
        - |
$(printf '%s\n' "$script" | sed 's/^/          /')
      volumeMounts:
        - {name: e2e, mountPath: /e2e}
  volumes:
    - name: e2e
      hostPath: {path: $node_dir, type: Directory}
EOF
}

# Waits for a pod to end; returns its exit as Succeeded (0) or Failed (1), after printing its log.
wait_pod_done() {
  local name="$1" timeout_s="$2" phase=""
  local deadline=$((SECONDS + timeout_s))
  while ((SECONDS < deadline)); do
    phase="$(kubectl -n "$topic_ns" get pod "$name" -o jsonpath='{.status.phase}')"
    [[ "$phase" == Succeeded || "$phase" == Failed ]] && break
    sleep 2
  done
  kubectl -n "$topic_ns" logs "$name" | tail -n 20 || true
  [[ "$phase" == Succeeded ]]
}

topic_field() {
  kubectl -n "$topic_ns" get ptopic "$topic" -o jsonpath="{.status.$1}"
}

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (this test needs docker, kind, kubectl and helm)"
done

created_cluster=0
work="$(mktemp -d)"
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  rm -rf "$work"
  if ((rc != 0)) && kubectl cluster-info >/dev/null 2>&1; then
    echo "---- diagnostics (exit $rc) ----" >&2
    kubectl get ptopic,statefulsets,pods -A -o wide >&2 || true
    kubectl -n "$topic_ns" describe ptopic "$topic" >&2 || true
    kubectl -n "$release_ns" logs -l app.kubernetes.io/component=operator --tail=100 \
      --prefix >&2 || true
  fi
  if ((created_cluster)) && [[ "$keep_cluster" != 1 ]]; then
    log "deleting kind cluster $cluster"
    kind delete cluster --name "$cluster" || true
  elif ((created_cluster)); then
    log "keeping kind cluster $cluster (kind delete cluster --name $cluster)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
  log "using the existing kind cluster $cluster (it will be kept)"
else
  log "creating kind cluster $cluster"
  created_cluster=1
  kind create cluster --name "$cluster" --wait 180s
fi
kubectl config use-context "kind-$cluster" >/dev/null
mapfile -t nodes < <(kind get nodes --name "$cluster")
((${#nodes[@]} == 1)) || fail "cluster $cluster has ${#nodes[@]} nodes; the hostPath files need exactly one"
docker exec "${nodes[0]}" sh -c "rm -rf $node_dir && mkdir -p $node_dir/seen && chmod 1777 $node_dir $node_dir/seen"

if ((build)); then
  log "building $image"
  docker build -t "$image" .
fi
log "loading $image into $cluster"
kind load docker-image "$image" --name "$cluster"

log "helm install (release $release in $release_ns, Pod Security restricted)"
kubectl create namespace "$release_ns" --dry-run=client -o yaml | kubectl apply -f -
kubectl label namespace "$release_ns" pod-security.kubernetes.io/enforce=restricted --overwrite
helm upgrade --install "$release" helm/shoal --namespace "$release_ns" \
  --set-string image.repository="${image%:*}" --set-string image.tag="${image##*:}" \
  --set image.pullPolicy=IfNotPresent --wait --timeout 5m
kubectl wait --for condition=Established crd/partitionedtopics.shoal.dev --timeout=60s
kubectl -n "$release_ns" rollout status deployment/shoal-operator --timeout=120s
helm test "$release" --namespace "$release_ns" --logs

log "the quickstart in namespace $qs_ns (Pod Security restricted)"
kubectl delete namespace "$qs_ns" --ignore-not-found --wait
kubectl create namespace "$qs_ns"
kubectl label namespace "$qs_ns" pod-security.kubernetes.io/enforce=restricted
expect_restricted_refusal "$qs_ns"
# The example with the built image (it names shoal:latest, which kind cannot pull).
sed -E "s|^( *)image: shoal:latest\$|\\1image: $image\\n\\1imagePullPolicy: IfNotPresent|" examples/quickstart.yaml |
  kubectl -n "$qs_ns" apply -f -
kubectl -n "$qs_ns" wait --for=condition=Ready ptopic/quickstart --timeout=300s
expect_quickstart_listed "$qs_ns"
kubectl -n "$qs_ns" scale ptopic quickstart --replicas 2
kubectl -n "$qs_ns" wait --for=jsonpath='{.status.replicas}'=2 ptopic/quickstart --timeout=300s
kubectl -n "$qs_ns" wait --for=condition=Ready ptopic/quickstart --timeout=300s
before="$(revisions "$qs_ns" quickstart)"
echo "before: $before"
kubectl -n "$qs_ns" patch ptopic quickstart --type merge -p '{"spec":{"durability":{"fsync":"always"}}}'
expect_rolled "$qs_ns" quickstart "$before" 300
kubectl -n "$qs_ns" describe ptopic quickstart | tee "$work/describe.txt" | head -40
grep -q 'Type: *Ready' "$work/describe.txt" || fail "describe shows no Ready condition"
kubectl -n "$qs_ns" delete ptopic quickstart --timeout=120s
left="$(kubectl -n "$qs_ns" get statefulsets,services,poddisruptionbudgets -l app.kubernetes.io/instance=quickstart -o name)"
[[ -z "$left" ]] || fail "the topic's objects outlived it: $left"
kubectl delete namespace "$qs_ns" --wait

log "applying $example (sidecar $image, consumer: shoal consume)"
topic_manifest | kubectl apply -f -
kubectl -n "$topic_ns" wait ptopic "$topic" --for=condition=Ready --timeout=300s
initial_partitions="$(topic_field partitions)"
initial_replicas="$(topic_field replicas)"
echo "ready: $initial_partitions partitions, $initial_replicas pods"

log "flash sale: $rate events/s for $duration s, 10x from $((duration * 3 / 10)) s to $((duration / 2)) s"
kubectl -n "$topic_ns" delete pod shoal-e2e-load shoal-e2e-verify --ignore-not-found --wait
tool_pod shoal-e2e-load "shoal load --targets http://$topic.$topic_ns.svc:8080 --topic $topic \
--profile surge --rate $rate --duration $duration --keys 10000 --acked-out /e2e/acked.jsonl" |
  kubectl apply -f -

# Scale-up: more partitions and more pods than at rest, seen while the load runs.
max_partitions="$initial_partitions"
max_replicas="$initial_replicas"
deadline=$((SECONDS + duration + 120))
while ((SECONDS < deadline)); do
  p="$(topic_field partitions)"
  r="$(topic_field replicas)"
  ((p > max_partitions)) && max_partitions="$p"
  ((r > max_replicas)) && max_replicas="$r"
  printf '  t=%ss partitions=%s pods=%s last decision: %s\n' "$SECONDS" "$p" "$r" \
    "$(topic_field lastDecision.reason)"
  phase="$(kubectl -n "$topic_ns" get pod shoal-e2e-load -o jsonpath='{.status.phase}')"
  [[ "$phase" == Succeeded || "$phase" == Failed ]] && break
  sleep 5
done
wait_pod_done shoal-e2e-load 60 || fail "the load pod did not succeed"
((max_partitions > initial_partitions)) ||
  fail "no split: partitions stayed at $initial_partitions under the surge"
((max_replicas > initial_replicas)) ||
  fail "no scale-up: pods stayed at $initial_replicas under the surge"
echo "scaled up: partitions $initial_partitions -> $max_partitions, pods $initial_replicas -> $max_replicas"

log "verifying (every acked event seen, per-key order kept), waiting for the consumers to catch up"
# shellcheck disable=SC2016 # the pod's shell expands these
tool_pod shoal-e2e-verify 'for i in $(seq 60); do
  if shoal verify --acked /e2e/acked.jsonl --seen /e2e/seen/*.jsonl > /tmp/verify.txt 2>&1; then
    cat /tmp/verify.txt; exit 0
  fi
  sleep 5
done
cat /tmp/verify.txt; exit 1' | kubectl apply -f -
wait_pod_done shoal-e2e-verify 400 || fail "shoal verify found lost or reordered events"

log "waiting for the way back: pods down to spec.replicas.min"
min_replicas="$(kubectl -n "$topic_ns" get ptopic "$topic" -o jsonpath='{.spec.replicas.min}')"
deadline=$((SECONDS + 300))
until r="$(topic_field replicas)" && ((${r:-0} > 0 && r <= min_replicas)); do
  ((SECONDS < deadline)) || fail "pods did not come back down to $min_replicas within 300 s"
  sleep 5
done
echo "scaled down: $(topic_field partitions) partitions, $(topic_field replicas) pods"

log "helm uninstall"
kubectl -n "$topic_ns" delete ptopic "$topic" --timeout=180s
helm uninstall "$release" --namespace "$release_ns" --wait --timeout 120s
left="$(kubectl -n "$release_ns" get deployments,replicasets,pods,services -o name)"
[[ -z "$left" ]] || fail "helm uninstall left: $left"

log "PASSED: scaled $initial_partitions -> $max_partitions partitions and $initial_replicas -> $max_replicas pods, verified, back to $(topic_field replicas) pods"
