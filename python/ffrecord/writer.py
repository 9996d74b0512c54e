"""``FileWriter``: writes samples to a new FFRecord file.

The file appears at its path only when ``close()`` succeeds; until then the data goes to a
temporary file beside it, so an interrupted or aborted write never leaves a valid-looking file.

>>> import tempfile, os
>>> from ffrecord import FileWriter
>>> path = os.path.join(tempfile.mkdtemp(), "demo.ffr")
>>> with FileWriter(path, 2) as w:
...     w.write_one(b"hello")
...     w.write_one(bytearray(b"world"))
>>> os.path.exists(path)
True
"""

from __future__ import annotations

import ctypes
import operator
import os
import warnings
from typing import Any, Union

import numpy as np

from . import _lib

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


class FileWriter:
    """Writes exactly ``n`` samples (or any number when ``n`` is ``None``) to ``fname``.

    ``compression="lz4"`` stores samples LZ4-compressed (readers decompress transparently;
    the reference implementation cannot read such files). As a context manager the file is
    closed on success and aborted (nothing left at ``fname``) on an exception.

    >>> w = FileWriter(path, n=None)                      # doctest: +SKIP
    >>> w.write_one(np.arange(4, dtype=np.float32))       # doctest: +SKIP
    >>> w.count                                           # doctest: +SKIP
    1
    >>> w.close()                                         # doctest: +SKIP
    """

    def __init__(self, fname: PathArg, n: int | None = None, *,
                 compression: str | None = None) -> None:
        self._handle = 0  # nothing to clean up if the checks below fail
        if not isinstance(fname, (str, bytes, os.PathLike)):
            raise TypeError(f"fname must be str or os.PathLike, not {type(fname).__name__}")
        if n is not None:
            if isinstance(n, bool):
                raise TypeError("n must be an integer or None, not bool")
            n = operator.index(n)
            if n < 0 or n >= _lib.UNKNOWN_COUNT:
                raise ValueError(f"n must be >= 0 and < 2**64-1, got {n}")
        if compression not in _lib.COMPRESSION:
            raise ValueError(f"compression must be None or 'lz4', got {compression!r}")
        self.fname = os.fsdecode(fname)
        self.n = n
        self.compression = compression
        self.count = 0
        lib = _lib.current()
        handle = ctypes.c_int64()
        _lib.check(lib.dll.ffr_writer_create(
            _lib.encode_path(fname), _lib.UNKNOWN_COUNT if n is None else n,
            _lib.COMPRESSION[compression], ctypes.byref(handle)))
        self._generation = lib.generation
        self._handle = handle.value

    def write_one(self, data: Any) -> None:
        """Appends one sample: ``bytes``, ``bytearray``, ``memoryview``, a numpy array or any
        C-contiguous buffer, passed to the library without a copy.

        >>> w.write_one(b"\\x00\\x01")                       # doctest: +SKIP
        """
        dll, handle = self._live()
        if type(data) is bytes:  # the common case: ctypes passes its storage directly
            status = dll.ffr_writer_write(handle, data, len(data))
        else:
            flat = _flat_bytes(data)
            status = dll.ffr_writer_write(handle, flat.ctypes.data, flat.nbytes)
        if status:
            _lib.raise_status(status)
        self.count += 1

    def close(self) -> None:
        """Writes the header and moves the file into place. ``ValueError`` (and nothing left
        at ``fname``) when fewer than ``n`` samples were written. Closing twice is a no-op."""
        if self._handle:
            dll, handle = self._live()
            self._handle = 0
            _lib.check(dll.ffr_writer_close(handle))

    def abort(self) -> None:
        """Discards everything written; nothing is left at ``fname``."""
        if self._handle:
            dll, handle = self._live()
            self._handle = 0
            _lib.check(dll.ffr_writer_abort(handle))

    @property
    def closed(self) -> bool:
        return not self._handle

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        try:
            handle = getattr(self, "_handle", 0)
            lib = _lib.loaded() if handle else None
            if lib is None or lib.generation != self._generation:
                return  # nothing open here (a forked child's copy: the parent owns the file)
            message = f"{self!r} was never closed: discarding what was written"
            self._handle = 0
            try:
                warnings.warn(message, ResourceWarning, stacklevel=2)
            finally:
                lib.dll.ffr_writer_abort(handle)
        except Exception:  # noqa: BLE001 - a destructor must never raise, even at shutdown
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"count={self.count}"
        extra = f", compression={self.compression!r}" if self.compression else ""
        return f"{type(self).__name__}({self.fname!r}, n={self.n}{extra}) {state}"

    def _live(self) -> tuple[ctypes.CDLL, int]:
        if not self._handle:
            raise ValueError(f"I/O operation on closed {type(self).__name__}")
        lib = _lib.current()
        if lib.generation != self._generation:
            raise RuntimeError(
                f"{self!r} was created in another process: a FileWriter cannot be used "
                "after fork(); create the writer in the process that writes")
        return lib.dll, self._handle


def _flat_bytes(data: Any) -> np.ndarray:
    """A zero-copy ``uint8`` view of any C-contiguous buffer."""
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"a sample must be a bytes-like object, not {type(data).__name__}") from None
    if not view.c_contiguous:
        raise ValueError("a sample must be a C-contiguous buffer (use np.ascontiguousarray)")
    if view.nbytes == 0:
        return np.empty(0, np.uint8)
    return np.frombuffer(view, np.uint8)
