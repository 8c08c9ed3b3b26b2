#!/usr/bin/env bash
# Produce throughput and latency with copies against without: one topic of 3 pods and 6
# partitions under `shoal control` (no consumers, no scaling), once with replication factor 1 and
# once with factor 3 / acks quorum, each measured with `shoal bench ingest` through pod 0 (which
# forwards the keys of the other pods' partitions, as an app outside the pods would be). The
# runs alternate (1, 3, 1, 3, ...) so that the noise of a shared machine falls on both.
#
#   bench/replication.sh [rounds] [seconds] [fsync] [connections]
#     (defaults: 2 rounds of 10 s, interval, 4 connections with batches of 1,000)
#
# With few connections the produce rate is bound by each batch's latency (a quorum's copy adds a
# fetch round trip); with more in flight it is bound by what the machine can do.
#
# Prints one line per run and the medians; needs build/cli/shoal (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/control.sh
shoal=build/cli/shoal
rounds=${1:-2}
seconds=${2:-10}
fsync=${3:-interval}
connections=${4:-4}
work=$(mktemp -d /tmp/shoal-repl-bench-XXXXXX)
control_pid=""
cleanup() {
  if [[ -n "$control_pid" ]]; then kill "$control_pid" 2>/dev/null || true; wait "$control_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

run_one() {  # factor round -> prints "factor events_per_sec p50 p99"
  local factor=$1 round=$2
  local state="$work/state-$factor-$round" prefix="127.0.$((60 + round * 2 + factor % 2))"
  topic_yaml "$work/topic.yaml" "$factor" "$fsync"
  start_control "$work/topic.yaml" "$state" "$prefix" "$work/control-$factor-$round.log"
  local out
  out=$("$shoal" bench ingest --target "$prefix.2:18080" --topic bench --connections "$connections" \
    --batch 1000 --warmup 2 --duration "$seconds" --json)
  kill "$control_pid"
  wait "$control_pid" 2>/dev/null || true
  control_pid=""
  # Each run starts from the same machine: the last one's files gone, nothing left to write back.
  rm -rf "$state"
  sync
  python3 - "$factor" "$out" <<'PY'
import json, sys
r = json.loads(sys.argv[2])
print(sys.argv[1], round(r["events_per_sec"]), r["p50_ms"], r["p99_ms"])
PY
}

results="$work/results"
: >"$results"
for ((round = 0; round < rounds; round++)); do
  for factor in 1 3; do
    line=$(run_one "$factor" "$round")
    echo "factor $factor round $round: events/s p50_ms p99_ms = ${line#* }"
    echo "$line" >>"$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for f, eps, p50, p99 in rows:
    by.setdefault(f, []).append((float(eps), float(p50), float(p99)))
med = {f: tuple(statistics.median(x[i] for x in v) for i in range(3)) for f, v in by.items()}
for f in sorted(med):
    eps, p50, p99 = med[f]
    print(f"median factor {f}: {eps:,.0f} events/s, produce p50 {p50:.1f} ms, p99 {p99:.1f} ms")
if "1" in med and "3" in med:
    print(f"factor 3 / factor 1 throughput: {med['3'][0] / med['1'][0]:.2f}")
PY
