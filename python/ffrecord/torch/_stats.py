"""What a DataLoader's reads cost and where its time goes: its readers' I/O counters and
its stage timings, summed over its processes and threads; the warning when it reads remote
files without a chunk cache.

Counters (``FileReader.stats``) live in each process's readers. A loader's workers add what
their readers did to a row of a table in shared memory after each batch they read
(``publish``), so the main process sums its own readers and the rows (``LoaderStats``):
workers that exited (a finished epoch's) keep their share there.

Timings (``ffrecord._timing``): each thread that fetches batches (a worker process's main
thread, a loader thread, the training thread with 0 workers) adds its batches' stages up on
a clock: a worker process's writes its totals to its row of the same table (its timing
columns) after each batch, this process's are read as they are. The training loop's clock
holds its wait in ``iter()``/``next()``, its epochs' elapsed time, and its share of the
hand-over (unpacking a worker's batch). ``LoaderStats.total`` adds it all up, in seconds;
``LoaderStats.epoch`` the difference between an epoch's start and the next one's.

Without a cache every process reads its samples from the store in every epoch: the loader
warns once per process (``UncachedRemoteWarning``), quoting what ``ffrecord plan`` expects
such an epoch to cost.
"""

from __future__ import annotations

import re
import warnings
import weakref
from typing import Any, Callable

import torch
import torch.utils.data

from ffrecord import _counters as counters
from ffrecord import _lib, _remote, _timing
from ffrecord._timing import Clock, now
from ffrecord.errors import UncachedRemoteWarning
from ffrecord.reader import FileReader

from . import _transport
from . import dataset as _dataset  # (imports this module: its names are looked up when used)

__all__ = ["LoaderStats", "TimedCollate", "loader_name", "publish", "warn_if_uncached"]

#: A row of a loader's table: its readers' counters, then its timing columns.
COLUMNS = _lib.STAT_NAMES + _timing.COLUMNS
_IO = len(_lib.STAT_NAMES)
#: What ``stats()`` gives besides the readers' counters, in this order (seconds as floats).
TIMING_KEYS = _timing.COUNTS + tuple(f"{name}_s" for name in _timing.TIMES)


class _Publisher:
    """A loader worker's side: adds what its readers counted since the last time to its row.

    Only remote readers count anything (requests, bytes, the chunk cache's hits...), and a
    dataset gains remote readers only as it opens remote files: the walk that finds them
    (every member of a mixture of thousands) is made again only when the process-wide table
    of open files opened a remote reader, or the dataset is another (local opens, a mixture's
    first epoch opening its thousand members, made one walk each: quadratic in the members);
    then a batch costs one look at the remote readers' counters (a reader closed since is
    passed over), not a walk and a call per file."""

    def __init__(self, row: torch.Tensor) -> None:
        self.row = row[:_IO]
        self.last: dict[int, tuple[weakref.ref, list[int]]] = {}
        self._walked: tuple[Any, ...] | None = None  # (dataset id, the table's remote opens)
        self._remote: list[FileReader] = []

    def _remote_readers(self, dataset: Any) -> list[FileReader]:
        from ffrecord.dataset.open_files import READERS

        seen = (id(dataset), READERS.remote_opened)
        if seen != self._walked:
            self._remote = [r for r in _dataset.readers_of(dataset) if any(map(_remote.is_url, r.fnames))]
            self._walked = seen
        return self._remote

    def publish(self) -> None:
        info = torch.utils.data.get_worker_info()
        if info is None:
            return
        for reader in self._remote_readers(info.dataset):
            if reader.closed:
                continue
            counted = [int(reader.stats()[name]) for name in _lib.STAT_NAMES]
            ref, before = self.last.get(id(reader), (None, None))
            if ref is None or ref() is not reader:  # a reader not seen yet (its id may be reused)
                before = [0] * len(counted)
            self.row += torch.tensor([a - b for a, b in zip(counted, before)], dtype=torch.int64)
            self.last[id(reader)] = (weakref.ref(reader), counted)


_publisher: _Publisher | None = None  # set in a loader worker with a row to publish to


def publish() -> None:
    """In a loader worker: adds what the worker's readers counted since the last call to the
    loader's table (the datasets call it after each batch they read); elsewhere nothing."""
    if _publisher is not None:
        _publisher.publish()


def _worker_clock(table: torch.Tensor, row: int) -> Clock:
    """A worker process's clock, writing its totals into the timing columns of ``table``'s
    row ``row`` (shared memory), from the totals an earlier worker of that row left."""
    return Clock(table.numpy(), (row * len(COLUMNS) + _IO) * table.element_size())


class _WorkerStats:
    """The loader's ``worker_init_fn``, after giving the worker its row of the table (and,
    when it times its batches, its clock)."""

    def __init__(self, worker_init_fn: Callable[[int], Any] | None, table: torch.Tensor, timed: bool) -> None:
        self.worker_init_fn = worker_init_fn
        self.table = table
        self.timed = timed

    def __call__(self, worker_id: int) -> None:
        global _publisher
        _publisher = _Publisher(self.table[worker_id])
        if self.timed:
            _timing.set_worker_clock(_worker_clock(self.table, worker_id))
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)

    def __repr__(self) -> str:
        return f"_WorkerStats({self.worker_init_fn!r})"


class TimedCollate:
    """A loader's ``collate_fn`` where the training thread fetches (0 workers): the fetch
    ends as it is called, the collation as it returns (``batched``: the loader batches,
    else each fetch is one datapoint)."""

    def __init__(self, collate_fn: Callable[[Any], Any], clock: Clock, batched: bool) -> None:
        self.collate_fn = collate_fn
        self.clock = clock
        self.batched = batched

    def __call__(self, data: Any) -> Any:
        self.clock.fetched(_transport.datapoints(data) if self.batched else 1)
        batch = self.collate_fn(data)
        self.clock.collated()
        return batch

    def __repr__(self) -> str:
        return f"TimedCollate({self.collate_fn!r})"


class LoaderStats:
    """The counters of a loader's readers (the main process's and every worker's) and the
    timings of its threads, and the totals as each epoch began.

    With worker ``processes``, a row of a table in shared memory for each worker, which
    writes its counters and its clock's totals there; this process's clocks (the training
    thread's, each loader thread's) are read as they are. ``timing``: the stages are timed.

    >>> stats = LoaderStats(workers=2)
    >>> stats.total([])["bytes_fetched"], stats.total([])["wait_s"]
    (0, 0.0)
    """

    def __init__(self, workers: int, processes: bool = False, timing: bool = True) -> None:
        table = torch.zeros((workers if processes else 0, len(COLUMNS)), dtype=torch.int64)
        # in shared memory only for worker processes to write in (a descriptor per loader)
        self.table = table.share_memory_() if processes else table
        self.timing = timing
        # this process's clocks: the training thread's, then each loader thread's
        self.loop = Clock() if timing else None
        self.threads = [Clock() for _ in range(workers)] if timing and not processes else None
        self.fetches_here = timing and workers == 0  # the training thread fetches the batches
        self.last = 0  # when the loop last came back from the loader (its epoch's elapsed time ends there)
        self.runs: list[tuple[int, dict[str, int | float]]] = []  # (epoch, totals as it began), as run
        # this process's readers as last counted, and the counts of those gone since (closed
        # by the table of open files): totals never go back
        self._counted: dict[int, tuple[weakref.ref, dict[str, int | float]]] = {}
        self._gone = counters.summed([])

    def worker_init_fn(self, worker_init_fn: Callable[[int], Any] | None, timed: bool) -> _WorkerStats:
        """``worker_init_fn`` wrapped to give each worker process its row (``timed``: and
        its clock, when its batches travel through ``_transport``, whose hooks mark them)."""
        return _WorkerStats(worker_init_fn, self.table, self.timing and timed)

    def epoch_began(self, epoch: int, readers: list[FileReader]) -> None:
        """``iter()`` begins epoch ``epoch``: the totals so far are where it starts."""
        self.runs.append((epoch, self.total(readers)))

    def iter_returned(self, began: int) -> None:
        """``iter()``, called at ``began`` (a ``now()``), returns: the loop waited for it,
        and the epoch's elapsed time starts there."""
        loop = self.loop
        if loop is not None:
            self.last = end = now()
            loop.wait += end - began
            loop.elapsed += end - began

    def timed_next(self, next_batch: Callable[[], Any]) -> Any:
        """``next_batch()``, the loop's wait for it counted (with 0 workers, the batch's
        fetch timed on the loop's clock: its hand-over ends when ``next`` returns)."""
        loop = self.loop
        start = now()
        fetches_here = self.fetches_here
        if fetches_here:
            _timing.use_clock(loop)
            loop.begin(start)
        try:
            batch = next_batch()
        finally:
            end = now()
            loop.wait += end - start
            loop.elapsed += end - self.last
            self.last = end
        if fetches_here:
            loop.handed_over(at=end)
        return batch

    def total(self, readers: list[FileReader]) -> dict[str, int | float]:
        """The rows and this process's clocks and ``readers`` added up, with the readers'
        ratio and the timings in seconds."""
        sums = self.table.sum(0).tolist() if len(self.table) else [0] * len(COLUMNS)
        io = counters.summed([dict(zip(_lib.STAT_NAMES, sums[:_IO])), self._readers_io(readers)])
        timings = sums[_IO:]
        for clock in ([self.loop] if self.loop else []) + (self.threads or []):
            timings = [a + b for a, b in zip(timings, clock.values())]
        named = dict(zip(_timing.COLUMNS, timings))
        seconds = {f"{name}_s": named[f"{name}_ns"] / 1e9 for name in _timing.TIMES}
        return {**io, **{name: named[name] for name in _timing.COUNTS}, **seconds}

    def _readers_io(self, readers: list[FileReader]) -> dict[str, int | float]:
        """The counters of ``readers`` (this process's) added up, with those of the readers
        counted before and closed or gone since, as last counted: a reader the table of open
        files closes mid-epoch (a dataset of more shards than its bound) takes nothing back.
        What a reader counts after the last look before it closes (an epoch's start, a
        ``stats()`` call) is missed, and a reader opened and closed between two looks is not
        counted: worker processes, which look after every batch, miss far less."""
        now_open = {id(r): (weakref.ref(r), r.stats()) for r in readers if not r.closed}
        gone = [counts for key, (ref, counts) in self._counted.items()
                if key not in now_open or now_open[key][0]() is not ref()]
        if gone:
            self._gone = counters.summed([self._gone, *gone])
        self._counted = now_open
        return counters.summed([self._gone, *(counts for _, counts in now_open.values())])

    def epoch(self, epoch: int, readers: list[FileReader]) -> dict[str, int | float]:
        """What epoch ``epoch`` (its latest run) added: the totals as the next epoch began,
        or now, less those as it began. ValueError when it has not begun."""
        runs = [k for k, (number, _) in enumerate(self.runs) if number == epoch]
        if not runs:
            ran = sorted({number for number, _ in self.runs})
            raise ValueError(f"epoch {epoch} has not begun on this loader (epochs begun: "
                             f"{', '.join(map(str, ran)) or 'none'})")
        k = runs[-1]
        start = self.runs[k][1]
        end = self.runs[k + 1][1] if k + 1 < len(self.runs) else self.total(readers)
        diff = {name: end[name] - start[name] for name in end if name != counters.RATIO}
        io = counters.with_ratio({name: diff[name] for name in _lib.STAT_NAMES})
        return {**io, **{name: diff[name] for name in TIMING_KEYS}}


_NAME = re.compile(r"[A-Za-z0-9_.:/+-]{1,100}\Z")
_unnamed = 0


def loader_name(name: str | None) -> str:
    """A loader's name in its metrics (``ffrecord.metrics``): ``name`` checked (1 to 100
    letters, digits or ``_.:/+-``: no room for a URL's credentials or a query's token), or
    ``loader-N``, N counting the loaders of this process made without one.

    >>> loader_name("train"), loader_name(None).startswith("loader-")
    ('train', True)
    """
    global _unnamed
    if name is None:
        _unnamed += 1
        return f"loader-{_unnamed}"
    if not isinstance(name, str) or not _NAME.match(name):
        # the name itself is not quoted: a mistaken URL may carry credentials
        size = f"a str of {len(name)} characters" if isinstance(name, str) else f"a {type(name).__name__}"
        raise ValueError("a DataLoader's name must be 1 to 100 letters, digits or _.:/+- "
                         f"(it names the loader's metrics), not {size}")
    return name


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
