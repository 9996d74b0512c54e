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
import math
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np
import torch
from torch.utils.data import Sampler

from ._permutation import FeistelPermutation

Order = Callable[[np.ndarray], np.ndarray]  # positions of an epoch → sample indices
# Indices are computed for this many samples at once: enough to amortise numpy's per-call
# overhead, small enough that the first batch after set_step comes at once.
_CHUNK_SAMPLES = 8192


def _identity(positions: np.ndarray) -> np.ndarray:
    return positions


class Batch(list):
    """A batch of indices that also names the batch its reader will be asked for later
    (``ahead``), so that a dataset can prefetch it: ``EpochBatchSampler`` yields these when
    its ``lookahead`` is set.

    >>> b = Batch([4, 2], ahead=[7, 1])
    >>> b == [4, 2], b.ahead
    (True, [7, 1])
    """

    def __init__(self, indices: list[int], ahead: list[int] | None = None) -> None:
        super().__init__(indices)
        self.ahead = ahead

    def __reduce__(self) -> tuple:
        # Batches cross to loader workers pickled: plain lists pickle several times faster.
        return Batch, (list(self), self.ahead)


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
    """The batches of each epoch of a shuffled or sequential order, for one rank.

    Order of an epoch: sequential when ``shuffle`` is false; ``torch.randperm`` drawn from
    ``generator`` exactly as ``torch.utils.data.RandomSampler`` draws it when a generator is
    given; otherwise a permutation keyed by ``(seed, epoch)`` and computed per position.

    Ranks: rank ``r`` of ``world_size`` takes positions ``r, r + world_size, ...`` of the epoch
    order, like ``torch.utils.data.DistributedSampler``: without ``drop_last`` the order is
    padded by wrapping around to a multiple of ``world_size``; with it, the tail is cut
    instead. Then ``drop_last`` also drops each rank's incomplete last batch.

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
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, world_size={world_size}), got {rank}")
        if shuffle and seed is None and generator is None:
            raise ValueError("a shuffled order needs a seed or a generator")
        self.n = n
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.seed = seed
        self.generator = generator
        self.rank = rank
        self.world_size = world_size
        self.unbatched = unbatched
        # Batches yielded carry the indices of the batch this many places later (Batch.ahead),
        # for the reader to prefetch; 0 yields plain lists. The DataLoader sets it.
        self.lookahead = 0
        per_rank = n // world_size if drop_last else math.ceil(n / world_size)
        self.samples_per_rank = per_rank
        self._num_batches = per_rank // batch_size if drop_last else math.ceil(per_rank / batch_size)

    @property
    def uses_generator(self) -> bool:
        """True when each epoch's order is drawn from the generator (torch's RandomSampler order)."""
        return self.shuffle and self.seed is None

    @property
    def num_batches(self) -> int:
        return self._num_batches

    def __repr__(self) -> str:
        return (
            f"EpochBatchSampler(n={self.n}, batch_size={self.batch_size}, shuffle={self.shuffle}, "
            f"drop_last={self.drop_last}, seed={self.seed}, rank={self.rank}, "
            f"world_size={self.world_size}, epoch={self.epoch}, start={self.start})"
        )

    def __iter__(self) -> Iterator[Any]:
        epoch, start = self.epoch, self.start
        order = self._order(epoch)
        size = self.batch_size
        per_chunk = max(1, _CHUNK_SAMPLES // size)
        finished = False
        ahead = 0 if self.unbatched else self.lookahead
        for first in range(start, self._num_batches, per_chunk):
            last = min(first + per_chunk, self._num_batches)
            # With lookahead, the chunk's indices run on to the batch its last one names.
            upto = min(last + ahead, self._num_batches)
            indices = self._indices(order, first * size, min(upto * size, self.samples_per_rank)).tolist()
            for offset in range(0, (last - first) * size, size):
                batch = indices[offset : offset + size]
                if len(batch) < size:  # torch's BatchSampler meets the end while filling it
                    self._finish_generator_epoch()
                    finished = True
                if self.unbatched:
                    yield batch[0]
                elif ahead:
                    later = offset + ahead * size
                    yield Batch(batch, indices[later : later + size] if later < len(indices) else None)
                else:
                    yield batch
        if not finished:  # else it meets the end at the request after the last batch
            self._finish_generator_epoch()

    def _order(self, epoch: int) -> Order:
        if not self.shuffle:
            return _identity
        if self.uses_generator:
            perm = torch.randperm(self.n, generator=self.generator).numpy()
            return perm.__getitem__
        return FeistelPermutation(self.n, self.seed, epoch)

    def _finish_generator_epoch(self) -> None:
        # RandomSampler draws one more permutation (for its empty remainder) when exhausted;
        # drawing it at the same moment keeps the generator in step with the stock DataLoader
        # (which matters when the training loop draws from the same generator).
        if self.uses_generator:
            torch.randperm(self.n, generator=self.generator)

    def _indices(self, order: Order, first: int, last: int) -> np.ndarray:
        """Sample indices of this rank's samples ``first`` to ``last - 1`` of the epoch."""
        positions = self.rank + np.arange(first, last, dtype=np.int64) * self.world_size
        if positions.size and positions[-1] >= self.n:  # padding wraps around the order
            positions %= self.n
        return order(positions)


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
