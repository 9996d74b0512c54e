"""``Mixture``: a weighted, deterministic interleaving of datasets that is itself a dataset.

Any index maps to (member, index in member) in O(1), with no state: the order repeats a
fixed pattern of ``period`` positions in which member ``j`` takes ``quota[j]`` places,
shuffled once by ``seed``. So ``mixture[k]`` is the same in every process and every run,
and a loader resumes it at any step exactly as it resumes a single dataset.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import SpecError
from .reader import Readable, Routed


class Mixture(Routed):
    """Datasets interleaved by ``weights``: ``len`` and indexing like any dataset.

    Within each period of ``period`` consecutive indices, dataset ``j`` supplies
    ``round(period * weights[j] / sum(weights))`` of them (at least one for a positive
    weight; integer weights are kept exact, divided by their greatest common divisor and
    the period stretched to a multiple of their sum, unless that sum exceeds
    ``MAX_PERIOD``: then they are rounded as fractional weights are), in an order shuffled
    once by ``seed``. Memory is O(period), at most ``MAX_PERIOD`` places, whatever the
    weights. Each dataset is read in its own order, from datapoint ``start[j]`` on (0 by
    default; see ``consumed`` to carry a checkpoint's progress into a new mixture).

    ``length`` None ends the mixture just before any dataset would be asked for a datapoint
    past its end (nothing repeats). An integer ``length`` instead lets the datasets wrap
    around (a dataset that runs out starts again from its first datapoint).

    >>> mix = Mixture([list("abcdef"), list("XY")], weights=[3, 1], seed=0, period=4)
    >>> len(mix), sorted("".join(mix[k] for k in range(len(mix))))
    (8, ['X', 'Y', 'a', 'b', 'c', 'd', 'e', 'f'])
    """

    def __init__(self, datasets: Sequence[Any], weights: Sequence[float], seed: int = 0,
                 length: int | None = None, period: int = 1000, start: Sequence[int] | None = None) -> None:
        self.members = list(datasets)
        if not self.members or len(self.members) != len(weights):
            raise ValueError(f"need one weight per dataset and at least one dataset, got "
                             f"{len(self.members)} dataset(s) and {len(weights)} weight(s)")
        self._check_specs()
        self.weights = list(weights)
        self.seed = seed
        self.quotas = _quotas(self.weights, operator.index(period))
        self.period = int(self.quotas.sum())
        self._lengths = np.array([len(d) for d in self.members], np.int64)
        self.start = _starts(start, self._lengths)
        for j in np.flatnonzero(self.quotas).tolist():
            if self._lengths[j] == 0:
                raise ValueError(f"dataset {j} is empty but has weight {self.weights[j]}")
        pattern = np.repeat(np.arange(len(self.members)), self.quotas)
        np.random.default_rng(seed).shuffle(pattern)
        self._pattern = pattern
        self._rank = np.empty(self.period, np.int64)  # occurrences of pattern[p] before p
        self._places = []  # positions of each member in the pattern
        for j in range(len(self.members)):
            where = np.flatnonzero(pattern == j)
            self._rank[where] = np.arange(len(where))
            self._places.append(where)
        self._wrap = length is not None
        self._length = operator.index(length) if length is not None else self._natural_length()
        if self._length < 0:
            raise ValueError(f"length must be >= 0, got {length}")

    def _check_specs(self) -> None:
        specs = [getattr(d, "spec", None) for d in self.members]
        if any(s is not None for s in specs):
            names = [None if s is None else sorted(s) for s in specs]
            if any(n != names[0] for n in names):
                raise SpecError(f"mixed datasets must have the same fields, got {names}")

    def _natural_length(self) -> int:
        """The first index at which some dataset would be asked for a datapoint past its end."""
        ends = []
        for j in np.flatnonzero(self.quotas).tolist():
            full, rest = divmod(int(self._lengths[j] - self.start[j]), int(self.quotas[j]))
            ends.append(full * self.period + int(self._places[j][rest]))
        return min(ends)

    def __len__(self) -> int:
        return self._length

    @property
    def spec(self) -> dict[str, str]:
        return getattr(self.members[0], "spec", {})

    def _route(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        block, place = np.divmod(idx, self.period)
        member = self._pattern[place]
        local = block * self.quotas[member] + self._rank[place] + self.start[member]
        if self._wrap:
            local %= self._lengths[member]
        return member, local

    def consumed(self, position: int) -> list[int]:
        """How many datapoints of each dataset indices ``0 .. position - 1`` use (from each
        dataset's ``start`` on): what a new mixture takes as ``start`` to continue after a
        loader consumed ``position`` indices in order, e.g. with other weights or members.

        >>> mix = Mixture([list("abcdef"), list("XY")], weights=[3, 1], seed=0, period=4)
        >>> mix.consumed(4), mix.consumed(len(mix))
        ([3, 1], [6, 2])
        """
        position = operator.index(position)
        if not 0 <= position <= self._length:
            raise ValueError(f"position must lie in [0, {self._length}], got {position}")
        full, rest = divmod(position, self.period)
        return [int(self.start[j] + full * self.quotas[j] + np.searchsorted(self._places[j], rest))
                for j in range(len(self.members))]

    def identity(self, files_of: Any = None) -> dict[str, Any]:
        """What makes this mixture's order (weights, seed, period, start, length and each
        member's length, plus ``files_of(member)`` when given): for loader states.

        >>> Mixture([[1, 2], [3]], weights=[1, 1]).identity()["members"]
        [{'length': 2}, {'length': 1}]
        """
        members = [{"length": int(n)} for n in self._lengths]
        if files_of is not None:
            for described, member in zip(members, self.members):
                described["files"] = files_of(member)
        return {"weights": [float(w) for w in self.weights], "seed": self.seed, "period": self.period,
                "start": self.start.tolist(), "length": self._length, "wrap": self._wrap,
                "members": members}

    def read(self, indices: Any, mask: Any = None) -> list[Any]:
        if all(isinstance(m, Readable) for m in self.members):
            return super().read(indices, mask)
        if mask is not None:  # plain sequences have no fields to select
            raise TypeError("a mask needs structured datasets as members")
        member, local = self._route(self._indices(indices))
        return [self.members[m][i] for m, i in zip(member.tolist(), local.tolist())]

    def __getitem__(self, key: Any) -> Any:
        if all(isinstance(m, Readable) for m in self.members):
            return super().__getitem__(key)
        return self.read([key])[0]

    def __repr__(self) -> str:
        return (f"Mixture({len(self.members)} datasets, weights={self.weights}, seed={self.seed}, "
                f"period={self.period}) n={self._length}")


MAX_PERIOD = 1 << 16  # places in a mixture's pattern at most: its memory, whatever the weights


def _starts(start: Sequence[int] | None, lengths: np.ndarray) -> np.ndarray:
    if start is None:
        return np.zeros(len(lengths), np.int64)
    if isinstance(start, (str, bytes)) or len(start) != len(lengths) or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in start):
        raise TypeError(f"start must hold one integer per dataset, got {start!r:.80}")
    values = np.array([int(s) for s in start], np.int64)
    if (values < 0).any() or (values > lengths).any():
        raise ValueError(f"start must lie within each dataset's length {lengths.tolist()}, got {values.tolist()}")
    return values


def _quotas(weights: Sequence[float], period: int) -> np.ndarray:
    """Places per period for each weight: exact for integer weights (up to ``MAX_PERIOD``),
    else rounded to ``period`` (largest remainders), at least one for every positive weight."""
    if not 1 <= period <= MAX_PERIOD:
        raise ValueError(f"period must lie in [1, {MAX_PERIOD}], got {period}")
    if isinstance(weights, (str, bytes)) or not all(
            isinstance(w, numbers.Real) and not isinstance(w, bool) for w in weights):
        raise TypeError(f"weights must be numbers, got {weights!r:.80}")
    values = np.array(weights, np.float64)
    if values.ndim != 1 or not np.isfinite(values).all() or (values < 0).any() or values.sum() <= 0:
        raise ValueError(f"weights must be finite, non-negative and not all 0, got {list(weights)}")
    if all(isinstance(w, numbers.Integral) for w in weights):
        exact = [int(w) // math.gcd(*[int(v) for v in weights]) for w in weights]
        if sum(exact) <= MAX_PERIOD:
            return np.array(exact, np.int64) * min(math.ceil(period / sum(exact)), MAX_PERIOD // sum(exact))
    exact = values / values.sum() * period
    quotas = np.floor(exact).astype(np.int64)
    quotas[np.argsort(quotas - exact, kind="stable")[: period - int(quotas.sum())]] += 1
    return np.where((values > 0) & (quotas == 0), 1, quotas)
