"""A reader's native handle: opening its files, reopening them after a fork, and vouching
for the files it checked so that its copies in other processes need not check them again.

A handle belongs to one copy of the loaded library (``_lib.current().generation``); a forked
child loads a new copy, and the first thread there to use the reader opens its files again
by path. Vouched files are identities (device, inode, size, modification and change times)
of files whose metadata a reader checked: a copy handed them skips checking again each of
those files that has not changed. To *vouch* is not to *verify*: verification scans the
samples for bad ones (``_verification``).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import threading
import warnings
from typing import Any

from . import _lib, _paths, _remote
from ._file_info import FileStamp
from .errors import E_SHORTBUF, ObjectChangedError


class ReaderHandle:
    """Opens, reopens after a fork, and closes a reader's handle (``FileReader``'s base)."""

    check_data: bool
    direct: bool
    descriptors: bool
    storage_options: dict[str, Any] | None
    n: int
    fnames: list[str]

    def _open_files(self, paths: list[str], check_data: bool, direct: bool,
                    vouched: tuple[int, ...], storage_options: dict[str, Any] | None,
                    descriptors: bool = True) -> list[str]:
        """Opens ``paths``, trusting the files ``vouched`` for; sets ``n`` and ``fnames``
        and returns the library's warnings about the files (e.g. a legacy file)."""
        self.check_data = bool(check_data)
        self.direct = bool(direct)
        self.descriptors = bool(descriptors)
        self.storage_options, self._versions = _remote.unpinned(storage_options)
        _remote.check_options(self.storage_options)  # a bad option fails before any open
        self._closed = True  # until the open succeeds, so __del__ has nothing to do
        self._reopen_lock = threading.Lock()
        self._vouched = vouched
        lib, self._handle = self._open(paths)
        self._generation = lib.generation
        self._closed = False
        self.n = self._query_u64(lib.dll.ffr_reader_len)
        nfiles = self._query_u64(lib.dll.ffr_reader_nfiles)
        self.fnames = [os.fsdecode(_lib.copy_text(lib.dll.ffr_reader_fname, self._handle, i))
                       for i in range(nfiles)]
        self._stamps = _stamps_of(lib.dll, self._handle, nfiles)  # what a reopen must find
        text = _lib.copy_text(lib.dll.ffr_reader_warnings, self._handle).decode("utf-8", "replace")
        return [line for line in text.splitlines() if line]

    def close(self) -> None:
        """Closes the files; later reads raise ``ValueError``. Closing twice is a no-op."""
        if self._closed:
            return
        self._closed = True
        generation, self._generation = self._generation, -1  # makes _live() refuse
        lib = _lib.loaded()
        if lib is not None and lib.generation == generation:
            _lib.check(lib.dll.ffr_reader_close(self._handle))

    @property
    def closed(self) -> bool:
        return self._closed

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a destructor must not raise
            pass

    @property
    def vouched_files(self) -> tuple[int, ...]:
        """Identities of the files whose headers this reader checked (empty without
        ``check_data``), as the core's opaque words: handed to ``reopen`` in another process,
        they spare it checking again the files that have not changed."""
        return self._vouched

    @property
    def verified_files(self) -> tuple[int, ...]:
        """Deprecated spelling of ``vouched_files``."""
        warnings.warn("FileReader.verified_files is now vouched_files", DeprecationWarning,
                      stacklevel=2)
        return self._vouched

    @property
    def versions(self) -> dict[str, Any]:
        """The size and ETag of each remote file as this reader opened it, by URL: a copy
        of the reader (after ``fork()`` or unpickling) reads those versions, and opens them
        without a request; an object replaced since raises ``ObjectChangedError``."""
        return dict(self._versions)

    @property
    def descriptors_held(self) -> int:
        """How many file descriptors the reader holds open now: one per local file, another
        per file read with ``direct``; none for the files that gave theirs up
        (``descriptors=False``) nor for remote files. A bound on open files counts these."""
        dll, handle = self._live()
        count = ctypes.c_uint64()
        _lib.check(dll.ffr_reader_descriptors(handle, ctypes.byref(count)))
        return count.value

    def _live(self) -> tuple[ctypes.CDLL, int]:
        """The library and this reader's handle in it, reopening after a fork."""
        lib = _lib.current()
        if lib.generation == self._generation:
            return lib.dll, self._handle
        return self._reopen(lib)

    def _reopen(self, lib: _lib.Library) -> tuple[ctypes.CDLL, int]:
        if not self._reopen_lock.acquire(timeout=60):
            raise RuntimeError(f"{self!r}: timed out waiting for another thread to reopen it")
        try:
            if self._closed:
                raise ValueError(f"I/O operation on closed {type(self).__name__}")
            if self._generation != lib.generation:  # first thread here after the fork
                _, handle = self._open(self.fnames)
                self._check_same_files(lib.dll, handle)
                self._handle, self._generation = handle, lib.generation
            return lib.dll, self._handle
        finally:
            self._reopen_lock.release()

    def _check_same_files(self, dll: ctypes.CDLL, handle: int) -> None:
        """After a fork: ``ObjectChangedError`` (and ``handle`` closed) unless the files
        reopened by path are those this reader opened."""
        try:
            check_same_files(self.fnames, self._stamps, _stamps_of(dll, handle, len(self.fnames)))
        except ObjectChangedError:
            _lib.check(dll.ffr_reader_close(handle))
            raise

    def _open(self, paths: list[str]) -> tuple[_lib.Library, int]:
        """Opens paths, trusting the files this reader's copies vouched for, and records
        which files the new handle vouches for in turn."""
        lib = _lib.current()
        encoded = (ctypes.c_char_p * len(paths))(*map(_paths.encode, paths))
        flags = ((_lib.CHECK_DATA if self.check_data else 0) | (_lib.DIRECT if self.direct else 0)
                 | (0 if self.descriptors else _lib.NO_DESCRIPTORS))
        handle = ctypes.c_int64()
        if any(map(_remote.is_url, paths)):  # remote files: the versions opened first, pinned
            _lib.check(lib.dll.ffr_reader_open_options(
                encoded, len(paths), flags,
                _remote.encode_options(_remote.pinned(self.storage_options, self._versions)),
                ctypes.byref(handle)))
            self._versions = json.loads(_lib.copy_text(lib.dll.ffr_reader_versions, handle.value))
            return lib, handle.value
        ids = (ctypes.c_uint64 * len(self._vouched))(*self._vouched)
        _lib.check(lib.dll.ffr_reader_open_verified(encoded, len(paths), flags, ids,
                                                    len(self._vouched), ctypes.byref(handle)))
        if self.check_data:
            self._vouched = _vouched_by(lib.dll, handle.value)
        return lib, handle.value

    def _query_u64(self, func: Any) -> int:
        value = ctypes.c_uint64()
        _lib.check(func(self._handle, ctypes.byref(value)))
        return value.value


def check_same_files(paths: list[str], opened: list[Any], found: list[FileStamp]) -> None:
    """``ObjectChangedError`` for the first of ``paths`` whose stamp ``found`` (a copy of a
    reader reopening by path, after a fork or unpickled) is not the one ``opened`` (its
    original's): a file replaced since is never read as the one the reader describes."""
    if len(found) != len(opened):
        raise ObjectChangedError(
            errno.ESTALE, f"{os.path.dirname(paths[0]) if paths else '.'}: {len(found)} files now, {len(opened)} "
            "when the reader opened them: a copy of a reader reads only the files its original opened; reopen "
            "the reader to read the new ones")
    for path, was, now in zip(paths, opened, found):
        was = FileStamp(*was)
        if now != was:
            raise ObjectChangedError(
                errno.ESTALE, f"{path}: replaced since the reader opened it ({was.file_bytes} bytes, header "
                f"checksum 0x{was.header_checksum:08x}; now {now.file_bytes} bytes, 0x{now.header_checksum:08x}): "
                "a copy of a reader reads only the files its original opened; reopen the reader to read "
                "the new one")


def _stamps_of(dll: ctypes.CDLL, handle: int, nfiles: int) -> list[FileStamp]:
    """The stamp of each file of the reader behind ``handle`` (see ``FileStamp``)."""
    stamp = (ctypes.c_uint64 * 3)()
    stamps = []
    for k in range(nfiles):
        _lib.check(dll.ffr_reader_file_stamp(handle, k, stamp))
        stamps.append(FileStamp(*stamp))
    return stamps


def _vouched_by(dll: ctypes.CDLL, handle: int) -> tuple[int, ...]:
    """The identities of the files the reader behind ``handle`` vouches for, as ABI words."""
    needed = ctypes.c_uint64()
    status = dll.ffr_reader_verified(handle, None, 0, ctypes.byref(needed))
    if status != E_SHORTBUF:
        _lib.check(status)
    words = (ctypes.c_uint64 * needed.value)()
    _lib.check(dll.ffr_reader_verified(handle, words, needed.value, ctypes.byref(needed)))
    return tuple(words)
