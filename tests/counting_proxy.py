"""A forwarding HTTP/1.1 proxy on loopback that counts the requests that pass and what the
server sends back.

Put in front of moto's S3 server (``endpoint_url`` = the proxy's URL), it counts requests
by method and key, the GETs and the body bytes of their answers per path, as a bill for
egress and requests would, and can add a latency to each request, as a distant store
would. ``GET /__count__`` answers the number of requests so far (for another process's
phases: opening, then reading), itself neither forwarded nor counted. moto does not check
signatures, so requests signed for the proxy's address are answered. Like
``range_server``, it imports nothing but the standard library.

>>> from range_server import RangeServer
>>> with RangeServer({"/a.bin": b"0123456789"}) as srv, CountingProxy(srv.url) as proxy:
...     import urllib.request
...     urllib.request.urlopen(proxy.url + "/a.bin").read(), proxy.bytes_sent, dict(proxy.gets)
(b'0123456789', 10, {'/a.bin': 1})
"""

from __future__ import annotations

import collections
import http.client
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any

from range_server import LoopbackServer

COUNT_PATH = "/__count__"
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class CountingProxy(LoopbackServer):
    """Forwards every request to ``upstream`` (``http://host:port``), after ``latency``
    seconds. ``requests`` lists ``(method, path)`` in order (``LIST`` for a listing's GET),
    ``gets`` counts the GETs of each path (query left out) and ``bytes_sent`` the body
    bytes answered to them; ``reset()`` forgets the requests."""

    def __init__(self, upstream: str, latency: float = 0.0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname, parsed.port)
        self.latency = latency
        self.requests: list[tuple[str, str]] = []
        self.gets: collections.Counter[str] = collections.Counter()
        self.bytes_sent = 0
        self._lock = threading.Lock()
        super().__init__(_handler_for(self))

    def counted(self, suffix: str = "") -> tuple[int, int]:
        """``(GETs, bytes)`` so far; the GETs of paths ending with ``suffix``."""
        with self._lock:
            return sum(n for path, n in self.gets.items() if path.endswith(suffix)), self.bytes_sent

    def counts(self) -> collections.Counter:
        """Requests by method (``LIST`` for a listing's GET)."""
        with self._lock:
            return collections.Counter(method for method, _ in self.requests)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self.requests)

    def _note(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def _count(self, path: str, nbytes: int) -> None:
        with self._lock:
            self.gets[path] += 1
            self.bytes_sent += nbytes

    def __repr__(self) -> str:
        return f"CountingProxy({self.url} -> {self.upstream[0]}:{self.upstream[1]})"


def _handler_for(proxy: CountingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        upstream: http.client.HTTPConnection | None = None

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _answer_count(self) -> None:
            body = str(len(proxy)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _forward(self) -> None:
            if self.path == COUNT_PATH:
                self._answer_count()
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            listing = self.command == "GET" and "list-type=" in self.path
            proxy._note("LIST" if listing else self.command, self.path)
            if proxy.latency:
                time.sleep(proxy.latency)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            if self.upstream is None:
                self.upstream = http.client.HTTPConnection(*proxy.upstream, timeout=60)
            try:
                self.upstream.request(self.command, self.path, body=body, headers=headers)
                answer = self.upstream.getresponse()
                data = answer.read()
            except (OSError, http.client.HTTPException):
                self.upstream.close()
                self.upstream = None
                self.send_error(502)
                return
            self.send_response(answer.status, answer.reason)
            head = self.command == "HEAD"  # its Content-Length is the object's, sent as is
            for k, v in answer.getheaders():
                if k.lower() not in _HOP_BY_HOP and (head or k.lower() != "content-length"):
                    self.send_header(k, v)
            if not head:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "GET":  # before the answer: the client may look at once
                proxy._count(urllib.parse.urlsplit(self.path).path, len(data))
            if not head:
                self.wfile.write(data)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward  # noqa: N815 - http.server's naming

    return Handler
