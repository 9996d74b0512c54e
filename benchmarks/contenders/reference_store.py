"""The reference implementation (HFAiLab ffrecord 1.4: C++, libaio, pybind11), built from its
sources and measured through the same API as ffrecord, in processes of its own.

Its sources and ``build.sh`` live in ``shared/reference`` beside the repository (or
``$FFRECORD_REFERENCE_SRC``). The build needs g++, libaio-dev and pybind11 (``make bench``
installs them: see ``make bench-deps``); it is cached under ``~/.cache/ffrecord-bench``,
keyed by the sources and the interpreter, so it is built once. The package it builds is
also called ``ffrecord``: it runs in processes of its own (``contenders/isolated.py``).
It reads the files ffrecord wrote (the format is byte-compatible), so both read the same
files; what it writes goes to scratch directories.

Example:
    >>> source_dir().name
    'reference'
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from ..config import REPO
from .base import BatchReader
from .ffrecord_store import FFRecordContender

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ffrecord-bench"


def source_dir() -> Path:
    return Path(os.environ.get("FFRECORD_REFERENCE_SRC", REPO.parent / "shared" / "reference"))


def _fingerprint(src: Path) -> str:
    digest = hashlib.sha256(sys.executable.encode())
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(src)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def build() -> Path:
    """The directory to put first on ``PYTHONPATH`` to import the reference as ``ffrecord``;
    builds it on first use. Raises RuntimeError saying why it cannot be built."""
    src = source_dir()
    script = src / "build.sh"
    if not script.is_file():
        raise RuntimeError(f"no reference sources at {src} (set FFRECORD_REFERENCE_SRC)")
    out = CACHE / f"reference-{_fingerprint(src)}"
    if (out / "ffrecord" / "_ffrecord_cpp.so").is_file():
        return out
    proc = subprocess.run(["bash", str(script), str(out), sys.executable],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"reference build failed: {(proc.stderr or proc.stdout).strip()[-600:]}")
    return out


@functools.lru_cache(maxsize=1)
def _build_once() -> tuple[str | None, str | None]:
    try:
        return str(build()), None
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
        return _build_once()[0]

    def unavailable_reason(self) -> str | None:
        return _build_once()[1]

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
