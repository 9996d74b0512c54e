"""Measuring and keeping figures: repetitions, medians, pair-by-pair ratios, the cells of a run.

Contenders of one cell run their repetitions interleaved (A1 B1 C1, B2 C2 A2, ...), so a
noisy neighbour slows every contender alike; ratios are medians of per-repetition ratios.
A ``Cell`` keeps one measured configuration, ``Results`` every cell of a run.

Example:
    >>> runs = interleaved({"a": lambda: 2.0, "b": lambda: 1.0}, reps=3)
    >>> pair_ratio(runs["a"], runs["b"])
    2.0
    >>> cell = Cell("warm_read", {"sample_size": 1024}, "samples/s", {"ffrecord": [4.0, 6.0, 5.0],
    ...             "python": [1.0, 2.0, 1.0]}, bytes_per_unit=1024)
    >>> cell.median("ffrecord"), cell.ratios()["ffrecord/python"]
    (5.0, 4.0)
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def interleaved(runners: dict[str, Callable[[], float]], reps: int) -> dict[str, list[float]]:
    """Runs every runner ``reps`` times, rotating the order each round; returns the values."""
    names = list(runners)
    values: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        shift = rep % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            values[name].append(runners[name]())
    return values


def pair_ratio(a: list[float], b: list[float]) -> float:
    """Median over repetitions of a[i] / b[i] (b values of 0 are skipped)."""
    ratios = [x / y for x, y in zip(a, b) if y]
    return statistics.median(ratios) if ratios else float("nan")


def rate(work: Callable[[], int], min_seconds: float) -> float:
    """Calls ``work`` (returning units done) until ``min_seconds`` pass; returns units/s."""
    done = 0
    start = time.perf_counter()
    while True:
        done += work()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return done / elapsed


PRIMARY = "ffrecord"  # ratios are "how many times better this project is than X"


@dataclass
class Cell:
    """One measured configuration: per contender, the value of every repetition."""

    workload: str
    params: dict
    unit: str
    values: dict[str, list[float]]
    higher_is_better: bool = True
    #: bytes per unit of ``unit`` (the sample size for samples/s), to report GB/s beside it.
    bytes_per_unit: int | None = None
    notes: dict = field(default_factory=dict)

    def median(self, contender: str) -> float:
        return statistics.median(self.values[contender])

    def gb_per_s(self, contender: str) -> float | None:
        if self.bytes_per_unit is None:
            return None
        return self.median(contender) * self.bytes_per_unit / 1e9

    def ratios(self) -> dict[str, float]:
        """Pair-by-pair ratios of every ffrecord variant against every other contender."""
        ours = [c for c in self.values if c.startswith(PRIMARY)]
        theirs = [c for c in self.values if not c.startswith(PRIMARY)]
        out = {}
        for a in ours:
            for b in theirs:
                pair = (self.values[a], self.values[b])
                r = pair_ratio(*pair) if self.higher_is_better else pair_ratio(*pair[::-1])
                out[f"{a}/{b}"] = r
        return out

    def to_json(self) -> dict:
        return {
            "workload": self.workload,
            "params": self.params,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "contenders": {
                name: {
                    "reps": reps,
                    "median": self.median(name),
                    **({"gb_per_s": self.gb_per_s(name)} if self.bytes_per_unit else {}),
                }
                for name, reps in self.values.items()
            },
            "ratios": self.ratios(),
            "notes": self.notes,
        }

    def __repr__(self) -> str:
        return f"Cell({self.workload}, {self.params}, {sorted(self.values)})"


@dataclass
class Results:
    """Everything one run measured, in the order it was measured."""

    cells: list[Cell] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: workload name -> traceback of a workload that failed
    errors: dict[str, str] = field(default_factory=dict)

    def add(self, cell: Cell) -> Cell:
        self.cells.append(cell)
        return cell

    def find(self, workload: str, **params: object) -> Cell | None:
        """The first cell of ``workload`` whose params include ``params``."""
        for cell in self.cells:
            if cell.workload == workload and all(cell.params.get(k) == v for k, v in params.items()):
                return cell
        return None

    def __repr__(self) -> str:
        return f"Results({len(self.cells)} cells, skipped={sorted(self.skipped)})"


def finite(x: float | None) -> bool:
    """True for a real, finite number."""
    return x is not None and math.isfinite(x)
