"""A process-wide bound on the files structured datasets hold open: one least-recently-used
table of open readers (each a shard's ``DatasetReader``, holding one file per field),
shared by every dataset opened from a manifest (``open_dataset``), whatever their number
and their shards'.

A reader is *leased* for each read: a leased reader is never closed, so no read in flight
loses its files; the least recently used readers that no read holds are closed whenever the
files held exceed the bound, and opened again by path when next read (a file that changed
meanwhile is then refused: see ``ffrecord.dataset.versioned``). Reads running at once may
hold more than the bound for as long as they run; nothing waits for room, so no read can
wait on another forever.

The bound is ``max_open_files()``: 128 files by default, ``FFRECORD_MAX_OPEN_FILES`` or
``set_max_open_files(n)`` to change it. It counts the files that hold a descriptor, and
remote ones (their headers held in memory). A local file opened without a descriptor (a
mixture's members, see ``Mixture.from_paths``; ``descriptors=False``) is read from its
mapping alone and holds nothing the process has few of: such files are bounded apart, by
``max_mapped_files()`` (16,384 by default, ``FFRECORD_MAX_MAPPED_FILES``), within the
kernel's limit on a process's mappings (65,530 by default).

>>> table = OpenReaders(limit=2)
>>> class Opened:
...     closed = False
...     def close(self): self.closed = True
>>> first = table.lease(("a", 0), lambda: (Opened(), 1, 1)); table.release(first)
>>> second = table.lease(("a", 1), lambda: (Opened(), 2, 2)); table.release(second)
>>> mapped = table.lease(("a", 2), lambda: (Opened(), 2, 0)); table.release(mapped)
>>> first.reader.closed, second.reader.closed, mapped.reader.closed, table.held, table.files
(True, False, False, 2, 4)
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

_DEFAULT_LIMIT = 128
_DEFAULT_MAPPED_LIMIT = 16384
_OPENS_AT_ONCE = 32  # readers a batch opens at once (each open waits a round trip or two)


class Lease:
    """A reader held for a read (``OpenReaders.lease``): its ``reader`` stays open until the
    lease is released."""

    __slots__ = ("key", "reader", "files", "held", "leases", "pins", "ready", "error", "dropped")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.reader: Any = None
        self.files = 0
        self.held = 0  # of its files, those the bound on open files counts
        self.leases = 1
        self.pins = 0
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.dropped = False


class OpenReaders:
    """Readers by key, at most ``limit`` files with descriptors (or remote) and
    ``mapped_limit`` files without of them held by no read (see the module). Keys are
    ``(owner, k)``: ``drop(owner)`` closes an owner's readers."""

    def __init__(self, limit: int | None = None, mapped_limit: int | None = None) -> None:
        self.limit = _default_limit("FFRECORD_MAX_OPEN_FILES", _DEFAULT_LIMIT) if limit is None else _positive(limit)
        self.mapped_limit = (_default_limit("FFRECORD_MAX_MAPPED_FILES", _DEFAULT_MAPPED_LIMIT)
                             if mapped_limit is None else _positive(mapped_limit))
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Lease] = OrderedDict()
        self.files = 0  # files of the readers open (leased or not)
        self.held = 0  # of them, those with a descriptor, or remote
        # remote readers opened so far: a list of a dataset's remote readers (a loader
        # worker's I/O counters, torch._stats) holds until this changes
        self.remote_opened = 0

    def _within(self) -> bool:
        return self.held <= self.limit and self.files - self.held <= self.mapped_limit

    def lease(self, key: Hashable, opener: Callable[[], tuple[Any, int, int]]) -> Lease:
        """The reader of ``key``, opened by ``opener`` (which returns it, how many files it
        holds and how many of them the bound on open files counts) unless open already;
        held until ``release``."""
        with self._lock:
            entry = self._entries.get(key)
            opening = entry is None
            if opening:
                entry = self._entries[key] = Lease(key)
            else:
                entry.leases += 1
                self._entries.move_to_end(key)
        if not opening:  # opened, or being opened by another thread
            if not entry.ready.is_set():
                entry.ready.wait()
            if entry.error is not None:
                self._forget(entry)
                raise entry.error
            return entry
        try:
            entry.reader, entry.files, entry.held = opener()
        except BaseException as exc:
            entry.error = exc
            with self._lock:
                if self._entries.get(key) is entry:
                    del self._entries[key]
            entry.ready.set()
            raise
        with self._lock:
            if self._entries.get(key) is entry:
                self.files += entry.files
                self.held += entry.held
            self.remote_opened += bool(getattr(entry.reader, "_remote", False))
            entry.ready.set()
            victims = self._victims()
        self._close(victims)
        return entry

    def release(self, entry: Lease) -> None:
        """Ends a lease: the reader may be closed from now on."""
        with self._lock:
            entry.leases -= 1
            if self._within() and not entry.dropped:
                return  # nothing to close: the common case, a read of a reader kept open
            victims = self._victims() if self._entries.get(entry.key) is entry else \
                ([entry] if entry.leases == 0 and entry.dropped else [])
        self._close(victims)

    def pin(self, key: Hashable, opener: Callable[[], tuple[Any, int, int]]) -> Any:
        """The reader of ``key``, held open until its owner is dropped (for a caller that
        keeps it: ``DatasetReader.field_reader``)."""
        entry = self.lease(key, opener)
        with self._lock:
            entry.pins += 1
        return entry.reader

    @contextmanager
    def leased(self, key: Hashable, opener: Callable[[], tuple[Any, int, int]]) -> Iterator[Any]:
        entry = self.lease(key, opener)
        try:
            yield entry.reader
        finally:
            self.release(entry)

    @contextmanager
    def leased_many(self, keys: list[Hashable], opener: Callable[[Hashable], tuple[Any, int, int]]) -> Iterator[None]:
        """Holds the readers of ``keys``, opening those not open at once."""
        with self._lock:
            missing = sum(key not in self._entries for key in keys)
        held: list[Lease] = []
        try:
            if missing > 1:
                with ThreadPoolExecutor(min(missing, _OPENS_AT_ONCE)) as pool:
                    futures = [pool.submit(self.lease, key, lambda key=key: opener(key)) for key in keys]
                failed = None
                for future in futures:
                    if future.exception() is None:
                        held.append(future.result())
                    elif failed is None:
                        failed = future.exception()
                if failed is not None:
                    raise failed
            else:
                for key in keys:
                    held.append(self.lease(key, lambda key=key: opener(key)))
            yield
        finally:
            for entry in held:
                self.release(entry)

    def drop(self, owner: Hashable) -> None:
        """Closes the readers of ``owner`` (those leased when their lease ends)."""
        with self._lock:
            mine = [key for key in self._entries if key[0] == owner]
            victims = []
            for key in mine:
                entry = self._entries.pop(key)
                entry.dropped = True
                entry.leases -= entry.pins
                entry.pins = 0
                if entry.ready.is_set() and entry.error is None:
                    self.files -= entry.files
                    self.held -= entry.held
                    if entry.leases == 0:
                        victims.append(entry)
        self._close(victims)

    def held_by(self, owner: Hashable) -> int:
        """The files ``owner``'s open readers hold."""
        return sum(files for _, files in self.readers_of(owner))

    def readers_of(self, owner: Hashable) -> list[tuple[Any, int]]:
        """``owner``'s open readers, with the files each holds."""
        with self._lock:
            return [(e.reader, e.files) for key, e in self._entries.items()
                    if key[0] == owner and e.ready.is_set() and e.error is None]

    def _forget(self, entry: Lease) -> None:
        with self._lock:
            entry.leases -= 1

    def _victims(self) -> list[Lease]:
        """Takes out of the table the least recently used readers no read holds, until the
        files held fit the bound (called with the lock held)."""
        victims: list[Lease] = []
        if self._within():
            return victims
        for key, entry in list(self._entries.items()):
            if self._within():
                break
            if entry.leases == 0 and entry.ready.is_set() and \
                    (entry.held if self.held > self.limit else entry.files - entry.held):
                del self._entries[key]
                self.files -= entry.files
                self.held -= entry.held
                victims.append(entry)
        return victims

    def _close(self, victims: Iterable[Lease]) -> None:
        for entry in victims:
            entry.reader.close()

    def __repr__(self) -> str:
        return (f"OpenReaders(limit={self.limit}, mapped_limit={self.mapped_limit}, files={self.files}, "
                f"held={self.held}, readers={len(self._entries)})")


def _default_limit(variable: str, default: int) -> int:
    text = os.environ.get(variable)
    if not text:
        return default
    try:
        return _positive(int(text))
    except ValueError:
        raise ValueError(f"{variable}={text!r} is not a positive integer") from None


def _positive(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"the bound on open files must be a positive integer, not {limit!r}")
    return limit


READERS = OpenReaders()


def max_open_files() -> int:
    """The files datasets opened from a manifest hold open at most, all together, besides
    those of reads in flight (see the module).

    >>> max_open_files() >= 1
    True
    """
    return READERS.limit


def set_max_open_files(limit: int) -> None:
    """Sets ``max_open_files()``; readers beyond it are closed as reads release them."""
    READERS.limit = _positive(limit)
    _close_beyond()


def max_mapped_files() -> int:
    """The local files opened without a descriptor (read from their mappings alone) that
    datasets hold open at most, all together, besides those of reads in flight (see the
    module).

    >>> max_mapped_files() >= max_open_files()
    True
    """
    return READERS.mapped_limit


def set_max_mapped_files(limit: int) -> None:
    """Sets ``max_mapped_files()``; readers beyond it are closed as reads release them."""
    READERS.mapped_limit = _positive(limit)
    _close_beyond()


def _close_beyond() -> None:
    with READERS._lock:
        victims = READERS._victims()
    READERS._close(victims)


# After fork() the child has only the forking thread: locks held by the others stay held,
# and readers being opened by them never become ready. The child starts an empty table;
# the readers it inherited reopen their files by path if used, and close as they are freed.
os.register_at_fork(after_in_child=READERS._reset)
