"""What a DataLoader's reads cost: its readers' I/O counters summed over its processes, and
the warning when it reads remote files without a chunk cache.

Counters (``FileReader.stats``) live in each process's readers. A loader's workers add what
their readers did to a row of a table in shared memory after each batch they read
(``publish``), so the main process sums its own readers and the rows (``LoaderStats``):
workers that exited (a finished epoch's) keep their share there.

Without a cache every process reads its samples from the store in every epoch: the loader
warns once per process (``UncachedRemoteWarning``), quoting what ``ffrecord plan`` expects
such an epoch to cost.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any, Callable

import torch
import torch.utils.data

from ffrecord import _counters as counters
from ffrecord import _lib
from ffrecord.errors import UncachedRemoteWarning
from ffrecord.reader import FileReader

from . import dataset as _dataset  # (imports this module: its names are looked up when used)

__all__ = ["LoaderStats", "publish", "warn_if_uncached"]


class _Publisher:
    """A loader worker's side: adds what its readers counted since the last time to its row."""

    def __init__(self, row: torch.Tensor) -> None:
        self.row = row
        self.last: dict[int, tuple[weakref.ref, list[int]]] = {}

    def publish(self) -> None:
        info = torch.utils.data.get_worker_info()
        if info is None:
            return
        for reader in _dataset.readers_of(info.dataset):
            if reader.closed:
                continue
            now = [int(reader.stats()[name]) for name in _lib.STAT_NAMES]
            ref, before = self.last.get(id(reader), (None, None))
            if ref is None or ref() is not reader:  # a reader not seen yet (its id may be reused)
                before = [0] * len(now)
            self.row += torch.tensor([a - b for a, b in zip(now, before)], dtype=torch.int64)
            self.last[id(reader)] = (weakref.ref(reader), now)


_publisher: _Publisher | None = None  # set in a loader worker with a row to publish to


def publish() -> None:
    """In a loader worker: adds what the worker's readers counted since the last call to the
    loader's table (the datasets call it after each batch they read); elsewhere nothing."""
    if _publisher is not None:
        _publisher.publish()


class _WorkerStats:
    """The loader's ``worker_init_fn``, after giving the worker its row of the table."""

    def __init__(self, worker_init_fn: Callable[[int], Any] | None, table: torch.Tensor) -> None:
        self.worker_init_fn = worker_init_fn
        self.table = table

    def __call__(self, worker_id: int) -> None:
        global _publisher
        _publisher = _Publisher(self.table[worker_id])
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)

    def __repr__(self) -> str:
        return f"_WorkerStats({self.worker_init_fn!r})"


class LoaderStats:
    """The counters of a loader's readers: the main process's and every worker's.

    >>> stats = LoaderStats(workers=2)
    >>> stats.total([])["bytes_fetched"], stats.total([])["fetched_per_delivered"]
    (0, 0.0)
    """

    def __init__(self, workers: int) -> None:
        # in shared memory only for workers to write in (a descriptor per loader)
        table = torch.zeros((workers, len(_lib.STAT_NAMES)), dtype=torch.int64)
        self.table = table.share_memory_() if workers else table

    def worker_init_fn(self, worker_init_fn: Callable[[int], Any] | None) -> _WorkerStats:
        """``worker_init_fn`` wrapped to give each worker its row."""
        return _WorkerStats(worker_init_fn, self.table)

    def total(self, readers: list[FileReader]) -> dict[str, int | float]:
        """The rows and ``readers`` (the main process's) added up, with their ratio."""
        rows = [dict(zip(_lib.STAT_NAMES, row)) for row in self.table.tolist()]
        return counters.summed(rows + [r.stats() for r in readers if not r.closed])


_warned = False


def warn_if_uncached(dataset: Any, world_size: int) -> None:
    """Warns (``UncachedRemoteWarning``, once per process) when ``dataset`` reads remote
    files without a chunk cache, quoting ``ffrecord plan``'s figures for this loader's share
    of an epoch (``world_size`` loaders sharing it)."""
    global _warned
    if _warned:
        return
    readers = [r for r in _dataset.readers_of(dataset) if not r.closed and any(
        r.file_info(k).read_from == "remote" for k in range(len(r.fnames)))]
    if not readers:
        return
    _warned = True
    from ffrecord.plan import plan_reader

    plans = [plan_reader(r, nodes=world_size, shuffle="full", cached=False) for r in readers]
    size = _size(sum(p.node_bytes_cold for p in plans))
    gets = sum(p.node_gets_cold for p in plans)
    files = sum(len(r.fnames) for r in readers)
    warnings.warn(
        f"this DataLoader reads {files} remote file{'s' * (files > 1)} without a chunk cache: every epoch "
        f"downloads its share again, about {size} in {gets:,} GETs (ffrecord plan's figure without "
        "a cache). Pass cache_dir='/local/disk/dir' to the reader (or set FFRECORD_CACHE_DIR) to download "
        "each chunk once per node and read later epochs from local disk; "
        "warnings.filterwarnings('ignore', category=ffrecord.UncachedRemoteWarning) silences this.",
        UncachedRemoteWarning, stacklevel=3)


def _size(n: int) -> str:
    """A byte count for a message.

    >>> _size(3 << 30), _size(1536), _size(12)
    ('3,072.0 MiB', '1.5 KiB', '12 bytes')
    """
    if n >= 1 << 20:
        return f"{n / (1 << 20):,.1f} MiB"
    return f"{n / 1024:,.1f} KiB" if n >= 1024 else f"{n} bytes"
