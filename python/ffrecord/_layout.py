"""What a file holds beyond its samples, for ``ffrecord info``.

An open reader already knows what a file shows: its samples, decompressed. What it does not
tell is how many samples the header *stores*; that count is read here from the header's
first 12 bytes. One stored sample more than the reader shows is the LZ4 extension record
(the reader has checked it; see the core's format spec, ``core/doc.go``).

>>> import os, tempfile
>>> from ffrecord import FileReader, FileWriter
>>> path = os.path.join(tempfile.mkdtemp(), "demo.ffr")
>>> with FileWriter(path, 1, compression="lz4") as w:
...     w.write_one(b"x" * 1000)
>>> with FileReader(path) as r:
...     layout = describe(r)
>>> layout.stored_samples, layout.compression, layout.packed_folder
(2, 'lz4', False)
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from ._paths import open_regular
from .errors import CorruptFileError
from .packed import MAGIC as _PACKED_MAGIC

_PREFIX = struct.Struct("<IQ")  # metadata checksum, stored sample count
_PER_SAMPLE = 4 + 8  # checksum and offset in the header


@dataclass(frozen=True)
class Layout:
    """The shape of one FFRecord file as stored on disk."""

    path: str
    file_size: int
    stored_samples: int  # samples in the header, an extension record included
    compression: str  # "none" or "lz4"
    packed_folder: bool  # the last user sample is a pack_folder index

    @property
    def header_size(self) -> int:
        return _PREFIX.size + _PER_SAMPLE * self.stored_samples

    @property
    def data_size(self) -> int:
        """Bytes of sample data as stored (after compression, records included)."""
        return self.file_size - self.header_size


def describe(reader) -> Layout:
    """The layout of the one file an open ``FileReader`` reads."""
    (path,) = reader.fnames
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        prefix = f.read(_PREFIX.size)
    if len(prefix) < _PREFIX.size:  # only if the file changed since the reader opened it
        raise CorruptFileError(f"{path}: file of {size} bytes is too short for a header")
    _, stored = _PREFIX.unpack(prefix)
    n = len(reader)
    packed = n > 0 and reader.read_one(n - 1)[: len(_PACKED_MAGIC)].tobytes() == _PACKED_MAGIC
    return Layout(path, size, stored, "lz4" if stored > n else "none", packed)
