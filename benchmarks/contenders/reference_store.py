"""The reference implementation, through the same API as ffrecord, in processes of its own.

It reads the files ffrecord wrote (the format is byte-compatible), so both read the same
files; what it writes goes to scratch directories.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .. import reference
from .base import BatchReader
from .ffrecord_store import FFRecordContender


@functools.lru_cache(maxsize=1)
def _build() -> tuple[str | None, str | None]:
    try:
        return str(reference.build()), None
    except (RuntimeError, OSError) as e:
        return None, str(e)


class ReferenceContender(FFRecordContender):
    """``import ffrecord`` resolves to the reference's build in this contender's processes."""

    isolated = True

    def __init__(self) -> None:
        super().__init__()
        self.name = "reference"
        self.label = "reference (C++/libaio)"

    @property
    def pythonpath(self) -> str | None:
        return _build()[0]

    def unavailable_reason(self) -> str | None:
        return _build()[1]

    def open(self, root: Path, check: bool) -> BatchReader:
        return ListIndexReader(super().open(root, check))


class ListIndexReader:
    """Hands the reference its indices as a list of ints (what its pybind11 binding converts
    fastest; a numpy array goes element by element)."""

    def __init__(self, reader: BatchReader) -> None:
        self._reader = reader

    def read(self, indices: np.ndarray) -> list:
        return self._reader.read(indices.tolist())

    def close(self) -> None:
        self._reader.close()

    def __repr__(self) -> str:
        return f"ListIndexReader({self._reader!r})"
