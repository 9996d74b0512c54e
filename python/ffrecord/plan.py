"""What training from object storage will cost: requests, bytes and cache per epoch and per
node, for a dataset, a cluster and an order — before running it.

``plan(url, nodes=64, gpus_per_node=8, batch_size=64, samples_per_second=20_000)`` opens the
dataset (its headers only), cuts it into chunks with the core's chunk rule
(``FileReader.chunk_bounds``) and models the epoch:

- ``shuffle="chunk"`` (chunk-aware): chunks are permuted and split among the nodes, each
  node reads its share a window of ``window`` chunks at a time, samples shuffled within
  the window. A node downloads each chunk of its share once per epoch (one GET each), and
  none in later epochs when its cache holds the share. The request that reads a file's
  header also brings the chunks lying wholly in its first bytes (a file of about a chunk
  whole; the first file's first chunk), which every node then has without a GET of its
  own (``first_request_bytes``).
- ``shuffle="full"``: every node reads samples from anywhere. With a cache, each node
  downloads every chunk; without, one GET per sample.

S3 answers about 5,500 GET/HEAD requests per second per key prefix; ``gets_per_second``
is what the job would ask of the dataset's prefix at ``samples_per_second``.

>>> import os, tempfile
>>> from ffrecord import FileWriter
>>> path = os.path.join(tempfile.mkdtemp(), "d.ffr")
>>> with FileWriter(path, 4000) as w:
...     w.write_many([bytes(1024)] * 4000)
>>> p = plan(path, nodes=2, gpus_per_node=2, batch_size=16, samples_per_second=1000,
...          chunk_size=256 << 10, window=4)
>>> p.chunks, p.node_gets_cold, p.job_gets_warm  # 4 chunks come with the header, 2 of a share
(16, 6, 0)
"""

from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from . import _lib
from .order import ChunkShuffle, FullShuffle, shuffle_quality
from .reader import FileReader

#: Requests per second S3 serves per key prefix (GET and HEAD) before answering 503 SlowDown.
S3_REQUESTS_PER_PREFIX = 5500
_TRAILER = 44  # bytes a cached chunk file adds: its seal (sealSize, core/source/cachefile.go)


@dataclass(frozen=True)
class Plan:
    """The figures of one plan; ``str(plan)`` is the table ``ffrecord plan`` prints."""

    samples: int
    data_bytes: int
    chunks: int
    chunk_size: int
    nodes: int
    ranks: int
    batch_size: int
    shuffle: str
    window: int
    epoch_seconds: float
    node_gets_cold: int  #: data GETs of one node in the first epoch
    node_bytes_cold: int
    node_gets_warm: int  #: in a later epoch, the cache holding the node's share
    node_bytes_warm: int
    job_gets_cold: int
    job_gets_warm: int
    gets_per_second: float  #: the job's GETs per second on the dataset's prefix, cold
    cache_streaming: int  #: cache per node for the epoch to run (chunks in use + ahead)
    cache_warm: int  #: cache per node for later epochs to make no GET
    chunks_per_batch: float  #: distinct chunks a batch draws from (shuffle quality)
    chunks_per_batch_full: float  #: the same under a full shuffle
    window_fraction: float  #: share of a node's data one sample can be swapped with
    #: requests one process makes to open the dataset: its manifest's, when it has one
    #: (``open_dataset``), else a ``FileReader``'s (a HEAD and a GET per file)
    open_requests: int = 0

    def __str__(self) -> str:
        mib = 1 << 20
        rows = [
            ("dataset", f"{self.samples:,} samples, {self.data_bytes / mib:,.1f} MiB, "
                        f"{self.chunks:,} chunks of <= {self.chunk_size / mib:g} MiB"),
            ("open", f"{self.open_requests:,} requests per process, {self.open_requests * self.ranks:,} "
                     "for the job"),
            ("cluster", f"{self.nodes} nodes x {self.ranks // self.nodes} GPUs, batch "
                        f"{self.batch_size} per GPU, epoch ~{self.epoch_seconds:,.0f} s"),
            ("order", f"{self.shuffle} shuffle" + (f", windows of {self.window} chunks"
                                                   if self.shuffle == "chunk" else "")),
            ("per node, epoch 1", f"{self.node_gets_cold:,} GETs, {self.node_bytes_cold / mib:,.1f} MiB"),
            ("per node, epoch 2+", f"{self.node_gets_warm:,} GETs, {self.node_bytes_warm / mib:,.1f} MiB"),
            ("job, epoch 1", f"{self.job_gets_cold:,} GETs, {self.gets_per_second:,.1f} GETs/s on the "
                             f"prefix (S3: ~{S3_REQUESTS_PER_PREFIX:,}/s)"),
            ("job, epoch 2+", f"{self.job_gets_warm:,} GETs"),
            ("cache per node", f"{self.cache_streaming / mib:,.1f} MiB to run, "
                               f"{self.cache_warm / mib:,.1f} MiB for GET-free later epochs"),
            ("shuffle quality", f"{self.chunks_per_batch:,.1f} chunks per batch "
                                f"(full shuffle: {self.chunks_per_batch_full:,.1f}); a window is "
                                f"{100 * self.window_fraction:.3g}% of a node's data"),
        ]
        if self.gets_per_second > S3_REQUESTS_PER_PREFIX:
            rows.append(("warning", "over S3's per-prefix request rate: expect 503 SlowDown; "
                                    "use larger chunks, a cache, or several prefixes"))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


class PlanError(ValueError):
    """An argument ``plan`` cannot model; the message names it."""


_LARGEST = 2**63 - 1  # what the core and numpy take as a count or a size


def _count(name: str, value: Any) -> int:
    """``value``, a count or a size in bytes: an integer from 1 to 2**63 - 1."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
            and 1 <= value <= _LARGEST:
        return int(value)
    raise PlanError(f"{name} must be an integer from 1 to 2**63 - 1, not {value!r}")


def _rate(name: str, value: Any) -> float:
    """``value``, a rate: a finite number above 0."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        try:
            rate = float(value)
        except OverflowError:
            rate = math.inf
        if math.isfinite(rate) and rate > 0:
            return rate
    raise PlanError(f"{name} must be a finite number above 0, not {value!r}")


def plan(paths: Any, *, nodes: int = 1, gpus_per_node: int = 1, batch_size: int = 64,
         samples_per_second: float = 10_000, shuffle: str = "chunk", chunk_size: int = 16 << 20,
         window: int = 8, cached: bool = True, cache_limit: int | None = None,
         storage_options: dict[str, Any] | None = None) -> Plan:
    """The plan of an epoch over ``paths`` (anything ``FileReader`` opens); see the module.
    ``cached=False`` models readers without a chunk cache (one GET per sample); with one,
    ``cache_limit`` per node (None: as much as the plan needs) bounds what later epochs
    find cached. Counts and sizes (``nodes``, ``gpus_per_node``, ``batch_size``,
    ``chunk_size``, ``window``, ``cache_limit``) are integers from 1 to 2**63 - 1 and
    ``samples_per_second`` a finite number above 0: anything else (``nan``, ``inf``,
    ``2.5`` nodes, ``True``) raises ``PlanError`` naming the argument, before any request."""
    settings = _settings(nodes=nodes, gpus_per_node=gpus_per_node, batch_size=batch_size,
                         samples_per_second=samples_per_second, shuffle=shuffle, chunk_size=chunk_size,
                         window=window, cached=cached, cache_limit=cache_limit)
    with FileReader(paths, check_data=False, storage_options=storage_options) as reader:
        opening_requests = reader.stats()["requests"]
        plan_ = _plan_open(reader, settings, opening_requests)
    manifest = _manifest_requests(paths, storage_options)
    return plan_ if manifest is None else replace(plan_, open_requests=manifest)


def plan_reader(reader: FileReader, *, nodes: int = 1, gpus_per_node: int = 1, batch_size: int = 64,
                samples_per_second: float = 10_000, shuffle: str = "chunk", chunk_size: int = 16 << 20,
                window: int = 8, cached: bool = True, cache_limit: int | None = None) -> Plan:
    """``plan`` of the files an open ``reader`` reads (their headers are all it needs): a
    DataLoader's warning about reading without a cache quotes its figures."""
    return _plan_open(reader, _settings(nodes=nodes, gpus_per_node=gpus_per_node, batch_size=batch_size,
                                        samples_per_second=samples_per_second, shuffle=shuffle,
                                        chunk_size=chunk_size, window=window, cached=cached,
                                        cache_limit=cache_limit), reader.stats()["requests"])


def _settings(*, nodes: Any, gpus_per_node: Any, batch_size: Any, samples_per_second: Any, shuffle: Any,
              chunk_size: Any, window: Any, cached: Any, cache_limit: Any) -> dict[str, Any]:
    """A plan's arguments checked (``PlanError`` naming the first bad one) and typed."""
    if shuffle not in ("chunk", "full"):
        raise PlanError(f"shuffle must be 'chunk' or 'full', not {shuffle!r}")
    if not isinstance(cached, (bool, np.bool_)):
        raise PlanError(f"cached must be True or False, not {cached!r}")
    counts = {name: _count(name, value) for name, value in (
        ("nodes", nodes), ("gpus_per_node", gpus_per_node), ("batch_size", batch_size),
        ("chunk_size", chunk_size), ("window", window))}
    return dict(counts, samples_per_second=_rate("samples_per_second", samples_per_second), shuffle=shuffle,
                cached=bool(cached), cache_limit=None if cache_limit is None else _count("cache_limit", cache_limit))


def _plan_open(reader: FileReader, settings: dict[str, Any], open_requests: int) -> Plan:
    """The plan of an epoch over the files ``reader`` has open, with checked ``settings``
    (``open_requests``: what opening them took)."""
    chunk_size = settings["chunk_size"]
    bounds = reader.chunk_bounds(chunk_size)
    data_bytes = sum(reader.file_info(k).data_bytes for k in range(len(reader.fnames)))
    sizes = _chunk_bytes(reader, bounds)
    seeded, opening = _with_headers(reader, bounds, sizes, chunk_size)
    model = dict(settings)
    model["ranks"] = model["nodes"] * model.pop("gpus_per_node")
    return _model(bounds=bounds, chunk_bytes=sizes, seeded=seeded, opening_bytes=opening, data_bytes=data_bytes,
                  open_requests=open_requests, **model)


def _chunk_bytes(reader: FileReader, bounds: np.ndarray) -> np.ndarray:
    """The stored bytes of each chunk."""
    sizes = reader.sizes(np.arange(reader.n)) if reader.n else np.zeros(0, np.int64)
    sums = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    return sums[bounds[1:]] - sums[bounds[:-1]]


def first_request_bytes(chunk_size: int, first_file: bool) -> int:
    """Bytes from the start of a remote file that the request reading its header asks for,
    with a chunk cache of ``chunk_size`` (0: none); the core's rule
    (``FirstRequestBytes``): the chunks lying wholly in them are cached from that request.

    >>> first_request_bytes(16 << 20, True) > first_request_bytes(16 << 20, False) >= 1 << 20
    True
    """
    out = ctypes.c_uint64()
    _lib.check(_lib.current().dll.ffr_first_request_bytes(chunk_size, int(first_file), ctypes.byref(out)))
    return out.value


def _with_headers(reader: FileReader, bounds: np.ndarray, chunk_bytes: np.ndarray,
                  chunk_size: int) -> tuple[np.ndarray, int]:
    """Which chunks come with the requests that read the files' headers (bool per chunk),
    and the sample-data bytes those requests download, with a chunk cache."""
    seeded = np.zeros(len(chunk_bytes), bool)
    opening, first_sample = 0, 0
    for k in range(len(reader.fnames)):
        info = reader.file_info(k)
        upto = min(info.file_bytes, first_request_bytes(chunk_size, k == 0))
        opening += max(0, upto - info.header_bytes)
        lo, hi = np.searchsorted(bounds, [first_sample, first_sample + info.samples])
        ends = info.header_bytes + np.cumsum(chunk_bytes[lo:hi])
        seeded[lo:hi] = ends <= upto
        first_sample += info.samples
    return seeded, opening


def _manifest_requests(paths: Any, storage_options: dict[str, Any] | None) -> int | None:
    """The requests opening the manifest of the dataset at ``paths`` takes, when it is
    one dataset's directory with a manifest."""
    from . import _remote
    from .dataset import manifest

    if not isinstance(paths, (str, os.PathLike)):
        return None
    loaded = manifest.load(_remote.as_path(paths, storage_options))
    return None if loaded is None else loaded.requests


def _model(*, bounds: np.ndarray, chunk_bytes: np.ndarray, seeded: np.ndarray, opening_bytes: int,
           open_requests: int, chunk_size: int, data_bytes: int,
           nodes: int, ranks: int, batch_size: int, samples_per_second: float, shuffle: str,
           window: int, cache_limit: int | None, cached: bool) -> Plan:
    # The chunk-aware order is ffrecord.order.ChunkShuffle with one canonical partition per
    # node: each node reads its own share of the chunks, a window of `window` chunks at a
    # time; the shuffle-quality figures are measured on that order itself.
    samples = int(bounds[-1])
    chunks = len(chunk_bytes)
    total = int(chunk_bytes.sum())
    largest = int(chunk_bytes.max()) + _TRAILER if chunks else 0
    per_node_chunks = math.ceil(chunks / nodes)  # fewer chunks than nodes: nodes share chunks
    share_bytes = math.ceil(per_node_chunks * total / chunks) if chunks else 0
    epoch_seconds = samples / samples_per_second
    cache_warm = share_bytes + per_node_chunks * _TRAILER
    # Every node downloads, with the headers, the chunks those requests hold: those of its
    # share make no GET of their own; the requests' bytes are the node's.
    share = per_node_chunks / chunks if shuffle == "chunk" and chunks else 1.0
    seeded_gets = round(int(seeded.sum()) * share)
    seeded_bytes = round(int(chunk_bytes[seeded].sum()) * share)
    if shuffle == "chunk":
        node_gets, node_bytes = per_node_chunks, share_bytes
        cache_streaming = 2 * min(window, per_node_chunks) * largest  # a window read, the next ahead
        window_fraction = (min(window, per_node_chunks) or 1) / max(1, per_node_chunks)
        chosen = ChunkShuffle(bounds, seed=0, window=window, partitions=min(nodes, chunks)) if samples else None
    else:  # every node reads every chunk
        node_gets, node_bytes = chunks, total
        cache_warm = total + chunks * _TRAILER
        cache_streaming = cache_warm
        window_fraction = 1.0
        chosen = FullShuffle(samples, 0) if samples else None
    node_gets = max(0, node_gets - seeded_gets)
    node_bytes = node_bytes - seeded_bytes + opening_bytes
    if not cached:  # one GET per sample, every epoch
        node_gets, node_bytes = math.ceil(samples / nodes), math.ceil(total / nodes)
        warm_gets, warm_bytes, cache_streaming, cache_warm = node_gets, node_bytes, 0, 0
    elif cache_limit is not None and cache_limit < cache_warm:
        # Later epochs find what LRU kept of the chunks: the same fraction misses again.
        held = max(0.0, cache_limit / cache_warm)
        warm_gets, warm_bytes = math.ceil(node_gets * (1 - held)), math.ceil(node_bytes * (1 - held))
    else:
        warm_gets, warm_bytes = 0, 0
    quality = shuffle_quality(chosen, batch_size, bounds) if chosen is not None else {}
    per_batch = quality.get("distinct_chunks", 0.0)
    full = quality.get("full_shuffle_distinct_chunks", 0.0)
    return Plan(samples=samples, data_bytes=data_bytes, chunks=chunks, chunk_size=chunk_size,
                nodes=nodes, ranks=ranks, batch_size=batch_size, shuffle=shuffle, window=window,
                epoch_seconds=epoch_seconds, node_gets_cold=node_gets, node_bytes_cold=node_bytes,
                node_gets_warm=warm_gets, node_bytes_warm=warm_bytes,
                job_gets_cold=node_gets * nodes, job_gets_warm=warm_gets * nodes,
                gets_per_second=node_gets * nodes / epoch_seconds if epoch_seconds else 0.0,
                cache_streaming=cache_streaming, cache_warm=cache_warm,
                chunks_per_batch=per_batch, chunks_per_batch_full=full,
                window_fraction=window_fraction, open_requests=open_requests)


def print_plan(paths: Any, **kw: Any) -> Plan:
    """Prints ``plan(paths, **kw)`` and returns it."""
    p = plan(paths, **kw)
    print(p)
    return p
