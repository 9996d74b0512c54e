"""The index map of a ``Mixture``: mixture index → (member, index in member), a pure
function of a few numbers, with no member in sight (``ffrecord ledger`` rebuilds it from a
loader state alone).

The indices are cut into *segments* at the positions of a weight schedule (one segment
without a schedule). Within a segment, the order repeats a pattern of ``period`` places in
which member ``j`` takes ``quotas[j]`` places, shuffled once by the seed (and the segment's
number); a member's datapoints are taken in order, each segment carrying on where the
segments before it left each member. So index ``k`` maps in O(log segments): find the
segment, then the place in its pattern.

>>> plan = MixtureMap([np.array([1, 1]), np.array([0, 1])], [0, 4], seed=0, lengths=[10, 10])
>>> [tuple(int(v) for v in pair) for pair in zip(*plan.route(np.arange(7)))]
[(0, 0), (1, 0), (0, 1), (1, 1), (1, 2), (1, 3), (1, 4)]
>>> len(plan), plan.consumed(6)
(12, [2, 4])
"""

from __future__ import annotations

import bisect
import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import MixtureError

MAX_PERIOD = 1 << 16  # places in a segment's pattern at most: its memory, whatever the weights


class _Segment:
    """One segment's pattern: the member of each place, how many places of that member come
    before it (``rank``), and each member's places in order (``places[first[j]:][:quotas[j]]``)."""

    __slots__ = ("quotas", "period", "pattern", "rank", "places", "first")

    def __init__(self, quotas: np.ndarray, rng: np.random.Generator) -> None:
        self.quotas = quotas
        self.period = int(quotas.sum())
        pattern = np.repeat(np.arange(len(quotas)), quotas)
        rng.shuffle(pattern)
        self.pattern = pattern
        self.places = np.argsort(pattern, kind="stable")
        self.first = np.cumsum(quotas) - quotas
        self.rank = np.empty(self.period, np.int64)
        self.rank[self.places] = np.arange(self.period) - self.first[pattern[self.places]]

    def used(self, count: int) -> np.ndarray:
        """Datapoints of each member that the segment's first ``count`` indices take."""
        full, rest = divmod(count, self.period)
        return full * self.quotas + np.bincount(self.pattern[:rest], minlength=len(self.quotas))

    def end_of(self, member: int, available: int) -> int:
        """The segment's first index that would ask ``member`` for a datapoint past the
        ``available`` ones it has left (the member has places in the pattern)."""
        full, rest = divmod(available, int(self.quotas[member]))
        return full * self.period + int(self.places[self.first[member] + rest])


class _SideBySide:
    """Every segment's tables side by side (see ``MixtureMap.route``): its start
    (``positions``), its period, where its pattern begins among them (``first``), the
    patterns and ranks joined, and the quotas as a segment × member table."""

    __slots__ = ("positions", "periods", "first", "pattern", "rank", "quotas")

    def __init__(self, positions: Sequence[int], segments: Sequence[_Segment]) -> None:
        self.positions = np.asarray(positions, np.int64)
        self.periods = np.array([segment.period for segment in segments], np.int64)
        self.first = np.cumsum(self.periods) - self.periods
        self.pattern = np.concatenate([segment.pattern for segment in segments])
        self.rank = np.concatenate([segment.rank for segment in segments])
        self.quotas = np.stack([segment.quotas for segment in segments])


class MixtureMap:
    """Mixture index → (member, index in member) for ``quotas`` per segment (each an int64
    array, one count per member), segments starting at ``positions`` (0 first, increasing),
    patterns shuffled by ``seed``; members of ``lengths`` datapoints, read from ``start``.

    ``length`` None ends the map just before any member would be asked for a datapoint past
    its end; an integer lets members wrap around (from their first datapoint again)."""

    def __init__(self, quotas: Sequence[np.ndarray], positions: Sequence[int], seed: int,
                 lengths: Sequence[int], start: Sequence[int] | None = None, length: int | None = None) -> None:
        self.lengths = np.asarray(lengths, np.int64)
        self.start = _starts(start, self.lengths)
        self.positions = [int(p) for p in positions]
        self.seed = seed
        self.segments = [_Segment(np.asarray(q, np.int64), _rng(seed, s)) for s, q in enumerate(quotas)]
        for s, segment in enumerate(self.segments):
            empty = np.flatnonzero((segment.quotas > 0) & (self.lengths == 0))
            if len(empty):
                raise MixtureError(f"member {int(empty[0])} is empty but has a weight"
                                   + (f" from position {self.positions[s]} on" if s else ""))
        # Datapoints of each member the segments before each one take (from ``start``).
        before = np.zeros((len(self.segments), len(self.lengths)), np.int64)
        for s in range(1, len(self.segments)):
            span = self.positions[s] - self.positions[s - 1]
            before[s] = before[s - 1] + self.segments[s - 1].used(span)
        self._before = before
        self.wrap = length is not None
        self.length = operator.index(length) if self.wrap else self._natural_length()
        if self.length < 0:
            raise MixtureError(f"length must be >= 0, got {length}")

    @property
    def quotas(self) -> list[np.ndarray]:
        return [segment.quotas for segment in self.segments]

    def __len__(self) -> int:
        return self.length

    def _natural_length(self) -> int:
        """The first index at which some member with places would run out of datapoints."""
        for s, segment in enumerate(self.segments):
            left = self.lengths - self.start - self._before[s]
            span = self.positions[s + 1] - self.positions[s] if s + 1 < len(self.segments) else None
            ends = [segment.end_of(j, int(left[j])) for j in np.flatnonzero(segment.quotas).tolist()]
            ends = [end for end in ends if span is None or end < span]
            if ends:
                return self.positions[s] + min(ends)
        raise AssertionError("the last segment gives some member places")  # weights are checked

    def route(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(member, index in member) of each mixture index of ``idx`` (int64, in range): one
        gather per table from every segment's tables side by side, whatever segments the
        indices lie in (a shuffled order over a schedule meets them all; a pass per segment
        cost ~20 µs each, 0.25 ms for a batch over 11 segments)."""
        which: Any = 0 if len(self.segments) == 1 else np.searchsorted(self.positions, idx, side="right") - 1
        tables = self.__dict__.get("_side_by_side") or self._put_side_by_side()
        block, place = np.divmod(idx - tables.positions[which], tables.periods[which])
        at = tables.first[which] + place
        member = tables.pattern[at]
        local = block * tables.quotas[which, member] + tables.rank[at] + self.start[member] + self._before[which, member]
        if self.wrap:
            local %= self.lengths[member]
        return member, local

    def _put_side_by_side(self) -> _SideBySide:
        """Joins the segments' patterns and ranks; each segment then reads its own as a view
        of the joined ones, so that they are held once."""
        tables = _SideBySide(self.positions, self.segments)
        for segment, first in zip(self.segments, tables.first.tolist()):
            segment.pattern = tables.pattern[first:first + segment.period]
            segment.rank = tables.rank[first:first + segment.period]
        self._side_by_side = tables
        return tables

    def __getstate__(self) -> dict[str, Any]:
        # views pickle as copies of their own: the tables side by side are joined again
        # where needed
        return {k: v for k, v in self.__dict__.items() if k != "_side_by_side"}

    def consumed(self, position: int) -> list[int]:
        """Where each member stands once indices ``0 .. position - 1`` were taken (from each
        member's ``start`` on): what a new mixture takes as ``start`` to carry on."""
        position = operator.index(position)
        if not 0 <= position <= self.length:
            raise ValueError(f"position must lie in [0, {self.length}], got {position}")
        s = bisect.bisect_right(self.positions, position) - 1
        used = self.segments[s].used(position - self.positions[s])
        return (self.start + self._before[s] + used).tolist()

    def describe(self) -> dict[str, Any]:
        """What rebuilds this map (``from_description``), JSON: the first segment's pattern
        size and quotas, the later segments' positions and quotas, seed, start, length."""
        first = self.segments[0]
        described: dict[str, Any] = {"seed": self.seed, "period": first.period, "quotas": first.quotas.tolist()}
        if len(self.segments) > 1:
            described["schedule"] = [[p, segment.quotas.tolist()]
                                     for p, segment in zip(self.positions[1:], self.segments[1:])]
        return {**described, "start": self.start.tolist(), "length": self.length, "wrap": self.wrap}

    @classmethod
    def from_description(cls, described: dict[str, Any], lengths: Sequence[int]) -> MixtureMap:
        """The map ``describe`` described, over members of ``lengths``; ``ValueError`` for a
        description that is not one (damaged, or of members of other lengths)."""
        try:
            schedule = described.get("schedule", [])
            quotas = [_counts(described["quotas"], len(lengths))]
            positions = [0]
            for position, later in schedule:
                positions.append(_position(position))
                quotas.append(_counts(later, len(lengths)))
            _check_positions(positions[1:])
            made = cls(quotas, positions, _seed(described["seed"]), lengths, described["start"],
                       described["length"] if described["wrap"] else None)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a mixture's description ({type(exc).__name__}: {exc})") from None
        if made.length != described["length"] or made.segments[0].period != described["period"]:
            raise ValueError(f"not a mixture's description: it says {described['length']} indices, "
                             f"its members and weights make {made.length}")
        return made


def _rng(seed: int, segment: int) -> np.random.Generator:
    # the first segment keeps the pattern a mixture without a schedule always had
    return np.random.default_rng(seed if segment == 0 else [seed, segment])


def _counts(values: Any, members: int) -> np.ndarray:
    counts = np.asarray(values)
    if counts.shape != (members,) or (members and counts.dtype.kind not in "iu") or (counts < 0).any():
        raise ValueError(f"quotas must be {members} non-negative integers")
    return counts.astype(np.int64)


def _position(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise MixtureError(f"a schedule's positions must be integers, got {value!r:.40}")
    return int(value)


def _seed(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a mixture's seed must be a non-negative integer, got {value!r:.40}")
    return value


def _check_positions(positions: list[int]) -> None:
    previous = 0
    for position in positions:
        if position <= previous:
            raise MixtureError(f"a schedule's positions must increase from 1 on, got {position} after {previous}")
        previous = position


def _starts(start: Sequence[int] | None, lengths: np.ndarray) -> np.ndarray:
    if start is None:
        return np.zeros(len(lengths), np.int64)
    if isinstance(start, (str, bytes)) or len(start) != len(lengths) or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in start):
        raise TypeError(f"start must hold one integer per dataset, got {start!r:.80}")
    values = np.array([int(s) for s in start], np.int64)
    if (values < 0).any() or (values > lengths).any():
        raise MixtureError(f"start must lie within each dataset's length {lengths.tolist()}, got {values.tolist()}")
    return values


def quotas(weights: Sequence[float], period: int, where: str = "weights") -> np.ndarray:
    """Places per period for each weight: exact for integer weights (divided by their
    greatest common divisor, the period stretched to a multiple of their sum, up to
    ``MAX_PERIOD``), else rounded to ``period`` (largest remainders), at least one for every
    positive weight. ``where`` names the weights in messages (a schedule's step).

    >>> quotas([3, 1], 4).tolist(), quotas([0.7, 0.3], 10).tolist()
    ([3, 1], [7, 3])
    """
    if isinstance(weights, (str, bytes)) or not all(
            isinstance(w, numbers.Real) and not isinstance(w, bool) for w in weights):
        raise TypeError(f"{where} must be numbers, got {weights!r:.80}")
    values = np.array(weights, np.float64)
    if values.ndim != 1 or not np.isfinite(values).all() or (values < 0).any() or values.sum() <= 0:
        raise MixtureError(f"{where} must be finite, non-negative and not all 0, got {list(weights)!r:.200}")
    if all(isinstance(w, numbers.Integral) for w in weights):
        divisor = math.gcd(*[int(w) for w in weights])
        exact = [int(w) // divisor for w in weights]
        if sum(exact) <= MAX_PERIOD:
            return np.array(exact, np.int64) * min(math.ceil(period / sum(exact)), MAX_PERIOD // sum(exact))
    exact = values / values.sum() * period
    counts = np.floor(exact).astype(np.int64)
    counts[np.argsort(counts - exact, kind="stable")[: period - int(counts.sum())]] += 1
    return np.where((values > 0) & (counts == 0), 1, counts)


def check_period(period: Any) -> int:
    period = operator.index(period)
    if not 1 <= period <= MAX_PERIOD:
        raise MixtureError(f"period must lie in [1, {MAX_PERIOD}], got {period}")
    return period


def scheduled_quotas(weights: Sequence[float], schedule: Any, period: int,
                     members: int) -> tuple[list[np.ndarray], list[int]]:
    """The quotas of each segment and where each starts, from the first weights and a
    schedule ``[(position, weights), ...]`` (positions increasing from 1)."""
    if len(weights) != members:
        raise MixtureError(f"need one weight per member: {members} member(s), {len(weights)} weight(s)")
    counts, positions = [quotas(weights, period)], [0]
    if schedule is None:
        return counts, positions
    if isinstance(schedule, (str, bytes, dict)) or not isinstance(schedule, Sequence):
        raise TypeError(f"schedule must be a list of (position, weights), got {schedule!r:.80}")
    for step in schedule:
        if isinstance(step, (str, bytes)) or not isinstance(step, Sequence) or len(step) != 2:
            raise TypeError(f"a schedule's step must be (position, weights), got {step!r:.80}")
        position, later = _position(step[0]), step[1]
        where = f"the weights from position {position} on"
        if isinstance(later, (str, bytes)) or not isinstance(later, Sequence) or len(later) != members:
            raise MixtureError(f"{where} must hold one weight per member ({members}), got {later!r:.80}")
        counts.append(quotas(later, period, where))
        positions.append(position)
    _check_positions(positions[1:])
    return counts, positions


def ramp(first: int, last: int, begin: Sequence[float], end: Sequence[float], steps: int) -> list[tuple[int, list[float]]]:
    """A schedule that moves the weights from ``begin`` (at position ``first``) to ``end``
    (from position ``last`` on) in ``steps`` equal steps: a linear ramp, as steps (each
    step's weights are the ramp's at its middle; the last step is ``end``).

    >>> ramp(100, 300, [1.0, 0.0], [0.0, 1.0], 2)
    [(100, [0.75, 0.25]), (200, [0.25, 0.75]), (300, [0.0, 1.0])]
    """
    first, last, steps = operator.index(first), operator.index(last), operator.index(steps)
    if len(begin) != len(end) or steps < 1 or not 0 < first < last or (last - first) < steps:
        raise MixtureError(f"a ramp needs 0 < first < last, steps in [1, last - first] and weights of one "
                           f"length, got first={first}, last={last}, steps={steps}, {len(begin)} and {len(end)} weights")
    a, b = np.asarray(begin, np.float64), np.asarray(end, np.float64)
    out = []
    for k in range(steps):
        t = (k + 0.5) / steps
        out.append((first + (last - first) * k // steps, (a + (b - a) * t).tolist()))
    return out + [(last, [float(w) for w in end])]
