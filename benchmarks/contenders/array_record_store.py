"""Google's ArrayRecord (``array-record``): one record per chunk, for random access."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base import ClosingReader, Contender, fsync_file

_FILE = "data.array_record"
# group_size:1 puts every record in its own chunk: what random access needs.
_WRITE_OPTIONS = "group_size:1"
# no readahead: ArrayRecord's advice for random access.
_READ_OPTIONS = "readahead_buffer_size:0"


class ArrayRecordBatchReader(ClosingReader):
    """Reads a batch with one ``read(indices)`` call (ArrayRecord's parallel batch read).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> ArrayRecordContender().write(root, [b"x", b"yz"])
        >>> with ArrayRecordBatchReader(root) as r:
        ...     r.read(np.array([1, 0]))
        [b'yz', b'x']
    """

    def __init__(self, root: Path) -> None:
        from array_record.python.array_record_module import ArrayRecordReader

        self._reader = ArrayRecordReader(str(root / _FILE), _READ_OPTIONS)

    def read(self, indices: np.ndarray) -> list[bytes]:
        return self._reader.read(indices.tolist())

    def close(self) -> None:
        self._reader.close()

    def __repr__(self) -> str:
        return f"ArrayRecordBatchReader(n={self._reader.num_records()})"


class ArrayRecordContender(Contender):
    name = "array-record"
    label = "ArrayRecord"
    package = "array_record"

    def write(self, root: Path, samples: Sequence[bytes]) -> None:
        from array_record.python.array_record_module import ArrayRecordWriter

        writer = ArrayRecordWriter(str(root / _FILE), _WRITE_OPTIONS)
        for data in samples:
            writer.write(data)
        writer.close()
        fsync_file(root / _FILE)

    def open(self, root: Path, check: bool) -> ArrayRecordBatchReader:
        return ArrayRecordBatchReader(root)
