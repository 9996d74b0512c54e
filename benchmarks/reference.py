"""The reference implementation (HFAiLab ffrecord 1.4: C++, libaio, pybind11), built to run
beside ffrecord.

Its sources and ``build.sh`` live in ``shared/reference`` beside the repository (or
``$FFRECORD_REFERENCE_SRC``). The build needs g++, libaio-dev and pybind11 (``make bench``
installs them: see ``make bench-deps``); it is cached under ``~/.cache/ffrecord-bench``,
keyed by the sources and the interpreter, so it is built once. The package it builds is
also called ``ffrecord``: it runs in processes of its own (``benchmarks/isolated.py``).

Example:
    >>> source_dir().name
    'reference'
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from .config import REPO

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
