"""A batch of samples of one reader in one native call: ``FileReader.read`` and
``read_batch``.

Reading a batch normally takes two calls, the sizes then the samples. Fixed-size samples are
common: once a batch of at least ``_MIN_FIXED_EVIDENCE`` samples all had one size, later
batches are read into a buffer of that size times k in one call, without the sizes call
first (a wrong guess costs one retry, then guessing stops for good).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

import numpy as np

from . import _lib
from ._buffers import BufferPool, address, allocator, writable_bytes
from .errors import E_SHORTBUF

_MIN_FIXED_EVIDENCE = 8
_MAX_GUESS = 256 << 20
_SIZE_UNKNOWN, _SIZES_VARY = -1, -2

#: ``(buffer, sizes, common)``: the samples back to back, their sizes, and their one size
#: (-1 when the sizes differ).
Batch = tuple[np.ndarray, np.ndarray, int]


class BatchReads:
    """Reads batches of one reader: learns whether its samples have one size, and recycles
    each thread's batch buffers (``BufferPool``) when the caller gives none."""

    def __init__(self) -> None:
        self._fixed_size = _SIZE_UNKNOWN
        self._fixed_bytes = b""
        self._pools = threading.local()

    def forget_buffers(self) -> None:
        """Frees the recycled buffers (those still in use live on)."""
        self._pools = threading.local()

    def read(self, dll: ctypes.CDLL, handle: int, idx: np.ndarray, out: Any) -> Batch:
        """Reads ``idx`` into one buffer (``out``: None, a buffer, or a function giving one
        for a byte count)."""
        k = len(idx)
        sizes = np.empty(k, np.uint64)
        if k == 0:
            return np.empty(0, np.uint8), sizes, -1
        idx_addr, sizes_addr = address(idx), address(sizes)
        if out is not None and not callable(out):  # one call: it fails, sizing, when too small
            return self._read_into(dll, handle, idx_addr, sizes, sizes_addr, writable_bytes(out))
        allocate = self._new_buffer if out is None else allocator(out)
        if 0 <= self._fixed_size * k <= _MAX_GUESS:
            done = self._read_fixed_size(dll, handle, idx_addr, sizes, sizes_addr, allocate)
            if done is not None:
                return done
        else:
            status = dll.ffr_reader_sizes(handle, idx_addr, k, sizes_addr)
            if status:
                _lib.raise_status(status)
        buf = allocate(int(sizes.sum()))
        return self._read_into(dll, handle, idx_addr, sizes, sizes_addr, buf)

    def _read_into(self, dll: ctypes.CDLL, handle: int, idx_addr: int, sizes: np.ndarray,
                   sizes_addr: int, buf: np.ndarray) -> Batch:
        k = len(sizes)
        status = dll.ffr_reader_read_batch(handle, idx_addr, k, address(buf), buf.nbytes,
                                           sizes_addr)
        total = int(sizes.sum())
        if status == E_SHORTBUF:
            raise ValueError(f"out holds {buf.nbytes} bytes; the batch needs {total}")
        if status:
            _lib.raise_status(status)
        buf = buf[:total]
        common = int(sizes[0])
        if not (sizes == common).all():
            return buf, sizes, -1
        if k >= _MIN_FIXED_EVIDENCE and self._fixed_size == _SIZE_UNKNOWN:
            self._fixed_size = common
        return buf, sizes, common

    def _read_fixed_size(self, dll: ctypes.CDLL, handle: int, idx_addr: int, sizes: np.ndarray,
                         sizes_addr: int, allocate: Callable[[int], np.ndarray]) -> Batch | None:
        """One call, no sizes call, into a buffer sized for samples of the learnt size.
        ``None`` when it was too small: ``sizes`` is filled and nothing was read."""
        fixed, k = self._fixed_size, len(sizes)
        buf = allocate(fixed * k)
        status = dll.ffr_reader_read_batch(handle, idx_addr, k, address(buf), fixed * k,
                                           sizes_addr)
        if status == 0 and sizes.tobytes() == self._fixed_sizes(k):
            return buf[: fixed * k], sizes, fixed
        if status not in (0, E_SHORTBUF):
            _lib.raise_status(status)
        self._fixed_size = _SIZES_VARY  # guessed wrong once: size every batch from now on
        return (buf[: int(sizes.sum())], sizes, -1) if status == 0 else None

    def _fixed_sizes(self, k: int) -> bytes:
        """The bytes of ``k`` sizes all of the learnt size: comparing bytes costs a tenth of
        comparing arrays."""
        pattern = self._fixed_bytes
        if len(pattern) != 8 * k:
            pattern = self._fixed_bytes = np.full(k, self._fixed_size, np.uint64).tobytes()
        return pattern

    def _new_buffer(self, nbytes: int) -> np.ndarray:
        """A ``uint8`` array of ``nbytes`` for one batch: recycled memory when this thread
        has a buffer that nothing refers to any more (already faulted in: a fresh buffer
        pays a page fault per 4 KiB, as much as reading warm data costs)."""
        pool = getattr(self._pools, "pool", None)
        if pool is None:
            pool = self._pools.pool = BufferPool()
        return pool.take(nbytes)
