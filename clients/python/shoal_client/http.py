"""One keep-alive HTTP connection to a sidecar, with TLS when asked (http.client, ssl)."""

import http.client
import json
import socket
import ssl
import urllib.parse

from . import errors


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to an address whose certificate carries another name: a topic's pods are reached by
    IP, and their certificate names the topic (shoal-peer.<topic>; docs/security.md)."""

    def __init__(self, host, port, timeout, context, server_name):
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name

    def connect(self):
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self._server_name)


class Connection:
    """Sends JSON requests to one sidecar's base URL and decodes the answers. Reconnects after a
    failure. Not thread-safe: one per thread."""

    def __init__(self, base_url, timeout=30.0, tls=None):
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"a sidecar URL is http://host:port or https://host:port, got {base_url!r}")
        self._host = url.hostname
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._https = url.scheme == "https"
        self._timeout = timeout
        self._tls = tls or {}
        self._conn = None

    def _connect(self):
        if not self._https:
            return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        ctx = ssl.create_default_context(cafile=self._tls.get("ca"))
        if self._tls.get("cert"):
            ctx.load_cert_chain(self._tls["cert"], self._tls.get("key"))
        return _PinnedHTTPSConnection(self._host, self._port, self._timeout, ctx,
                                      self._tls.get("server_name") or self._host)

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method, path, body=None):
        """The decoded JSON of a 200 answer; a ShoalError otherwise."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            if self._conn is None:
                self._conn = self._connect()
            self._conn.request(method, path, body=data, headers=headers)
            resp = self._conn.getresponse()
            raw = resp.read()
            status = resp.status
            if resp.getheader("Connection", "").lower() == "close":
                self.close()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise errors.Unavailable("unavailable", "unavailable",
                                     f"{method} {self._host}:{self._port}{path}: {e}") from e
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        if status == 200:
            return doc
        raise errors.from_answer(status, doc)
