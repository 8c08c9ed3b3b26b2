# shellcheck shell=bash
# Sourced by the tests/e2e scripts that drive the test cluster (not run on its own). They define
# `fail MESSAGE` and `kubectl`, and keep their files in $work. The checks that hold on any
# cluster (kind.sh runs them on a real one) are in checks.sh, sourced here.
# shellcheck source=tests/e2e/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"
#
# start_test_cluster BUILD WORK [ARGS...]: starts BUILD/tests/shoal-test-cluster with its
# kubeconfig at $KUBECONFIG and WORK as its work directory (plus ARGS), sets cluster_pid, and
# waits up to 10 s for its "ready" line; calls `fail` (the script's) when it exits or is late.
start_test_cluster() {
  local build="$1" work="$2"
  shift 2
  "$build/tests/shoal-test-cluster" --kubeconfig "$KUBECONFIG" --work-dir "$work" "$@" \
    >"$work/cluster.out" 2>"$work/cluster.err" &
  cluster_pid=$!
  for _ in $(seq 1 100); do
    grep -q '^ready ' "$work/cluster.out" && return 0
    kill -0 "$cluster_pid" 2>/dev/null || { cat "$work/cluster.err" >&2; fail "the test cluster exited"; }
    sleep 0.1
  done
  fail "the test cluster did not become ready in 10 s"
}

# verify_seen SHOAL ACKED DIR: waits up to 30 s for the consumers' seen.jsonl files under DIR
# (pod directories of the test kubelet; also those a restarted pod left, data.ended-<uid>, with
# --keep-ended-empty-dirs) to hold every event in ACKED, in order per key and once, and prints
# the verifier's line.
verify_seen() {
  local shoal="$1" acked="$2" dir="$3" out="" files=()
  for _ in $(seq 1 300); do
    mapfile -t files < <(find "$dir" -maxdepth 3 -path '*/data/seen.jsonl' -o -maxdepth 3 -path '*/data.ended-*/seen.jsonl')
    if ((${#files[@]})) &&
      out="$("$shoal" verify --acked "$acked" --seen "${files[@]}" --json 2>/dev/null)"; then
      break
    fi
    out=""
    sleep 0.1
  done
  echo "$out"
  [[ -n "$out" ]] || fail "the consumers under $dir did not see every acknowledged event in 30 s"
  if ! grep -q '"lost":0' <<<"$out" || ! grep -q '"reordered":0' <<<"$out" ||
    ! grep -q '"duplicated":0' <<<"$out"; then
    fail "events were lost, reordered or duplicated"
  fi
}
