"""The FFRecord layout in plain Python: the floor that ffrecord is measured against.

Layout (see ``core/doc.go``): ``u32 meta_crc | u64 n | n x u32 sample_crc | n x u64 offset |
data``, little-endian, CRC-32/IEEE (``zlib.crc32``).

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.ffr")
    >>> write_file(path, [b"ab", b"", b"xyz"])
    >>> header = read_header(path)
    >>> header.sizes.tolist()
    [2, 0, 3]
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_PREFIX = 12  # u32 meta checksum + u64 sample count


@dataclass(frozen=True)
class Header:
    """The decoded index of one file: per-sample CRCs, offsets and sizes."""

    n: int
    checksums: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray

    def __repr__(self) -> str:
        return f"Header(n={self.n})"


def header_bytes(checksums: np.ndarray, offsets: np.ndarray) -> bytes:
    """Builds the header for samples with these CRCs and absolute offsets."""
    body = (
        np.uint64(len(checksums)).tobytes()
        + checksums.astype("<u4").tobytes()
        + offsets.astype("<u8").tobytes()
    )
    return np.uint32(zlib.crc32(body)).tobytes() + body


def write_file(path: str, samples: Sequence[bytes]) -> None:
    """Writes ``samples`` as an FFRecord file with buffered writes, then fsyncs it."""
    n = len(samples)
    sizes = np.fromiter((len(s) for s in samples), dtype=np.uint64, count=n)
    offsets = np.full(n, _PREFIX + 12 * n, dtype=np.uint64)
    offsets[1:] += np.cumsum(sizes[:-1])
    checksums = np.fromiter((zlib.crc32(s) for s in samples), dtype=np.uint32, count=n)
    with open(path, "wb") as f:
        f.write(header_bytes(checksums, offsets))
        for s in samples:
            f.write(s)
        f.flush()
        os.fsync(f.fileno())


def write_tiny_samples(path: str, n: int) -> None:
    """Writes ``n`` one-byte samples (values ``i % 256``) quickly, for header-size tests."""
    values = (np.arange(n) % 256).astype(np.uint8)
    crc_of_byte = np.array([zlib.crc32(bytes([b])) for b in range(256)], dtype=np.uint32)
    offsets = np.arange(n, dtype=np.uint64) + np.uint64(_PREFIX + 12 * n)
    with open(path, "wb") as f:
        f.write(header_bytes(crc_of_byte[values], offsets))
        f.write(values.tobytes())
        f.flush()
        os.fsync(f.fileno())  # clean pages: dirty ones would count as private memory of readers


def read_header(path: str) -> Header:
    """Reads and checks a file's whole header into memory, as the reference reader does."""
    with open(path, "rb") as f:
        prefix = f.read(_PREFIX)
        n = int(np.frombuffer(prefix, "<u8", offset=4)[0])
        index = f.read(12 * n)
        file_size = os.fstat(f.fileno()).st_size
    stored = int(np.frombuffer(prefix, "<u4", count=1)[0])
    if stored and zlib.crc32(prefix[4:] + index) != stored:
        raise ValueError(f"{path}: metadata checksum mismatch")
    checksums = np.frombuffer(index, "<u4", count=n)
    offsets = np.frombuffer(index, "<u8", count=n, offset=4 * n)
    sizes = np.diff(offsets, append=np.uint64(file_size))
    return Header(n, checksums, offsets, sizes)
