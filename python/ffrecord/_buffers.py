"""Batch buffers: the pool that recycles them, the caller's own buffers checked before the
core writes into them, and the split of one buffer into per-sample views.

>>> buf = np.frombuffer(b"abbccc", np.uint8)
>>> [s.tobytes() for s in split_batch(buf, offsets(np.array([1, 2, 3], np.uint64)))]
[b'a', b'bb', b'ccc']
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, Callable

import numpy as np

# Batch buffers are recycled (see BufferPool) up to this size; larger ones are allocated per call.
_MAX_POOLED = 256 << 20
_POOL_SLOTS = 4


class BufferPool:
    """A few batch buffers of one thread, each reused only while nothing else refers to it.

    Every array ``read`` hands out is a view of its buffer, and so is anything made from
    one (views, ``memoryview``, ``np.frombuffer``, ``torch.from_numpy``): each holds a
    reference to the buffer, directly or through the objects it was made from. A buffer
    whose reference count is down to the pool's own is therefore seen by no one, and a
    sample that someone keeps never changes. The count is compared with the count taken
    the same way right after the buffer was made. Without a global interpreter lock the
    counts are not exact, and every batch gets a fresh buffer.

    >>> pool = BufferPool()
    >>> a = pool.take(100); first = id(a.base)
    >>> id(pool.take(100).base) == first   # a still refers to the first buffer
    False
    >>> del a; id(pool.take(10).base) == first   # no one does any more: it is reused
    True
    """

    enabled = getattr(sys, "_is_gil_enabled", lambda: True)()

    def __init__(self) -> None:
        self._buffers: list[np.ndarray] = []
        self._baseline = 0

    def take(self, nbytes: int) -> np.ndarray:
        if not self.enabled or nbytes > _MAX_POOLED:
            return np.empty(nbytes, np.uint8)
        fitting = smaller = None
        for slot in range(len(self._buffers)):
            if self._refs(slot) > self._baseline:
                continue
            if self._buffers[slot].nbytes >= nbytes:
                fitting = slot
                break
            smaller = slot
        if fitting is None:
            fitting = self._add(nbytes, smaller)
            if fitting is None:  # every slot in use: this batch's buffer is not kept
                return np.empty(nbytes, np.uint8)
        return self._buffers[fitting][:nbytes]

    def _add(self, nbytes: int, replace: int | None) -> int | None:
        """Makes a buffer of at least ``nbytes`` in slot ``replace`` or a new slot."""
        if replace is None and len(self._buffers) >= _POOL_SLOTS:
            return None
        # a power of two: batches of variable-size samples reuse it as they vary
        capacity = min(max(4096, 1 << max(nbytes - 1, 0).bit_length()), _MAX_POOLED)
        if replace is None:
            self._buffers.append(np.empty(capacity, np.uint8))
            replace = len(self._buffers) - 1
        else:
            self._buffers[replace] = np.empty(capacity, np.uint8)
        self._baseline = self._refs(replace)
        return replace

    def _refs(self, slot: int) -> int:
        return sys.getrefcount(self._buffers[slot])


def address(arr: np.ndarray) -> int:
    """The address of the first byte of a C-contiguous array, for a native call: through a
    ctypes view when it is writable (0.4 µs), else through numpy (``.ctypes.data``, 2 µs).

    >>> a = np.zeros(4, np.uint8)
    >>> address(a[1:]) == a.ctypes.data + 1, address(a[1:].view()) == address(a) + 1
    (True, True)
    >>> a.flags.writeable = False; address(a) == a.ctypes.data, address(a[:0]) == a.ctypes.data
    (True, True)
    """
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(arr))
    except (TypeError, ValueError):  # read-only, or empty
        return arr.ctypes.data


def split(buf: np.ndarray, k: int, common: int, sizes: np.ndarray) -> list[np.ndarray]:
    """The ``k`` samples of a batch buffer; ``common`` is their one size, or -1."""
    if common >= 0:  # one size: the rows of a 2-D view are the cheapest views to make
        return list(buf[: k * common].reshape(k, common))
    edges = offsets(sizes).tolist()
    return [buf[start:end] for start, end in zip(edges, edges[1:])]


def split_batch(buffer: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    """The samples of ``read_batch``'s ``(buffer, offsets)``, as ``read`` returns them.

    >>> split_batch(np.frombuffer(b"abbccc", np.uint8), np.array([0, 1, 3, 6]))[2].tobytes()
    b'ccc'
    """
    sizes = np.diff(offsets)
    k = len(sizes)
    common = int(sizes[0]) if k and (sizes == sizes[0]).all() else -1
    return split(buffer, k, common, sizes)


def offsets(sizes: np.ndarray) -> np.ndarray:
    """Start offsets of back-to-back samples, plus the end: ``int64``, ``len(sizes) + 1``."""
    edges = np.empty(len(sizes) + 1, np.int64)
    edges[0] = 0
    np.cumsum(sizes.view(np.int64), out=edges[1:])
    return edges


def writable_bytes(out: Any) -> np.ndarray:
    """The whole of ``out`` as a ``uint8`` array; ValueError unless writable and contiguous."""
    view = memoryview(out)
    if view.readonly or not view.c_contiguous:
        raise ValueError("out must be a writable C-contiguous buffer")
    return np.frombuffer(view, np.uint8, count=view.nbytes)


def output_view(out: Any, total: int) -> np.ndarray:
    """The first ``total`` bytes of ``out``; ValueError when it holds fewer."""
    buf = writable_bytes(out)
    if buf.nbytes < total:
        raise ValueError(f"out holds {buf.nbytes} bytes; the batch needs {total}")
    return buf[:total]


def allocator(make: Callable[[int], Any]) -> Callable[[int], np.ndarray]:
    """``make(nbytes)``'s buffer as ``uint8``, checked to be writable and big enough."""

    def allocate(nbytes: int) -> np.ndarray:
        buf = writable_bytes(make(nbytes))
        if buf.nbytes < nbytes:
            raise ValueError(f"out({nbytes}) returned a buffer of {buf.nbytes} bytes")
        return buf

    return allocate
