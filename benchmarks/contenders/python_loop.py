"""The floor: the FFRecord layout in plain Python, written with buffered writes and read with
an ``os.pread`` + ``zlib.crc32`` loop per sample.

Layout (see ``core/doc.go``): ``u32 meta_crc | u64 n | n x u32 sample_crc | n x u64 offset |
data``, little-endian, CRC-32/IEEE (``zlib.crc32``). The workloads also write their
header-size test files with it (``write_tiny_samples``).

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
from pathlib import Path

import numpy as np

from .base import ClosingReader, Contender

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


_FILE = "data.ffr"


class PreadLoopReader(ClosingReader):
    """Reads one FFRecord file sample by sample with ``os.pread``, checking CRCs if asked.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> write_file(str(root / _FILE), [b"ab", b"c"])
        >>> with PreadLoopReader(root / _FILE, check=True) as r:
        ...     r.read(np.array([1, 0]))
        [b'c', b'ab']
    """

    def __init__(self, path: Path, check: bool) -> None:
        # the whole header in memory as numpy arrays (12 bytes a sample), as the reference keeps it
        self._header = read_header(str(path))
        self._check = check
        self._fd = os.open(path, os.O_RDONLY)

    def read(self, indices: np.ndarray) -> list[bytes]:
        h = self._header
        # one numpy gather per batch, then Python ints: per-sample numpy indexing is slower
        rows = zip(indices.tolist(), h.offsets[indices].tolist(), h.sizes[indices].tolist(),
                   h.checksums[indices].tolist())
        out = []
        for i, offset, size, checksum in rows:
            data = os.pread(self._fd, size, offset)
            if self._check and zlib.crc32(data) != checksum:
                raise ValueError(f"sample {i}: checksum mismatch")
            out.append(data)
        return out

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __repr__(self) -> str:
        return f"PreadLoopReader(n={self._header.n}, check={self._check})"


class PythonLoopContender(Contender):
    name = "python"
    label = "Python pread+crc32 loop"
    checks = (False, True)

    def write(self, root: Path, samples: Sequence[bytes]) -> None:
        write_file(str(root / _FILE), samples)

    def open(self, root: Path, check: bool) -> PreadLoopReader:
        return PreadLoopReader(root / _FILE, check)
