#!/usr/bin/env bash
# Failover time with copies: how long the ranges of a killed leader take writes again. One topic
# of 3 pods and 6 partitions, replication factor 3 / acks quorum, under `shoal control` (the
# coordinator, default failover.afterSeconds 2; no consumers). Each round stops the sidecar of a
# pod that leads partitions, then produces, through another pod, one event to a key of each of
# those partitions again and again until every one is acknowledged: the failover time of a range
# is from the fault to its first acknowledged write.
#   pause (default): SIGSTOP, a hung pod or node: the coordinator fails its partitions over to
#     copies after failover.afterSeconds; then SIGCONT, and it follows the new leaders.
#   kill: kill -9; the platform starts the sidecar again at once (as a kubelet restarts a
#     container), usually before the failover is due: it leads again with its data.
#
#   bench/failover.sh [faults] [pause|kill] [fsync]     (defaults: 20, pause, interval)
#
# Prints one line per kill (the slowest of its ranges) and p50/p99 over the kills and over every
# range; needs build/cli/shoal (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/control.sh
shoal=build/cli/shoal
kills=${1:-20}
mode=${2:-pause}
fsync=${3:-interval}
[[ "$mode" == pause || "$mode" == kill ]] || { echo "mode is pause or kill, not $mode" >&2; exit 2; }
work=$(mktemp -d /tmp/shoal-failover-bench-XXXXXX)
prefix=127.0.70
control_pid=""
cleanup() {
  if [[ -n "$control_pid" ]]; then kill "$control_pid" 2>/dev/null || true; wait "$control_pid" 2>/dev/null || true; fi
  [[ -n "${SHOAL_BENCH_KEEP:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

topic_yaml "$work/topic.yaml" 3 "$fsync"
start_control "$work/topic.yaml" "$work/state" "$prefix" "$work/control.log"

python3 - "$kills" "$prefix" "$work/state" "$mode" <<'PY'
import json, os, signal, statistics, sys, threading, time, urllib.request, zlib

kills, prefix, state, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
pods = [f"bench-{i}" for i in range(3)]
url = lambda i: f"http://{prefix}.{2 + i}:18080/v1/topics/bench"

def get_map(i):
    with urllib.request.urlopen(url(i), timeout=2) as r:
        return json.load(r)

def produce(i, key, timeout=1.0):
    body = json.dumps({"events": [{"key": key, "value": 1}]}).encode()
    req = urllib.request.Request(url(i) + "/events", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status == 200
    except Exception:
        return False

def key_for(lo, hi):
    n = 0
    while True:
        k = f"key-{n}"
        if lo <= zlib.crc32(k.encode()) < hi:
            return k
        n += 1

def answers(i):
    try:
        get_map(i)
        return True
    except Exception:
        return False

def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]

per_kill, per_range = [], []
victim_turn = 0
# The coordinator counts a failover from a pod's last ready answer: one it has never seen ready
# (the topic is a moment old) would count from the first miss. Give it a few ticks first.
time.sleep(3)
for k in range(kills):
    # Every pod answers and holds the same map before the next kill.
    deadline = time.time() + 60
    while True:
        try:
            maps = [get_map(i) for i in range(3)]
            if len({m["epoch"] for m in maps}) == 1:
                break
        except Exception:
            pass
        if time.time() > deadline:
            sys.exit("the pods did not settle on one map")
        time.sleep(0.2)
    active = [p for p in maps[0]["partitions"] if p.get("state", "active") == "active"]
    leads = {pod: [p for p in active if p["owner"] == pod] for pod in pods}
    candidates = [p for p in pods if leads[p]]
    victim = candidates[victim_turn % len(candidates)]
    victim_turn += 1
    entry = next(i for i, p in enumerate(pods) if p != victim)
    keys = {p["id"]: key_for(p["lo"], p["hi"]) for p in leads[victim]}
    pid = int(open(f"{state}/pods/{victim}/sidecar.pid").read().strip())
    t0 = time.monotonic()
    os.kill(pid, signal.SIGSTOP if mode == "pause" else signal.SIGKILL)
    # One producer per range, each retrying at once after a refusal or a timeout.
    took = {}
    def until_acked(partition, key):
        while time.monotonic() - t0 < 60:
            if produce(entry, key, timeout=0.25):
                took[partition] = time.monotonic() - t0
                return
    threads = [threading.Thread(target=until_acked, args=kv) for kv in keys.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if mode == "pause":
        os.kill(pid, signal.SIGCONT)
    if len(took) < len(keys):
        sys.exit(f"kill {k + 1}: partitions {sorted(set(keys) - set(took))} took no write in 60 s")
    worst = max(took.values())
    per_kill.append(worst)
    per_range.extend(took.values())
    print(f"{mode} {k + 1:2d}: {victim} led {len(keys)} partitions; first acknowledged write "
          f"after {worst * 1000:,.0f} ms (slowest range)", flush=True)
    # The platform starts the killed sidecar again; it follows the new leaders.
    deadline = time.time() + 60
    while not answers(pods.index(victim)):
        if time.time() > deadline:
            sys.exit(f"{victim} did not come back")
        time.sleep(0.2)

ms = lambda s: f"{s * 1000:,.0f} ms"
print(f"over {len(per_kill)} faults ({mode}; slowest range each): p50 {ms(statistics.median(per_kill))}, "
      f"p99 {ms(percentile(per_kill, 0.99))}, max {ms(max(per_kill))}")
print(f"over {len(per_range)} ranges: p50 {ms(statistics.median(per_range))}, "
      f"p99 {ms(percentile(per_range, 0.99))}")
PY
