"""Convert TFRecord files, OFRecord files, folders and Python iterables into FFRecord: the
public home of these converters, which live in ``ffrecord.converters.records`` (record files)
and ``ffrecord.packed`` (folders).

Example:
    >>> from ffrecord.convert import tfrecord_to_ffr
    >>> tfrecord_to_ffr(["train-0.tfrecord", "train-1.tfrecord"], "train.ffr")  # doctest: +SKIP
    50000
"""

from __future__ import annotations

from ._paths import PathLike
from .converters import records
from .converters.records import (crc32c, masked_crc32c, ofrecord_to_ffr, read_ofrecord,
                                 read_tfrecord, tfrecord_to_ffr, write_iterable)

__all__ = [*records.__all__, "folder_to_ffr"]


def folder_to_ffr(folder: PathLike, out: PathLike, *, verbose: bool = False) -> int:
    """Packs a folder (see :func:`ffrecord.pack_folder`); returns the number of files."""
    from .packed import pack_folder

    return pack_folder(folder, out, verbose)
