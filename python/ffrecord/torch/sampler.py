"""Batch samplers that start an epoch at any batch.

The DataLoader tells its sampler which epoch to produce and from which batch
(``plan(epoch, start)``) before torch asks for a fresh iterator. The iterator is lazy: torch
may create one and drop it unused (its multi-worker iterator does, once per epoch), so the
epoch's work — and any use of a random generator — happens at the first ``next``.

``EpochBatchSampler`` computes any batch of any epoch directly, so starting at batch
``10**6`` costs what starting at batch 1 does. ``SkippingBatchSampler`` wraps a sampler the
user supplied, whose order we cannot compute, and skips by walking it (still no reads).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from ffrecord.order import FullShuffle, Order, RankShare, Sequential, batch_indices, datapoint_seeds

from ._transport import TaskGroup

# Indices are computed for this many samples at once: enough to amortise numpy's per-call
# overhead, small enough that the first batch after set_step comes at once.
_CHUNK_SAMPLES = 8192


class GeneratorOrder:
    """torch's ``RandomSampler`` order: a ``randperm`` drawn from a generator, per epoch."""

    def __init__(self, perm: np.ndarray) -> None:
        self.perm = perm

    def indices(self, epoch: int, positions: np.ndarray) -> np.ndarray:
        return self.perm[positions]


class Batch(list):
    """A batch of indices that also names the batch its reader will be asked for later
    (``ahead``), so that a dataset can prefetch it, and the canonical positions of its
    samples (``positions``, with the ``(seed, epoch)`` of their order) from which each
    datapoint's seed derives (``seeds``). ``EpochBatchSampler`` yields these for ffrecord
    datasets.

    >>> b = Batch([4, 2], ahead=[7, 1], positions=[0, 1], seed_key=(5, 0))
    >>> b == [4, 2], b.ahead, b.seeds == datapoint_seeds(5, 0, [0, 1]).tolist()
    (True, [7, 1], True)
    """

    def __init__(self, indices: list[int], ahead: list[int] | None = None,
                 positions: Sequence[int] | None = None, seed_key: tuple[int, int] | None = None) -> None:
        super().__init__(indices)
        self.ahead = ahead
        self.positions = positions
        self.seed_key = seed_key

    @property
    def seeds(self) -> list[int] | None:
        """Each datapoint's seed (``ffrecord.order.datapoint_seed``), or None if unknown."""
        if self.positions is None or self.seed_key is None:
            return None
        return datapoint_seeds(*self.seed_key, self.positions).tolist()

    def __reduce__(self) -> tuple:
        # Batches cross to loader workers pickled: plain lists pickle several times faster.
        return Batch, (list(self), self.ahead, self.positions, self.seed_key)


# After a prefetch that found its batch cached (a warm dataset), this many batches go
# without: each would cost a call (~20 us a file) for nothing. Few, so that the first hint
# into the next window of a chunk-aware order (its download) comes at most this late.
PREFETCH_PAUSE = 4


def prefetch_ahead(owner: Any, indices: Any, prefetch: Any, *args: Any) -> None:
    """``prefetch(indices.ahead, *args)`` for a dataset ``owner`` handed ``indices`` by the
    loader (a ``Batch`` naming a later batch), unless one of the last ``PREFETCH_PAUSE``
    such hints of ``owner`` found its batch cached (``prefetch`` returned 0: nothing queued).

    >>> class Data: pass
    >>> data, asked = Data(), []
    >>> for k in range(6):
    ...     prefetch_ahead(data, Batch([k], ahead=[k + 1]), lambda ahead: asked.append(ahead) or 0)
    >>> asked
    [[1], [6]]
    """
    ahead = getattr(indices, "ahead", None)
    if not ahead:
        return
    paused = owner.__dict__.get("_prefetch_paused", 0)  # a subclass may skip __init__
    if paused:
        owner._prefetch_paused = paused - 1
    elif not prefetch(ahead, *args):
        owner._prefetch_paused = PREFETCH_PAUSE


def _progression(values: np.ndarray) -> Sequence[int]:
    """``values`` as a ``range`` when they step evenly, as a rank's positions do (a batch's
    slice of it then crosses to a worker in a few bytes), else as a list.

    >>> _progression(np.array([3, 5, 7])), _progression(np.array([3, 5, 0]))
    (range(3, 9, 2), [3, 5, 0])
    """
    if len(values) >= 2:
        first, step = int(values[0]), int(values[1] - values[0])
        if step > 0 and (np.diff(values) == step).all():
            return range(first, first + step * len(values), step)
    return values.tolist()


class _PlannedSampler(Sampler):
    """What both samplers share: the (epoch, start batch) that the next iteration produces."""

    def __init__(self) -> None:
        self.epoch = 0
        self.start = 0

    def plan(self, epoch: int, start: int) -> None:
        """The next iteration yields epoch ``epoch`` from batch ``start`` on."""
        self.epoch = epoch
        self.start = start

    @property
    def num_batches(self) -> int:
        """Batches in a whole epoch."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.num_batches - self.start


class EpochBatchSampler(_PlannedSampler):
    """The batches of each epoch of a canonical order (``ffrecord.order``), for one rank.

    Order of an epoch: ``order`` when given; else sequential when ``shuffle`` is false;
    ``torch.randperm`` drawn from ``generator`` exactly as ``torch.utils.data.RandomSampler``
    draws it when a generator is given; otherwise ``FullShuffle(n, seed)``.

    Ranks: an epoch's *segment* runs from canonical position ``base`` (0, or what an elastic
    resume found consumed) to the end; rank ``r`` of ``world_size`` takes positions
    ``base + r, base + r + world_size, ...`` of it (``ffrecord.order.RankShare``: padding
    without ``drop_last``, the tail cut with it; equal batch counts on every rank).

    ``unbatched`` yields single indices (for ``batch_size=None``) instead of lists.

    >>> s = EpochBatchSampler(5, batch_size=2, shuffle=False)
    >>> list(s), len(s)
    ([[0, 1], [2, 3], [4]], 3)
    >>> s.plan(epoch=1, start=2); list(s)
    [[4]]
    >>> sorted(sum(EpochBatchSampler(5, 2, shuffle=True, seed=3), []))
    [0, 1, 2, 3, 4]
    >>> list(EpochBatchSampler(5, 2, shuffle=False, rank=1, world_size=2))
    [[1, 3], [0]]
    >>> s = EpochBatchSampler(5, batch_size=2, shuffle=False); s.plan(epoch=0, start=0, base=3); list(s)
    [[3, 4]]

    An epoch may run over the dataset's first ``n`` samples only (``plan(..., n=)``): the
    epoch a loader state of an earlier, shorter version of a grown dataset interrupted, in
    its order over them (``Order.first``).

    >>> s.plan(epoch=0, start=0, n=3); list(s), len(s)
    ([[0, 1], [2]], 2)
    """

    def __init__(
        self,
        n: int,
        batch_size: int,
        *,
        shuffle: bool,
        drop_last: bool = False,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        rank: int = 0,
        world_size: int = 1,
        unbatched: bool = False,
        order: Order | None = None,
    ) -> None:
        super().__init__()
        if shuffle and seed is None and generator is None and order is None:
            raise ValueError("a shuffled order needs a seed or a generator")
        if order is not None and order.n != n:
            raise ValueError(f"the order covers {order.n} samples, the dataset holds {n}")
        self.n = n
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.generator = generator
        self.unbatched = unbatched
        if order is None and not (shuffle and seed is None):
            order = FullShuffle(n, seed) if shuffle else Sequential(n)
        self.order = order  # None: drawn from the generator each epoch
        self.drawn: tuple[int, GeneratorOrder] | None = None  # the last epoch drawn so, and its order
        # Batches yielded carry the indices of the batch this many places later (Batch.ahead),
        # for the reader to prefetch; 0 yields plain lists. The DataLoader sets it.
        self.lookahead = 0
        # Batches carry their canonical positions (Batch.seeds) when set; the DataLoader
        # sets it for ffrecord datasets, and to the seed datapoint seeds derive from.
        self.seed_of_datapoints: int | None = None
        self.share = RankShare(n, batch_size, rank, world_size, drop_last)
        self._shorter: tuple[Order, Order] | None = None  # an order, and its last shorter epoch's

    @property
    def shuffle(self) -> bool:
        return not isinstance(self.order, Sequential)

    @property
    def seed(self) -> int | None:
        return None if self.order is None else self.order.seed

    @property
    def rank(self) -> int:
        return self.share.rank

    @property
    def world_size(self) -> int:
        return self.share.world_size

    def plan(self, epoch: int, start: int, base: int = 0, n: int | None = None) -> None:
        """The next iteration yields batch ``start`` on of the segment of epoch ``epoch``
        that begins at canonical position ``base``, over the first ``n`` samples (default:
        all)."""
        super().plan(epoch, start)
        share, n = self.share, self.n if n is None else n
        if (base, n) != (share.base, share.n):
            self.share = RankShare(n, self.batch_size, share.rank, share.world_size, self.drop_last, base)

    @property
    def epoch_samples(self) -> int:
        """The samples the planned epoch runs over: the dataset's, or its first ``n``."""
        return self.share.n

    def order_over(self, n: int) -> Order | None:
        """The canonical order of an epoch over the first ``n`` samples (None: drawn from
        the generator)."""
        if self.order is None or n == self.n:
            return self.order
        if self._shorter is None or self._shorter[0] is not self.order or self._shorter[1].n != n:
            self._shorter = (self.order, self.order.first(n))
        return self._shorter[1]

    def consumed(self, epoch_step: int) -> int:
        """Canonical positions of the epoch consumed once every rank had ``epoch_step`` batches."""
        return self.share.consumed(epoch_step)

    @property
    def uses_generator(self) -> bool:
        """True when each epoch's order is drawn from the generator (torch's RandomSampler order)."""
        return self.order is None

    @property
    def num_batches(self) -> int:
        return self.share.num_batches

    def __repr__(self) -> str:
        return (
            f"EpochBatchSampler(n={self.n}, batch_size={self.batch_size}, order={self.order!r}, "
            f"drop_last={self.drop_last}, rank={self.rank}, world_size={self.world_size}, "
            f"epoch={self.epoch}, start={self.start}, base={self.share.base})"
        )

    def __iter__(self) -> Iterator[Any]:
        epoch, start, share = self.epoch, self.start, self.share
        order = self._order()
        size = self.batch_size
        per_chunk = max(1, _CHUNK_SAMPLES // size)
        finished = False
        ahead = 0 if self.unbatched else self.lookahead
        seed_key = None if self.seed_of_datapoints is None else (self.seed_of_datapoints, epoch)
        for first in range(start, share.num_batches, per_chunk):
            last = min(first + per_chunk, share.num_batches)
            # With lookahead, the chunk's indices run on to the batch its last one names.
            upto = min(last + ahead, share.num_batches)
            positions, drawn = batch_indices(order, epoch, share, first, upto)
            indices = drawn.tolist()
            places = _progression(positions) if seed_key else None
            for offset in range(0, (last - first) * size, size):
                batch = indices[offset : offset + size]
                if len(batch) < size:  # torch's BatchSampler meets the end while filling it
                    self._finish_generator_epoch()
                    finished = True
                if self.unbatched:
                    yield batch[0]
                elif ahead or seed_key:
                    later = offset + ahead * size
                    yield Batch(batch, indices[later : later + size] if ahead and later < len(indices) else None,
                                places[offset : offset + size] if places else None, seed_key)
                else:
                    yield batch
        if not finished:  # else it meets the end at the request after the last batch
            self._finish_generator_epoch()

    def _order(self) -> Any:
        if self.order is not None:
            return self.order_over(self.epoch_samples)
        drawn = GeneratorOrder(torch.randperm(self.epoch_samples, generator=self.generator).numpy())
        self.drawn = (self.epoch, drawn)  # the epoch's order, for its ledger (DataLoader.indices)
        return drawn

    def batch(self, epoch: int, step: int, rank: int, base: int = 0, order: Any = None,
              n: int | None = None) -> np.ndarray:
        """The sample indices of rank ``rank``'s batch ``step`` of the segment of ``epoch``
        from canonical position ``base`` over the first ``n`` samples (default: all), drawn
        as ``__iter__`` draws them (``order``: the epoch's order, by default this sampler's
        canonical one); nothing is read.

        >>> EpochBatchSampler(5, batch_size=2, shuffle=False, world_size=2).batch(0, 1, rank=1).tolist()
        [0]
        """
        n = self.n if n is None else n
        share = RankShare(n, self.batch_size, rank, self.world_size, self.drop_last, base)
        if not 0 <= step < share.num_batches:
            raise IndexError(f"step {step} out of range: the epoch has {share.num_batches} batches"
                             + (f" from position {base} on" if base else ""))
        return batch_indices(order if order is not None else self.order_over(n), epoch, share, step, step + 1)[1]

    def _finish_generator_epoch(self) -> None:
        # RandomSampler draws one more permutation (for its empty remainder) when exhausted;
        # drawing it at the same moment keeps the generator in step with the stock DataLoader
        # (which matters when the training loop draws from the same generator).
        if self.uses_generator:
            torch.randperm(self.epoch_samples, generator=self.generator)


class WorkerTasks:
    """What a DataLoader's torch iterator draws its tasks from: the batch sampler's batches,
    ``group`` consecutive ones per loader worker task (a ``TaskGroup``) after ``single``
    batches alone (each worker's first task: its first batch comes as soon as it can); a
    batch per task while ``group`` is 1. The batch sampler itself yields single batches.

    >>> tasks = WorkerTasks([[0], [1], [2], [3], [4]])
    >>> tasks.group, tasks.single = 2, 1
    >>> list(tasks), len(tasks)
    ([[0], TaskGroup([[1], [2]]), TaskGroup([[3], [4]])], 5)
    """

    def __init__(self, batches: Any) -> None:
        self.batches = batches
        self.group = 1
        self.single = 0

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[Any]:
        batches = iter(self.batches)
        return batches if self.group < 2 else self._grouped(batches, self.group, self.single)

    def batches_in(self, tasks: int) -> int:
        """How many batches the first ``tasks`` tasks of an iteration hold.

        >>> tasks = WorkerTasks([[0], [1], [2], [3], [4]])
        >>> tasks.group, tasks.single = 2, 1
        >>> [tasks.batches_in(k) for k in range(4)]
        [0, 1, 3, 5]
        """
        grouped = max(0, tasks - self.single) if self.group > 1 else 0
        return min(len(self), tasks - grouped + grouped * self.group)

    @staticmethod
    def _grouped(batches: Iterator[Any], size: int, single: int) -> Iterator[Any]:
        yield from itertools.islice(batches, single)
        group = TaskGroup()
        for batch in batches:
            group.append(batch)
            if len(group) == size:
                yield group
                group = TaskGroup()
        if group:
            yield group

    def __repr__(self) -> str:
        return f"WorkerTasks({self.batches!r}, group={self.group}, single={self.single})"


class SkippingBatchSampler(_PlannedSampler):
    """A user's sampler or batch sampler, started at batch ``start`` by walking past the rest.

    Resuming reproduces the order only if the wrapped sampler repeats its order (for a
    given ``set_epoch``, say); the epoch number here is bookkeeping only.

    >>> s = SkippingBatchSampler([[0, 1], [2, 3], [4]])
    >>> s.plan(epoch=0, start=1); list(s), len(s)
    ([[2, 3], [4]], 2)
    """

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    @property
    def num_batches(self) -> int:
        return len(self.inner)

    def __repr__(self) -> str:
        return f"SkippingBatchSampler({self.inner!r}, epoch={self.epoch}, start={self.start})"

    def __iter__(self) -> Iterator[Any]:
        yield from itertools.islice(self.inner, self.start, None)


class SkipableSampler(Sampler):
    """The reference's skipping wrapper: yields ``sampler``'s batches from batch ``step`` on.

    Kept for scripts that use it directly; ``DataLoader.set_step`` does not walk past the
    skipped batches as this does. ``len()`` is the number of batches left, as in the
    reference.

    >>> s = SkipableSampler([[0, 1], [2, 3], [4]])
    >>> s.set_step(1); list(s), len(s)
    ([[2, 3], [4]], 2)
    """

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.step = 0

    def __iter__(self) -> Iterator[Any]:
        yield from itertools.islice(self.sampler, self.step, None)

    def __len__(self) -> int:
        return len(self.sampler) - self.step

    def set_step(self, step: int) -> None:
        self.step = step

    def __repr__(self) -> str:
        return f"SkipableSampler({self.sampler!r}, step={self.step})"
