"""Packing whole documents into blocks of a fixed number of tokens.

``pack(lengths, capacity, method, window, seed)`` plans which token ranges of which
documents fill each block: a document longer than a block is split into full blocks and
a remainder; the remainders are packed, largest first, by first-fit or best-fit
decreasing. ``window=None`` packs the whole set at once; a window of ``W`` documents sorts
and places ``W`` documents at a time (in an order shuffled by ``seed``), placing them
into any block still open, so memory and the plan's first blocks do not wait for the
whole set. The plan is a pure function of its arguments.

>>> plan = pack(np.array([5, 3, 2, 9, 1]), capacity=4, method="first_fit")
>>> plan.blocks, plan.padding_fraction
(5, 0.0)
>>> [list(zip(*map(np.ndarray.tolist, plan.block(b)))) for b in range(3, 5)]  # (doc, begin, count)
[[(1, 0, 3), (0, 4, 1)], [(2, 0, 2), (3, 8, 1), (4, 0, 1)]]
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._integers import at_least

METHODS = ("best_fit", "first_fit")


@dataclass(frozen=True)
class PackPlan:
    """Blocks as runs of pieces: block ``b`` is pieces ``ptr[b]:ptr[b+1]``, piece ``k``
    being tokens ``[begin[k], begin[k] + count[k])`` of document ``doc[k]``, placed at
    ``offset[k]`` in its block."""

    capacity: int
    ptr: np.ndarray
    doc: np.ndarray
    begin: np.ndarray
    count: np.ndarray
    offset: np.ndarray

    @property
    def blocks(self) -> int:
        return len(self.ptr) - 1

    @property
    def padding_fraction(self) -> float:
        """The share of the blocks' token slots that hold padding."""
        slots = self.blocks * self.capacity
        return 0.0 if slots == 0 else 1.0 - int(self.count.sum()) / slots

    def block(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(documents, begins, counts) of block ``b``."""
        run = slice(self.ptr[b], self.ptr[b + 1])
        return self.doc[run], self.begin[run], self.count[run]


def checked_packing(method: Any, window: Any, seed: Any) -> tuple[str, int | None, int]:
    """``(method, window, seed)`` checked: a method of ``METHODS``, ``None`` or an integer
    window ``>= 1``, an integer seed ``>= 0`` (errors name the argument)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    window = None if window is None else at_least(window, "window", 1)
    return method, window, at_least(seed, "seed")


def pack(lengths: np.ndarray, capacity: int, method: str = "best_fit", window: int | None = None,
         seed: int = 0) -> PackPlan:
    """Plans blocks of ``capacity`` tokens holding the documents of ``lengths`` (integers
    ``>= 0``)."""
    method, window, seed = checked_packing(method, window, seed)
    capacity = at_least(capacity, "capacity", 1)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or (lengths.size and lengths.dtype.kind not in "iu"):
        raise ValueError(f"lengths must be a 1-D sequence of integers, not {lengths.dtype} of shape "
                         f"{lengths.shape}")
    if lengths.size and (lengths.min() < 0 or int(lengths.max()) > np.iinfo(np.int64).max):
        bad = int(np.argmin(lengths)) if lengths.min() < 0 else int(np.argmax(lengths))
        raise ValueError(f"lengths must be from 0 to 2**63 - 1: document {bad} has {lengths[bad]}")
    lengths = lengths.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(lengths)) if window else np.arange(len(lengths))
    bins = _BestFit(capacity) if method == "best_fit" else _FirstFit(capacity)
    full_doc: list[np.ndarray] = []
    step = window or max(len(order), 1)
    for at in range(0, len(order), step):
        docs = order[at:at + step]
        full = lengths[docs] // capacity
        full_doc.append(np.repeat(docs, full))
        rest = lengths[docs] - full * capacity
        # Largest first; ties by document number so the plan does not depend on sort details.
        placing = docs[np.lexsort((docs, -rest))]
        placing = placing[lengths[placing] % capacity > 0]
        for doc, size in zip(placing.tolist(), (lengths[placing] % capacity).tolist()):
            bins.place(doc, size)
    return _plan(capacity, lengths, np.concatenate(full_doc or [np.empty(0, np.int64)]), bins.contents)


def _plan(capacity: int, lengths: np.ndarray, full_docs: np.ndarray, packed: list[list[int]]) -> PackPlan:
    """Full blocks of long documents first (in document order), then the packed blocks."""
    # The k-th full block of a document holds its tokens [k * capacity, (k + 1) * capacity).
    full_docs = np.sort(full_docs, kind="stable")
    first = np.searchsorted(full_docs, full_docs, side="left")
    full_begin = (np.arange(len(full_docs)) - first) * capacity
    sizes = [len(b) for b in packed]
    packed_doc = np.fromiter((d for b in packed for d in b), np.int64, sum(sizes))
    packed_count = lengths[packed_doc] % capacity
    packed_begin = lengths[packed_doc] - packed_count
    ptr = np.concatenate([np.arange(len(full_docs) + 1), len(full_docs) + np.cumsum(sizes, dtype=np.int64)])
    count = np.concatenate([np.full(len(full_docs), capacity, np.int64), packed_count])
    offset = np.cumsum(count) - count
    offset -= np.repeat(offset[ptr[:-1]], np.diff(ptr))
    return PackPlan(capacity, ptr.astype(np.int64), np.concatenate([full_docs, packed_doc]),
                    np.concatenate([full_begin, packed_begin]), count, offset)


class _BestFit:
    """Each item into the open block with the least room that still fits it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.contents: list[list[int]] = []
        self.rooms: list[int] = []  # distinct rooms of open blocks, ascending
        self.by_room: dict[int, list[int]] = {}

    def place(self, doc: int, size: int) -> None:
        at = bisect.bisect_left(self.rooms, size)
        if at == len(self.rooms):
            block, room = len(self.contents), self.capacity
            self.contents.append([])
        else:
            room = self.rooms[at]
            holders = self.by_room[room]
            block = holders.pop()
            if not holders:
                del self.by_room[room]
                del self.rooms[at]
        self.contents[block].append(doc)
        left = room - size
        if left:
            holders = self.by_room.get(left)
            if holders is None:
                holders = self.by_room[left] = []
                bisect.insort(self.rooms, left)
            holders.append(block)


class _FirstFit:
    """Each item into the first open block (in creation order) with room for it: a
    max-tree over the blocks' rooms finds it in O(log blocks)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.contents: list[list[int]] = []
        self.size = 1
        self.tree = [0, 0]

    def place(self, doc: int, size: int) -> None:
        tree = self.tree
        if tree[1] < size:
            block = len(self.contents)
            self.contents.append([])
            if block == self.size:
                self._grow()
                tree = self.tree
            node = self.size + block
            tree[node] = self.capacity
        else:
            node = 1
            while node < self.size:
                node = 2 * node if tree[2 * node] >= size else 2 * node + 1
            block = node - self.size
        self.contents[block].append(doc)
        tree[node] -= size
        node //= 2
        while node:
            tree[node] = max(tree[2 * node], tree[2 * node + 1])
            node //= 2

    def _grow(self) -> None:
        leaves = self.tree[self.size:]
        self.size *= 2
        self.tree = [0] * self.size + leaves + [0] * (self.size - len(leaves))
        for node in range(self.size - 1, 0, -1):
            self.tree[node] = max(self.tree[2 * node], self.tree[2 * node + 1])
