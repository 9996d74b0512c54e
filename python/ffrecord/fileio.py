"""The reference's ``ffrecord.fileio`` module: ``FileReader``, ``FileWriter``, ``checkFsAlign``.

Scripts written for the reference import from here; ``ffrecord`` itself exports the same
names.

>>> import os, tempfile
>>> from ffrecord.fileio import FileReader, FileWriter, checkFsAlign
>>> path = os.path.join(tempfile.mkdtemp(), "a.ffr")
>>> with FileWriter(path, 1) as w:
...     w.write_one(b"x")
>>> with open(path, "rb") as f:
...     checkFsAlign(f.fileno())
False
"""

from __future__ import annotations

import array
import fcntl

from .reader import FileReader
from .writer import FileWriter

__all__ = ["FileReader", "FileWriter", "checkFsAlign"]

# The ioctl by which the reference asks its cluster filesystem whether O_DIRECT reads need
# no alignment there; other filesystems refuse it.
_FS_IOC_CHECK_FS_ALIGN = 2147772004


def checkFsAlign(fd: int) -> bool:
    """True when the filesystem of open file ``fd`` says it takes unaligned direct reads.

    Only the reference's own cluster filesystem answers that ioctl: everywhere else (ext4,
    xfs, tmpfs, ...) this is False, as it is with the reference. The reference opens files
    with ``O_DIRECT`` only when it is True; ffrecord chooses with ``FileReader(direct=...)``.
    """
    answer = array.array("I", [0])
    try:
        fcntl.ioctl(fd, _FS_IOC_CHECK_FS_ALIGN, answer, True)
    except (OSError, ValueError):  # ValueError: a negative descriptor, refused before the call
        return False
    return answer[0] == 1
