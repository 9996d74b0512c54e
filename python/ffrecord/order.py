"""The canonical order of an epoch, and how ranks share it: one home for every loader's order.

An epoch's sequence of samples is a pure function of (the dataset, the order's kind and
parameters, its seed, the epoch): **never** of the world size, the rank, the number of
workers or the per-rank batch size. Loaders (``ffrecord.torch.DataLoader``, Ray, a plan) map
a *canonical position* ``p`` in ``[0, n)`` to a sample index with ``order.indices(epoch, p)``,
and ranks take disjoint parts of the positions (``RankShare``). A state that records how many
positions were consumed therefore resumes on any topology. Nothing here imports torch.

Kinds:

- ``Sequential(n)``: position ``p`` is sample ``p``.
- ``FullShuffle(n, seed)``: a keyed permutation computed per position (never stored).
- ``ChunkShuffle(bounds, seed, window, partitions)``: chunks (runs of consecutive samples,
  see ``chunk_bounds``) are permuted, split into ``partitions`` canonical partitions, cut into
  windows of ``window`` chunks, and samples are shuffled within each window. Readers then
  touch a window's chunks at a time instead of the whole dataset.

>>> import numpy as np
>>> order = FullShuffle(10, seed=3)
>>> sorted(order.indices(0, np.arange(10)).tolist()) == list(range(10))
True
>>> share = RankShare(10, batch_size=2, rank=1, world_size=3)
>>> share.num_batches, share.positions(0, share.samples_per_rank).tolist()
(2, [1, 4, 7, 0])
"""

from __future__ import annotations

import math
import operator
import zlib
from typing import Any

import numpy as np

from ._integers import at_least as _count
from ._integers import integer as _integer
from ._permutation import FeistelPermutation, splitmix64, splitmix64_array

__all__ = [
    "ChunkShuffle", "FullShuffle", "Order", "RankShare", "Sequential", "batch_indices", "chunk_bounds",
    "datapoint_seed", "datapoint_seeds", "shuffle_quality",
]

_MASK64 = (1 << 64) - 1
# Tags that make the keys of the chunk permutation, of each window and of datapoint seeds
# independent of one another (and of FullShuffle's, which uses the seed itself).
_TAG_CHUNKS = 0x43484E4B
_TAG_WINDOW = 0x57494E44
_TAG_DATAPOINT = 0x44415441


def _key(seed: int, *parts: int) -> int:
    key = splitmix64(seed & _MASK64)
    for part in parts:
        key = splitmix64(key ^ (part & _MASK64))
    return key


def datapoint_seeds(seed: int, epoch: int, positions: Any) -> np.ndarray:
    """``datapoint_seed`` of many positions at once (a uint64 array).

    >>> datapoint_seeds(0, 1, [5, 6]).tolist() == [datapoint_seed(0, 1, 5), datapoint_seed(0, 1, 6)]
    True
    """
    base = np.uint64(_key(seed, _TAG_DATAPOINT, epoch))
    return splitmix64_array(np.asarray(positions, np.int64).astype(np.uint64) ^ base)


def datapoint_seed(seed: int, epoch: int, position: int) -> int:
    """The seed of the datapoint at canonical ``position`` of ``epoch`` (an int in [0, 2**64)).

    A pure function of the loader's seed, the epoch and the position in the canonical order:
    the same for a datapoint whatever the world size, rank, workers or batch size, and after
    any resume. Use it for random augmentation, e.g. ``np.random.default_rng(seed)``.

    >>> datapoint_seed(7, 0, 3) == datapoint_seed(7, 0, 3) != datapoint_seed(7, 1, 3)
    True
    """
    return int(datapoint_seeds(seed, epoch, [operator.index(position)])[0])


class Order:
    """An epoch's canonical order: ``indices(epoch, positions)`` → sample indices (int64).

    ``describe()`` is the order's identity (kind and parameters, JSON), stored in states.
    """

    kind = "order"
    n: int
    seed: int | None = None

    def indices(self, epoch: int, positions: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n}

    def first(self, n: int) -> Order:
        """The same order over the first ``n`` samples only: the order an earlier version
        of a dataset that grew since had (a loader state taken on it finishes its epoch so).
        ``TypeError`` for an order that cannot say.

        >>> FullShuffle(10, seed=1).first(4).describe()
        {'kind': 'shuffle', 'n': 4, 'seed': 1}
        """
        n = _count(n, "n")
        if n > self.n:
            raise ValueError(f"the order covers {self.n} samples, not {n}")
        return self._first(n)

    def _first(self, n: int) -> Order:
        raise TypeError(f"{type(self).__name__} cannot say its order over an earlier version of the dataset")

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "kind")
        return f"{type(self).__name__}({params})"


class Sequential(Order):
    """Position ``p`` is sample ``p``.

    >>> Sequential(4).indices(0, np.arange(4)).tolist()
    [0, 1, 2, 3]
    """

    kind = "sequential"

    def __init__(self, n: int) -> None:
        self.n = _count(n, "n")

    def indices(self, epoch: int, positions: np.ndarray) -> np.ndarray:
        return np.asarray(positions, np.int64)

    def _first(self, n: int) -> Sequential:
        return Sequential(n)


class FullShuffle(Order):
    """A uniform-looking permutation per epoch, keyed by ``(seed, epoch)``, O(1) per position.

    >>> FullShuffle(5, seed=1).indices(0, np.arange(5)).tolist() != [0, 1, 2, 3, 4]
    True
    """

    kind = "shuffle"

    def __init__(self, n: int, seed: int) -> None:
        self.n = _count(n, "n")
        self.seed = _integer(seed, "seed")
        self._cached: tuple[int, FeistelPermutation] | None = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "seed": self.seed}

    def _first(self, n: int) -> FullShuffle:
        return FullShuffle(n, self.seed)

    def indices(self, epoch: int, positions: np.ndarray) -> np.ndarray:
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, FeistelPermutation(self.n, self.seed, epoch))
        return self._cached[1](np.asarray(positions, np.int64))


class ChunkShuffle(Order):
    """Chunks permuted, split into partitions, samples shuffled within windows of chunks.

    ``bounds`` (int64): the first sample of each chunk, then ``n`` (see ``chunk_bounds``).
    Per epoch:

    1. the chunks are permuted (a keyed permutation of the chunk numbers);
    2. the permuted list is cut into ``partitions`` runs holding about ``n / partitions``
       samples each (canonical partitions: give each node or rank of the starting topology
       its own, so that it reads only its own chunks, see ``RankShare``);
    3. each partition's run is cut into windows of ``window`` chunks, and the samples of a
       window are shuffled (a keyed permutation per window);
    4. the canonical sequence deals positions round-robin over the partitions: position
       ``p`` belongs to partition ``p % partitions`` while all partitions have samples left
       (then round-robin over those that still have).

    With ``window >= chunks`` and one partition it is a full shuffle. Resuming anywhere is
    O(chunks); nothing of size ``n`` is built (only per-chunk arrays).

    >>> bounds = np.array([0, 4, 8, 12])
    >>> order = ChunkShuffle(bounds, seed=0, window=1)
    >>> first = order.indices(0, np.arange(4))
    >>> len(set((first // 4).tolist()))                 # the first window is one chunk
    1
    >>> sorted(order.indices(0, np.arange(12)).tolist()) == list(range(12))
    True
    """

    kind = "chunks"

    def __init__(self, bounds: Any, seed: int, window: int, partitions: int = 1) -> None:
        b = np.asarray(bounds)
        if b.ndim != 1 or b.size < 1 or (b.size and b.dtype.kind not in "iu"):
            raise TypeError(f"bounds must be a 1-D integer array, got {bounds!r:.80}")
        b = b.astype(np.int64)
        if b[0] != 0 or (np.diff(b) <= 0).any():
            raise ValueError("bounds must start at 0 and increase strictly (no empty chunk)")
        self.bounds = b
        self.n = int(b[-1])
        self.seed = _integer(seed, "seed")
        self.window = _count(window, "window", minimum=1)
        self.partitions = _count(partitions, "partitions", minimum=1)
        self._cached: tuple[int, _ChunkTables] | None = None

    @classmethod
    def of(cls, source: Any, chunk_size: int, seed: int, window: int, partitions: int = 1) -> ChunkShuffle:
        """The chunk-aware shuffle of ``source`` (see ``chunk_bounds``) with chunks of
        ``chunk_size`` bytes."""
        return cls(chunk_bounds(source, chunk_size), seed, window, partitions)

    @property
    def chunks(self) -> int:
        return len(self.bounds) - 1

    @property
    def window_positions(self) -> int:
        """Canonical positions from one window's start to the next's, on average (a
        partition's window, with the partitions dealt round-robin): how far ahead a loader
        hints its reads so that the next window's chunks download while this one is read.

        >>> ChunkShuffle(np.array([0, 4, 8, 12]), seed=0, window=2).window_positions
        8
        """
        return -(-self.n * min(self.window, self.chunks) * self.partitions // max(1, self.chunks))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "seed": self.seed, "window": self.window,
                "partitions": self.partitions, "chunks": self.chunks,
                "bounds_crc32": zlib.crc32(self.bounds.tobytes())}

    def _first(self, n: int) -> ChunkShuffle:
        """The chunks of the first ``n`` samples (the last one cut at ``n``), shuffled alike.

        >>> ChunkShuffle(np.array([0, 4, 8, 12]), seed=0, window=2).first(6).bounds.tolist()
        [0, 4, 6]
        """
        kept = self.bounds[self.bounds < n]
        return ChunkShuffle(np.append(kept, n), self.seed, self.window, self.partitions)

    def tables(self, epoch: int) -> _ChunkTables:
        """The per-chunk tables of ``epoch`` (kept for the last epoch asked)."""
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, _ChunkTables(self, epoch))
        return self._cached[1]

    def indices(self, epoch: int, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.n):
            raise IndexError(f"positions must lie in [0, {self.n})")
        return self.tables(epoch).indices(positions)


class _ChunkTables:
    """One epoch of a ``ChunkShuffle``: every array here has one entry per chunk or fewer."""

    def __init__(self, order: ChunkShuffle, epoch: int) -> None:
        self.seed, self.epoch, self.bounds = order.seed, epoch, order.bounds
        n, chunks = order.n, order.chunks
        counts = np.diff(order.bounds)
        self.chunk_order = FeistelPermutation(chunks, _key(order.seed, _TAG_CHUNKS), epoch)(np.arange(chunks))
        # Sample offsets of the permuted chunks, back to back (partition after partition).
        self.starts = np.concatenate([[0], np.cumsum(counts[self.chunk_order])])
        targets = -(-np.arange(order.partitions, dtype=np.int64) * n // order.partitions)
        first_chunk = np.searchsorted(self.starts[:-1], targets)
        end_chunk = np.append(first_chunk[1:], chunks)
        self.partition_starts = self.starts[first_chunk]
        self.partition_lengths = self.starts[end_chunk] - self.partition_starts
        windows = [np.arange(a, b, order.window) for a, b in zip(first_chunk.tolist(), end_chunk.tolist())]
        window_chunks = np.concatenate(windows + [np.array([chunks])]).astype(np.int64)
        self.window_starts = self.starts[window_chunks]  # sample offset of each window, then n
        self._phases = _phases(self.partition_lengths)

    def indices(self, positions: np.ndarray) -> np.ndarray:
        """Sample indices at canonical ``positions`` (a 1-D int64 array in ``[0, n)``)."""
        flat = self._deal(positions)
        window = np.searchsorted(self.window_starts, flat, side="right") - 1
        shuffled = np.empty_like(flat)
        for w in np.unique(window).tolist():
            where = np.flatnonzero(window == w)
            first, end = int(self.window_starts[w]), int(self.window_starts[w + 1])
            perm = FeistelPermutation(end - first, _key(self.seed, _TAG_WINDOW, w), self.epoch)
            shuffled[where] = first + perm(flat[where] - first)
        chunk = np.searchsorted(self.starts, shuffled, side="right") - 1
        return self.bounds[self.chunk_order[chunk]] + (shuffled - self.starts[chunk])

    def _deal(self, positions: np.ndarray) -> np.ndarray:
        """Canonical positions → offsets in the partition-major sequence (round-robin deal)."""
        phase_starts = np.array([p[0] for p in self._phases], np.int64)
        phase = np.searchsorted(phase_starts, positions, side="right") - 1
        out = np.empty_like(positions)
        for t in np.unique(phase).tolist():
            where = np.flatnonzero(phase == t)
            start, rounds_before, active = self._phases[t]
            step, which = np.divmod(positions[where] - start, len(active))
            partition = active[which]
            out[where] = self.partition_starts[partition] + rounds_before + step
        return out


def _phases(lengths: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """(first canonical position, rounds dealt before, partitions still active) of each phase
    of a round-robin deal over partitions of ``lengths`` samples."""
    phases, position, done = [], 0, 0
    for level in np.unique(lengths[lengths > 0]).tolist():
        active = np.flatnonzero(lengths > done)
        phases.append((position, done, active))
        position += (level - done) * len(active)
        done = level
    return phases


class RankShare:
    """The canonical positions rank ``rank`` of ``world_size`` reads in one epoch's segment.

    A segment is what is left of an epoch from canonical position ``base`` on (0 at the
    start of an epoch, the consumed count after an elastic resume). Rank ``r`` takes the
    positions ``base + r, base + r + world_size, ...``, like ``DistributedSampler``. Every
    rank gets the same number of samples and batches: without ``drop_last`` the segment is
    padded by wrapping around it (a few samples twice); with it, its tail is cut to a
    multiple of ``world_size`` and each rank then drops its incomplete last batch.

    >>> s = RankShare(7, batch_size=2, rank=0, world_size=2, base=2)
    >>> s.samples_per_rank, s.num_batches, s.positions(0, 3).tolist()
    (3, 2, [2, 4, 6])
    >>> s.consumed(1), s.consumed(2)
    (6, 7)
    """

    def __init__(self, n: int, batch_size: int, rank: int = 0, world_size: int = 1,
                 drop_last: bool = False, base: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, world_size={world_size}), got {rank}")
        if not 0 <= base <= n:
            raise ValueError(f"base must lie in [0, {n}], got {base}")
        self.n, self.batch_size, self.rank, self.world_size = n, batch_size, rank, world_size
        self.drop_last, self.base = drop_last, base
        remaining = n - base
        per_rank = remaining // world_size if drop_last else -(-remaining // world_size)
        self.samples_per_rank = per_rank
        self.num_batches = per_rank // batch_size if drop_last else -(-per_rank // batch_size)

    def positions(self, first: int, last: int) -> np.ndarray:
        """Canonical positions of this rank's samples ``first`` to ``last - 1`` of the segment."""
        offsets = self.rank + np.arange(first, last, dtype=np.int64) * self.world_size
        remaining = self.n - self.base
        if offsets.size and offsets[-1] >= remaining:  # padding wraps around the segment
            offsets %= remaining
        return self.base + offsets

    def batch_positions(self, first: int, last: int) -> np.ndarray:
        """Canonical positions of this rank's batches ``first`` to ``last - 1``, back to back
        (the last batch short when the share is).

        >>> RankShare(7, batch_size=2, rank=1, world_size=2).batch_positions(1, 3).tolist()
        [5, 0]
        """
        return self.positions(first * self.batch_size, min(last * self.batch_size, self.samples_per_rank))

    def consumed(self, step: int) -> int:
        """Canonical positions consumed once every rank has had ``step`` batches: all of them
        (``n``) at the end of the segment, whatever padding or ``drop_last`` did."""
        if step >= self.num_batches:
            return self.n
        return min(self.n, self.base + step * self.batch_size * self.world_size)

    def __repr__(self) -> str:
        return (f"RankShare(n={self.n}, batch_size={self.batch_size}, rank={self.rank}, "
                f"world_size={self.world_size}, drop_last={self.drop_last}, base={self.base})")


def batch_indices(order: Any, epoch: int, share: RankShare, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """The canonical positions and sample indices of ``share``'s batches ``first`` to
    ``last - 1`` of ``epoch``, back to back: how every loader draws its batches, and how a
    ledger finds them again (``ffrecord.ledger``). ``order``: anything with ``indices(epoch,
    positions)``.

    >>> positions, indices = batch_indices(FullShuffle(10, seed=3), 0, RankShare(10, 2, rank=1, world_size=2), 0, 2)
    >>> positions.tolist(), indices.tolist() == FullShuffle(10, seed=3).indices(0, positions).tolist()
    ([1, 3, 5, 7], True)
    """
    positions = share.batch_positions(first, last)
    return positions, np.asarray(order.indices(epoch, positions), np.int64)


# -- chunks -----------------------------------------------------------------------------


def chunk_bounds(source: Any, chunk_size: int) -> np.ndarray:
    """The first sample of each chunk of ``source``, then its length (int64).

    A chunk is a run of consecutive samples within one file: walking the samples in order, a
    new chunk starts when the next sample would push the chunk's bytes over ``chunk_size``
    and the chunk holds at least one sample (a sample larger than a chunk gets its own); a
    chunk never crosses files. ``source``: a ``FileReader``, an ``ffrecord.torch.Dataset``
    (its reader), a ``StructuredDataset`` or ``DatasetReader`` (chunks of its largest field),
    or a ``ShardedDatasetReader`` (each shard's chunks in turn).

    >>> import os, tempfile
    >>> from ffrecord import FileReader, FileWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "c.ffr")
    >>> with FileWriter(path, 5) as w:
    ...     for k in range(5):
    ...         w.write_one(bytes(100))
    >>> chunk_bounds(FileReader(path), 250).tolist()
    [0, 2, 4, 5]
    """
    chunk_size = _count(chunk_size, "chunk_size", minimum=1)
    from ffrecord import FileReader  # here: ffrecord.order must import without the library

    source = getattr(source, "source", source)  # a StructuredDataset's reader
    if isinstance(source, FileReader):
        return _reader_chunk_bounds(source, chunk_size)
    reader = getattr(source, "reader", None)
    if isinstance(reader, FileReader):  # an ffrecord.torch.Dataset
        return _reader_chunk_bounds(reader, chunk_size)
    members = getattr(source, "members", None)
    if members is not None and hasattr(source, "shards"):  # shards one after another
        parts, offset = [np.zeros(1, np.int64)], 0
        for member in members:
            parts.append(chunk_bounds(member, chunk_size)[1:] + offset)
            offset += len(member)
        return np.concatenate(parts)
    if callable(getattr(source, "chunk_bounds", None)):  # a shard opened when read (its own rule)
        return np.asarray(source.chunk_bounds(chunk_size), np.int64)
    if callable(getattr(source, "field_reader", None)):  # a structured dataset: its largest field
        names = list(source.fields)
        sizes = [source.field_reader(name).file_info(0).data_bytes for name in names]
        name = names[int(np.argmax(sizes))]
        bounds = _reader_chunk_bounds(source.field_reader(name), chunk_size)
        block = source.fields[name].block  # a column's samples are blocks of datapoints
        return bounds if block is None else np.minimum(bounds * block, len(source))
    raise TypeError(f"cannot find the chunks of {type(source).__name__}: pass the bounds yourself")


def _reader_chunk_bounds(reader: Any, chunk_size: int) -> np.ndarray:
    """The core's chunk rule (``FileReader.chunk_bounds``), as int64."""
    return np.asarray(reader.chunk_bounds(chunk_size), np.int64)


# -- quality ----------------------------------------------------------------------------


def shuffle_quality(order: Order, batch_size: int, bounds: Any = None, epoch: int = 0,
                    batches: int = 32) -> dict[str, float]:
    """How well ``order`` mixes, measured on ``batches`` global batches spread over the epoch.

    - ``distinct_chunks``: chunks a batch of ``batch_size`` consecutive canonical positions
      draws from, on average (chunks per ``bounds``, a ``ChunkShuffle``'s own by default);
      ``full_shuffle_distinct_chunks`` is the same for a full shuffle of the same data.
    - ``spread``: standard deviation of a batch's sample indices, relative to a uniform
      draw over the dataset's (``n / sqrt(12)``): about 1.0 for a full shuffle, near 0 for
      a sequential order.

    >>> b = np.arange(0, 1001, 10)                       # 100 chunks of 10 samples
    >>> q = shuffle_quality(ChunkShuffle(b, seed=0, window=4), 32)
    >>> q["distinct_chunks"] <= 8 < q["full_shuffle_distinct_chunks"]  # a batch spans 1 or 2 windows
    True
    """
    bounds = getattr(order, "bounds", None) if bounds is None else np.asarray(bounds, np.int64)
    if bounds is None:
        raise ValueError("shuffle_quality needs the chunk bounds of a non-chunk order")
    n, size = order.n, min(batch_size, order.n)
    if size < 1:
        raise ValueError("shuffle_quality needs a non-empty dataset and batch")
    firsts = np.linspace(0, n - size, num=batches).astype(np.int64)
    full = FullShuffle(n, order.seed or 0)
    figures: dict[str, list[float]] = {"distinct_chunks": [], "full_shuffle_distinct_chunks": [], "spread": []}
    for first in firsts.tolist():
        positions = np.arange(first, first + size)
        for name, o in (("distinct_chunks", order), ("full_shuffle_distinct_chunks", full)):
            idx = o.indices(epoch, positions)
            figures[name].append(len(np.unique(np.searchsorted(bounds, idx, side="right"))))
            if o is order:
                figures["spread"].append(float(idx.std()) / (n / math.sqrt(12)) if n > 1 else 1.0)
    return {name: float(np.mean(values)) for name, values in figures.items()}

