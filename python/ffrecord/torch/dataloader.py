"""A drop-in ``torch.utils.data.DataLoader`` that resumes at the exact batch.

The loader counts the batches it has *handed to the user* in the current epoch (not the ones
its workers have prefetched), so ``state_dict()`` taken anywhere inside the training loop
describes exactly what comes next. Everything else is torch's own loader: the only change
is the index sampler, replaced by one that can start an epoch at any batch (see
``sampler.py``).
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.utils.data
from torch._utils import ExceptionWrapper

from ffrecord._processes import start_context
from ffrecord._timing import now

from . import _threads, _transport
from .collate import default_collate
from .dataset import Dataset, readers_of
from ffrecord.order import FullShuffle, Order, RankShare

from . import _resume, _stats
from ffrecord.dataset.mixture import members_identity
from ffrecord.errors import ForeignStateError, StateError
from ffrecord.ledger import skips

from ._state import dataset_fingerprint, encode_generator_state, identified_source, member_id
from .sampler import EpochBatchSampler, SkipableSampler, SkippingBatchSampler, WorkerTasks, GeneratorOrder
from .structured import StructuredDataset

__all__ = ["DataLoader", "SkipableSampler", "mixture_start"]

STATE_FORMAT = _resume.STATE_FORMAT


@dataclass(frozen=True)
class _Pin:
    """An epoch that runs over an earlier version of the dataset, which grew since: its
    first ``samples`` datapoints, identified as the loader state taken on that version
    recorded them (``fingerprint``, which the epoch's states record again)."""

    samples: int
    fingerprint: dict[str, Any]


@dataclass
class _EpochRun:
    """Progress of the epoch an iterator is producing."""

    epoch: int
    start: int  # first batch of this epoch (set_step or a loaded state)
    base: int  # canonical position the epoch's segment starts at (elastic resume)
    num_batches: int  # batches in a whole epoch
    generator_state: torch.Tensor | None  # the loader's generator as the epoch began
    before: int = 0  # batches of the epoch delivered before it, as a loaded state records
    yielded: int = 0  # batches handed to the user so far
    skipped: int = 0  # batches passed over (DataLoader.skip) since the run began
    restart: bool = False  # a skip asks for torch's iterator to start again further on
    finished: bool = False  # the iterator has raised StopIteration
    pin: _Pin | None = None  # the epoch runs over an earlier version of the dataset

    @property
    def step(self) -> int:
        """The batch of the segment that comes next."""
        return self.start + self.yielded + self.skipped

    @property
    def length(self) -> int:
        """What ``len()`` says of this epoch: see ``DataLoader.__len__``."""
        return self.num_batches - self.start + self.before

    @property
    def exhausted(self) -> bool:
        return self.finished or self.step >= self.num_batches


class _TrackedIterator:
    """torch's iterator for one epoch, counting the batches it hands out, one at a time
    when a worker delivered several as one task (``_transport.TaskGroup``).

    A batch that failed (its dataset read or collate raised) counts as handed out: torch
    goes on with the next one, so a loop that catches the error and carries on has spent
    it, and a state taken afterwards resumes after it."""

    def __init__(self, inner: Any, run: _EpochRun, tasks: WorkerTasks, stats: _stats.LoaderStats,
                 restarted: Callable[[Any], Any]) -> None:
        self._inner = inner
        self._run = run
        self._tasks = tasks
        self._stats = stats if stats.timing else None  # the loop's wait is timed
        self._grouped: collections.deque[Any] = collections.deque()  # a task's batches still to hand out
        self._restarted = restarted  # torch's iterator again, from the run's step (after a skip)
        self._yielded_before = 0  # batches the run had handed out when the inner iterator began

    def __iter__(self) -> _TrackedIterator:
        return self

    def __next__(self) -> Any:
        stats = self._stats
        return self._next_batch() if stats is None else stats.timed_next(self._next_batch)

    def _next_batch(self) -> Any:
        if self._run.restart:
            self._restart()
        if self._grouped:
            batch = self._grouped.popleft()
        else:
            try:
                batch = _transport.received(self._next_inner(), self._stats and self._stats.loop)
            except StopIteration:
                self._run.finished = True
                raise
            except Exception:
                self._count_failed_task()
                raise
            if type(batch) is _transport.TaskGroup:
                self._grouped.extend(batch)
                batch = self._grouped.popleft()
        self._run.yielded += 1
        if type(batch) is ExceptionWrapper:  # this batch of a task failed in its worker
            batch.reraise()
        return batch

    def _restart(self) -> None:
        """Drops what torch's iterator holds of the batches skipped (those in flight are
        not waited for unless its workers persist) and starts it again at the run's step."""
        run = self._run
        run.restart = False
        self._grouped.clear()
        self._inner = self._restarted(self._inner)
        self._yielded_before = run.yielded

    def _count_failed_task(self) -> None:
        """After torch's iterator raised: the batches of the task it was receiving count as
        handed out when that task failed (torch goes on with the next), not when the task
        never came (a worker that died, a timeout: the iterator is broken, and a state
        taken now must deliver that task's batches again)."""
        received = getattr(self._inner, "_rcvd_idx", None)  # tasks a worker pool has received
        if received is None:  # no workers: the batch drawn was read here, and failed
            self._run.yielded += 1
        else:
            run = self._run
            run.yielded = max(run.yielded, self._yielded_before + self._tasks.batches_in(received))

    def _next_inner(self) -> Any:
        """torch's ``__next__`` for a map-style dataset, without its profiler scope when no
        profiler runs (that scope costs about a tenth of a batch of token blocks in process)."""
        inner = self._inner
        if _profiler_enabled() or not _BARE_NEXT:
            return next(inner)
        if inner._sampler_iter is None:
            inner._reset()
        data = inner._next_data()
        inner._num_yielded += 1
        return data

    def __len__(self) -> int:
        return self._run.length

    def __repr__(self) -> str:
        return f"<DataLoader iterator: epoch {self._run.epoch}, batch {self._run.step}>"


_profiler_enabled = getattr(torch.autograd, "_profiler_enabled", None) or (lambda: True)
# torch's iterator parts the bare __next__ uses (private: without them, torch's __next__ is used)
_BARE_NEXT = all(hasattr(torch.utils.data.dataloader._BaseDataLoaderIter, name)
                 for name in ("_reset", "_next_data", "__next__"))


# Batches per loader worker task when a batch is only read: a task costs a worker and the
# main process ~0.3 ms of queues and wake-ups whatever it carries, about a third of a worker's
# work on a batch of 64 16 KiB datapoints; four batches a task leave a quarter of that cost.
TASK_GROUP = 4


def _resolve_ranks(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """The given rank and world size, completed from ``torch.distributed`` when initialised."""
    if (rank is None or world_size is None) and dist.is_available() and dist.is_initialized():
        rank = dist.get_rank() if rank is None else rank
        world_size = dist.get_world_size() if world_size is None else world_size
    return (0 if rank is None else rank), (1 if world_size is None else world_size)


class DataLoader(torch.utils.data.DataLoader):
    """``torch.utils.data.DataLoader`` plus exact resumption: ``set_step``, ``state_dict``.

    Takes torch's arguments, plus:

    - ``skippable`` (default True): enables ``set_step``, ``set_epoch``, ``state_dict`` and
      ``load_state_dict``. ``skippable=False`` leaves torch's sampling untouched (for tools
      such as PyTorch Lightning that replace the sampler).
    - ``seed``: the shuffle order of epoch ``e`` is then a pure function of ``(seed, e)``.
      With ``generator`` instead, the order is exactly ``torch.utils.data.RandomSampler``'s
      for that generator (batch for batch the stock DataLoader's). With neither, a seed is
      drawn from torch's global RNG once, at construction (0 when distributed, like
      ``DistributedSampler``, so that all ranks agree).
    - ``rank``, ``world_size``: the share of each epoch this process reads; taken from
      ``torch.distributed`` when it is initialised. See ``EpochBatchSampler`` for padding.
    - ``order``: an ``ffrecord.order`` order (e.g. ``ChunkShuffle``) instead of
      ``shuffle``/``seed``.

    States resume on any topology (world size, per-rank batch size, workers) when the
    order is canonical (``seed=`` or ``order=``, or sequential); see ``_resume.py``.

    Workers start with ``fork`` unless ``multiprocessing_context`` is given or the process
    has fixed its start method; ``forkserver`` and ``spawn`` work too. A forked worker
    never collects the objects it inherits (``ffrecord._processes``).

    ``workers``: what the ``num_workers`` workers are. ``"processes"`` (the default):
    torch's worker processes. ``"threads"``: threads of this process, which fetch, collate
    and pin batches side by side (ffrecord's reads and decodes run without the GIL), with no
    start-up, pickling or transport (see ``_threads``; a map-style dataset only). Where a
    batch costs less than handing it to a thread and back (tens of microseconds: a few token
    blocks), the training thread makes the batches itself, in the same order, while that
    measures faster (unless a ``worker_init_fn`` or a ``timeout`` is given).
    ``"auto"``: threads for ffrecord's own datasets, processes otherwise.

    ``shared_memory`` (default True): worker batches travel in shared memory, not through
    torch's pipe (see ``_transport``): tensors and arrays arrive as views of it, and
    ``bytes``-like values as read-only ``memoryview`` objects. False keeps torch's pipe
    (always used where there is no ``memfd_create``: outside Linux).

    ``name``: the loader's name in its metrics (``ffrecord.metrics``; 1 to 100 letters,
    digits or ``_.:/+-``; ``loader-N`` by default). ``timing`` (default True): the loader
    times where its batches spend their time (``stats()``: read, transform, collate,
    transfer, and the training loop's wait), a few clock reads per batch; see
    docs/profiling.md.

    Each batch is one ``dataset[indices]`` call (via ``__getitems__``), then ``collate_fn``.
    Without a ``collate_fn``, batches are collated by ``ffrecord.torch.collate.default_collate``:
    torch's ``default_collate`` results, built from the batch's one buffer when its samples
    are equal-shaped arrays. A ``collate_fn`` given is used as given.

    >>> loader = DataLoader(list(range(10)), batch_size=4, shuffle=True, seed=1)
    >>> first = [b.tolist() for b in loader]
    >>> loader.set_epoch(0); loader.set_step(2)
    >>> [b.tolist() for b in loader] == first[2:]
    True
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Any = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Any = None,
        multiprocessing_context: Any = None,
        generator: torch.Generator | None = None,
        *,
        skippable: bool = True,
        seed: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        order: Order | None = None,
        shared_memory: bool = True,
        workers: str = "processes",
        name: str | None = None,
        timing: bool = True,
        **torch_kwargs: Any,
    ) -> None:
        self.workers = workers
        self.name = _stats.loader_name(name)
        processes = num_workers > 0 and _threads.resolve_workers(workers, dataset) == "processes"
        self._on_threads = num_workers > 0 and not processes
        if processes:
            multiprocessing_context = start_context(multiprocessing_context)
        users_collate = collate_fn is not None
        if collate_fn is None and (batch_size is not None or batch_sampler is not None):
            collate_fn = default_collate  # torch's default for batches (auto-collation)
        transported = processes and shared_memory and _transport.SUPPORTED
        if transported and not isinstance(collate_fn, _transport.WorkerCollate):
            # A user's collate_fn gets back the types it made (bytes stay bytes: one copy
            # out of the slot); the default's bytes-like values arrive as views of it.
            # A worker whose batches the default collate takes lets a structured dataset
            # read them straight into its slot, column by column.
            worker_init_fn = _transport.WorkerStart(worker_init_fn, columns=collate_fn is default_collate)
            # only skeletons of batches cross the queues: written without a feeder thread
            from ._channel import direct_queues  # Linux only, as the transport

            multiprocessing_context = direct_queues(multiprocessing_context)
            collate_fn = _transport.WorkerCollate(collate_fn or torch.utils.data.default_convert,
                                                  exact_types=users_collate,
                                                  batched=batch_size is not None or batch_sampler is not None)
        self._stats = _stats.LoaderStats(num_workers, processes, timing)
        if processes:  # the transport's hooks mark a worker's batches (see _timing)
            worker_init_fn = self._stats.worker_init_fn(worker_init_fn, timed=transported)
        super().__init__(
            dataset,
            batch_size,
            shuffle,
            sampler,
            batch_sampler,
            num_workers,
            collate_fn,
            pin_memory,
            drop_last,
            timeout,
            worker_init_fn,
            multiprocessing_context,
            generator,
            **torch_kwargs,
        )
        _stats.warn_if_uncached(dataset, _resolve_ranks(rank, world_size)[1])
        from ffrecord import metrics

        metrics.register(self)
        self.skippable = skippable
        self._next_epoch = 0
        self._pending_start = 0
        self._pending_base = 0
        self._pending_pin: _Pin | None = None  # the next epoch's, after a state of an earlier version
        self._before = 0  # batches of the pending epoch that a loaded state says were delivered
        self._pending_generator_state: torch.Tensor | None = None
        self._run: _EpochRun | None = None
        self._skipped: list[dict[str, Any]] = []  # DataLoader.skip's, as states record them
        custom = sampler is not None or batch_sampler is not None
        if (custom or not skippable) and (seed is not None or rank is not None or world_size is not None
                                          or order is not None):
            raise ValueError("seed, order, rank and world_size apply to a skippable loader's own sampler only")
        if order is not None and (shuffle or seed is not None or generator is not None):
            raise ValueError("order= replaces shuffle, seed and generator: give one of them")
        self._seed_given = seed is not None or order is not None
        if not skippable:
            return
        if isinstance(dataset, torch.utils.data.IterableDataset):
            raise ValueError("skippable=True needs a map-style dataset; pass skippable=False")
        if custom:
            self._planner: EpochBatchSampler | SkippingBatchSampler = SkippingBatchSampler(self._index_sampler)
        else:
            self._planner = self._make_sampler(bool(shuffle), seed, rank, world_size, order)
        # torch keeps the index sampler in one of these; ours replaces it (torch's own
        # attribute guard is for users, who must not swap samplers mid-life).
        object.__setattr__(self, "batch_sampler" if self._auto_collation else "sampler", self._planner)
        self._tasks = WorkerTasks(self._planner)
        self._fingerprint = dataset_fingerprint(dataset)

    def _make_sampler(self, shuffle: bool, seed: int | None, rank: int | None, world_size: int | None,
                      order: Order | None) -> EpochBatchSampler:
        rank, world_size = _resolve_ranks(rank, world_size)
        if shuffle and seed is None and self.generator is None:
            seed = 0 if world_size > 1 else int(torch.empty((), dtype=torch.int64).random_().item())
        return EpochBatchSampler(
            len(self.dataset),
            self.batch_size or 1,
            shuffle=shuffle,
            drop_last=self.drop_last,
            seed=seed,
            generator=self.generator,
            rank=rank,
            world_size=world_size,
            unbatched=self.batch_size is None,
            order=order,
        )

    def __repr__(self) -> str:
        if not self.skippable:
            return f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, skippable=False)"
        return f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, sampler={self._planner!r})"

    @property
    def seed(self) -> int | None:
        """The seed of the shuffle order (None when sequential or drawn from a generator)."""
        return getattr(getattr(self, "_planner", None), "seed", None)

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter(loader)`` produces."""
        return self._next_epoch

    def __len__(self) -> int:
        """Batches of the current epoch, else of the next one.

        After ``set_step(k)`` that is the batches from ``k`` on, as in the reference. After
        ``load_state_dict`` it is the batches this rank had delivered of the epoch when the
        state was taken plus those it yields from here: the whole epoch on the same topology,
        as torchdata's ``StatefulDataLoader`` says. Trainers that restore their own batch
        counter with the loader's state (PyTorch Lightning) stop the epoch at ``len()``: any
        other length would cut the resumed epoch short or wait for batches that never come,
        also after an elastic resume (where the batches left are counted at the new topology).
        """
        if not self.skippable:
            return super().__len__()
        run = self._run
        if run is not None and not run.exhausted:
            return run.length
        batches = self._pending_batches()
        return batches - self._pending_start + self._before

    def __iter__(self) -> Any:
        began = now()
        if self.num_workers > 0:
            _transport.forget_exited_workers()
        stats = self._stats
        if not self.skippable:
            stats.epoch_began(len(stats.runs), readers_of(self.dataset))
            receiving = _transport.Receiving(super().__iter__(), stats if stats.timing else None)
            stats.iter_returned(began)
            return receiving
        epoch, start, base = self._next_epoch, self._pending_start, self._pending_base
        stats.epoch_began(epoch, readers_of(self.dataset))
        self._next_epoch, self._pending_start, self._pending_base = epoch + 1, 0, 0
        pin, self._pending_pin = self._pending_pin, None
        before, self._before = self._before, 0
        generator_state = None
        if self._uses_generator():
            if self._pending_generator_state is not None:
                self.generator.set_state(self._pending_generator_state)
                self._pending_generator_state = None
            generator_state = self.generator.get_state()
        if isinstance(self._planner, EpochBatchSampler):
            self._planner.plan(epoch, start, base, self._samples(pin))
            self._tasks.group, self._tasks.single = self._task_group(), self.num_workers
            if isinstance(self.dataset, (Dataset, StructuredDataset)):
                # A worker's tasks come every num_workers tasks and it holds prefetch_factor
                # of them queued: the batch to prefetch is the one after those; with a
                # chunk-aware order, a window on, so that the next window's chunks download
                # (remote) from the start of this one: downloads never wait for half a window
                # read, and the cache holds two windows (ffrecord.plan's cache to run).
                window = getattr(self._planner.order, "window_positions", 0)
                queued = self.num_workers * (self.prefetch_factor or 1) * self._tasks.group
                per_window = window // (self._planner.batch_size * self._planner.world_size)
                self._planner.lookahead = max(1, queued, per_window)
            if isinstance(self.dataset, (Dataset, StructuredDataset)):  # they hand on datapoint seeds
                self._planner.seed_of_datapoints = self.seed or 0
        else:
            self._planner.plan(epoch, start)
        self._run = _EpochRun(epoch, start, base, self._planner.num_batches, generator_state, before, pin=pin)
        tracked = _TrackedIterator(super().__iter__(), self._run, self._tasks, stats, self._restarted)
        stats.iter_returned(began)
        return tracked

    def _restarted(self, inner: Any) -> Any:
        """torch's iterator for the rest of the run's epoch from its step (after a skip):
        ``inner``'s workers stopped, unless they persist (torch then drops what they hold)."""
        run = self._run
        if not (self.persistent_workers and self.num_workers > 0):
            stop = getattr(inner, "_shutdown_workers", None) or getattr(inner, "_shutdown", None)
            if stop is not None:
                stop()
        if isinstance(self._planner, EpochBatchSampler):
            self._planner.plan(run.epoch, run.step, run.base, self._samples(run.pin))
        else:
            self._planner.plan(run.epoch, run.step)
        if run.generator_state is not None:  # the same permutation drawn again
            self.generator.set_state(run.generator_state)
        return super().__iter__()

    def _get_iterator(self) -> Any:
        """torch's iterator for the workers asked for: threads of this process (``_threads``)
        or torch's own (processes, or none: then its collation is timed, see ``_stats``, and
        a dataset that reads in columns is read so, see ``_transport.ColumnsHere``)."""
        if self._on_threads:
            return _threads.ThreadedIterator(self, self._stats.threads, self._stats.loop)
        iterator = super()._get_iterator()
        fetcher = getattr(iterator, "_dataset_fetcher", None)  # torch's, with 0 workers
        if (fetcher is not None and iterator._auto_collation and fetcher.collate_fn is default_collate
                and getattr(iterator._dataset, "reads_in_columns", False)):
            fetcher.fetch = _transport.ColumnsHere(fetcher, iterator._dataset)
        if self._stats.fetches_here and fetcher is not None:
            fetcher.collate_fn = _stats.TimedCollate(fetcher.collate_fn, self._stats.loop, iterator._auto_collation)
        return iterator

    def check_worker_number_rationality(self) -> None:
        """torch's warning of more worker processes than cores; threads, which mostly wait
        for the library's calls, are not processes."""
        if not self._on_threads:
            super().check_worker_number_rationality()

    @property
    def _index_sampler(self) -> Any:
        """What torch's iterator draws its tasks from (see ``WorkerTasks``); torch's own
        choice until the loader's sampler is in place."""
        tasks = self.__dict__.get("_tasks")
        return tasks if tasks is not None else super()._index_sampler

    def _task_group(self) -> int:
        """Batches per worker task (``_transport.TaskGroup``): ``TASK_GROUP`` when the
        batches travel in slots and the dataset is one of ffrecord's whose batches are only
        read (nothing of the user's runs on them: the task's own cost weighs); 1 otherwise,
        and in the generator's order, whose draws keep in step with the stock DataLoader's."""
        reads_only = getattr(self.dataset, "_batches_are_reads", None)
        packing = isinstance(self.collate_fn, _transport.WorkerCollate)
        grouped = self.num_workers > 0 and packing and reads_only is not None and reads_only()
        return TASK_GROUP if grouped and not self._uses_generator() else 1

    def _uses_generator(self) -> bool:
        return isinstance(self._planner, EpochBatchSampler) and self._planner.uses_generator

    def _require_skippable(self, what: str) -> None:
        if not self.skippable:
            raise RuntimeError(f"{what} needs a DataLoader made with skippable=True")

    def set_step(self, step: int) -> None:
        """The next epoch starts at batch ``step`` (this one epoch only; later ones start at 0).

        Costs the same for any step: nothing is read or walked now or later (except with a
        custom sampler, which is walked without reading).
        """
        self._require_skippable("set_step")
        step = operator.index(step)
        batches = self._pending_batches(base=0)
        if step != 0 and not 0 <= step < batches:
            raise ValueError(f"step must lie in [0, {batches}), got {step}")
        self._pending_start, self._pending_base, self._before = step, 0, 0

    def set_epoch(self, epoch: int) -> None:
        """The next ``iter(loader)`` produces epoch ``epoch`` (each iteration otherwise advances it)."""
        self._require_skippable("set_epoch")
        epoch = operator.index(epoch)
        if epoch < 0:
            raise ValueError(f"epoch must be non-negative, got {epoch}")
        self._next_epoch = epoch

    def skip(self, batches: int) -> None:
        """Passes over the next ``batches`` batches of the epoch in progress (or of the next
        one, between epochs): they are never read nor handed out, and states record them
        (``state_dict()["skipped"]``: epoch, step, batch count and canonical positions), so
        that skipping the steps around a loss spike and resuming is exact, and ``ffrecord
        audit`` tells them from samples lost. Between epochs (after ``load_state_dict``,
        say) nothing is read; inside one, the batches the workers already hold are dropped
        and the workers start again further on. ``ValueError`` for more batches than the
        epoch has left.

        >>> loader = DataLoader(list(range(10)), batch_size=2)
        >>> loader.skip(2)
        >>> [b.tolist() for b in loader]
        [[4, 5], [6, 7], [8, 9]]
        """
        self._require_skippable("skip")
        batches = operator.index(batches)
        run = self._run
        in_progress = run is not None and not run.finished
        epoch, step, base, pin = (run.epoch, run.step, run.base, run.pin) if in_progress else \
            (self._next_epoch, self._pending_start, self._pending_base, self._pending_pin)
        left = (run.num_batches if in_progress else self._pending_batches()) - step
        if not 0 <= batches <= left:
            raise ValueError(f"batches must lie in [0, {left}] (what epoch {epoch} has left from batch {step}), "
                             f"got {batches}")
        if not batches:
            return
        positions = None
        if isinstance(self._planner, EpochBatchSampler):
            segment = self._segment(base, self._samples(pin))
            positions = [segment.consumed(step), segment.consumed(step + batches)]
        self._skipped.append({"epoch": epoch, "step": step, "batches": batches, "positions": positions})
        if in_progress:
            run.skipped += batches
            run.restart = True
        else:
            self._pending_start += batches

    def indices(self, epoch: int, step: int, rank: int | None = None) -> Any:
        """The dataset indices of batch ``step`` of ``epoch``, without reading: a list for
        rank ``rank`` (0 ≤ rank < world size), else one list per rank. Drawn by the very code
        that draws the loader's batches; steps count as ``state_dict()["step"]`` does: from
        the start of the epoch, or after an elastic resume from where the resumed epoch
        continues. Skipped batches (``skip``) have indices too. For a ``Mixture``, its
        ``locate(index)`` says which member and datapoint each is. An order drawn from a
        ``generator`` is known for the epoch in progress (or next) only; a sampler of your
        own has no ledger (``TypeError``).

        >>> loader = DataLoader(list(range(10)), batch_size=2, shuffle=True, seed=0, world_size=2, rank=0)
        >>> loader.indices(0, 1) == [loader.indices(0, 1, rank=r) for r in (0, 1)]
        True
        >>> loader.indices(0, 1, rank=0) == [b.tolist() for b in loader][1]
        True
        """
        self._require_skippable("indices")
        planner = self._planner
        if not isinstance(planner, EpochBatchSampler):
            raise TypeError("indices() needs the loader's own sampler: a sampler of yours draws its own batches")
        epoch, step = operator.index(epoch), operator.index(step)
        run = self._run
        running = run is not None and not run.finished and epoch == run.epoch
        base = run.base if running else self._pending_base if epoch == self._next_epoch else 0
        samples = self._samples(run.pin if running else self._pending_pin if epoch == self._next_epoch else None)
        order = self._generator_order(epoch, running, samples) if planner.uses_generator else None
        ranks = range(planner.world_size) if rank is None else [operator.index(rank)]
        if any(not 0 <= r < planner.world_size for r in ranks):
            raise IndexError(f"rank {rank} out of range for a world of {planner.world_size}")
        batches = [planner.batch(epoch, step, r, base, order, samples).tolist() for r in ranks]
        return batches[0] if rank is not None else batches

    def _generator_order(self, epoch: int, running: bool, samples: int) -> GeneratorOrder:
        """The permutation of ``samples`` samples a generator's order draws for ``epoch``: the
        one drawn, or the one the generator will draw (after the seed torch's iterator draws
        as it is made)."""
        drawn = self._planner.drawn
        if running and drawn is not None and drawn[0] == epoch:
            return drawn[1]
        if not running and epoch != self._next_epoch:
            raise ValueError(f"a generator's order of epoch {epoch} is drawn when it begins: known for the "
                             "epoch in progress or the next one only")
        state = self._pending_generator_state if not running else None
        generator = torch.Generator().set_state(self.generator.get_state() if state is None else state)
        if not running and not (self.persistent_workers and self.num_workers > 0 and self._iterator is not None):
            torch.empty((), dtype=torch.int64).random_(generator=generator)  # a new iterator's seed
        return GeneratorOrder(torch.randperm(samples, generator=generator).numpy())

    def _config(self) -> dict[str, Any]:
        planner = self._planner
        if isinstance(planner, SkippingBatchSampler):
            order, world_size = "custom", 1
        else:
            order = "generator" if planner.uses_generator else planner.order.kind
            world_size = planner.world_size
        return {"order": order, "batch_size": self.batch_size, "drop_last": self.drop_last, "world_size": world_size}

    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands: small, JSON-serialisable, valid at any point.

        Taken inside the loop, after batch ``k`` was handed out, it resumes at batch ``k + 1``
        (however far the workers have prefetched); taken between epochs, at the next epoch.
        ``position`` counts the canonical positions of the epoch consumed by all ranks.
        """
        self._require_skippable("state_dict")
        run = self._run
        if run is not None and not run.finished:
            epoch, step, base, generator_state, pin = run.epoch, run.step, run.base, run.generator_state, run.pin
        else:
            epoch, step, base, pin = self._next_epoch, self._pending_start, self._pending_base, self._pending_pin
            generator_state = self._pending_generator_state
            if generator_state is None and self._uses_generator():
                generator_state = self.generator.get_state()
        planner = self._planner
        canonical = isinstance(planner, EpochBatchSampler) and not planner.uses_generator
        position = self._segment(base, self._samples(pin)).consumed(step) if isinstance(planner, EpochBatchSampler) \
            else None
        state = {
            "format": STATE_FORMAT,
            "epoch": epoch,
            "step": step,
            "base": base,
            "position": position,
            "seed": self.seed,
            "generator_state": None if generator_state is None else encode_generator_state(generator_state),
            "rank": getattr(planner, "rank", 0),
            **self._config(),
            "order_identity": planner.order_over(self._samples(pin)).describe() if canonical else None,
            "dataset": self._fingerprint if pin is None else pin.fingerprint,
            "skipped": [dict(entry) for entry in self._skipped],
        }
        mixture = getattr(self.dataset, "source", self.dataset)
        if "mixture" in self._fingerprint and position is not None and not planner.shuffle:
            state["mixture_consumed"] = mixture.consumed(position)
        return state

    def stats(self, epoch: int | None = None) -> dict[str, int | float]:
        """What the loader did and where its time went, since it was made (``epoch``: in
        that epoch's latest run, from its ``iter()`` to the next epoch's; ValueError for an
        epoch that has not begun). One flat dict, always with the same keys:

        - the I/O counters of the loader's readers (``FileReader.stats``) summed over its
          processes: the main process's and every worker's, those of finished epochs
          included; ``bytes_fetched`` against ``bytes_delivered`` (and
          ``fetched_per_delivered``) is what the epochs cost in traffic for the data they
          read;
        - ``batches`` and ``datapoints`` fetched;
        - in seconds: ``wait_s``, the training loop inside ``iter()`` and ``next()``;
          ``elapsed_s``, its epochs from ``iter()`` to the last ``next()``; and the stages,
          summed over the workers (processes or threads) doing them: ``read_s`` (ffrecord's
          reads), ``transform_s`` (the rest of the dataset's fetch: its ``__getitems__``,
          ``process``, transform), ``collate_s``, ``transfer_s`` (the hand-over: packing
          into shared memory and unpacking, pinning). Zero with ``timing=False``.

        A worker adds its counts after each batch. See docs/profiling.md.

        >>> loader = DataLoader(list(range(4)), batch_size=2)
        >>> _ = list(loader)
        >>> stats = loader.stats(epoch=0)
        >>> stats["batches"], stats["datapoints"], stats["bytes_fetched"], stats["wait_s"] > 0
        (2, 4, 0, True)
        """
        readers = readers_of(self.dataset)
        return self._stats.total(readers) if epoch is None else self._stats.epoch(operator.index(epoch), readers)

    def _segment(self, base: int, samples: int) -> RankShare:
        """Rank 0's share of the segment from canonical position ``base`` of an epoch over
        ``samples`` samples."""
        planner = self._planner
        return RankShare(samples, planner.batch_size, 0, planner.world_size, planner.drop_last, base)

    def _samples(self, pin: _Pin | None) -> int:
        """The samples an epoch runs over: a pinned epoch's, else the dataset's."""
        if pin is not None:
            return pin.samples
        return self._planner.n if isinstance(self._planner, EpochBatchSampler) else len(self.dataset)

    def _pending_batches(self, base: int | None = None) -> int:
        """Batches of the segment the next ``iter(loader)`` produces (or of one from ``base``)."""
        if isinstance(self._planner, EpochBatchSampler):
            base = self._pending_base if base is None else base
            return self._segment(base, self._samples(self._pending_pin)).num_batches
        return self._planner.num_batches

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from ``state_dict()`` of a loader over the same dataset and order.

        With the same batch size, ``drop_last`` and world size, the next ``iter(loader)``
        yields exactly what the saved loader would have yielded next. With another world
        size or per-rank batch size (an order given by ``seed=``/``order=`` or sequential),
        the epoch continues from the canonical position the state records, shared among
        this loader's ranks: over the epoch every sample is delivered once. Any rank's state
        will do (ranks move in step).

        A state taken on an earlier version of a dataset read from its manifest
        (``open_dataset``), which grew since (shards appended, fields added), finishes the
        epoch it interrupted over that version's datapoints exactly as the saving loader
        would have (in its order over them: the grown dataset's first datapoints, read
        with its fields); the next epoch runs over the whole grown dataset.

        Raises ValueError when the dataset, the seed or the order differs, or the state is
        damaged.
        """
        self._require_skippable("load_state_dict")
        pin = self._pin_for(state_dict)
        planner = self._planner
        canonical = getattr(planner, "order", None)
        mine = {**self._config(), "seed": self.seed, "seed_given": self._seed_given,
                "dataset": self._fingerprint if pin is None else pin.fingerprint,
                "num_batches": self._segment(0, self._samples(pin)).num_batches
                if isinstance(planner, EpochBatchSampler) else planner.num_batches,
                "order_identity": {} if canonical is None else planner.order_over(self._samples(pin)).describe()}
        resumption = _resume.interpret(state_dict, mine, self._samples(pin))
        if resumption.seed is not None and resumption.seed != self.seed:  # a seed drawn here gives way
            planner.order = FullShuffle(planner.n, resumption.seed)
        if resumption.generator_state is not None:
            self._pending_generator_state = resumption.generator_state
        self._next_epoch, self._pending_start, self._pending_base = resumption.epoch, resumption.start, resumption.base
        self._pending_pin = pin
        self._run = None
        self._before = state_dict["step"]  # this rank's batches of the epoch before the state
        self._skipped = [dict(entry) for entry in skips(state_dict)]

    def _pin_for(self, state: Any) -> _Pin | None:
        """The epoch a state of an earlier version of this loader's dataset (which grew
        since) interrupted: over that version's datapoints, this dataset's first ones
        (``VersionedReader.earlier_length`` checks that it grew from that version). None
        for a state of this very version or of another dataset."""
        theirs = state.get("dataset") if isinstance(state, dict) else None
        identity = _resume.earlier_version(theirs, self._fingerprint)
        if identity is None:
            return None
        if not isinstance(self._planner, EpochBatchSampler):
            raise ForeignStateError(f"the state was taken on version {identity['version']} of the dataset: the "
                                    "loader's own sampler finishes its epoch on the grown dataset, not yours")
        try:
            samples = identified_source(self.dataset).earlier_length(identity["version"], identity["digest"])
            self._planner.order_over(samples)  # an order of the user's may not say its order over fewer
        except (ValueError, TypeError) as exc:
            raise ForeignStateError(f"the state was taken on version {identity['version']} of the dataset, "
                                    f"which this loader cannot finish its epoch on: {exc}") from None
        if samples != theirs.get("length"):
            raise StateError(f"damaged state: version {identity['version']} holds {samples} datapoints "
                             f"here, the state says {theirs.get('length')!r:.40}")
        return _Pin(samples, theirs)


def mixture_start(state: dict[str, Any], datasets: list[Any]) -> list[int]:
    """Where each of ``datasets`` continues after a loader state of a ``Mixture``: pass it as
    ``Mixture(datasets, new_weights, start=...)`` to change the weights, the schedule or the
    members at a checkpoint (a member the state does not know starts at 0). See
    docs/torch-and-resume.md.

    >>> from ffrecord.dataset import Mixture
    >>> a, b = list(range(10)), list(range(100, 110))
    >>> loader = DataLoader(Mixture([a, b], weights=[1, 1], period=2), batch_size=4)
    >>> _ = next(iter(loader))
    >>> mixture_start(loader.state_dict(), [b, a, list("new")])
    [2, 2, 0]
    """
    return _resume.start_after(state, members_identity(datasets, member_id))
