"""One sample of several readers in one native call: ``FileReader.read_one`` and a
structured datapoint (``DatasetReader[i]``, one file per field).

Everything that does not change between calls is worked out once: the readers' handles as
a C array (again only after a fork, when the library and its handles are new), the buffer
size the samples usually need. A call is then one buffer, one ``ffr_readers_read_one``.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Sequence

from . import _lib
from .errors import E_SHORTBUF

_FIRST_GUESS = 4096


class SampleReads:
    """Reads sample ``i`` of each of ``count`` readers (open ``FileReader`` objects, given
    at each call so that no reference cycle keeps them open)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._sizes = struct.Struct(f"<{count}Q")
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

    def read(self, index: int, readers: Sequence) -> tuple[bytearray, tuple[int, ...]]:
        """``(buffer, sizes)``: the samples back to back at the start of ``buffer``.
        ``index`` must already lie in ``[0, n)``; ``readers`` are the same every call."""
        lib = _lib.current()
        if lib.generation != self._generation:
            self._refresh(lib, readers)
        count = self._count
        while True:
            room = self._guess
            # a bytearray and its address cost a fraction of a numpy array's .ctypes.data
            buf = bytearray(room + 8 * count)
            at = ctypes.addressof(ctypes.c_char.from_buffer(buf))
            status = lib.dll.ffr_readers_read_one(self._address, count, index, at, room, at + room)
            sizes = self._sizes.unpack_from(buf, room)
            if status == 0:
                return buf, sizes
            if status != E_SHORTBUF:
                _lib.raise_status(status)
            self._guess = -(-max(sum(sizes), room + 1) // 8) * 8
