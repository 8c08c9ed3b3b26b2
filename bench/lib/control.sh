# Sourced by the benchmarks that run a topic of 3 pods and 6 partitions under `shoal control`
# (bench/replication.sh, bench/failover.sh). Needs $shoal (the CLI) and sets $control_pid.

# topic_yaml FILE FACTOR FSYNC: the topic `bench`, replication factor FACTOR with acks quorum.
topic_yaml() {
  cat >"$1" <<YAML
apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata:
  name: bench
spec:
  partitions: {min: 6, max: 6, initial: 6}
  replicas: {min: 3, max: 3}
  durability: {fsync: $3}
  replication: {factor: $2, acks: quorum}
YAML
}

# start_control YAML STATE PREFIX LOG: the coordinator and its pods (no consumers) on
# PREFIX.2.., in the background; returns once pod 0 takes a produce (60 s at most).
start_control() {
  local yaml=$1 state=$2 prefix=$3 log=$4
  "$shoal" control "$yaml" --state-dir "$state" --ip-prefix "$prefix" \
    --data-port 18080 --admin-port 18081 --metrics-port 18082 --no-consumers \
    --stop-pods-on-exit --log-level warn >"$log" 2>&1 &
  control_pid=$!
  local deadline=$((SECONDS + 60))
  until curl -sf -X POST "http://$prefix.2:18080/v1/topics/bench/events" \
      -d '{"events":[{"key":"warm","value":1}]}' >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      echo "the topic did not come up; see $log" >&2
      tail -20 "$log" >&2
      exit 1
    fi
    sleep 0.2
  done
}
