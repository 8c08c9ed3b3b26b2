# shellcheck shell=bash
# The quickstart's checks, the same on the test cluster (quickstart.sh, kubectl.sh through
# test-cluster.sh) and on a real one (kind.sh). Sourced, not run; the caller defines
# `fail MESSAGE` and `kubectl`, and keeps its files in $work.
# shellcheck disable=SC2154 # $work is the caller's

# expect_restricted_refusal [NS]: applies tests/e2e/restricted-pod.yaml (a pod that keeps its
# capabilities) in NS (default: the current namespace), labelled
# pod-security.kubernetes.io/enforce=restricted, and fails unless Pod Security refuses it, naming
# the missing drop: [ALL].
expect_restricted_refusal() {
  local in=()
  [[ -n "${1:-}" ]] && in=(-n "$1")
  if kubectl "${in[@]}" apply -f tests/e2e/restricted-pod.yaml 2>"$work/refused.txt"; then
    fail "a pod that does not drop ALL capabilities was admitted to a restricted namespace"
  fi
  cat "$work/refused.txt"
  grep -qF 'violates PodSecurity "restricted:latest": unrestricted capabilities (container "app" must set securityContext.capabilities.drop=["ALL"])' "$work/refused.txt" ||
    fail "the refusal does not name the missing drop: [ALL]"
}

# expect_quickstart_listed [NS]: `kubectl get ptopic` prints the CRD's printer columns and the
# quickstart topic with 2 partitions, 1 replica, Ready.
expect_quickstart_listed() {
  local in=()
  [[ -n "${1:-}" ]] && in=(-n "$1")
  kubectl "${in[@]}" get ptopic | tee "$work/get.txt"
  head -1 "$work/get.txt" | grep -Eq '^NAME +PARTITIONS +REPLICAS +EPOCH +READY +PAUSED +LAST DECISION +AGE$' ||
    fail "kubectl get ptopic does not print the CRD's printer columns"
  grep -Eq '^quickstart +2 +1 +[0-9]+ +True +False ' "$work/get.txt" ||
    fail "the topic is not 2 partitions, 1 replica, Ready, not paused"
  # Every `kubectl get ptopic` listing the docs show has the header kubectl prints.
  local printed shown doc
  printed="$(head -1 "$work/get.txt" | tr -s ' ')"
  for doc in README.md docs/*.md; do
    while IFS= read -r shown; do
      shown="$(printf '%s' "$shown" | tr -s ' ')"
      [[ "$shown" == "$printed" ]] ||
        fail "$doc shows the header '$shown' under kubectl get ptopic; kubectl prints '$printed'"
    done < <(grep -A1 '^\$ kubectl\( -n [a-z-]*\)\? get ptopic$' "$doc" | grep '^NAME ')
  done
}

# revisions NS TOPIC: each topic pod's controller-revision-hash and the StatefulSet's
# updateRevision, on one line ("T-0=REV T-1=REV update=REV").
revisions() {
  kubectl -n "$1" get pods -l "app.kubernetes.io/instance=$2" \
    -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.labels.controller-revision-hash} {end}'
  echo "update=$(kubectl -n "$1" get statefulset "$2" -o jsonpath='{.status.updateRevision}')"
}

# expect_rolled NS TOPIC BEFORE SECONDS: after a change of the topic's pod template, waits until
# the StatefulSet's updateRevision is not the one in BEFORE (revisions' line from before the
# change), every pod carries it and is Ready, and no plan is left; fails after SECONDS. The
# StatefulSet must update OnDelete: the operator rolls the pods, each emptied first.
expect_rolled() {
  local ns="$1" topic="$2" before="$3" seconds="$4" now update pods plan
  [[ "$(kubectl -n "$ns" get statefulset "$topic" -o jsonpath='{.spec.updateStrategy.type}')" == OnDelete ]] ||
    fail "the StatefulSet does not update OnDelete: its controller would restart pods that own partitions"
  local deadline=$((SECONDS + seconds))
  while ((SECONDS < deadline)); do
    now="$(revisions "$ns" "$topic")"
    update="${now##*update=}"
    pods="$(kubectl -n "$ns" get pods -l "app.kubernetes.io/instance=$topic" \
      -o jsonpath='{range .items[*]}{.metadata.labels.controller-revision-hash}{"/"}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}')"
    plan="$(kubectl -n "$ns" get ptopic "$topic" -o jsonpath='{.status.plan.reason}')"
    if [[ -n "$update" && "$before" != *"update=$update" && -n "$pods" && -z "$plan" ]] &&
      ! tr ' ' '\n' <<<"$pods" | grep -q -v -x -e '' -e "$update/True"; then
      echo "rolled: $now"
      return 0
    fi
    sleep 0.2
  done
  echo "not rolled: $(revisions "$ns" "$topic")" >&2
  fail "the pods of $ns/$topic were not rolled to the new template in $seconds s"
}
