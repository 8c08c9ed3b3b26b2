"""Consumer: a group's loop of poll, process, commit against the sidecar of its pod.

Delivery is at least once: events handed out and not committed are handed out again (after the
sidecar's redelivery time, or to whichever consumer of the group reads the range next), so a
handler must tolerate seeing an event twice. Per key, events arrive in the order they were
acknowledged, across every split, merge and move (docs/guarantees.md).
"""

import base64
import threading
import time
import urllib.parse

from . import errors
from .http import Connection


class Event:
    __slots__ = ("key", "value", "partition", "offset", "producer", "seq", "timestamp_ms")

    def __init__(self, doc):
        self.key = doc["key"]
        # An event produced as opaque bytes (a binary batch, docs/data-plane.md) comes as
        # value_b64: its value is then bytes; otherwise the decoded JSON value.
        if "value_b64" in doc:
            self.value = base64.b64decode(doc["value_b64"], validate=True)
        else:
            self.value = doc.get("value")
        self.partition = doc["partition"]
        self.offset = doc["offset"]
        self.producer = doc.get("producer")
        self.seq = doc.get("seq")
        self.timestamp_ms = doc.get("timestamp_ms")

    def __repr__(self):
        return f"Event({self.key!r}, partition={self.partition}, offset={self.offset})"


# The most partition:offset pairs a poll carries (docs/data-plane.md); more go in a POST.
_MAX_CARRIED = 4096


def _next_offsets(events):
    """Per partition, the offset after the last of `events`: what committing them means."""
    next_offsets = {}
    for e in events:
        next_offsets[e.partition] = max(next_offsets.get(e.partition, 0), e.offset + 1)
    return next_offsets


class Consumer:
    """Reads a topic as `group` from one sidecar: the partitions that sidecar serves (in a pod,
    its own sidecar at $SHOAL_URL) and their ranges of older partitions not yet consumed."""

    def __init__(self, url, topic, group, max_events=500, wait_ms=1000, timeout=70.0, tls=None):
        if not 1 <= max_events <= 10000 or not 0 <= wait_ms <= 60000:
            raise ValueError("max_events is 1..10000 and wait_ms 0..60000")
        self.topic = topic
        self.group = group
        self._conn = Connection(url, timeout=timeout, tls=tls)
        self._poll_path = (f"/v1/topics/{topic}/events?group={urllib.parse.quote(group)}"
                           f"&max={max_events}&wait_ms={wait_ms}")
        self._commit_path = f"/v1/topics/{topic}/commits"
        self._stop = threading.Event()

    def poll(self, commit=None):
        """The next events for the group (may be empty after wait_ms). `commit`: events processed
        before (the previous batch), committed first by the same request, exactly as commit()
        would (docs/data-plane.md, Consume); if that commit is refused, the error is raised and
        nothing is consumed: poll again with the same `commit`."""
        path = self._poll_path
        offsets = _next_offsets(commit or ())
        if offsets:
            path += "&commit=" + ",".join(f"{p}:{o}" for p, o in sorted(offsets.items()))
        answer = self._conn.request("GET", path)
        return [Event(e) for e in (answer or {}).get("events", [])]

    def commit(self, events):
        """Marks `events` processed: per partition, everything below the last offset + 1."""
        next_offsets = _next_offsets(events)
        if not next_offsets:
            return
        self._conn.request("POST", self._commit_path, {
            "group": self.group,
            "offsets": [{"partition": p, "offset": o} for p, o in sorted(next_offsets.items())],
        })

    def run(self, handler, retry_for_s=60.0, carry_commits=True):
        """Polls, calls handler(events) with each non-empty batch, commits it, until stop().
        With carry_commits (the default) a batch's commit rides on the next poll, so the loop is
        one request per batch (Kafka's consumers commit the same way); otherwise each batch is
        committed by a request of its own. A stop lets the batch in hand finish and be
        committed. Retryable errors (a restarting sidecar, a change in progress) are retried,
        the carried commit with them, for up to retry_for_s at a time; a handler's exception
        stops the loop without committing its batch (it will be handed out again)."""
        backoff = 0.05
        failing_since = None
        processed = []  # handled, to be committed by the next poll
        while not self._stop.is_set():
            try:
                if len(_next_offsets(processed)) > _MAX_CARRIED:
                    self._commit_retrying(processed, retry_for_s)
                    processed = []
                events = self.poll(commit=processed)
                processed = []  # the poll answered: its commit stands
                if events:
                    handler(events)
                    if carry_commits:
                        processed = events
                    else:
                        self._commit_retrying(events, retry_for_s)
                failing_since, backoff = None, 0.05
            except errors.ShoalError as e:
                now = time.monotonic()
                failing_since = failing_since or now
                if not e.retryable or now - failing_since > retry_for_s:
                    raise
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 1.0)
        if processed:
            self._commit_retrying(processed, retry_for_s)

    def _commit_retrying(self, events, retry_for_s):
        deadline = time.monotonic() + retry_for_s
        backoff = 0.05
        while True:
            try:
                return self.commit(events)
            except errors.ShoalError as e:
                if not e.retryable or time.monotonic() > deadline:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    def stop(self):
        """Ends run() after the batch in hand (from any thread or a signal handler)."""
        self._stop.set()

    def close(self):
        self.stop()
        self._conn.close()
