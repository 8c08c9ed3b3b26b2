#!/usr/bin/env python3
"""A group's consumer through the Python client, recording what it saw for the verifier, until
SIGTERM (it then finishes its batch, commits and exits 0).

    consume.py --url http://127.0.0.1:8080 --topic orders --group verify --out seen/pod-0.jsonl

Each event seen is one line {"p","k","s","n","t","part","off"} of --out (t: CLOCK_MONOTONIC in
ns), the format `shoal verify --seen-dir` reads; p, k and n come from the event's value when it
has them (`shoal load` and produce.py write them there), an event handed out again before its
commit is recorded once. It is the quickstart's consumer (examples/quickstart.yaml).
"""

import json
import signal
import sys
import time

from _common import parser  # the package from this checkout
from shoal_client import Consumer


def main():
    ap = parser(__doc__)
    ap.add_argument("--group", default="verify")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    consumer = Consumer(a.url, a.topic, a.group, max_events=500, wait_ms=200)
    signal.signal(signal.SIGTERM, lambda *_: consumer.stop())
    last_t = [0]
    recorded = {}  # partition -> the highest offset recorded
    with open(a.out, "a") as out:
        def handle(events):
            for e in events:
                # Each sighting its own instant, in the order handled (the verifier orders by it).
                t = max(time.monotonic_ns(), last_t[0] + 1)
                last_t[0] = t
                # Handed out again before its commit (each partition's events, or this consumer's
                # range of them, come in offset order): recorded once.
                if e.offset <= recorded.get(e.partition, -1):
                    continue
                recorded[e.partition] = e.offset
                # A load generator's event names its producer, key and number in its value (the
                # sidecar may store the producer id bound to the caller's name).
                v = e.value if isinstance(e.value, dict) else {}
                out.write(json.dumps({"p": v.get("p", e.producer or ""), "k": v.get("k", e.key),
                                      "s": e.seq or 0, "n": v.get("n", 0), "t": t,
                                      "part": e.partition, "off": e.offset}) + "\n")
            out.flush()  # seen before it is committed

        consumer.run(handle)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
