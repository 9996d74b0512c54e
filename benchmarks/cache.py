"""Evicting files from the page cache before cold-read repetitions.

As root the whole cache is dropped (``/proc/sys/vm/drop_caches``, which also drops inodes and
dentries: the folder-of-files loader then pays its metadata reads too); every file is also
evicted with ``posix_fadvise(DONTNEED)``, which is all that works without root.

Example:
    >>> method = eviction_method()
    >>> method in ("drop_caches", "fadvise")
    True
"""

from __future__ import annotations

import os
from collections.abc import Iterable

_DROP_CACHES = "/proc/sys/vm/drop_caches"


def eviction_method() -> str:
    """Names the strongest eviction available to this process."""
    return "drop_caches" if os.access(_DROP_CACHES, os.W_OK) else "fadvise"


def evict(paths: Iterable[str]) -> None:
    """Makes the next reads of ``paths`` come from the disk."""
    os.sync()  # dirty pages cannot be dropped
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if eviction_method() == "drop_caches":
        with open(_DROP_CACHES, "w") as f:
            f.write("3\n")
