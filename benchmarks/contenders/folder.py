"""One file per sample in a folder, read with ``open().read()``: the conventional loader."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base import ClosingReader, Contender


def sample_path(root: Path, index: int) -> str:
    """Where sample ``index`` lives."""
    return f"{root}/{index:08d}.bin"


class FolderReader(ClosingReader):
    """Reads samples from their own files.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> FolderContender().write(root, [b"x", b"yz"])
        >>> FolderReader(root, 2).read(np.array([1]))
        [b'yz']
    """

    def __init__(self, root: Path, n: int) -> None:
        self._paths = [sample_path(root, i) for i in range(n)]

    def read(self, indices: np.ndarray) -> list[bytes]:
        out = []
        for i in indices.tolist():
            with open(self._paths[i], "rb") as f:
                out.append(f.read())
        return out

    def __len__(self) -> int:
        return len(self._paths)

    def __repr__(self) -> str:
        return f"FolderReader(n={len(self._paths)})"


class FolderContender(Contender):
    name = "folder"
    label = "folder of files"

    def write(self, root: Path, samples: Sequence[bytes]) -> None:
        # No fsync: one per sample file would dominate, and such loaders do not do it. The
        # other writers fsync their file once, so this figure flatters the folder.
        for i, data in enumerate(samples):
            with open(sample_path(root, i), "wb") as f:
                f.write(data)

    def open(self, root: Path, check: bool) -> FolderReader:
        return FolderReader(root, sum(1 for _ in os.scandir(root)))
