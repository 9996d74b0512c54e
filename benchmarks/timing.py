"""Repetitions, medians and pair-by-pair ratios.

Contenders of one cell run their repetitions interleaved (A1 B1 C1, B2 C2 A2, ...), so a
noisy neighbour slows every contender alike; ratios are medians of per-repetition ratios.

Example:
    >>> runs = interleaved({"a": lambda: 2.0, "b": lambda: 1.0}, reps=3)
    >>> pair_ratio(runs["a"], runs["b"])
    2.0
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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
