"""What every path-taking function checks: no NUL byte in a path, and only regular files opened
for reading (a FIFO blocks until a writer appears, a device may never end); and, asked of the
core, which files make up a dataset directory and how its parts are named.

>>> fspath("data/train.ffr")
'data/train.ffr'
>>> fspath("data/train.ffr\\0.txt")
Traceback (most recent call last):
...
ValueError: embedded null byte in path 'data/train.ffr\\x00.txt'
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO, Union

from . import _lib

#: A path as every function taking a path accepts it.
PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: A path given as text (functions that build other paths from it take no ``bytes``).
PathLike = Union[str, "os.PathLike[str]"]

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def fspath(path: PathArg) -> str:
    """``path`` as ``str``; ``ValueError`` for a NUL byte, as ``open()`` raises. The system
    would see the path cut short at the NUL and act on another file than the one named."""
    text = os.fsdecode(path)
    if "\0" in text:
        raise ValueError(f"embedded null byte in path {text!r}")
    return text


def encode(path: PathArg) -> bytes:
    """``path`` checked and encoded for the C library."""
    return os.fsencode(fspath(path))


def check_regular(mode: int, path: PathArg) -> None:
    """``ValueError`` naming ``path`` unless ``mode`` (an ``st_mode``) is a regular file's."""
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a file")
        raise ValueError(f"{os.fsdecode(path)}: not a regular file but {kind}")


def dataset_files(directory: PathArg) -> list[str]:
    """The files of a dataset directory as ``FileReader(directory)`` reads them: its ``*.ffr``
    entries that are neither hidden nor directories, in name order (the core's rule).

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> for name in ("b.ffr", "a.ffr", ".a.ffr.tmp", "notes.txt"):
    ...     open(os.path.join(root, name), "wb").close()
    >>> [os.path.basename(f) for f in dataset_files(root)]
    ['a.ffr', 'b.ffr']
    """
    text = _lib.copy_text(_lib.current().dll.ffr_dataset_files, encode(directory))
    return os.fsdecode(text).splitlines()


def part_name(k: int, nparts: int) -> str:
    """The file name of part ``k`` of a dataset written as ``nparts`` parts (the core's rule):
    the number is widened past 100,000 parts, so that name order stays part order.

    >>> part_name(3, 8), part_name(7, 100_001)
    ('PART_00003.ffr', 'PART_000007.ffr')
    """
    return _lib.copy_text(_lib.current().dll.ffr_part_name, k, nparts).decode()


def open_regular(path: PathArg, buffering: int = -1) -> BinaryIO:
    """Opens a regular file for reading; ``ValueError`` at once for anything else.

    The open does not block (``O_NONBLOCK``: a FIFO would wait for a writer), and the file
    is checked on the descriptor itself, so nothing swapped in after a check is read.
    """
    fd = os.open(fspath(path), os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        check_regular(os.fstat(fd).st_mode, path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering)
    except BaseException:
        os.close(fd)
        raise
