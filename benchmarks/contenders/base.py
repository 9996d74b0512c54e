"""What every contender is: the ``Contender`` interface, the reader protocol and helpers
they share. A module of its own so that the contenders import it, not the package that
lists them (which imports them in turn)."""

from __future__ import annotations

import importlib.util
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, Self

import numpy as np


class BatchReader(Protocol):
    """An open dataset: ``read`` returns the samples at ``indices`` as buffer objects."""

    def read(self, indices: np.ndarray) -> Sequence: ...

    def close(self) -> None: ...


def fsync_file(path: Path) -> None:
    """Flushes a written file to disk (what every single-file writer here does once)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ClosingReader:
    """Context-manager behaviour for readers that define ``close``."""

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Contender(ABC):
    """One storage format, written to and read from its own directory ``root``."""

    name: str = ""
    label: str = ""
    #: directory name of the stored dataset; variants of one format share it.
    store: str = ""
    #: check_data settings that mean something for this format (others cannot check).
    checks: tuple[bool, ...] = (False,)
    #: the PyPI package it needs, if any.
    package: str | None = None
    #: measured only in processes of its own (``contenders/isolated.py``).
    isolated: bool = False
    #: put first on the import path of its processes.
    pythonpath: str | None = None

    def unavailable_reason(self) -> str | None:
        """None when usable here, else why not (e.g. the package is not installed)."""
        if self.package and importlib.util.find_spec(self.package) is None:
            return f"package {self.package} is not installed"
        return None

    @abstractmethod
    def write(self, root: Path, samples: Sequence[bytes]) -> None:
        """Stores ``samples`` under the empty directory ``root`` and flushes them to disk."""

    @abstractmethod
    def open(self, root: Path, check: bool) -> BatchReader:
        """Opens what ``write`` stored under ``root``."""

    @property
    def store_name(self) -> str:
        return self.store or self.name

    @property
    def owns_store(self) -> bool:
        """False when it reads a store another contender writes (its writes go to scratch)."""
        return self.store_name == self.name

    def files(self, root: Path) -> list[str]:
        """Every file that reads of ``root`` touch (evicted before cold reads)."""
        return [str(p) for p in sorted(root.rglob("*")) if p.is_file()]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

