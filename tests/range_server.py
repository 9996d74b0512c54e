"""A small range-capable HTTP/1.1 server on loopback, with injected latency and faults.

A test double: the tests use it to drive the core's retries, deadlines and concurrency
(``from range_server import RangeServer``; pytest puts ``tests/`` on the path). The
object-storage benchmarks (``benchmarks/remote.py``, ``benchmarks/cache_epoch.py``) use the
same server, imported as ``tests.range_server``, to put every contender behind one loopback
endpoint with the same latency: a second server for them would repeat the range, ETag and
keep-alive handling below with the faults left out. It imports nothing but the standard
library, so both can load it.

>>> import urllib.request
>>> with RangeServer({"/a.bin": b"0123456789"}) as srv:
...     req = urllib.request.Request(srv.url + "/a.bin", headers={"Range": "bytes=2-4"})
...     urllib.request.urlopen(req).read()
b'234'
"""

from __future__ import annotations

import collections
import json
import re
import socket
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
#: A GET of this path answers the counters as JSON (``gets`` per path, ``bytes``, ``requests``).
STATS_PATH = "/__stats"
#: Faults that ``RangeServer.inject`` accepts: an HTTP status, or one of these.
FAULTS = ("reset", "truncate", "stall", "corrupt")


class LoopbackServer:
    """A threaded HTTP/1.1 server on ``127.0.0.1`` with the handler class ``handler``,
    served from a thread between ``start`` and ``stop`` (or in a ``with`` block)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Any:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class RangeServer(LoopbackServer):
    """Serves ``objects`` (path → bytes) on ``127.0.0.1``: ``HEAD`` and ``GET`` with one
    byte range, an ``ETag`` of the content (``If-Match`` honoured), keep-alive connections,
    ``latency`` seconds before each answer, and faults injected one request at a time
    (``inject``) or for every request (``always``; ``always_get`` for GETs only).
    ``requests`` counts requests, ``gets`` the GETs of each path, ``log`` lists them,
    ``bytes_sent`` counts their body bytes, and ``peak`` the most in flight at once;
    ``ignore_range`` answers every GET with the whole object, as some servers do.
    """

    def __init__(self, objects: dict[str, bytes] | None = None, latency: float = 0.0) -> None:
        self.objects = dict(objects or {})
        self.latency = latency
        self.always: str | int | None = None
        self.always_get: str | int | None = None  # a fault for every GET (HEADs answered)
        self.requests = 0
        self.gets: collections.Counter[str] = collections.Counter()
        self.log: list[tuple[str, int, int]] = []  # (path, start, end) of every GET answered
        self.bytes_sent = 0
        self.ignore_range = False
        self.peak = 0
        self._faults: collections.deque[str | int] = collections.deque()
        self._in_flight = 0
        self._etags: dict[int, tuple[bytes, str]] = {}
        self._lock = threading.Lock()
        super().__init__(_handler_for(self))

    def inject(self, *faults: str | int) -> None:
        """Queues faults for the next requests: an HTTP status (``503``) or one of
        ``FAULTS``: ``"reset"`` closes the connection unanswered, ``"truncate"`` sends half
        the body, ``"stall"`` answers nothing for 5 s, ``"corrupt"`` flips the first byte."""
        for f in faults:
            if not isinstance(f, int) and f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}; known: HTTP statuses and {FAULTS}")
        with self._lock:
            self._faults.extend(faults)

    def __repr__(self) -> str:
        return f"RangeServer({self.url}, {len(self.objects)} objects, latency={self.latency})"

    def _begin(self, head: bool) -> str | int | None:
        with self._lock:
            self.requests += 1
            self._in_flight += 1
            self.peak = max(self.peak, self._in_flight)
            if self._faults:
                return self._faults.popleft()
            return self.always if head or self.always_get is None else self.always_get

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def etag(self, data: bytes) -> str:
        """The ETag of an object's content, computed once per object (replacing an entry of
        ``objects`` gives it another)."""
        with self._lock:
            seen = self._etags.get(id(data))
            if seen is None or seen[0] is not data:
                seen = self._etags[id(data)] = (data, f'"{len(data):x}-{zlib.crc32(data):08x}"')
            return seen[1]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def _handler_for(server: RangeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in separate writes: with Nagle's algorithm the body
            # would wait for the client's delayed ACK (40 ms) on every answer.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
            self._answer(head=True)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(head=False)

        def _answer(self, head: bool) -> None:
            fault = server._begin(head)
            try:
                if server.latency:
                    time.sleep(server.latency)
                self._serve(fault, head)
            finally:
                server._end()

        def _serve(self, fault: str | int | None, head: bool) -> None:
            if fault == "reset":
                self.close_connection = True
                self.connection.close()
                return
            if fault == "stall":
                time.sleep(5)
                self.close_connection = True
                return
            if isinstance(fault, int):
                self._status(fault, head)
                return
            path = self.path.split("?", 1)[0]
            if path == STATS_PATH:  # the counters, for a benchmark driving the server from afar
                with server._lock:
                    body = json.dumps({"gets": dict(server.gets), "bytes": server.bytes_sent,
                                       "requests": server.requests}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            data = server.objects.get(path)
            if data is None:
                self._status(404, head)
                return
            etag = server.etag(data)
            if self.headers.get("If-Match", etag) not in (etag, "*"):
                self._status(412, head)
                return
            start, end, code = 0, len(data), 200
            match = _RANGE.match(self.headers.get("Range", ""))
            if match and not server.ignore_range:
                start = int(match[1])
                end = min(len(data), int(match[2]) + 1) if match[2] else len(data)
                code = 206
            body = memoryview(data)[start:end]  # no copy: the server must not be the bottleneck
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", etag)
            self.send_header("Accept-Ranges", "bytes")
            if code == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
            self.end_headers()
            if head:
                return
            with server._lock:
                server.gets[path] += 1
                server.bytes_sent += len(body)
                server.log.append((path, start, end))
            if fault == "truncate":
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
                return
            if fault == "corrupt" and body:
                body = bytes([body[0] ^ 0xFF]) + bytes(body[1:])
            self.wfile.write(body)

        def _status(self, code: int, head: bool) -> None:
            message = f"injected {code}".encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            if not head:
                self.wfile.write(message)

    return Handler
