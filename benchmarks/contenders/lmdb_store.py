"""LMDB through the ``lmdb`` package (what TorchRecord builds on); keys = sample index."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base import ClosingReader, Contender

_KEY = struct.Struct(">Q")  # big-endian so keys sort by index and appends stay sequential


def sample_key(index: int) -> bytes:
    """The LMDB key of sample ``index``."""
    return _KEY.pack(index)


class LMDBReader(ClosingReader):
    """Reads a batch with one read transaction and ``Cursor.getmulti``.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> LMDBContender().write(root, [b"x", b"yz"])
        >>> with LMDBReader(root) as r:
        ...     r.read(np.array([1, 0]))
        [b'yz', b'x']
    """

    def __init__(self, root: Path) -> None:
        import lmdb

        # readahead=False is LMDB's advice for random access larger than memory.
        self._env = lmdb.open(
            str(root), readonly=True, lock=False, readahead=False, meminit=False
        )

    def read(self, indices: np.ndarray) -> list[bytes]:
        keys = [sample_key(i) for i in indices.tolist()]
        with self._env.begin() as txn:
            return [value for _, value in txn.cursor().getmulti(keys)]

    def close(self) -> None:
        self._env.close()

    def __repr__(self) -> str:
        return f"LMDBReader({self._env.path()!r})"


class LMDBContender(Contender):
    name = "lmdb"
    label = "LMDB"
    package = "lmdb"

    def write(self, root: Path, samples: Sequence[bytes]) -> None:
        import lmdb

        total = sum(len(s) for s in samples)
        env = lmdb.open(str(root), map_size=2 * total + (64 << 20), meminit=False)
        try:
            with env.begin(write=True) as txn:
                for i, data in enumerate(samples):
                    txn.put(sample_key(i), data, append=True)
            env.sync(True)
        finally:
            env.close()

    def open(self, root: Path, check: bool) -> LMDBReader:
        return LMDBReader(root)
