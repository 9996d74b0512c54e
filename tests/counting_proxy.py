"""A reverse proxy on 127.0.0.1 in front of an S3 server (moto's, in tests): it counts the
requests that pass, by method and key, and can add a latency to each, as a distant store
would. Requests are forwarded as they come (their signature covers the proxy's host, which
moto does not check). ``GET /__count__`` answers the count so far (another process's
phases: opening, then reading), itself neither forwarded nor counted."""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


COUNT_PATH = "/__count__"


class CountingProxy:
    """``with CountingProxy(endpoint, latency=0.02) as proxy:`` then use ``proxy.url`` as
    the endpoint; ``proxy.requests`` lists ``(method, path)`` in order; ``reset()``."""

    def __init__(self, endpoint: str, latency: float = 0.0) -> None:
        target = urlsplit(endpoint)
        self.host, self.port = target.hostname, target.port
        self.latency = latency
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()

    def counts(self) -> Counter:
        """Requests by method (``LIST`` for a listing's GET)."""
        with self._lock:
            return Counter(method for method, _ in self.requests)

    def __len__(self) -> int:
        with self._lock:
            return len(self.requests)

    def _note(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(proxy: CountingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _forward(self) -> None:
            if self.path == COUNT_PATH:
                body = str(len(proxy)).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            listing = self.command == "GET" and "list-type=" in self.path
            proxy._note("LIST" if listing else self.command, self.path)
            if proxy.latency:
                time.sleep(proxy.latency)
            upstream = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(key, value)
                # a HEAD's length is the object's, not its (empty) body's
                self.send_header("Content-Length", answer.getheader("Content-Length", "0")
                                 if self.command == "HEAD" else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                upstream.close()

        do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _forward  # noqa: N815

    return Handler
