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

Small ``bytes`` samples are gathered and handed to the library many at a time (one call
into the library costs about as much as writing a 1 KiB sample), so a delayed write error,
such as a full disk, can surface at a later ``write_one`` or at ``close()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import operator
import os
import threading
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from . import _lib, _paths, _remote
from ._paths import PathArg
from .errors import clean_up_after

# Gathered ``bytes`` samples go to the library in one call once their bytes, plus
# SAMPLE_CHARGE for each, reach BATCH_BYTES: about 1 MiB of data or 4096 samples at most. A
# ``bytes`` sample of BATCH_BYTES or more goes on its own, as it costs no more that way.
BATCH_BYTES = 1 << 20
SAMPLE_CHARGE = BATCH_BYTES // 4096
# From this average size, gathered samples are handed over in place rather than joined.
VECTOR_BYTES = 64 << 10


class ClosesOrAborts:
    """As a context manager: ``close()`` on success, ``abort()`` when an exception leaves
    (a failure of the abort is noted on that exception, see ``clean_up_after``)."""

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, _: object) -> None:
        if exc is None:
            self.close()
        else:
            clean_up_after(exc, self.abort)


class FileWriter(ClosesOrAborts):
    """Writes exactly ``n`` samples (or any number when ``n`` is ``None``) to ``fname``.

    ``compression="lz4"`` stores samples LZ4-compressed, ``"zstd"`` Zstandard-compressed
    (smaller, slower to write); readers decompress transparently. The reference
    implementation opens such files but sees the stored (compressed) bytes. As a context manager the file is
    closed on success and aborted (nothing left at ``fname``) on an exception.

    ``fname`` may be an ``s3://bucket/key`` URL (``storage_options`` as for ``FileReader``):
    the file is written to a private local staging directory and uploaded at ``close()``,
    in parallel parts when large; the object appears only when the upload completes, and
    nothing appears when writing, closing or uploading fails.

    ``close()`` makes the file durable (fsync of the file and its directory) before it
    returns. ``durable=False`` skips that, for scratch files a crash may lose (a conversion's
    intermediate output, a benchmark): the file still appears at ``fname`` complete or not
    at all while the machine stays up, but after a power loss it may be missing or hold zeros.

    Small ``bytes`` samples are kept (bytes cannot change, so no copy is made) and written
    in batches of up to 1 MiB or 4096 samples; other buffers, which may change after the
    call, are written at once, after what was gathered before them, so the order is always
    the order of the calls. ``count`` counts samples accepted, written or gathered. Writing
    more than ``n`` raises ``ValueError`` at the call that tries. An I/O error while writing
    a batch (disk full, say) is raised by the call that flushes it: a later ``write_one``,
    ``write_many`` or ``close()``; the file is then lost (``close()`` leaves nothing).
    A writer can be shared by threads: calls are serialised. The path is checked at once:
    ``ValueError`` when it is a directory or holds a NUL byte, ``FileNotFoundError`` when
    its directory is missing.

    >>> w = FileWriter(path, n=None)                      # doctest: +SKIP
    >>> w.write_one(np.arange(4, dtype=np.float32))       # doctest: +SKIP
    >>> w.count                                           # doctest: +SKIP
    1
    >>> w.close()                                         # doctest: +SKIP
    """

    def __init__(self, fname: PathArg, n: int | None = None, *,
                 compression: str | None = None,
                 storage_options: dict[str, Any] | None = None, durable: bool = True) -> None:
        self._handle = 0  # nothing to clean up if the checks below fail
        self._staging: _remote.Staging | None = None
        if not isinstance(fname, (str, bytes, os.PathLike)):
            raise TypeError(f"fname must be str or os.PathLike, not {type(fname).__name__}")
        if n is not None:
            if isinstance(n, bool):
                raise TypeError("n must be an integer or None, not bool")
            n = operator.index(n)
            if n < 0 or n >= _lib.UNKNOWN_COUNT:
                raise ValueError(f"n must be >= 0 and < 2**64-1, got {n}")
        if compression not in _lib.COMPRESSION:
            raise ValueError(f"compression must be None, 'lz4' or 'zstd', got {compression!r}")
        self.fname = os.fsdecode(_remote.local_path(fname))
        self.storage_options = storage_options
        _remote.check_options(storage_options)  # a bad option fails before anything is written
        local = self.fname
        if _remote.is_url(self.fname):
            if self.fname.endswith("/"):
                raise ValueError(f"{self.fname}: a FileWriter writes one object: name its key")
            self._staging = _remote.Staging(self.fname)
            local = self._staging.path
        self.n = n
        self.compression = compression
        self.count = 0
        self._pending: list[bytes] = []  # gathered samples, not yet given to the library
        self._batch_room = BATCH_BYTES  # what the pending samples may still take, charges included
        self._lock = threading.Lock()  # guards the handle, count and pending samples
        lib = _lib.current()
        handle = ctypes.c_int64()
        try:
            _lib.check(lib.dll.ffr_writer_create(
                _paths.encode(local), _lib.UNKNOWN_COUNT if n is None else n,
                _lib.COMPRESSION[compression], ctypes.byref(handle)))
        except BaseException:
            self._discard_staging()
            raise
        self._library = lib  # the copy that owns the handle (a forked child gets another)
        self._handle = handle.value
        self.durable = bool(durable)
        if not self.durable:
            _lib.check(lib.dll.ffr_writer_set_durable(self._handle, 0))

    def write_one(self, data: Any) -> None:
        """Appends one sample: ``bytes``, ``bytearray``, ``memoryview``, a numpy array or any
        C-contiguous buffer (its raw bytes are stored). ``ValueError`` when ``n`` samples
        were already written. Small ``bytes`` are gathered, not written yet: an I/O error
        met while writing gathered samples is raised by the call that sends them (this one
        or a later one, or ``close()``).

        >>> w.write_one(b"\\x00\\x01")                       # doctest: +SKIP
        """
        # The library identity check comes before the lock: in a forked child it fails, and
        # the slow path raises there instead of waiting on a lock copied in a locked state.
        if type(data) is bytes and self._library is _lib._state:
            size = len(data)
            if size < BATCH_BYTES:
                with self._lock:
                    if self.count != self.n and self._handle:
                        self._pending.append(data)
                        self.count += 1
                        self._batch_room -= size + SAMPLE_CHARGE
                        if self._batch_room < 0:
                            self._flush(self._library.dll, self._handle)
                        return
        # A sample that cannot wait, or one the writer will refuse: the library says why.
        self._write_now(data)

    def write_many(self, samples: Iterable[Any]) -> None:
        """Appends every sample of an iterable, in order, as ``write_one`` would; when one
        fails, those before it are kept.

        >>> w = FileWriter(path, 3)                           # doctest: +SKIP
        >>> w.write_many([b"a", bytearray(b"b"), np.zeros(4, np.uint8)])  # doctest: +SKIP
        >>> w.count                                           # doctest: +SKIP
        3
        """
        write_one = self.write_one
        for sample in samples:
            write_one(sample)

    def write_batch(self, data: Any, sizes: Any) -> None:
        """Appends ``len(sizes)`` samples stored back to back in ``data`` (any C-contiguous
        buffer), ``sizes[k]`` bytes each, by one native call: what ``write_one`` of each
        would store. ``ValueError``, with nothing written, when the sizes do not add up to
        the buffer's length or the batch would pass ``n``.

        >>> w.write_batch(b"abbccc", [1, 2, 3])               # doctest: +SKIP
        """
        flat = _flat_bytes(data)
        lengths = np.ascontiguousarray(sizes, np.uint64).reshape(-1)
        if int(lengths.sum(dtype=np.uint64)) != flat.nbytes:
            raise ValueError(f"the sizes add up to {int(lengths.sum())} bytes, the buffer holds {flat.nbytes}")
        dll, handle = self._live()
        with self._lock:
            if not self._handle:
                raise self._closed_error()
            self._flush(dll, handle)
            if len(lengths):
                status = dll.ffr_writer_write_batch(handle, flat.ctypes.data, lengths.ctypes.data, len(lengths))
                if status:
                    _lib.raise_status(status)
            self.count += len(lengths)

    def _write_now(self, data: Any) -> None:
        """Writes a sample that cannot wait (a buffer that may change, a large one) after
        flushing the samples gathered before it."""
        dll, handle = self._live()
        flat = _flat_bytes(data) if type(data) is not bytes else None  # TypeError before anything
        with self._lock:
            if not self._handle:
                raise self._closed_error()
            self._flush(dll, handle)
            if flat is None:  # ctypes passes the storage of bytes directly
                status = dll.ffr_writer_write(handle, data, len(data))
            else:
                status = dll.ffr_writer_write(handle, flat.ctypes.data, flat.nbytes)
            if status:
                _lib.raise_status(status)
            self.count += 1

    def _flush(self, dll: ctypes.CDLL, handle: int) -> None:
        """Hands the gathered samples to the library in one call; the caller holds the lock."""
        pending = self._pending
        if not pending:
            return
        self._pending, self._batch_room = [], BATCH_BYTES
        sizes = np.fromiter(map(len, pending), np.uint64, len(pending))
        if int(sizes.sum()) >= VECTOR_BYTES * len(pending):
            # Large samples: the library writes them from where they are, with no join.
            data = (ctypes.c_char_p * len(pending))(*pending)
            status = dll.ffr_writer_write_vectors(handle, data, sizes.ctypes.data, len(pending))
        else:
            status = dll.ffr_writer_write_batch(handle, b"".join(pending), sizes.ctypes.data,
                                                len(pending))
        if status:
            _lib.raise_status(status)

    def close(self) -> None:
        """Writes what is still gathered, then the header, and moves the file into place.
        ``ValueError`` (and nothing left at ``fname``) when fewer than ``n`` samples were
        written; a delayed write error is raised here too (and nothing is left either).
        Closing twice is a no-op."""
        with self._finishing() as live:
            if live is None:
                return
            dll, handle = live
            try:
                self._flush(dll, handle)
            except BaseException:  # the file is lost: free the handle, keep the error
                dll.ffr_writer_abort(handle)
                raise
            _lib.check(dll.ffr_writer_close(handle))
            if self._staging is not None:
                _remote.upload(self._staging.path, self.fname, self.storage_options)

    def abort(self) -> None:
        """Discards everything written or gathered; nothing is left at ``fname``."""
        with self._finishing() as live:
            if live is not None:
                self._pending, self._batch_room = [], BATCH_BYTES
                _lib.check(live[0].ffr_writer_abort(live[1]))

    @contextlib.contextmanager
    def _finishing(self) -> Iterator[tuple[ctypes.CDLL, int] | None]:
        """The library and the handle for the one ``close`` or ``abort`` that ends the
        writer (``None`` for any later one), under the lock; the upload staging is
        discarded at the end, whatever happens."""
        if not self._handle:
            yield None
            return
        dll, handle = self._live()
        with self._lock:
            if not self._handle:
                yield None
                return
            self._handle = 0
            try:
                yield dll, handle
            finally:
                self._discard_staging()

    def _discard_staging(self) -> None:
        if self._staging is not None:
            self._staging.discard()
            self._staging = None

    @property
    def closed(self) -> bool:
        return not self._handle

    def __del__(self) -> None:
        try:
            handle = getattr(self, "_handle", 0)
            lib = _lib.loaded() if handle else None
            if lib is None or lib is not self._library:
                return  # nothing open here (a forked child's copy: the parent owns the file)
            message = f"{self!r} was never closed: discarding what was written"
            self._handle = 0
            try:
                warnings.warn(message, ResourceWarning, stacklevel=2)
            finally:
                lib.dll.ffr_writer_abort(handle)
                self._discard_staging()
        except Exception:  # noqa: BLE001 - a destructor must never raise, even at shutdown
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"count={self.count}"
        extra = f", compression={self.compression!r}" if self.compression else ""
        return f"{type(self).__name__}({self.fname!r}, n={self.n}{extra}) {state}"

    def _closed_error(self) -> ValueError:
        return ValueError(f"I/O operation on closed {type(self).__name__}")

    def _live(self) -> tuple[ctypes.CDLL, int]:
        if not self._handle:
            raise self._closed_error()
        lib = _lib.current()
        if lib is not self._library:
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
