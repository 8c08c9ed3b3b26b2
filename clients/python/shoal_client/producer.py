"""Producer: batches events by size and linger time, numbers them for idempotence, and retries in
order, so that a key's events are stored once and in the order they were sent.

One batch is in flight at a time per producer: a retried batch is never overtaken by a later one,
which is what keeps per-key order through retries (Kafka keeps it the same way with
max.in.flight.requests.per.connection=1 or idempotence). Use several producers (ids) for more
throughput.
"""

import threading
import time
import uuid

from . import errors
from .http import Connection


class Delivery:
    """What became of one event: `result()` waits for it and returns (partition, offset,
    duplicate), or raises the error that ended its retries."""

    __slots__ = ("key", "seq", "_done", "_result", "_error")

    def __init__(self, key, seq):
        self.key = key
        self.seq = seq
        self._done = threading.Event()
        self._result = None
        self._error = None

    def done(self):
        return self._done.is_set()

    def result(self, timeout=None):
        if not self._done.wait(timeout):
            raise TimeoutError(f"event {self.key!r} seq {self.seq} not acknowledged yet")
        if self._error is not None:
            raise self._error
        return self._result

    def _finish(self, result=None, error=None):
        self._result, self._error = result, error
        self._done.set()


class Producer:
    """Sends events to a topic through one sidecar (it forwards what other pods own).

    `batch_size`: events per request at most; `linger_ms`: how long a partial batch waits for
    more; `retry_for_s`: how long a batch is retried on retryable errors (503, no answer, a
    restarting sidecar) before its events fail; `max_buffered`: events held unsent at most, past
    which send() blocks. `producer_id` names this producer for idempotence (default: random);
    give a stable one to a process that restarts and resends. `tls`: {"ca", "cert", "key",
    "server_name"} for a topic whose pods require TLS (docs/security.md).
    """

    def __init__(self, url, topic, producer_id=None, batch_size=500, linger_ms=5,
                 retry_for_s=30.0, max_buffered=100_000, timeout=30.0, tls=None):
        if batch_size < 1 or linger_ms < 0 or max_buffered < batch_size:
            raise ValueError("batch_size >= 1, linger_ms >= 0 and max_buffered >= batch_size")
        self.topic = topic
        self.producer_id = producer_id or f"py-{uuid.uuid4().hex[:12]}"
        self._path = f"/v1/topics/{topic}/events"
        self._conn = Connection(url, timeout=timeout, tls=tls)
        self._batch_size = batch_size
        self._linger = linger_ms / 1000.0
        self._retry_for = retry_for_s
        self._max_buffered = max_buffered
        self._cv = threading.Condition()
        self._pending = []  # (key, value, Delivery), in send order
        self._oldest = 0.0  # when the oldest pending event was sent
        self._next_seq = 1
        self._in_flight = 0
        self._closed = False
        self.retries = 0  # requests sent again (for observability)
        self._thread = threading.Thread(target=self._run, name="shoal-producer", daemon=True)
        self._thread.start()

    def send(self, key, value=None):
        """Queues one event; returns its Delivery. Blocks while max_buffered events wait."""
        if not isinstance(key, str) or not key:
            raise ValueError("a key is a non-empty string")
        with self._cv:
            while len(self._pending) >= self._max_buffered and not self._closed:
                self._cv.wait()
            if self._closed:
                raise RuntimeError("the producer is closed")
            d = Delivery(key, self._next_seq)
            self._next_seq += 1
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append((key, value, d))
            self._cv.notify_all()
            return d

    def flush(self, timeout=None):
        """Waits until every event sent so far is acknowledged or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._pending or self._in_flight:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("flush: events still unacknowledged")
                self._cv.wait(left)

    def close(self, timeout=None):
        """Flushes, then stops the sender."""
        try:
            self.flush(timeout)
        finally:
            with self._cv:
                self._closed = True
                self._cv.notify_all()
            self._thread.join()
            self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # The sender thread: takes a batch when it is full or has lingered, sends it until it is
    # answered or its retries run out, then takes the next.
    def _run(self):
        while True:
            with self._cv:
                while True:
                    if self._closed and not self._pending:
                        return
                    if len(self._pending) >= self._batch_size or self._closed:
                        break
                    if self._pending:
                        left = self._oldest + self._linger - time.monotonic()
                        if left <= 0:
                            break
                        self._cv.wait(left)
                    else:
                        self._cv.wait()
                batch = self._pending[: self._batch_size]
                del self._pending[: len(batch)]
                if self._pending:
                    self._oldest = time.monotonic()
                self._in_flight = len(batch)
                self._cv.notify_all()
            self._send(batch)
            with self._cv:
                self._in_flight = 0
                self._cv.notify_all()

    def _send(self, batch):
        deadline = time.monotonic() + self._retry_for
        backoff = 0.05
        while batch:
            body = {"events": [{"key": k, "value": v, "producer": self.producer_id,
                                "seq": d.seq} for k, v, d in batch]}
            try:
                answer = self._conn.request("POST", self._path, body)
            except errors.SequenceUnknown as e:
                # The sidecar cannot tell whether these were stored: they go again under new
                # sequence numbers (they may then be stored twice; docs/data-plane.md).
                unknown = set(e.unknown)
                with self._cv:
                    for i in sorted(unknown):
                        if i < len(batch):
                            batch[i][2].seq = self._next_seq
                            self._next_seq += 1
                self.retries += 1
                continue
            except errors.ShoalError as e:
                if e.retryable and time.monotonic() < deadline:
                    self.retries += 1
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                for _, _, d in batch:
                    d._finish(error=e)
                return
            results = (answer or {}).get("results", [])
            if len(results) != len(batch):
                err = errors.Unavailable("unavailable", "unavailable",
                                         f"{len(results)} results for {len(batch)} events")
                for _, _, d in batch:
                    d._finish(error=err)
                return
            for (_, _, d), r in zip(batch, results):
                d._finish(result=(r["partition"], r["offset"], bool(r.get("duplicate", False))))
            return
