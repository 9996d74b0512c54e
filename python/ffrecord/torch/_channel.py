"""The loader's worker queues without a feeder thread, for batches that travel in shared memory.

torch's worker queues are ``multiprocessing.Queue`` objects: ``put`` hands the object to a
feeder thread, which pickles it and writes it to the pipe. That thread suits large pickled
batches (the worker goes on with its next batch while the pipe drains), but when a batch
travels in shared memory (``_transport``) only a few hundred bytes cross: then every message
costs a thread wake-up and two hand-overs of the GIL, in the main process (indices) and in
each worker (results), a measurable share of a batch's CPU on a small machine. Here ``put``
pickles and writes in the calling thread, as ``multiprocessing.SimpleQueue`` does;
``get(timeout=...)`` raises ``queue.Empty`` as torch's loop expects, so its checks for dead
workers and its ``timeout`` work unchanged.

A write must never block the caller: a process blocked on a full pipe whose reader died
would never notice (and a worker's reader end is held by its siblings too). So a message is
written in place only when the write lock, which every writer takes, is free and the pipe
has room for it (asked of the kernel under that lock); otherwise, and after it until they
are written, messages go in order to a thread of the queue's own that may block, as
``multiprocessing.Queue``'s feeder does. Skeletons and indices always fit; a large batch
torch pickles whole may not.
"""

from __future__ import annotations

import collections
import copyreg
import fcntl
import io
import multiprocessing
import multiprocessing.context
import multiprocessing.queues
import multiprocessing.util
import queue
import struct
import termios
import threading
import time
from multiprocessing.reduction import ForkingPickler
from typing import Any

from ffrecord import _timing
from ffrecord._processes import FrozenForkContext, start_context

# Room kept free in the pipe beyond a message: the kernel counts a pipe's capacity in pages,
# and the unread bytes may straddle one more page than they fill.
_SLACK = 8 << 10
# A queue's pickling buffer is kept for the next message up to this size.
_KEPT_BUFFER = 64 << 10


class DirectQueue(multiprocessing.queues.SimpleQueue):
    """A ``SimpleQueue`` with the parts of ``multiprocessing.Queue`` torch's loader uses.

    >>> q = DirectQueue(ctx=multiprocessing.get_context())
    >>> q.put((1, "a")); q.get(timeout=1)
    (1, 'a')
    >>> try:
    ...     q.get(timeout=0.01)
    ... except queue.Empty:
    ...     print("nothing came")
    nothing came
    """

    def __init__(self, *, ctx: Any) -> None:
        super().__init__(ctx=ctx)
        self._start_backlog()
        multiprocessing.util.register_after_fork(self, DirectQueue._start_backlog)

    def __setstate__(self, state: tuple) -> None:
        super().__setstate__(state)
        self._start_backlog()
        multiprocessing.util.register_after_fork(self, DirectQueue._start_backlog)

    def _start_backlog(self) -> None:
        """This process's messages waiting for room in the pipe, and the thread writing them."""
        self._order = threading.Condition(threading.Lock())
        self._backlog: collections.deque[bytes] = collections.deque()
        self._writing: threading.Thread | None = None
        self._capacity = 0  # the pipe's, asked at the first put (a closed queue has none)
        self._pickling = threading.Lock()
        self._pickler: tuple[io.BytesIO, ForkingPickler, int] | None = None

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        message = self._get(block, timeout)
        clock = _timing.worker_clock()
        if clock is not None:  # a loader worker took its next task: its fetch begins
            clock.begin()
        return message

    def _get(self, block: bool, timeout: float | None) -> Any:
        if block and timeout is None:
            return super().get()
        deadline = time.monotonic() + (timeout or 0.0)
        if not self._rlock.acquire(block, timeout):
            raise queue.Empty
        try:
            if not self._reader.poll(max(0.0, deadline - time.monotonic()) if block else 0.0):
                raise queue.Empty
            message = self._reader.recv_bytes()
        finally:
            self._rlock.release()
        return ForkingPickler.loads(message)

    def put(self, obj: Any, block: bool = True, timeout: float | None = None) -> None:
        clock = _timing.worker_clock()
        if clock is None:
            self._put(obj)
            return
        start = _timing.now()  # a loader worker sends a batch: part of its hand-over
        self._put(obj)
        clock.transfer += _timing.now() - start
        clock.flush()

    def _put(self, obj: Any) -> None:
        message = self._dumps(obj)
        with self._order:
            # The write lock only if free: a sibling's backlog thread may hold it, blocked on
            # a full pipe whose reader is gone.
            if not self._backlog and self._wlock.acquire(False):
                try:
                    if self._room() >= len(message) + _SLACK:
                        self._writer.send_bytes(message)  # cannot block: the pipe has room
                        return
                finally:
                    self._wlock.release()
            self._backlog.append(message)
            if self._writing is None:
                self._writing = threading.Thread(target=self._write_backlog, name="DirectQueue backlog",
                                                 daemon=True)
                self._writing.start()
            self._order.notify()

    def _dumps(self, obj: Any) -> bytes:
        """``ForkingPickler.dumps(obj)``, by a pickler kept for the queue: making one copies
        its table of reducers (torch's, dozens), a good part of pickling a small message.
        The table is made again when reducers were registered since."""
        reducers = len(ForkingPickler._extra_reducers) + len(copyreg.dispatch_table)
        with self._pickling:
            if self._pickler is None or self._pickler[2] != reducers:
                out = io.BytesIO()
                self._pickler = out, ForkingPickler(out), reducers
            out, pickler, _ = self._pickler
            try:
                pickler.dump(obj)
            except BaseException:
                self._pickler = None  # half a message in its buffer
                raise
            message = out.getvalue()
            pickler.clear_memo()  # keeps nothing alive
            if out.tell() > _KEPT_BUFFER:  # a large batch pickled whole: let its buffer go
                self._pickler = None
            else:
                out.seek(0)
                out.truncate()
            return message

    def _room(self) -> int:
        """Bytes the pipe takes before a write blocks (call with the write lock held)."""
        fd = self._writer.fileno()
        if not self._capacity:
            self._capacity = fcntl.fcntl(fd, _F_GETPIPE_SZ)
        unread = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        return self._capacity - unread

    def _write_backlog(self) -> None:
        while True:
            with self._order:
                while not self._backlog:
                    self._order.wait()
                message = self._backlog[0]
            with self._wlock:
                self._writer.send_bytes(message)
            with self._order:
                self._backlog.popleft()  # only now may a later message go in place

    def cancel_join_thread(self) -> None:
        """Nothing to do: the backlog thread is a daemon, never waited for at exit (torch
        asks this of every worker queue: a process exits without flushing them)."""

    def __repr__(self) -> str:
        return "<DirectQueue>"


_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)  # Python < 3.10 lacks the name (Linux's value)


class _DirectQueues:
    """A start method's context whose ``Queue`` is a ``DirectQueue``."""

    def Queue(self, maxsize: int = 0) -> DirectQueue:  # noqa: N802 (multiprocessing's name)
        return DirectQueue(ctx=self)


# the start methods' contexts for workers (see ffrecord._processes), each with DirectQueue queues
_DIRECT = {kind: type(f"Direct{kind.__name__}", (_DirectQueues, kind), {"__module__": __name__})
           for kind in (FrozenForkContext, multiprocessing.context.SpawnContext,
                        multiprocessing.context.ForkServerContext)}


def direct_queues(context: Any) -> Any:
    """The start method for workers that ``context`` names (see ``_processes.start_context``),
    with ``DirectQueue`` worker queues; a context of another kind as it is.

    >>> direct_queues("spawn").Queue()
    <DirectQueue>
    """
    context = start_context(context)
    direct = _DIRECT.get(type(context))
    return context if direct is None else direct()
