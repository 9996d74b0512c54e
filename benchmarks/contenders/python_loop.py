"""The floor: plain Python writes, and an ``os.pread`` + ``zlib.crc32`` loop per sample."""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .. import ffr_format
from .base import ClosingReader, Contender

_FILE = "data.ffr"


class PreadLoopReader(ClosingReader):
    """Reads one FFRecord file sample by sample with ``os.pread``, checking CRCs if asked.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> ffr_format.write_file(str(root / _FILE), [b"ab", b"c"])
        >>> with PreadLoopReader(root / _FILE, check=True) as r:
        ...     r.read(np.array([1, 0]))
        [b'c', b'ab']
    """

    def __init__(self, path: Path, check: bool) -> None:
        # the whole header in memory as numpy arrays (12 bytes a sample), as the reference keeps it
        self._header = ffr_format.read_header(str(path))
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
        ffr_format.write_file(str(root / _FILE), samples)

    def open(self, root: Path, check: bool) -> PreadLoopReader:
        return PreadLoopReader(root / _FILE, check)
