"""The loader's workers as threads of the training process: ``workers="threads"``.

ffrecord's heavy work runs without the GIL: the Go core's reads are ``ctypes.CDLL`` calls
(which release it), libjpeg-turbo (``simplejpeg``) and OpenCV release it while they decode
and resize, and token windows are one read call and numpy copies. So ``num_workers`` threads
of the training process can fetch batches side by side, with none of what worker processes
cost: no start-up (a thread starts in microseconds; a process imports torch), no pickling of
datasets, indices or batches, no shared-memory transport, no second copy of the library.

How a batch moves: the training thread draws the indices of the next batch from the
loader's sampler (where torch's own iterators draw them: a user's sampler, or a generator
the training loop also draws from, is never touched by another thread) and queues a
``_Task``; one of the threads fetches it (``dataset.__getitems__`` or one item at a time,
exactly as with 0 workers), collates it, pins it when asked, and marks it done; the training
thread hands the batches out in the order it queued them. A batch it must wait for that no
thread has begun yet (the threads are starting, or waking up) it makes itself, rather than
wait, unless a ``worker_init_fn`` or a ``timeout`` is given. At most ``num_workers ×
prefetch_factor`` batches are queued or held done and not yet handed out (torch's bound):
a new task is queued only as a batch is handed out. The first batch is queued alone, so
that it has the machine to itself (batches made side by side each take longer: a first
batch of JPEGs would take twice as long as with 0 workers); the others follow it.

Batches too cheap for a hand-over: when a batch costs less to make than handing it to a
thread and back (a few token blocks, small records: tens of microseconds, against a wake-up
and the GIL passed twice), the training thread makes the next batches itself, as with 0
workers, in the same order, from the same sampler, pinned and read as the threads would.
``_Pace`` times both ways as the loop sees them and keeps the faster, timing them again now
and then; a loader with a ``worker_init_fn`` or a ``timeout`` always fetches on its threads.

Everything the loader's state relies on is what 0 workers do: the same batch objects
(``sampler.Batch``, with their per-datapoint seeds and prefetch hints) reach the same
dataset object. What differs from worker processes: the dataset, the collate function and
``worker_init_fn`` (called once on each thread with its number) run in the training
process, concurrently: they must be safe to call from several threads (ffrecord's readers,
datasets and transforms are); ``torch.utils.data.get_worker_info()`` is None there, as in
the training loop; global random generators are the training process's own (draw random
augmentation from the per-datapoint seeds: ``ffrecord.torch.batch_seeds``).

Pinned memory: with ``pin_memory=True`` and an accelerator, a thread marks itself as
assembling pinned batches (``collate.pin_batches_in_this_thread``): the buffers ffrecord's
datasets read a batch into, and the tensors the default collate builds, are then allocated
page-locked (torch's caching host allocator, which reuses a block once its tensor is gone
and no asynchronous copy from it is pending), so the batch is never copied again; whatever
else the batch holds is pinned by torch's ``pin_memory`` in that thread, not in one thread
for all.

Lifetime: the threads belong to the loader's iterator. They stop when the epoch ends (unless
``persistent_workers``), when the iterator is dropped or garbage-collected (breaking out of
a ``for`` loop), or when the loader is; a thread in the middle of a batch finishes that
batch first (its result is dropped).
"""

from __future__ import annotations

import collections
import queue
import threading
import time
import weakref
from typing import Any, Callable

import torch
from torch.utils.data.dataloader import _BaseDataLoaderIter

from ffrecord import _timing
from ffrecord._buffers import BufferPool

from . import _transport, collate
from .dataset import fetch_batch

__all__ = ["ThreadedIterator", "check_threads", "resolve_workers"]

WORKERS = ("processes", "threads", "auto")


def resolve_workers(workers: str, dataset: Any) -> str:
    """``"threads"`` or ``"processes"``: what a loader's ``workers=`` asks for over
    ``dataset`` (``"auto"``: threads when the dataset is one of ffrecord's, whose work runs
    without the GIL, processes otherwise). Raises ``ValueError`` for another value, or for
    threads over a dataset they cannot fetch."""
    if workers not in WORKERS:
        raise ValueError(f"workers must be one of {', '.join(map(repr, WORKERS))}, not {workers!r}")
    if workers == "auto":
        workers = "threads" if _gil_free(dataset) else "processes"
    if workers == "threads":
        check_threads(dataset)
    return workers


def _gil_free(dataset: Any) -> bool:
    """True for ffrecord's datasets, whose batches are read and decoded without the GIL."""
    from ffrecord.tokens.blocks import _Blocks

    from .dataset import Dataset
    from .structured import StructuredDataset

    return isinstance(dataset, (Dataset, StructuredDataset, _Blocks))


def check_threads(dataset: Any) -> None:
    """Raises ``ValueError`` when ``dataset`` cannot be fetched by threads: an
    ``IterableDataset`` is one stream, which threads cannot share in order."""
    if isinstance(dataset, torch.utils.data.IterableDataset):
        raise ValueError("workers='threads' needs a map-style dataset: an IterableDataset is one stream "
                         "that threads cannot split (use workers='processes', which gives each worker a replica)")


class _Task:
    """One batch to fetch: its indices, then its batch or the exception fetching it raised."""

    __slots__ = ("index", "batch", "error", "done", "started", "cancelled")

    def __init__(self, index: Any) -> None:
        self.index = index
        self.batch: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.started = False  # a loader thread, or the training thread, took it (claim)
        self.cancelled = False  # nobody will ask for it: a thread that has not started skips it


class _Pipeline:
    """The threads and what they share; holds no reference to the iterator, so that
    dropping the iterator ends them (``ThreadedIterator`` closes it when collected)."""

    def __init__(self, fetch: Callable[[Any], Any], collate_fn: Callable[[Any], Any], workers: int,
                 worker_init_fn: Callable[[int], Any] | None, pin: bool, columns_of: Any = None,
                 clocks: list[_timing.Clock] | None = None, batched: bool = True,
                 loop_clock: _timing.Clock | None = None) -> None:
        self.fetch = fetch  # a batch's datapoints: what 0 workers fetch
        self.collate_fn = collate_fn
        self.batched = batched
        self.clocks = clocks  # each thread's, when the loader times its batches
        self.loop_clock = loop_clock  # the training thread's, for the batches it produces itself
        # the buffers of the batches the training thread produces itself, in columns
        self.here_pool = BufferPool() if columns_of is not None else None
        self.pin = pin
        self.columns_of = columns_of  # the dataset whose batches are read in columns (default collate)
        self.queue: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()  # _Task, or None: a thread's end
        self.lock = threading.RLock()  # a finalizer run by the garbage collector on a thread may take it again
        self.closed = False
        self.threads = [threading.Thread(target=self._work, args=(k, worker_init_fn), daemon=True,
                                         name=f"ffrecord-loader-{k}") for k in range(workers)]
        for thread in self.threads:
            thread.start()

    def _fetch_here(self, clock: _timing.Clock | None, pool: Any = None) -> tuple[Any, ...]:
        """The calling thread fetches this loader's batches from now on: its reads timed on
        ``clock``, its batches pinned when asked and read in columns into ``pool`` when the
        collate takes them. Returns what the thread had, for ``_fetch_here_no_more``."""
        return (_timing.use_clock(clock), collate.pin_batches_in_this_thread(self.pin),
                _transport.read_columns_in_this_thread(self.columns_of, pool))

    @staticmethod
    def _fetch_here_no_more(before: tuple[Any, ...]) -> None:
        clock, pinned, (columns_of, pool) = before
        _timing.use_clock(clock)
        collate.pin_batches_in_this_thread(pinned)
        _transport.read_columns_in_this_thread(columns_of, pool)

    def _work(self, worker_id: int, worker_init_fn: Callable[[int], Any] | None) -> None:
        failure: BaseException | None = None
        clock = self.clocks[worker_id] if self.clocks is not None else None
        try:
            self._fetch_here(clock)
            if worker_init_fn is not None:
                worker_init_fn(worker_id)
        except BaseException as exc:  # raised at the batches this thread takes
            failure = _noted(exc, f"in ffrecord DataLoader thread {worker_id}'s worker_init_fn")
        while True:
            task = self.queue.get()
            if task is None:
                return
            if not self.claim(task):  # cancelled, or the training thread took it
                continue
            try:
                if failure is not None:
                    raise failure
                task.batch = self.produce(task.index, clock)
            except BaseException as exc:
                task.error = exc if exc is failure else _noted(exc, f"in ffrecord DataLoader thread {worker_id}")
            finally:
                task.done.set()
            del task

    def produce(self, index: Any, clock: _timing.Clock | None = None) -> Any:
        """The batch of ``index``: fetched, collated, pinned when asked; its stages marked
        on ``clock`` (the thread's, when the loader times them)."""
        if clock is None:
            batch = self.collate_fn(self.fetch(index))
        else:
            clock.begin()
            data = self.fetch(index)
            clock.fetched(_transport.datapoints(data) if self.batched else 1)
            batch = self.collate_fn(data)
            clock.collated()
        if self.columns_of is not None:
            batch = _transport.columns_as_views(batch)
        if self.pin:
            batch = _transport._pinned(batch)
        if clock is not None:
            clock.handed_over()
        return batch

    def produce_here(self, index: Any) -> Any:
        """The batch of ``index`` produced by the calling thread (the training thread), as
        a loader thread would: timed on the loop's clock, pinned, read in columns."""
        before = self._fetch_here(self.loop_clock, self.here_pool)
        try:
            return self.produce(index, self.loop_clock)
        except BaseException as exc:
            _noted(exc, "in ffrecord DataLoader, fetched on the training thread")
            raise
        finally:
            self._fetch_here_no_more(before)

    def submit(self, task: _Task) -> None:
        self.queue.put(task)

    def claim(self, task: _Task) -> bool:
        """Marks ``task`` started for the calling thread; False when it is cancelled or
        another thread has it."""
        with self.lock:
            if task.cancelled or task.started:
                return False
            task.started = True
            return True

    def cancel(self, tasks: Any) -> None:
        """Tasks nobody will ask for: those not started are skipped, those started are
        waited for (a thread finishes the batch it is on)."""
        with self.lock:
            running = []
            for task in tasks:
                task.cancelled = True
                if task.started:
                    running.append(task)
        current = threading.current_thread()
        if current not in self.threads:
            for task in running:
                task.done.wait()

    def close(self, tasks: Any = ()) -> None:
        """Stops the threads (after the batch each is on); idempotent."""
        if self.closed:
            return
        self.closed = True
        self.cancel(tasks)
        for _ in self.threads:
            self.queue.put(None)
        current = threading.current_thread()
        for thread in self.threads:
            if thread is not current:
                thread.join()


# Measuring whether the training thread should produce the batches itself (see _Pace).
PACE_BATCHES = (16, 128)  # a timing spans at least the first many batches handed out,
PACE_WINDOW_S = 0.025  # and this long unless it has the second many
HAND_OVER_S = 0.002  # threads taking longer a batch: a hand-over's cost (tens of µs) cannot matter
INLINE_SHARE = 0.9  # the training thread takes over when it needs less than this share of the threads' time
HOLD_S = (1.0, 30.0)  # a choice holds this long (doubling while it stands), then both ways are timed again


class _Pace:
    """Whether the training thread produces the next batch itself (``inline``) rather than
    waiting for the threads. Handing a batch to a thread and back costs a wake-up and the
    GIL passed twice: tens of microseconds on a busy machine, more than a batch of a few
    token blocks or small records costs to make. The loop then runs fastest with the
    training thread doing the work, as with 0 workers.

    Both ways are timed as the loop sees them: the time between batches handed out (the
    loop's own work included), over ``PACE_BATCHES[0]`` batches or more and
    ``PACE_WINDOW_S`` seconds or ``PACE_BATCHES[1]`` batches, the longest gap left out (a
    pause of the loop's). The threads are timed first; only where they take under
    ``HAND_OVER_S`` a batch is the other way tried. The training thread takes over when it
    needs under ``INLINE_SHARE`` of the threads' time; the choice holds for ``HOLD_S``
    (doubling while re-timing confirms it), then both are timed again.
    Batches are handed out in the same order either way: the threads' batches in flight are
    handed out before the training thread makes the next one, and it draws the indices from
    the sampler as it does for the threads.

    >>> import itertools
    >>> pace = _Pace(bound=1, enabled=True, clock=itertools.count().__next__)  # a batch a second
    >>> for _ in range(100): pace.handed_out(pending=1)
    >>> pace.inline, pace._times   # the threads timed; a hand-over's cost cannot matter
    (False, {False: 1.0})
    """

    def __init__(self, bound: int, enabled: bool, clock: Callable[[], float] = time.perf_counter) -> None:
        self.inline = False  # the training thread makes the batches (once none is in flight)
        self.enabled = enabled
        self._bound = bound
        self._clock = clock
        self._times: dict[bool, float] = {}  # seconds a batch, by way (inline or not), this round of timing
        self._chosen: bool | None = None  # the way the last round chose
        self._hold = HOLD_S[0]
        self._until: float | None = None  # while a choice holds: when it ends
        self._skip = bound  # batches handed out before the timing starts (the threads' first ones come at once)
        self._paused = False
        self._start = self._last = self._longest = 0.0
        self._count = 0

    def restart(self) -> None:
        """A new epoch: the pause before its first batch is no batch's time (a timing under
        way goes on from that batch)."""
        self._paused = True

    def handed_out(self, pending: int) -> None:
        """A batch was handed out; ``pending``: batches still in flight."""
        if not self.enabled:
            return
        now = self._clock()
        if self._until is not None:
            if now < self._until:
                return
            self._until, self._times, self._skip = None, {}, 1  # time the current way, then the other
        if self._skip:
            self._skip -= 1
            self._start = self._last = now
            self._count, self._longest, self._paused = 0, 0.0, False
            return
        if self._paused:
            self._start += now - self._last
            self._last, self._paused = now, False
            return
        gap, self._last = now - self._last, now
        self._count += 1
        self._longest = max(self._longest, gap)
        if self._count < PACE_BATCHES[0] or (now - self._start < PACE_WINDOW_S and self._count < PACE_BATCHES[1]):
            return
        self._times[self.inline] = (now - self._start - self._longest) / (self._count - 1)
        if len(self._times) == 1 and (self.inline or self._times[False] < HAND_OVER_S):
            self._switch(not self.inline, pending)  # time the other way
            return
        inline = self._times.get(True, float("inf")) < INLINE_SHARE * self._times.get(False, float("inf"))
        hold = self._hold if inline == self._chosen else HOLD_S[0]
        self._chosen, self._hold = inline, min(2 * hold, HOLD_S[1])
        if inline != self.inline:
            self._switch(inline, pending)
        self._until = now + hold

    def _switch(self, inline: bool, pending: int) -> None:
        """The other way from now: the batches in flight are handed out first (inline), or
        the threads fill their queue (not inline), before its timing starts."""
        self.inline = inline
        self._skip = max(1, pending) if inline else self._bound


def _fetcher(dataset: Any, batched: bool) -> Callable[[Any], Any]:
    """What 0 workers fetch for a sampler's item (before collating it): a batch fetched at
    once (``__getitems__``) or item by item; without batching (``batch_size=None``), one item."""
    if batched:
        return lambda index: fetch_batch(dataset, index)
    return dataset.__getitem__


def _noted(exc: BaseException, where: str) -> BaseException:
    """``exc`` with a note of where it was raised (Python 3.11+), raised as it is: its type
    and traceback reach the training loop unchanged."""
    add_note = getattr(exc, "add_note", None)
    if add_note is not None and where not in getattr(exc, "__notes__", ()):
        add_note(where)
    return exc


class ThreadedIterator(_BaseDataLoaderIter):
    """torch's loader iterator with ``num_workers`` threads of this process as its workers
    (see the module's docstring).

    >>> from ffrecord.torch import DataLoader
    >>> [b.tolist() for b in DataLoader(list(range(5)), batch_size=2, num_workers=2, workers="threads")]
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, loader: Any, clocks: list[_timing.Clock] | None = None,
                 loop_clock: _timing.Clock | None = None) -> None:
        super().__init__(loader)
        check_threads(loader.dataset)
        fetch = _fetcher(self._dataset, self._auto_collation)
        self._bound = max(1, self._num_workers * (loader.prefetch_factor or 1))
        self._pending: collections.deque[_Task] = collections.deque()
        self._exhausted = False  # the sampler has no more batches this epoch
        # batches of threads that ran worker_init_fn come from those threads only; with a
        # timeout, from threads that it watches (a batch stuck on the training thread is not)
        self._pace = _Pace(self._bound, enabled=loader.worker_init_fn is None and not self._timeout)
        columns_of = self._dataset if self._collate_fn is collate.default_collate else None
        self._pipeline = _Pipeline(fetch, self._collate_fn, self._num_workers, loader.worker_init_fn,
                                   self._pin_memory, columns_of, clocks, self._auto_collation, loop_clock)
        self._finalizer = weakref.finalize(self, self._pipeline.close, self._pending)
        # the first batch alone: with the machine to itself it comes as soon as with 0 workers
        # (batches fetched side by side would each take longer); the rest once it is out
        self._fill(most=1)

    def _reset(self, loader: Any, first_iter: bool = False) -> None:
        """A new epoch (persistent workers): what is queued of the last one is dropped."""
        super()._reset(loader, first_iter)
        if hasattr(self, "_pipeline"):  # torch's __init__ does not call it; the first epoch is filled there
            self._pipeline.cancel(self._pending)
            self._pending.clear()
            self._exhausted = False
            self._pace.restart()
            self._fill()

    def _fill(self, most: int | None = None) -> None:
        """Queues tasks until ``_bound`` (or ``most``) are pending or the sampler is
        exhausted (none while the training thread produces the batches itself)."""
        bound = self._bound if most is None else min(most, self._bound)
        while len(self._pending) < bound and not self._exhausted and not self._pace.inline:
            try:
                index = self._next_index()
            except StopIteration:
                self._exhausted = True
                break
            task = _Task(index)
            self._pending.append(task)
            self._pipeline.submit(task)

    def _next_data(self) -> Any:
        error = None
        if self._pace.inline and not self._pending:
            try:
                index = self._next_index()
            except StopIteration:
                self._exhausted = True
                self._end()
            batch = self._pipeline.produce_here(index)
        else:
            if not self._pending:
                self._fill()
                if not self._pending:
                    self._end()
            task = self._pending[0]
            if self._pace.enabled and self._pipeline.claim(task):
                # no thread has begun it (they are waking up, or starting): rather than wait
                self._pending.popleft()
                try:
                    batch = self._pipeline.produce_here(task.index)
                except BaseException as exc:  # raised once the next batches are queued
                    batch, error = None, exc
            else:
                if not task.done.wait(self._timeout or None):
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
                self._pending.popleft()
                batch, error = task.batch, task.error
        self._pace.handed_out(len(self._pending))
        self._fill()
        if error is not None:
            raise error
        return batch

    def _end(self) -> None:
        """The epoch has no batch left: raises ``StopIteration`` (the threads stopped, unless
        they persist)."""
        if not self._persistent_workers:
            self._shutdown()
        raise StopIteration

    def _shutdown(self) -> None:
        """Stops the threads now (the finalizer then has nothing left to do)."""
        self._finalizer()

    def __repr__(self) -> str:
        fetching = "the training thread" if self._pace.inline else "the threads"
        return (f"<ThreadedIterator: {self._num_workers} threads, {len(self._pending)} batches pending, "
                f"fetched by {fetching}>")
