"""The storage formats compared: each writes the same samples and reads batches back.

Example:
    >>> [c.name for c in all_contenders()][:2]
    ['ffrecord', 'reference']
"""

from __future__ import annotations

from .base import BatchReader, ClosingReader, Contender, fsync_file

__all__ = ["BatchReader", "ClosingReader", "Contender", "all_contenders", "contender_named",
           "fsync_file"]


def all_contenders() -> list[Contender]:
    """Every contender, ffrecord first (ratios are taken against it)."""
    from .array_record_store import ArrayRecordContender
    from .ffrecord_store import FFRecordContender
    from .folder import FolderContender
    from .granular_store import GranularContender
    from .hdf5 import HDF5Contender
    from .lmdb_store import LMDBContender
    from .python_loop import PythonLoopContender
    from .reference_store import ReferenceContender

    return [
        FFRecordContender(),
        ReferenceContender(),
        PythonLoopContender(),
        LMDBContender(),
        GranularContender(),
        ArrayRecordContender(),
        FolderContender(),
        HDF5Contender(),
    ]


def contender_named(name: str) -> Contender:
    """The contender called ``name`` (ffrecord's variants included).

    Example:
        >>> contender_named("ffrecord-direct").label
        'ffrecord (O_DIRECT)'
    """
    from .ffrecord_store import FFRecordContender

    if name.startswith("ffrecord-"):
        return FFRecordContender(name.removeprefix("ffrecord-"))
    return next(c for c in all_contenders() if c.name == name)
