"""State shared by the workloads of one run: configuration, data, contenders, results."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import ffr_format
from .config import BenchConfig, SizeSpec
from .contenders import Contender
from .contenders.ffrecord_store import FFRecordContender
from .results import Results


def make_samples(spec: SizeSpec, seed: int = 0) -> list[bytes]:
    """``spec.count`` random (incompressible) samples of ``spec.size`` bytes.

    Example:
        >>> [len(s) for s in make_samples(SizeSpec(3, 2))]
        [3, 3]
    """
    blob = np.random.default_rng(seed).bytes(spec.size * spec.count)
    return [blob[i * spec.size : (i + 1) * spec.size] for i in range(spec.count)]


def index_batches(n: int, batch: int, count: int, seed: int) -> list[np.ndarray]:
    """``count`` batches of uniform random indices in [0, n), the same for every contender."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, n, size=batch, dtype=np.int64) for _ in range(count)]


def read_through(paths: list[str]) -> None:
    """Reads files once so that they sit in the page cache (warm runs)."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(8 << 20):
                pass


@dataclass
class BenchContext:
    """Everything a workload needs; workloads add their cells to ``results``."""

    config: BenchConfig
    data_dir: Path
    contenders: list[Contender]
    results: Results = field(default_factory=Results)
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)
    samples: dict[int, list[bytes]] = field(default_factory=dict)

    def store_dir(self, contender: Contender, size: int) -> Path:
        """Where ``contender``'s dataset of ``size``-byte samples lives."""
        return self.data_dir / contender.store_name / f"{size}B"

    def scratch_dir(self, name: str) -> Path:
        """A fresh empty directory under the data directory."""
        path = self.data_dir / "scratch" / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def with_ffrecord_variant(self, variant: str) -> list[Contender]:
        """The contenders with ffrecord's ``variant`` right after ffrecord (when it runs)."""
        ffrecord = self.contender("ffrecord")
        if ffrecord is None:
            return self.contenders
        after = self.contenders.index(ffrecord) + 1
        return [*self.contenders[:after], FFRecordContender(variant), *self.contenders[after:]]

    def one_byte_samples_file(self) -> Path:
        """A file of ``config.open_samples`` one-byte samples, written once per run (the open
        and resume workloads share it; it goes with the data folder)."""
        path = self.data_dir / "shared" / f"{self.config.open_samples}-one-byte-samples.ffr"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")  # a failed write must not be reused
            ffr_format.write_tiny_samples(str(partial), self.config.open_samples)
            partial.rename(path)
        return path

    def contender(self, name: str) -> Contender | None:
        return next((c for c in self.contenders if c.name == name), None)

    def spec(self, size: int) -> SizeSpec:
        return next(s for s in self.config.datasets if s.size == size)

    def __repr__(self) -> str:
        return f"BenchContext({self.config.mode}, {self.data_dir}, {self.contenders})"
