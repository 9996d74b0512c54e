"""Loaders' counters for Prometheus: ``text()`` in its text exposition format, and
``serve(port)``, a scrape endpoint on 127.0.0.1.

Every ``ffrecord.torch.DataLoader`` registers itself here as it is made, weakly: a loader
that is dropped drops out of the metrics. Its series carry one label, ``loader``, its name
(``DataLoader(..., name="train")``; ``loader-N`` by default, N counting the loaders of the
process made without a name), and nothing of its dataset (paths and URLs, which may carry
credentials, never appear). Loaders of the same name add up. The values are
``loader.stats()``'s, cumulative: the I/O counters of the loader's readers, its batches and
datapoints, the training loop's wait in seconds, and each stage's seconds (label ``stage``).

>>> text().startswith("# HELP ffrecord_loader_wait_seconds_total")
True
"""

from __future__ import annotations

import functools
import operator
import threading
import weakref
from collections.abc import Iterable
from typing import Any

__all__ = ["MetricsServer", "register", "serve", "text"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (metric, help, stats() key); counters all, in the order text() writes them
_COUNTERS = (
    ("ffrecord_loader_wait_seconds_total", "Time the training loop spent inside iter() and next() of the loader.",
     "wait_s"),
    ("ffrecord_loader_elapsed_seconds_total", "The loader's epochs, from iter() to the last next().", "elapsed_s"),
    ("ffrecord_loader_batches_total", "Batches the loader's workers fetched.", "batches"),
    ("ffrecord_loader_datapoints_total", "Datapoints the loader's workers fetched.", "datapoints"),
    ("ffrecord_loader_requests_total", "Requests its readers sent to object storage.", "requests"),
    ("ffrecord_loader_fetched_bytes_total", "Bytes its readers fetched from object storage.", "bytes_fetched"),
    ("ffrecord_loader_delivered_bytes_total", "Stored bytes of the samples its readers delivered.",
     "bytes_delivered"),
    ("ffrecord_loader_retries_total", "Requests its readers retried.", "retries"),
    ("ffrecord_loader_cache_hits_total", "Chunk cache hits of its readers.", "cache_hits"),
    ("ffrecord_loader_cache_misses_total", "Chunk cache misses of its readers.", "cache_misses"),
    ("ffrecord_loader_cache_evictions_total", "Chunks its readers evicted from the cache.", "evictions"),
    ("ffrecord_loader_cache_bypassed_total", "Reads of its readers that bypassed the chunk cache.", "bypassed"),
    ("ffrecord_loader_prefetched_total", "Reads its readers prefetched.", "prefetched"),
)
STAGES = ("read", "transform", "collate", "transfer")
_STAGE_METRIC = "ffrecord_loader_stage_seconds_total"
_STAGE_HELP = ("Time the loader's workers spent in each stage of its batches, summed over workers: "
               "read (ffrecord's reads), transform (the rest of the dataset's fetch), collate, "
               "transfer (the hand-over to the training loop).")

_loaders: weakref.WeakSet = weakref.WeakSet()
_lock = threading.Lock()


def register(loader: Any) -> None:
    """Adds ``loader`` (anything with ``name`` and ``stats()``) to the metrics while it
    lives (``ffrecord.torch.DataLoader`` registers itself)."""
    with _lock:
        _loaders.add(loader)


def _totals() -> dict[str, dict[str, float]]:
    """The live loaders' stats, added up by name, names in order."""
    with _lock:
        loaders = list(_loaders)
    totals: dict[str, dict[str, float]] = {}
    for loader in loaders:
        stats = loader.stats()
        mine = totals.setdefault(loader.name, dict.fromkeys(stats, 0))
        for key, value in stats.items():
            mine[key] = mine.get(key, 0) + value
    return dict(sorted(totals.items()))


def text() -> str:
    """The metrics of every live loader in Prometheus' text exposition format (version
    0.0.4): ``# HELP`` and ``# TYPE`` lines, then a sample per loader.

    >>> print(text().splitlines()[1])
    # TYPE ffrecord_loader_wait_seconds_total counter
    """
    totals = _totals()
    lines: list[str] = []
    for metric, help_, key in _COUNTERS:
        lines += _family(metric, help_, ((_labels(loader=name), stats.get(key, 0)) for name, stats in totals.items()))
    lines += _family(_STAGE_METRIC, _STAGE_HELP, ((_labels(loader=name, stage=stage), stats.get(f"{stage}_s", 0))
                                                  for name, stats in totals.items() for stage in STAGES))
    return "\n".join(lines) + "\n"


def _family(metric: str, help_: str, samples: Iterable[tuple[str, float]]) -> list[str]:
    return [f"# HELP {metric} {_escape_help(help_)}", f"# TYPE {metric} counter",
            *(f"{metric}{labels} {_value(value)}" for labels, value in samples)]


def _labels(**labels: str) -> str:
    """``{name="value",...}`` with the values escaped.

    >>> _labels(loader='a"b')
    '{loader="a\\\\"b"}'
    """
    return "{" + ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items()) + "}"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _value(value: float) -> str:
    """A sample's value: an int as is, a float as Python writes it (what Prometheus reads).

    >>> _value(3), _value(0.25)
    ('3', '0.25')
    """
    return str(value) if isinstance(value, int) else repr(float(value))


@functools.cache
def _handler() -> type:
    """The server's request handler class, made on first use: ``http.server`` (4 ms to
    import) is loaded only by a process that serves its metrics, not by every loader's."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "ffrecord-metrics"

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                self.send_error(404, "metrics are at /metrics")
                return
            body = text().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # a scraper's every visit is no news
            pass

    return Handler


class MetricsServer:
    """The metrics served on ``127.0.0.1:port`` at ``/metrics`` from a thread, until
    ``stop()`` (or the end of a ``with`` block).

    >>> import urllib.request
    >>> with serve(0) as server:
    ...     body = urllib.request.urlopen(server.url).read().decode()
    >>> body == text()
    True
    """

    def __init__(self, port: int = 0) -> None:
        if isinstance(port, bool) or not 0 <= operator.index(port) <= 65535:
            raise ValueError(f"port must be an int from 0 (any free port) to 65535, not {port!r}")
        import http.server

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", operator.index(port)), _handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="ffrecord-metrics", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def stop(self) -> None:
        """Stops serving and frees the port; idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "serving" if self._thread.is_alive() else "stopped"
        return f"<MetricsServer {self.url} {state}>"


def serve(port: int = 0) -> MetricsServer:
    """Serves ``text()`` on ``http://127.0.0.1:port/metrics`` for a Prometheus scraper
    (``port=0``: a free port, see ``.port``); returns the running server (``stop()`` it, or
    use it in a ``with`` block). ValueError for a port out of range, OSError when it is taken.
    """
    return MetricsServer(port)
