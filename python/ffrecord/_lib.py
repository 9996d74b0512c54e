"""Lazy, fork-proof loading of ``libffrecord.so`` and the ctypes signatures of its C ABI.

The library holds a Go runtime, and a Go runtime does not survive ``fork()``: the child has
none of its threads, so any call into the parent's copy hangs forever. So:

- nothing is loaded at ``import ffrecord``; the first call loads the library;
- a fork is noticed (``os.register_at_fork``); the next call in the child
  loads a *private copy* of the library from a new inode (a ``memfd_create`` file, else a
  temporary file), which starts a fresh runtime. Handles of the parent's runtime mean
  nothing there: every load bumps a *generation* number, and objects holding handles
  compare it to theirs (readers reopen by path, writers refuse);
- when no fresh copy can be had, the call raises ``RuntimeError`` at once: never a hang.

Calls go through ``ctypes.CDLL``, which releases the GIL for their duration; the lock
here guards only the (re)load, never the calls.

>>> from ffrecord import _lib
>>> _lib.current().generation >= 1
True
>>> _lib.version().count(".") >= 2
True
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import POINTER, c_char_p, c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any, NamedTuple, NoReturn

from .errors import E_IO, E_NOTFOUND, E_SHORTBUF, exception_for, os_exception_for

LIBRARY_ENV = "FFRECORD_LIBRARY"
LIBRARY_NAME = "libffrecord.so"
UNKNOWN_COUNT = 2**64 - 1  # ffr_writer_create: count not known in advance

# The #defines of capi/ffrecord.h other than statuses (those are in errors.py), under their
# names without FFR_; tests/test_abi_contract.py checks them against the header.
ABI_VERSION = 2
CHECK_DATA = 1
DIRECT = 2
NO_DESCRIPTORS = 4
COMPRESS_NONE = 0
COMPRESS_LZ4 = 1
COMPRESS_ZSTD = 2
INFO_SAMPLES = 0
INFO_STORED = 1
INFO_COMPRESSION = 2
INFO_HEADER_BYTES = 3
INFO_DATA_BYTES = 4
INFO_FILE_BYTES = 5
INFO_METADATA = 6
INFO_READ_FROM = 7
INFO_FIELDS = 8
METADATA_INTACT = 0
METADATA_LEGACY = 1
METADATA_DAMAGED = 2
READ_LOCAL = 0
READ_REMOTE = 1
READ_CACHED = 2
PATH_LOCAL = 0
PATH_S3 = 1
PATH_HTTP = 2
#: ffr_reader_stats's counters, in order (FFR_STAT_*).
STAT_NAMES = ("requests", "bytes_fetched", "retries", "cache_hits", "cache_misses",
              "evictions", "bypassed", "prefetched", "bytes_delivered")
(STAT_REQUESTS, STAT_BYTES, STAT_RETRIES, STAT_HITS, STAT_MISSES, STAT_EVICTIONS,
 STAT_BYPASSED, STAT_PREFETCHED, STAT_DELIVERED) = range(len(STAT_NAMES))
STAT_FIELDS = len(STAT_NAMES)

COMPRESSION = {None: COMPRESS_NONE, "none": COMPRESS_NONE, "lz4": COMPRESS_LZ4,
               "zstd": COMPRESS_ZSTD}

_LOAD_TIMEOUT = 30.0  # seconds to wait for another thread's (re)load before giving up
_TEXT_CAPACITY = 4096  # first buffer for text the library copies out; grown when short

_u64p = POINTER(c_uint64)
_sizep = POINTER(c_size_t)
_SIGNATURES: dict[str, list[type]] = {
    "ffr_version": [c_char_p, c_size_t, POINTER(c_int32)],
    "ffr_errmsg": [c_char_p, c_size_t, _sizep],
    "ffr_oserror": [POINTER(c_int32), c_char_p, c_size_t, _sizep],
    "ffr_open_handles": [_u64p],
    "ffr_crc32c": [c_uint32, c_void_p, c_uint64, POINTER(c_uint32)],
    "ffr_permute": [c_uint64, c_uint64, c_uint64, c_void_p, c_uint64, c_void_p],
    "ffr_dataset_files": [c_char_p, c_char_p, c_size_t, _sizep],
    "ffr_dataset_urls": [c_char_p, c_char_p, c_char_p, c_size_t, _sizep],
    "ffr_part_name": [c_uint64, c_uint64, c_char_p, c_size_t, _sizep],
    "ffr_writer_create": [c_char_p, c_uint64, c_int32, POINTER(c_int64)],
    "ffr_writer_write": [c_int64, c_void_p, c_uint64],
    "ffr_writer_write_batch": [c_int64, c_void_p, c_void_p, c_uint64],
    "ffr_writer_write_vectors": [c_int64, c_void_p, c_void_p, c_uint64],
    "ffr_writer_count": [c_int64, _u64p],
    "ffr_writer_set_durable": [c_int64, c_int32],
    "ffr_readers_read_one": [c_void_p, c_uint64, c_uint64, c_void_p, c_uint64, c_void_p],
    "ffr_readers_read_batch": [c_void_p, c_void_p, c_uint64, c_void_p, c_uint64, c_void_p],
    "ffr_writer_close": [c_int64],
    "ffr_writer_abort": [c_int64],
    "ffr_reader_open": [POINTER(c_char_p), c_uint64, c_uint32, POINTER(c_int64)],
    "ffr_reader_open_verified": [POINTER(c_char_p), c_uint64, c_uint32, c_void_p, c_uint64,
                                 POINTER(c_int64)],
    "ffr_reader_verified": [c_int64, c_void_p, c_uint64, _u64p],
    "ffr_reader_open_options": [POINTER(c_char_p), c_uint64, c_uint32, c_char_p,
                                POINTER(c_int64)],
    "ffr_upload": [c_char_p, c_char_p, c_char_p],
    "ffr_put_new": [c_char_p, c_char_p, c_void_p, c_uint64],
    "ffr_remove": [c_char_p, c_char_p],
    "ffr_remove_if_holds": [c_char_p, c_char_p, c_void_p, c_uint64],
    "ffr_check_url": [c_char_p],
    "ffr_locate": [c_char_p, POINTER(c_uint32), c_char_p, c_size_t, _sizep],
    "ffr_check_options": [c_char_p],
    "ffr_fetch_text": [c_char_p, c_char_p, c_char_p, c_size_t, _sizep],
    "ffr_fetched_text": [c_char_p, c_char_p, c_char_p, c_size_t, _sizep],
    "ffr_list": [c_char_p, c_char_p, c_char_p, c_size_t, _sizep],
    "ffr_list_objects": [c_char_p, c_char_p, c_char_p, c_size_t, _sizep, _u64p],
    "ffr_describe_file": [c_char_p, c_char_p, c_void_p, c_char_p, c_size_t, _sizep],
    "ffr_reader_len": [c_int64, _u64p],
    "ffr_reader_nfiles": [c_int64, _u64p],
    "ffr_reader_descriptors": [c_int64, _u64p],
    "ffr_reader_fname": [c_int64, c_uint64, c_char_p, c_size_t, _sizep],
    "ffr_reader_file_counts": [c_int64, c_void_p, c_uint64],
    "ffr_reader_chunk_bounds": [c_int64, c_uint64, c_void_p, c_uint64, _u64p],
    "ffr_first_request_bytes": [c_uint64, c_int32, _u64p],
    "ffr_reader_stats": [c_int64, c_void_p, c_uint64],
    "ffr_reader_warnings": [c_int64, c_char_p, c_size_t, _sizep],
    "ffr_reader_versions": [c_int64, c_char_p, c_size_t, _sizep],
    "ffr_reader_sizes": [c_int64, c_void_p, c_uint64, c_void_p],
    "ffr_reader_read_batch": [c_int64, c_void_p, c_uint64, c_void_p, c_uint64, c_void_p],
    "ffr_reader_prefetch": [c_int64, c_void_p, c_uint64, _u64p],
    "ffr_reader_read_values": [c_int64, c_uint64, c_uint64, c_uint64, c_void_p, c_uint64, c_void_p,
                               c_uint64],
    "ffr_reader_read_value_range": [c_int64, c_uint64, c_uint64, c_uint64, c_uint64, c_uint64,
                                    c_void_p, c_uint64],
    "ffr_reader_read_span": [c_int64, c_uint64, c_uint64, c_void_p, c_uint64, c_void_p],
    "ffr_reader_file_info": [c_int64, c_uint64, c_void_p, c_uint64],
    "ffr_reader_file_header": [c_int64, c_uint64, c_void_p, c_void_p, c_uint64],
    "ffr_reader_file_stamp": [c_int64, c_uint64, c_void_p],
    "ffr_reader_read_ranges": [c_int64, c_void_p, c_uint64, c_void_p, c_uint64],
    "ffr_reader_read_windows": [c_int64, c_void_p, c_void_p, c_uint64, c_uint32, c_int64, c_void_p,
                                c_uint64, c_uint64, c_uint64, c_void_p, c_uint64],
    "ffr_reader_verify": [c_int64, c_uint64, c_uint64, c_void_p, c_void_p, c_uint64, c_char_p,
                          c_size_t, _u64p, _u64p],
    "ffr_reader_close": [c_int64],
}


class Library(NamedTuple):
    """The copy of the library usable in this process."""

    dll: ctypes.CDLL
    pid: int  # the process that loaded it
    generation: int  # bumped at every load: handles from another generation are foreign
    path: str  # what was dlopen'ed (a /proc/<pid>/fd/<n> path for a private copy)


_state: Library | None = None
_generation = 0
_lock = threading.Lock()
# Copies loaded by this process or its ancestors: their runtimes may be dead here.
_loaded_handles: set[int] = set()
# The memfds of private copies stay open so that no later copy, in this process or a child,
# can get the same /proc path, which dlopen would answer with the old (dead) copy.
_private_fds: list[int] = []
# The library file as first loaded, kept open so that a forked child copies the very bytes its
# parent runs even when the file at the path was replaced since (a `pip install` mid-training).
_source_fd: int | None = None


def current() -> Library:
    """The library for this process, loading it (or a fresh private copy after a fork).

    No pid check here: every child that goes on running Python runs the at-fork hooks
    (``os.fork`` and a C extension's ``PyOS_AfterFork_Child`` alike), and the hook below
    forgets the parent's copy; ``os.getpid()`` is a system call, a third of a microsecond
    of every one-sample read."""
    state = _state
    if state is not None:
        return state
    return _load()


def loaded() -> Library | None:
    """The library if this process has already loaded it, without loading anything."""
    state = _state
    return state if state is not None and state.pid == os.getpid() else None


def library_path() -> str:
    """Where the shared object is read from: ``$FFRECORD_LIBRARY``, else beside this file."""
    override = os.environ.get(LIBRARY_ENV)
    return override or os.path.join(os.path.dirname(__file__), LIBRARY_NAME)


def check(status: int) -> int:
    """Returns a non-negative status; raises the mapped exception with the Go message."""
    if status < 0:
        raise_status(status)
    return status


def raise_status(status: int) -> NoReturn:
    """Raises the exception for a failed call, with this thread's last Go error message."""
    raise error_for(status)


def error_for(status: int) -> Exception:
    """The exception for a failed call, with this thread's last Go error message.

    An operating-system failure with an errno becomes ``OSError(errno, message, path)``, which
    Python turns into the subclass for that errno (``PermissionError``,
    ``NotADirectoryError``, ...)."""
    dll = current().dll
    message = fetch_text_status(dll.ffr_errmsg)[1].decode("utf-8", "replace")
    message = message or f"libffrecord status {status}"
    if status in (E_IO, E_NOTFOUND):
        errno = c_int32()
        _, path = fetch_text_status(dll.ffr_oserror, ctypes.byref(errno))
        if errno.value:
            return os_exception_for(errno.value)(errno.value, message,
                                                 os.fsdecode(path) if path else None)
    return exception_for(status)(message)


def copy_text(func: Any, *args: Any) -> bytes:
    """Calls a ``(…, buf, len, needed)`` C function, growing the buffer until the text fits."""
    status, text = fetch_text_status(func, *args)
    check(status)
    return text


def fetch_text_status(func: Any, *args: Any) -> tuple[int, bytes]:
    """``copy_text`` that returns the status instead of raising (ffr_errmsg cannot raise)."""
    capacity = _TEXT_CAPACITY
    while True:
        buf = ctypes.create_string_buffer(capacity)
        needed = c_size_t()
        status = func(*args, buf, capacity, ctypes.byref(needed))
        if status != E_SHORTBUF or needed.value < capacity:
            return status, buf.value
        capacity = needed.value + 1


def version() -> str:
    """The library's version string, e.g. ``"1.0.0"``."""
    buf = ctypes.create_string_buffer(64)
    check(current().dll.ffr_version(buf, len(buf), ctypes.byref(c_int32())))
    return buf.value.decode()


def open_handles() -> int:
    """How many reader and writer handles are open in this process's copy of the library."""
    count = c_uint64()
    check(current().dll.ffr_open_handles(ctypes.byref(count)))
    return count.value


def crc32c(data: Any, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object, continuing ``crc``; computed by the
    core, with the CPU's CRC instructions when it has them.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    >>> crc32c(b"6789", crc32c(b"12345")) == crc32c(b"123456789")
    True
    """
    if type(data) is not bytes:
        data = bytes(data)  # ctypes passes the storage of bytes directly
    out = c_uint32()
    check(current().dll.ffr_crc32c(crc, data, len(data), ctypes.byref(out)))
    return out.value


def _load() -> Library:
    global _state, _generation
    if not _lock.acquire(timeout=_LOAD_TIMEOUT):
        raise RuntimeError("ffrecord: timed out waiting for the native library to load")
    try:
        pid = os.getpid()
        state = _state
        if state is not None and state.pid == pid:
            return state
        path = library_path()
        if _loaded_handles:
            dll, loaded_from = _load_private_copy(path)
        else:
            dll, loaded_from = _load_original(path), path
        _declare(dll, loaded_from)
        _loaded_handles.add(dll._handle)
        _generation += 1
        _state = Library(dll, pid, _generation, loaded_from)
        return _state
    finally:
        _lock.release()


def _load_original(path: str) -> ctypes.CDLL:
    if not os.path.isfile(path):
        raise RuntimeError(
            f"ffrecord: native library not found at {path}; build it with `make build` or "
            f"install the package with `pip install .` (or set {LIBRARY_ENV})"
        )
    global _source_fd
    try:
        source_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise RuntimeError(f"ffrecord: cannot load {path}: {exc}") from exc
    try:
        dll = ctypes.CDLL(path)
    except OSError as exc:
        os.close(source_fd)
        raise RuntimeError(f"ffrecord: cannot load {path}: {exc}") from exc
    if _source_fd is not None:  # a library of another ABI was refused before (_declare)
        os.close(_source_fd)
    _source_fd = source_fd
    return dll


def _load_private_copy(path: str) -> tuple[ctypes.CDLL, str]:
    """Loads the library again from a new inode, so that a fresh Go runtime starts."""
    failures = []
    for make_copy in (_memfd_copy, _tempfile_copy):
        try:
            dll, loaded_from = make_copy(path)
        except OSError as exc:
            failures.append(f"{make_copy.__name__.strip('_')}: {exc}")
            continue
        if dll._handle in _loaded_handles:  # dlopen handed back a copy with a dead runtime
            failures.append(f"{make_copy.__name__.strip('_')}: the loader reused an old copy")
            continue
        return dll, loaded_from
    raise RuntimeError(
        f"ffrecord: this process was forked after loading {path}, and no fresh copy of "
        f"the library could be loaded ({'; '.join(failures)}); use the 'spawn' or "
        f"'forkserver' multiprocessing start method"
    )


def _memfd_copy(path: str) -> tuple[ctypes.CDLL, str]:
    fd = os.memfd_create("libffrecord", os.MFD_CLOEXEC)
    try:
        _copy_into(path, fd)
        loaded_from = f"/proc/{os.getpid()}/fd/{fd}"
        dll = ctypes.CDLL(loaded_from)
    except BaseException:
        os.close(fd)
        raise
    _private_fds.append(fd)
    return dll, loaded_from


def _tempfile_copy(path: str) -> tuple[ctypes.CDLL, str]:
    import tempfile  # the fallback only: not at import

    fd, name = tempfile.mkstemp(prefix="libffrecord-", suffix=".so")
    try:
        _copy_into(path, fd)
        return ctypes.CDLL(name), name
    finally:
        os.close(fd)
        os.unlink(name)  # the mapping keeps the inode alive; the name is unique anyway


def _copy_into(path: str, fd: int) -> None:
    """Copies the library the parent loaded (from the fd kept since then, else ``path``)."""
    src = _source_fd if _source_fd is not None else os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        offset, size = 0, os.fstat(src).st_size
        try:  # copied by the kernel: half the time of a read and write through this process
            while offset < size and (sent := os.sendfile(fd, src, offset, size - offset)):
                offset += sent
        except OSError:
            pass  # the loop below goes on from what was sent (fd's position is past it)
        while chunk := os.pread(src, 1 << 20, offset):
            offset += len(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
    finally:
        if src != _source_fd:
            os.close(src)


def _declare(dll: ctypes.CDLL, loaded_from: str) -> None:
    """Declares the library's functions, then checks that it speaks this package's ABI.

    The Go runtime starts on a thread of its own at load, and the first call waits for it
    (a few ms): the functions are declared meanwhile. A stale build may lack some of them:
    they are skipped, and the version check says why."""
    for name, argtypes in _SIGNATURES.items():
        func = getattr(dll, name, None)
        if func is not None:
            func.argtypes = argtypes
            func.restype = c_int32
    abi = c_int32(0)
    status = dll.ffr_version(None, 0, ctypes.byref(abi))
    if abi.value != ABI_VERSION:
        # ABI 1 returned its version instead of a status and left abi alone.
        found = status if abi.value == 0 and status > 0 else abi.value
        raise RuntimeError(
            f"ffrecord: the native library {loaded_from} implements C ABI version {found}, but "
            f"this package needs version {ABI_VERSION}: a stale or mismatched build. Rebuild "
            f"it with `make build`, or reinstall the package (`pip install .`)"
            + (f", or point {LIBRARY_ENV} at a matching build" if os.environ.get(LIBRARY_ENV) else ""))


def _after_fork_in_child() -> None:
    global _state, _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    _state = None


os.register_at_fork(after_in_child=_after_fork_in_child)
