#!/usr/bin/env python3
"""Keyed load through the Python producer, recording what was acknowledged for the verifier.

    produce.py --url http://127.0.0.1:8080 --topic orders --keys 100 --rate 2000 --duration 10 \
               --acked-out acked.jsonl

Each event's value is {"p": the producer, "k": the key, "n": its number among its key's events,
from 1}; each acknowledged event is one
line {"p","k","s","n"} of --acked-out, the format `shoal verify --acked` reads.
"""

import json
import sys
import time

from _common import parser  # the package from this checkout
from shoal_client import Producer, ShoalError


def main():
    ap = parser(__doc__)
    ap.add_argument("--producer", default="py-load")
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--rate", type=float, default=1000, help="events/s")
    ap.add_argument("--duration", type=float, default=10, help="seconds")
    ap.add_argument("--acked-out", required=True)
    a = ap.parse_args()
    counts = {}
    sent = []
    with Producer(a.url, a.topic, producer_id=a.producer, batch_size=200, linger_ms=5) as p:
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < a.duration:
            due = start + i / a.rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            key = f"key-{i % a.keys}"
            n = counts.get(key, 0) + 1  # 1, 2, ... per key, as `shoal load` numbers them
            counts[key] = n
            sent.append((key, n, p.send(key, {"p": a.producer, "k": key, "n": n})))
            i += 1
    failed = 0
    with open(a.acked_out, "w") as out:
        for key, n, d in sent:
            try:
                d.result()
            except ShoalError as e:
                failed += 1
                print(f"produce.py: {key} #{n}: {e}", file=sys.stderr)
                continue
            out.write(json.dumps({"p": a.producer, "k": key, "s": d.seq, "n": n}) + "\n")
    print(json.dumps({"sent": len(sent), "acked": len(sent) - failed, "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
