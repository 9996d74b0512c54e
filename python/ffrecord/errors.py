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


class FFRecordWarning(UserWarning):
    """A file is readable but not as it should be (e.g. a legacy zero metadata checksum)."""


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


def exception_for(status: int) -> type[Exception]:
    """The exception class for a negative status code (``RuntimeError`` for unknown ones)."""
    return _EXCEPTIONS.get(status, RuntimeError)
