"""Map-style datasets for the stock DataLoader, and the bytes -> tensor collate every loader uses.

They live at module level so that DataLoader workers (forked, forkserver or spawned) can
unpickle them; storage handles open lazily inside each worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..contenders.folder import FolderContender
from ..contenders.lmdb_store import LMDBReader


def stack_bytes(samples: Sequence) -> "torch.Tensor":  # noqa: F821
    """Collates equal-size byte samples (bytes or uint8 arrays) into one uint8 tensor.

    Example:
        >>> stack_bytes([b"ab", b"cd"]).tolist()
        [[97, 98], [99, 100]]
    """
    import torch

    return torch.from_numpy(np.stack([np.frombuffer(s, dtype=np.uint8) for s in samples]))


class InMemoryDataset:
    """Samples already in memory, fetched a batch at a time: the loader machinery's ceiling.

    Example:
        >>> InMemoryDataset([b"x", b"yz"]).__getitems__([1, 0])
        [b'yz', b'x']
    """

    def __init__(self, samples: Sequence[bytes]) -> None:
        self._samples = samples

    def __len__(self) -> int:
        return len(self._samples)

    def __getitem__(self, index: int) -> bytes:
        return self._samples[index]

    def __getitems__(self, indices: Sequence[int]) -> list[bytes]:
        return [self._samples[i] for i in indices]

    def __repr__(self) -> str:
        return f"InMemoryDataset(n={len(self._samples)})"


class FolderDataset:
    """Sample i is the file ``<root>/<i>.bin``, read with ``open().read()``.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> FolderContender().write(root, [b"x", b"yz"])
        >>> FolderDataset(root)[1]
        b'yz'
    """

    def __init__(self, root: Path) -> None:
        self._reader = FolderContender().open(root, check=False)
        self._n = len(self._reader)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> bytes:
        return self._reader.read(np.array([index]))[0]

    def __repr__(self) -> str:
        return f"FolderDataset(n={self._n})"


class LMDBDataset:
    """Sample i is the value of key i; the environment opens lazily in each worker.

    Example:
        >>> import tempfile
        >>> from benchmarks.contenders.lmdb_store import LMDBContender
        >>> root = Path(tempfile.mkdtemp())
        >>> LMDBContender().write(root, [b"x", b"yz"])
        >>> LMDBDataset(root, 2)[1]
        b'yz'
    """

    def __init__(self, root: Path, n: int) -> None:
        self._root = root
        self._n = n
        self._reader: LMDBReader | None = None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> bytes:
        if self._reader is None:
            self._reader = LMDBReader(self._root)
        return self._reader.read(np.array([index]))[0]

    def __getstate__(self) -> dict:
        return {"_root": self._root, "_n": self._n, "_reader": None}

    def __repr__(self) -> str:
        return f"LMDBDataset({self._root}, n={self._n})"
