"""What a file holds beyond its samples, read in pure Python for ``ffrecord info``.

Only the header's sample count, the last sample's offset and the start of the last sample
are read (never the whole header), so this is cheap on any file. The extension record that
marks an LZ4-compressed file and the index record of a packed folder are both the file's
last stored sample; see the core's format spec (``core/doc.go``).

>>> describe("/nonexistent.ffr")
Traceback (most recent call last):
...
FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent.ffr'
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from .errors import CorruptFileError

_EXT_MAGIC = b"\x89FFRext\x1a"
_EXT_FIXED = 8 + 4 + 4 + 8  # magic, version, reserved, count of user samples
_EXT_PER_SAMPLE = 8 + 1  # original size, codec
_EXT_TRAILER = 4  # CRC-32 of the record
_PACKED_MAGIC = b"piouhjgbr"
_HEADER = struct.Struct("<IQ")


@dataclass(frozen=True)
class Layout:
    """The shape of one FFRecord file as stored on disk."""

    path: str
    file_size: int
    stored_samples: int  # samples in the header, an extension record included
    header_size: int
    compression: str  # "none" or "lz4"
    packed_folder: bool  # the last user sample is a pack_folder index

    @property
    def data_size(self) -> int:
        """Bytes of sample data as stored (after compression, records included)."""
        return self.file_size - self.header_size


def describe(path: str) -> Layout:
    """Reads the layout of one ``.ffr`` file; raises ``CorruptFileError`` on a cut header."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(_HEADER.size)
        if len(head) < _HEADER.size:
            raise CorruptFileError(f"{path}: file of {size} bytes is too short for a header")
        _, n = _HEADER.unpack(head)
        header_size = _HEADER.size + 12 * n
        if header_size > size:
            raise CorruptFileError(f"{path}: header of {n} samples does not fit in {size} bytes")
        last = _stored_sample(f, n, n - 1, size)
        compressed = last[0].startswith(_EXT_MAGIC) and last[1] == _ext_size(n - 1)
        if compressed:
            last = _stored_sample(f, n, n - 2, size)
        return Layout(path, size, n, header_size, "lz4" if compressed else "none",
                      last[0].startswith(_PACKED_MAGIC))


def _ext_size(count: int) -> int:
    return _EXT_FIXED + _EXT_PER_SAMPLE * count + _EXT_TRAILER


def _stored_sample(f, n: int, i: int, size: int, limit: int = 64) -> tuple:
    """(first ``limit`` bytes, length) of stored sample i; (b"", 0) when there is none."""
    if not 0 <= i < n:
        return b"", 0
    f.seek(_HEADER.size + 4 * n + 8 * i)
    if i + 1 < n:
        start, end = struct.unpack("<QQ", f.read(16))
    else:
        (start,), end = struct.unpack("<Q", f.read(8)), size
    if not start <= end <= size:
        return b"", 0  # a broken offset: reported by the reader, not here
    f.seek(start)
    return f.read(min(end - start, limit)), end - start
