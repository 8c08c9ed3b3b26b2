"""The Python client against real shoal-sidecar processes (SHOAL_SIDECAR_BIN, else the build's):
keyed events produced in batches and consumed by a group with nothing lost and every key in
order; the producer's retries through a sidecar killed with SIGKILL and restarted (each event
stored once) and through 503 busy answers; a TLS-only sidecar reached with a client
certificate; the consumer loop's commits carried by its next poll; typed errors."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

# The source tree's package, unless the test runs against an installed one (tests/python/run.sh).
if not os.environ.get("SHOAL_PY_INSTALLED"):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import shoal_client  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SIDECAR = os.environ.get("SHOAL_SIDECAR_BIN") or os.path.join(ROOT, "build", "sidecar",
                                                               "shoal-sidecar")


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


class Sidecar:
    """A shoal-sidecar process on free loopback ports; restart() keeps its directory and ports."""

    def __init__(self, topic="orders", partitions=4, extra=()):
        self.dir = tempfile.mkdtemp(prefix="shoal-py-")
        self.port, self.admin_port, self.metrics_port = free_ports(3)
        self.args = [SIDECAR, "--topic", topic, "--partitions", str(partitions), "--data-dir",
                     self.dir, "--port", str(self.port), "--admin-port", str(self.admin_port),
                     "--metrics-port", str(self.metrics_port), "--fsync", "always",
                     "--log-level", "warn", *extra]
        self.proc = None
        self.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.log = open(os.path.join(self.dir, "sidecar.log"), "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"the sidecar exited: {self.tail()}")
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False

        wait_until(ready, 20, "the sidecar is ready")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()

    def tail(self):
        with open(os.path.join(self.dir, "sidecar.log"), "rb") as f:
            return f.read()[-2000:].decode(errors="replace")

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.kill9()
        shutil.rmtree(self.dir, ignore_errors=True)


def consume_all(url, topic, group, want, timeout=30, tls=None):
    """Events a consumer of `group` handles until it has `want` distinct (producer, seq)."""
    seen = []
    distinct = set()
    consumer = shoal_client.Consumer(url, topic, group, max_events=1000, wait_ms=200, tls=tls)

    def handle(events):
        seen.extend(events)
        distinct.update((e.producer, e.seq) for e in events)
        if len(distinct) >= want:
            consumer.stop()

    t = threading.Thread(target=consumer.run, args=(handle,))
    t.start()
    t.join(timeout)
    consumer.stop()
    t.join()
    consumer.close()
    return seen


def check_order(test, seen, sent):
    """Nothing sent is missing, and each key's events came in the order they were sent."""
    by_key = {}
    for e in seen:
        by_key.setdefault(e.key, []).append(e.seq)
    for key, seqs in sent.items():
        got = by_key.get(key, [])
        firsts = []
        for s in got:  # redelivery may repeat an event; order is judged on first sightings
            if s not in firsts:
                firsts.append(s)
        test.assertEqual(firsts, seqs, f"key {key}: order or loss")


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.sidecar = Sidecar()

    def tearDown(self):
        self.sidecar.close()

    def test_batches_keep_every_key_in_order_and_lose_nothing(self):
        sent = {}
        with shoal_client.Producer(self.sidecar.url, "orders", batch_size=200,
                                   linger_ms=2) as p:
            deliveries = []
            for i in range(3000):
                key = f"user-{i % 60}"
                d = p.send(key, {"n": i})
                sent.setdefault(key, []).append(d.seq)
                deliveries.append(d)
        self.assertTrue(all(not d.result()[2] for d in deliveries))
        seen = consume_all(self.sidecar.url, "orders", "billing", 3000)
        check_order(self, seen, sent)
        # A second group reads everything again, on its own.
        check_order(self, consume_all(self.sidecar.url, "orders", "audit", 3000), sent)

    def test_the_loop_carries_each_commit_in_its_next_poll_and_commits_the_last_on_stop(self):
        with shoal_client.Producer(self.sidecar.url, "orders", batch_size=100) as p:
            for i in range(500):
                p.send(f"k{i % 20}", i)
        consumer = shoal_client.Consumer(self.sidecar.url, "orders", "carry", max_events=50,
                                         wait_ms=100)
        requests = []
        send = consumer._conn.request

        def counting(method, path, body=None):
            requests.append((method, path))
            return send(method, path, body)

        consumer._conn.request = counting
        seen = []

        def handle(events):
            seen.extend(events)
            if len(seen) >= 500:
                consumer.stop()

        consumer.run(handle)
        consumer.close()
        self.assertEqual(len(seen), 500)
        # One GET per batch, each after the first carrying the batch before; the last batch's
        # commit is the one POST, at the stop.
        gets = [path for method, path in requests if method == "GET"]
        posts = [path for method, path in requests if method == "POST"]
        self.assertEqual(len(posts), 1, requests)
        self.assertNotIn("commit=", gets[0])
        self.assertTrue(all("&commit=" in g for g in gets[1:]), gets)
        # Everything is committed: the group has nothing more, and a refused carried commit (an
        # offset past the partition's end) is an error that consumes nothing.
        again = shoal_client.Consumer(self.sidecar.url, "orders", "carry", wait_ms=0)
        self.assertEqual(again.poll(), [])
        fresh = shoal_client.Consumer(self.sidecar.url, "orders", "fresh", wait_ms=0)
        bogus = shoal_client.consumer.Event({"key": "x", "partition": 0, "offset": 10**9})
        with self.assertRaises(shoal_client.ShoalError) as refused:
            fresh.poll(commit=[bogus])
        self.assertFalse(refused.exception.retryable)
        first = fresh.poll()  # nothing was consumed by the refused poll: the group starts at 0
        self.assertTrue(first)
        self.assertEqual(min(e.offset for e in first), 0)
        again.close()
        fresh.close()

    def test_retries_through_a_killed_sidecar_store_each_event_once(self):
        p = shoal_client.Producer(self.sidecar.url, "orders", producer_id="orders-svc",
                                  batch_size=50, linger_ms=1, retry_for_s=30)
        sent = {}
        deliveries = []
        stop = threading.Event()

        def produce():
            i = 0
            while not stop.is_set() or i < 2000:
                key = f"k{i % 40}"
                d = p.send(key, i)
                sent.setdefault(key, []).append(d.seq)
                deliveries.append(d)
                i += 1
                if i % 50 == 0:
                    time.sleep(0.005)

        t = threading.Thread(target=produce)
        t.start()
        wait_until(lambda: sum(d.done() for d in deliveries) > 500, 20, "500 acknowledged")
        retries_before = p.retries
        self.sidecar.kill9()
        wait_until(lambda: p.retries > retries_before, 10, "the producer meets the dead port")
        self.sidecar.start()
        stop.set()
        t.join()
        p.close()
        for d in deliveries:
            d.result()
        seen = consume_all(self.sidecar.url, "orders", "g", len(deliveries))
        check_order(self, seen, sent)
        stored = {}
        for e in seen:
            stored.setdefault((e.producer, e.seq), set()).add((e.partition, e.offset))
        twice = [k for k, places in stored.items() if len(places) > 1]
        self.assertEqual(twice, [], "an event stored twice")
        self.assertEqual(len(stored), len(deliveries))

    def test_a_batch_refused_503_busy_is_sent_again_and_stored_once(self):
        # A sidecar whose request budget (1 MiB) a slow body holds whole: the producer's batch
        # is refused 503 busy until the slow body goes, then goes through.
        s = Sidecar(extra=["--request-budget-bytes", str(1 << 20)])
        try:
            slow = socket.create_connection(("127.0.0.1", s.port))
            slow.sendall(b"POST /v1/topics/orders/events HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
                         b'{"events":[')
            # The slow body's budget is taken once its headers are read: a probe that would be
            # refused as invalid (nothing stored) is refused busy from then on.
            probe = shoal_client.http.Connection(s.url)

            def busy():
                try:
                    probe.request("POST", "/v1/topics/orders/events", {"events": []})
                except shoal_client.Busy:
                    return True
                except shoal_client.ShoalError:
                    return False
                return False

            wait_until(busy, 10, "the slow body holds the request budget")
            probe.close()
            p = shoal_client.Producer(s.url, "orders", producer_id="retrier", retry_for_s=30)
            d = p.send("k", 1)
            wait_until(lambda: p.retries >= 2, 10, "the batch was refused and sent again")
            slow.close()  # the budget comes back
            self.assertFalse(d.result(20)[2])
            p.close()
            seen = consume_all(s.url, "orders", "g", 1)
            self.assertEqual([(e.producer, e.seq) for e in seen], [("retrier", d.seq)])
        finally:
            s.close()

    def test_errors_are_typed(self):
        p = shoal_client.Producer(self.sidecar.url, "nosuch", retry_for_s=0)
        with self.assertRaises(shoal_client.NotFound):
            p.send("k", 1).result(10)
        p.close()
        c = shoal_client.Consumer(self.sidecar.url, "orders", "bad group!")
        with self.assertRaises(shoal_client.InvalidArgument):
            c.poll()
        c.close()
        with self.assertRaises(ValueError):
            shoal_client.Producer(self.sidecar.url, "orders").send("")


class TlsTest(unittest.TestCase):
    """A sidecar whose data port is TLS only (as a topic's pods run with TLS on): the client
    shows a certificate of the topic's CA and checks the pod's name; plain HTTP is refused."""

    def test_tls_with_a_client_certificate(self):
        self.assertIsNotNone(shutil.which("openssl"), "scripts/install-deps.sh installs openssl")
        d = tempfile.mkdtemp(prefix="shoal-py-pki-")
        try:
            def run(cmd):
                subprocess.run(cmd, shell=True, check=True, cwd=d, capture_output=True)

            run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                "-keyout ca.key -out ca.crt -days 1 -subj /CN=test-ca")
            for name, ext in (("pod", "subjectAltName=DNS:shoal-peer.orders\\nextendedKeyUsage="
                                      "serverAuth,clientAuth"),
                              ("app", "extendedKeyUsage=clientAuth")):
                cn = "shoal-peer.orders" if name == "pod" else name
                run(f"openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                    f"-keyout {name}.key -out {name}.csr -subj /CN={cn}")
                run(f"printf '{ext}\\n' > {name}.ext && openssl x509 -req -in {name}.csr "
                    f"-CA ca.crt -CAkey ca.key -CAcreateserial -out {name}.crt -days 1 "
                    f"-extfile {name}.ext")
            s = Sidecar(extra=["--tls-cert", f"{d}/pod.crt", "--tls-key", f"{d}/pod.key",
                               "--tls-client-ca", f"{d}/ca.crt"])
            try:
                tls = {"ca": f"{d}/ca.crt", "cert": f"{d}/app.crt", "key": f"{d}/app.key",
                       "server_name": "shoal-peer.orders"}
                url = f"https://127.0.0.1:{s.port}"
                with shoal_client.Producer(url, "orders", tls=tls) as p:
                    self.assertFalse(p.send("a", 1).result(10)[2])
                seen = consume_all(url, "orders", "g", 1, tls=tls)
                self.assertEqual([e.key for e in seen][:1], ["a"])
                with self.assertRaises(shoal_client.TlsRequired):
                    shoal_client.Consumer(s.url, "orders", "g").poll()
            finally:
                s.close()
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
