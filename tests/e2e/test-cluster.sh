# shellcheck shell=bash
# Sourced by the tests/e2e scripts that drive the test cluster (not run on its own).
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
