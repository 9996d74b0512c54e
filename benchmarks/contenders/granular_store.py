"""granular's ``BagWriter`` / ``BagReader``: a data file and an index of end offsets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base import ClosingReader, Contender, fsync_file

_FILE = "data.bag"


class BagBatchReader(ClosingReader):
    """Reads a batch sample by sample (granular has no batch read).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> GranularContender().write(root, [b"x", b"yz"])
        >>> with BagBatchReader(root) as r:
        ...     r.read(np.array([1, 0]))
        [b'yz', b'x']
    """

    def __init__(self, root: Path) -> None:
        import granular

        self._bag = granular.BagReader(root / _FILE)

    def read(self, indices: np.ndarray) -> list[bytes]:
        bag = self._bag
        return [bag[i] for i in indices.tolist()]

    def close(self) -> None:
        self._bag.close()

    def __repr__(self) -> str:
        return f"BagBatchReader(n={len(self._bag)})"


class GranularContender(Contender):
    name = "granular"
    label = "granular (bag)"
    package = "granular"

    def write(self, root: Path, samples: Sequence[bytes]) -> None:
        import granular

        writer = granular.BagWriter(root / _FILE)
        for data in samples:
            writer.append(data, flush=False)
        writer.close()
        for path in (root / _FILE, (root / _FILE).with_suffix(".idx")):
            fsync_file(path)

    def open(self, root: Path, check: bool) -> BagBatchReader:
        return BagBatchReader(root)
