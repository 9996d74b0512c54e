"""State shared by the workloads of one run: configuration, data, contenders, results."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .config import BenchConfig, SizeSpec
from .contenders import Contender
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

    def with_variants(self, variants: tuple[Contender, ...]) -> list[Contender]:
        """The contenders with ``variants`` (of ffrecord) right after the first one."""
        return [*self.contenders[:1], *variants, *self.contenders[1:]]

    def contender(self, name: str) -> Contender | None:
        return next((c for c in self.contenders if c.name == name), None)

    def spec(self, size: int) -> SizeSpec:
        return next(s for s in self.config.datasets if s.size == size)

    def __repr__(self) -> str:
        return f"BenchContext({self.config.mode}, {self.data_dir}, {self.contenders})"
