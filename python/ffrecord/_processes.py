"""How ffrecord's worker processes start (the loader's, the converters' and ``dump``'s):
``fork`` unless told otherwise, with the parent's objects frozen while it forks.

A forked worker inherits every object of the training process, among them garbage that the
parent has not collected yet. The worker's first full collection would free that garbage
there: finalizers would run in a process they were never meant for, and some of them crash
there (Ray's gRPC clients segfault in a forked child, their threads gone), and the collector
would write to every inherited object, copying the pages the worker shares with its parent.
So a worker is forked with the parent's objects frozen (``gc.freeze``): the worker's
collector never looks at them, and the parent collects them as before once the fork is done.
This is what Python's documentation of ``gc.freeze`` advises before a fork without exec. A
process that keeps objects frozen itself manages its heap: it is left as it is.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import multiprocessing.context
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def frozen_objects() -> Iterator[None]:
    """Freezes this process's objects for the duration (see the module), unless the
    process keeps frozen objects of its own.

    >>> with frozen_objects():
    ...     gc.get_freeze_count() > 0
    True
    >>> gc.get_freeze_count()
    0
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class FrozenForkProcess(multiprocessing.context.ForkProcess):
    """A process started by ``fork`` with the parent's objects frozen."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with frozen_objects():
            return multiprocessing.context.ForkProcess._Popen(process_obj)


class FrozenForkContext(multiprocessing.context.ForkContext):
    """The ``fork`` start method, its processes forked with the parent's objects frozen."""

    Process = FrozenForkProcess


def start_context(context: Any) -> Any:
    """The start method for worker processes: ``context`` (a name or a context; None: the one
    this process fixed, else ``fork`` where there is one, else None), as a
    ``FrozenForkContext`` when it is ``fork``.

    ``fork`` works in every script, including one with no ``if __name__ == "__main__"``
    guard, and needs no pickling; the ffrecord library loads a private copy of itself in a
    forked child, so readers work there.

    >>> type(start_context("fork")).__name__, type(start_context("spawn")).__name__
    ('FrozenForkContext', 'SpawnContext')
    """
    if context is None:
        if multiprocessing.get_start_method(allow_none=True) is not None:
            context = multiprocessing.get_context()
        elif "fork" in multiprocessing.get_all_start_methods():
            context = "fork"
        else:
            return None
    if isinstance(context, str):
        context = multiprocessing.get_context(context)
    return FrozenForkContext() if type(context) is multiprocessing.context.ForkContext else context
