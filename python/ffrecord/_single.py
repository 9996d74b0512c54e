"""One sample of several readers in one native call: ``FileReader.read_one`` and a
structured datapoint (``DatasetReader[i]``, one file per field).

Everything that does not change between calls is worked out once: the readers' handles as
a C array and the native function (again only after a fork, when the library and its
handles are new), the buffer size the samples usually need. A call is then one buffer, one
``ffr_readers_read_one``, and no Python work that grows with the number of readers.

Each buffer comes in a *kit* with the call's arguments built once as ctypes objects (its
address, its room, where the sizes go, and a ``c_uint64`` the index is set in), so the
call converts no argument: ctypes turning six Python ints into C ones through declared
``argtypes`` cost 0.4 µs of a 10 µs structured datapoint (16 KiB samples). A caller that
copies the values out (``DatasetReader[i]``'s built-in decoders do, ``FileReader.read_one``
does) hands the kit back with ``give_back``, and the next call reuses it rather than
allocating and zeroing a buffer and building a kit around it (another 2 µs). A kit whose buffer something still refers to (a decoder kept a view of
it) is never reused.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from ctypes import c_int32, c_uint64, c_void_p
from typing import Any, Sequence

from . import _lib
from .errors import E_SHORTBUF

_FIRST_GUESS = 4096
_addressof = ctypes.addressof
_char_at = ctypes.c_char.from_buffer
_refcount = sys.getrefcount
_SPARES = 4  # kits kept for reuse: one per thread reading at once, within reason

# (buffer, the index argument, the call's arguments, the buffer's room for samples)
Kit = tuple[bytearray, c_uint64, tuple, int]


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
        self._guess = _FIRST_GUESS  # bytes of samples, a multiple of 8
        # kits no one refers to any more; list.pop and list.append are atomic, so threads
        # sharing the reader never get the same one
        self._spares: list[Kit] = []

    def _refresh(self, lib: _lib.Library, readers: Sequence) -> None:
        """The handles of this library copy (each reader reopens itself after a fork)."""
        handles = [reader._live()[1] for reader in readers]
        self._handles = (ctypes.c_int64 * self._count)(*handles)
        # A binding of its own without argtypes: every argument is passed as a ctypes
        # object of the type ffrecord.h declares (see _kit), which ctypes passes as is.
        call = lib.dll["ffr_readers_read_one"]
        call.restype = c_int32
        self._call = call
        self._spares = []  # their arguments name the old handles
        self._lib = lib

    def _kit(self) -> Kit:
        room = self._guess  # read once: another thread's _again may raise it meanwhile
        buf = bytearray(room + self._tail)
        at = _addressof(_char_at(buf))
        index = c_uint64()
        return buf, index, (self._handles, c_uint64(self._count), index, c_void_p(at),
                            c_uint64(room), c_void_p(at + room)), room

    def copy(self, index: int, reader: Any) -> bytearray:
        """Sample ``index`` of a single reader, copied out of a reused buffer: a copy costs
        less than a new kit (a fresh buffer zeroed and its arguments built, 2 µs) up to the
        largest samples, whose buffer would be zeroed anyway."""
        kit, sizes = self.lend(index, (reader,))
        value = kit[0][:sizes[0]]
        self.give_back(kit)
        return value

    def lend(self, index: int, readers: Sequence) -> tuple[Kit, tuple[int, ...]]:
        """``(kit, sizes)``: the samples back to back at the start of the kit's buffer
        (``kit[0]``), which the caller may ``give_back``. ``index`` must already lie in
        ``[0, n)``; ``readers`` are the same every call."""
        lib = _lib.current()
        if lib is not self._lib:
            self._refresh(lib, readers)
        try:
            kit = self._spares.pop()
        except IndexError:
            kit = self._kit()
        buf, number, args, room = kit
        number.value = index
        status = self._call(*args)
        if status:
            return self._again(status, index, readers, kit)
        return kit, self._sizes.unpack_from(buf, room)

    def give_back(self, kit: Kit) -> None:
        """Offers ``kit`` (from ``lend``) for reuse: taken only when the kit is the last
        holder of its buffer (nothing decoded from it keeps a view) and the buffer has the
        size the next call wants."""
        # the buffer's references: the kit's and getrefcount's argument
        if (_refcount(kit[0]) == 2 and kit[3] == self._guess
                and len(self._spares) < _SPARES):
            self._spares.append(kit)

    def _again(self, status: int, index: int, readers: Sequence,
               kit: Kit) -> tuple[Kit, tuple[int, ...]]:
        """After a failed call: a larger buffer when it was too small, else the error."""
        if status != E_SHORTBUF:
            _lib.raise_status(status)
        room = kit[3]
        need = max(sum(self._sizes.unpack_from(kit[0], room)), room + 1, self._guess)
        self._guess = -(-need // 8) * 8
        return self.lend(index, readers)
