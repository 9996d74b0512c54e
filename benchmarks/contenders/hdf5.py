"""HDF5 through ``h5py``: one dataset of variable-length uint8 arrays."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base import ClosingReader, Contender, fsync_file

_FILE = "data.h5"
_WRITE_CHUNK = 1024


class HDF5Reader(ClosingReader):
    """Reads a batch with one fancy-indexed selection (h5py needs sorted unique indices).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> HDF5Contender().write(root, [b"x", b"yz"])
        >>> with HDF5Reader(root) as r:
        ...     [a.tobytes() for a in r.read(np.array([1, 1, 0]))]
        [b'yz', b'yz', b'x']
    """

    def __init__(self, root: Path) -> None:
        import h5py

        self._file = h5py.File(root / _FILE, "r")
        self._samples = self._file["samples"]

    def read(self, indices: np.ndarray) -> np.ndarray:
        unique, inverse = np.unique(indices, return_inverse=True)
        return self._samples[unique][inverse]

    def close(self) -> None:
        self._file.close()

    def __repr__(self) -> str:
        return f"HDF5Reader({self._file.filename!r})"


class HDF5Contender(Contender):
    name = "hdf5"
    label = "HDF5 (h5py vlen)"
    package = "h5py"

    def write(self, root: Path, samples: Sequence[bytes]) -> None:
        import h5py

        path = root / _FILE
        with h5py.File(path, "w") as f:
            vlen = h5py.vlen_dtype(np.uint8)
            dset = f.create_dataset("samples", (len(samples),), dtype=vlen)
            for start in range(0, len(samples), _WRITE_CHUNK):
                chunk = samples[start : start + _WRITE_CHUNK]
                rows = np.empty(len(chunk), dtype=vlen)
                for j, data in enumerate(chunk):  # element-wise: a list would become 2-D
                    rows[j] = np.frombuffer(data, dtype=np.uint8)
                # write_direct: dset[a:b] = rows treats equal-length rows as a 2-D array
                dset.write_direct(rows, dest_sel=np.s_[start : start + len(chunk)])
        fsync_file(path)

    def open(self, root: Path, check: bool) -> HDF5Reader:
        return HDF5Reader(root)
