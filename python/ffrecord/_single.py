"""One sample of several readers in one native call: ``FileReader.read_one`` and a
structured datapoint (``DatasetReader[i]``, one file per field).

Everything that does not change between calls is worked out once: the readers' handles as
a C array and the bound native function (again only after a fork, when the library and its
handles are new), the buffer size the samples usually need. A call is then one buffer, one
``ffr_readers_read_one``, and no Python work that grows with the number of readers.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Sequence

from . import _lib
from .errors import E_SHORTBUF

_FIRST_GUESS = 4096
_addressof = ctypes.addressof
_char_at = ctypes.c_char.from_buffer


class SampleReads:
    """Reads sample ``i`` of each of ``count`` readers (open ``FileReader`` objects, given
    at each call so that no reference cycle keeps them open)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._sizes = struct.Struct(f"<{count}Q")
        self._tail = 8 * count  # the sizes come back after the samples
        self._lib: _lib.Library | None = None  # the library copy the handles belong to
        self._call: Any = None
        self._handles: ctypes.Array | None = None
        self._address = 0
        self._guess = _FIRST_GUESS  # bytes of samples, a multiple of 8

    def _refresh(self, lib: _lib.Library, readers: Sequence) -> None:
        """The handles of this library copy (each reader reopens itself after a fork)."""
        handles = [reader._live()[1] for reader in readers]
        self._handles = (ctypes.c_int64 * self._count)(*handles)
        self._address = _addressof(self._handles)
        self._call = lib.dll.ffr_readers_read_one
        self._lib = lib

    def read(self, index: int, readers: Sequence) -> tuple[bytearray, tuple[int, ...]]:
        """``(buffer, sizes)``: the samples back to back at the start of ``buffer``.
        ``index`` must already lie in ``[0, n)``; ``readers`` are the same every call."""
        lib = _lib.current()
        if lib is not self._lib:
            self._refresh(lib, readers)
        room = self._guess
        # a bytearray and its address cost a fraction of a numpy array's .ctypes.data
        buf = bytearray(room + self._tail)
        at = _addressof(_char_at(buf))
        status = self._call(self._address, self._count, index, at, room, at + room)
        if status:
            return self._again(status, index, readers, buf, room)
        return buf, self._sizes.unpack_from(buf, room)

    def _again(self, status: int, index: int, readers: Sequence, buf: bytearray,
               room: int) -> tuple[bytearray, tuple[int, ...]]:
        """After a failed call: a larger buffer when it was too small, else the error."""
        if status != E_SHORTBUF:
            _lib.raise_status(status)
        self._guess = -(-max(sum(self._sizes.unpack_from(buf, room)), room + 1) // 8) * 8
        return self.read(index, readers)
