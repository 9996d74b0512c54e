"""Where a loader's time goes: the stage clocks of the threads that fetch its batches.

A thread that fetches a DataLoader's batches (a worker process's, a loader thread, the
training thread with 0 workers) marks each batch's stages on a ``Clock``: its fetch (the
dataset's ``__getitems__``: ffrecord's reads and the user's transform), its collation and
its hand-over to the training loop (packing into shared memory, pinning), a few clock reads
per batch. ffrecord's batch reads made meanwhile add the time they take (``timed_read``):
of a batch's fetch, that much is *read* and the rest *transform*. A clock adds into a row
of its loader's table of counters (``ffrecord.torch._stats``) in shared memory for a worker
process, so that the batch's figures are there before the batch is handed over; the
loader reads the clocks of its own process's threads directly.

The module imports neither torch nor the library: readers import it.

>>> row = bytearray(8 * len(COLUMNS))
>>> clock = Clock(row)
>>> clock.begin(); clock.fetched(2); clock.collated(); clock.handed_over()
>>> clock.batches, clock.datapoints, Clock(row).values() == clock.values()
(1, 2, True)
"""

from __future__ import annotations

import functools
import struct
import threading
from time import perf_counter_ns as now
from typing import Any, Callable, TypeVar

__all__ = ["COLUMNS", "Clock", "now", "set_worker_clock", "timed_read", "use_clock", "worker_clock"]

#: A loader's timing columns, after its readers' counters: nanoseconds, then counts.
#: ``wait``: the training loop inside ``iter()`` and ``next()``; ``elapsed``: its epochs
#: from ``iter()`` to the last ``next()``; the stages, summed over the threads doing them.
TIMES = ("wait", "elapsed", "read", "transform", "collate", "transfer")
COUNTS = ("batches", "datapoints")
COLUMNS = tuple(f"{name}_ns" for name in TIMES) + COUNTS
_ROW = struct.Struct(f"={len(COLUMNS)}q")

_local = threading.local()  # .clock: the clock of the batch this thread fetches, if any

F = TypeVar("F", bound=Callable[..., Any])


class Clock:
    """The stages of the batches one thread fetches, as totals (``values()``, in the order
    of ``COLUMNS``), kept in this thread's Python ints and, for a worker process, written
    at the end of each batch into ``sink`` (a writable buffer of shared memory) at
    ``offset``, where the totals start from (an earlier worker of the same row left its own).

    A batch: ``begin`` (its fetch starts), ``fetched`` (its datapoints are in hand; the
    ffrecord reads since ``begin`` were its read, the rest its transform), ``collated``,
    ``handed_over`` (packed or pinned: the batch is the training loop's to take).
    """

    __slots__ = ("wait", "elapsed", "read", "transform", "collate", "transfer", "batches", "datapoints",
                 "mark", "read_pending", "reading", "sink", "offset")

    def __init__(self, sink: Any = None, offset: int = 0) -> None:
        self.sink, self.offset = sink, offset
        (self.wait, self.elapsed, self.read, self.transform, self.collate, self.transfer, self.batches,
         self.datapoints) = _ROW.unpack_from(sink, offset) if sink is not None else (0,) * len(COLUMNS)
        self.mark = 0  # when the current stage began
        self.read_pending = 0  # ns of ffrecord reads since begin
        self.reading = False  # inside a timed read (nested ones are not timed again)

    def values(self) -> tuple[int, ...]:
        """The totals, in the order of ``COLUMNS``."""
        return (self.wait, self.elapsed, self.read, self.transform, self.collate, self.transfer, self.batches,
                self.datapoints)

    def flush(self) -> None:
        """The totals written to the sink (the loader's table), when there is one."""
        if self.sink is not None:
            _ROW.pack_into(self.sink, self.offset, *self.values())

    def begin(self, at: int = 0) -> None:
        """A batch's fetch starts (``at``: now, when the caller has read the clock)."""
        self.mark = at or now()
        self.read_pending = 0

    def fetched(self, count: int) -> None:
        """The fetch returned the batch's ``count`` datapoints (to collate)."""
        at = now()
        fetch = at - self.mark
        read = min(self.read_pending, fetch)
        self.read += read
        self.transform += fetch - read
        self.datapoints += count
        self.mark = at
        self.read_pending = 0

    def collated(self) -> None:
        at = now()
        self.collate += at - self.mark
        self.mark = at

    def handed_over(self, batches: int = 1, at: int = 0) -> None:
        """The batch (``batches`` of them: a worker's task) is ready for the loop."""
        at = at or now()
        self.transfer += at - self.mark
        self.batches += batches
        self.mark = at
        if self.sink is not None:
            self.flush()

    def __repr__(self) -> str:
        return "Clock({})".format(", ".join(f"{name}={value}" for name, value in zip(COLUMNS, self.values())))


def timed_read(fn: F) -> F:
    """``fn``, a batch read of ffrecord's, adding the time it takes to the batch being
    fetched on this thread (nothing else when no loader fetches on it; a read inside
    another timed read is part of that one)."""

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        clock = getattr(_local, "clock", None)
        if clock is None or clock.reading:
            return fn(*args, **kwargs)
        clock.reading = True
        start = now()
        try:
            return fn(*args, **kwargs)
        finally:
            clock.read_pending += now() - start
            clock.reading = False

    return timed  # type: ignore[return-value]


def use_clock(clock: Clock | None) -> Clock | None:
    """``clock`` is this thread's (None: none) for the reads it makes from now on; returns
    the one it had."""
    before, _local.clock = getattr(_local, "clock", None), clock
    return before


_worker_clock: Clock | None = None  # a loader worker process's (set by its start)


def set_worker_clock(clock: Clock) -> None:
    """This process is a loader worker whose main thread fetches with ``clock``."""
    global _worker_clock
    _worker_clock = clock
    _local.clock = clock


def worker_clock() -> Clock | None:
    """The loader worker process's clock (None elsewhere, and in loaders that do not time)."""
    return _worker_clock
