"""Exceptions raised by ffrecord and the mapping from the C ABI's status codes to them.

The status codes are those of ``capi/ffrecord.h``; the message of every exception is the
Go core's own message (file name and sample index included), passed on intact.

>>> from ffrecord.errors import CorruptFileError, exception_for
>>> issubclass(CorruptFileError, ValueError)
True
>>> exception_for(-6) is CorruptFileError
True
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable

OK = 0
E_INVALID = -1
E_INDEX = -2
E_IO = -3
E_NOTFOUND = -4
E_CORRUPT = -5
E_CHECKSUM = -6
E_CLOSED = -7
E_HANDLE = -8
E_SHORTBUF = -9
E_INTERNAL = -10


class CorruptFileError(ValueError):
    """A file's structure is broken or a stored CRC-32 does not match its data.

    A ``ValueError``, so code written for the reference implementation (which raised
    ``ValueError("checksum mismatched!")``) keeps catching it.
    """


class ObjectChangedError(OSError):
    """A remote object was replaced after it was opened: its samples are not read as the old
    object's. Reopen the reader to read the new object. A copy of a reader (after ``fork()``,
    or unpickled) raises it too for a local file replaced since its original opened it.

    An ``OSError`` with errno ``ESTALE``, as a stale NFS file handle is: the file opened is
    no longer there.
    """


class StateError(ValueError):
    """A loader state (``ffrecord.torch.DataLoader.state_dict()``) that cannot be used:
    damaged, of a format this library does not read, or of an order it cannot compute
    without the loader (a sampler of the user's). A ``ValueError``, as before it had a class."""


class ForeignStateError(StateError):
    """A loader state taken on another dataset, mixture, order or seed than the one it is
    given with (a loader, a dataset named to ``ffrecord ledger``, the other states of an
    audit)."""


class FFRecordWarning(UserWarning):
    """A file is readable but not as it should be (e.g. a legacy zero metadata checksum)."""


class UncachedRemoteWarning(UserWarning):
    """A DataLoader reads remote files without a chunk cache (``cache_dir``): every epoch
    downloads its share of the dataset again, in every process. Issued once per process;
    silence it with ``warnings.filterwarnings("ignore", category=UncachedRemoteWarning)``."""


_EXCEPTIONS: dict[int, type[Exception]] = {
    E_INVALID: ValueError,
    E_INDEX: IndexError,
    E_IO: OSError,
    E_NOTFOUND: FileNotFoundError,
    E_CORRUPT: CorruptFileError,
    E_CHECKSUM: CorruptFileError,
    E_CLOSED: ValueError,
    E_HANDLE: ValueError,
    E_SHORTBUF: ValueError,
    E_INTERNAL: RuntimeError,
}


# Operating-system errors that get a class of their own beyond what ``OSError(errno, …)``
# picks (``FileNotFoundError``, ``PermissionError``, ...).
_OS_EXCEPTIONS: dict[int, type[OSError]] = {_errno.ESTALE: ObjectChangedError}


def os_exception_for(errno: int) -> type[OSError]:
    """The exception class for an operating-system error number (``OSError`` by default,
    which picks Python's own subclass for the errno).

    >>> os_exception_for(_errno.ESTALE) is ObjectChangedError
    True
    """
    return _OS_EXCEPTIONS.get(errno, OSError)


def exception_for(status: int) -> type[Exception]:
    """The exception class for a negative status code (``RuntimeError`` for unknown ones)."""
    return _EXCEPTIONS.get(status, RuntimeError)


def clean_up_after(error: BaseException, clean_up: Callable[[], object]) -> None:
    """Runs ``clean_up`` while ``error`` propagates. A clean-up that fails too is added to
    ``error`` as a note, never raised in its place: "no space left on device" stays the
    error the caller sees, not a ``FileNotFoundError`` of the clean-up after it.

    >>> import os
    >>> error = OSError(28, "no space left on device")
    >>> clean_up_after(error, lambda: os.rmdir("/nonexistent/dir"))
    >>> error.__notes__[0].startswith("cleaning up after it failed too: FileNotFoundError")
    True
    """
    try:
        clean_up()
    except Exception as failed:  # noqa: BLE001 - reported on the error that matters
        error.add_note(f"cleaning up after it failed too: {type(failed).__name__}: {failed}")
