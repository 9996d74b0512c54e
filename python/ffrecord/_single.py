"""One sample of several readers in one native call: ``FileReader.read_one`` and a
structured datapoint (``DatasetReader[i]``, one file per field).

Everything that does not change between calls is worked out once: the readers' handles as
a C array (again only after a fork, when the library and its handles are new), the buffer
size the samples usually need. A call is then one buffer, one ``ffr_readers_read_one``.
"""

from __future__ import annotations

import ctypes
from typing import Sequence

import numpy as np

from . import _lib
from .errors import E_SHORTBUF

_FIRST_GUESS = 4096


class SampleReads:
    """Reads sample ``i`` of each of ``count`` readers (open ``FileReader`` objects, given
    at each call so that no reference cycle keeps them open)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._generation = -1
        self._handles: ctypes.Array | None = None
        self._address = 0
        self._guess = _FIRST_GUESS  # bytes of samples plus their sizes, multiple of 8

    def _refresh(self, lib: _lib.Library, readers: Sequence) -> None:
        """The handles of this library copy (each reader reopens itself after a fork)."""
        handles = [reader._live()[1] for reader in readers]
        self._handles = (ctypes.c_int64 * self._count)(*handles)
        self._address = ctypes.addressof(self._handles)
        self._generation = lib.generation

    def read(self, index: int, readers: Sequence) -> tuple[np.ndarray, list[int]]:
        """``(buffer, sizes)``: the samples back to back, then 8 bytes per size. ``index``
        must already lie in ``[0, n)``; ``readers`` are the same readers every call."""
        lib = _lib.current()
        if lib.generation != self._generation:
            self._refresh(lib, readers)
        count = self._count
        while True:
            room = self._guess
            buf = np.empty(room + 8 * count, np.uint8)
            at = buf.ctypes.data
            status = lib.dll.ffr_readers_read_one(self._address, count, index, at, room, at + room)
            sizes = buf[room:].view(np.uint64).tolist()
            if status == 0:
                return buf, sizes
            if status != E_SHORTBUF:
                _lib.raise_status(status)
            self._guess = -(-max(sum(sizes), room + 1) // 8) * 8
