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

Writing in the caller blocks only when the pipe (64 KiB on Linux) is full: a worker's
messages are bounded by the tasks the loader gives it (``prefetch_factor``), each a skeleton
of a batch or an error's traceback, and the main process reads them as it iterates; at
shutdown torch terminates a worker that does not exit, as it does with its own queues.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import multiprocessing.queues
import queue
import time
from multiprocessing.reduction import ForkingPickler
from typing import Any


class DirectQueue(multiprocessing.queues.SimpleQueue):
    """A ``SimpleQueue`` with the parts of ``multiprocessing.Queue`` torch's loader uses.

    >>> q = DirectQueue(ctx=multiprocessing.get_context())
    >>> q.put((1, "a")); q.get(timeout=1)
    (1, 'a')
    >>> q.get(timeout=0.01)
    Traceback (most recent call last):
    queue.Empty
    """

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
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
        super().put(obj)

    def cancel_join_thread(self) -> None:
        """Nothing to do: there is no feeder thread to wait for."""

    def join_thread(self) -> None:
        """Nothing to do: there is no feeder thread to wait for."""

    def __repr__(self) -> str:
        return "<DirectQueue>"


class _DirectQueues:
    """A start method's context whose ``Queue`` is a ``DirectQueue``."""

    def Queue(self, maxsize: int = 0) -> DirectQueue:  # noqa: N802 (multiprocessing's name)
        return DirectQueue(ctx=self)


# the start methods' contexts, each with DirectQueue queues (those this platform has)
_DIRECT = {kind: type(f"Direct{kind.__name__}", (_DirectQueues, kind), {"__module__": __name__})
           for kind in (getattr(multiprocessing.context, name, None)
                        for name in ("ForkContext", "SpawnContext", "ForkServerContext"))
           if kind is not None}


def direct_queues(context: Any) -> Any:
    """The start method ``context`` names (a name or a context; None: the one this process
    fixed, else None), with ``DirectQueue`` worker queues; a context of another kind as it is.

    >>> direct_queues("spawn").Queue()
    <DirectQueue>
    """
    if context is None:
        context = multiprocessing.get_start_method(allow_none=True)
        if context is None:
            return None
    if isinstance(context, str):
        context = multiprocessing.get_context(context)
    direct = _DIRECT.get(type(context))
    return context if direct is None else direct()
