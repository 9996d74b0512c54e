"""``Mixture``: a weighted, deterministic interleaving of datasets that is itself a dataset.

Any index maps to (member, index in member) in O(1) (O(log steps) with a weight
schedule), with no state: the order repeats a fixed pattern of ``period`` positions in
which member ``j`` takes ``quota[j]`` places, shuffled once by ``seed`` (see
``ffrecord.dataset.mixture_map``). So ``mixture[k]`` is the same in every process and every
run, and a loader resumes it at any step exactly as it resumes a single dataset.

``Mixture.from_paths`` opens nothing until a member is read: members open when first read
and their files are held in the process-wide table of ``ffrecord.dataset.open_files``, so a
mixture of any number of members holds a bounded number of files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._indices import one_index
from .errors import MixtureError, SpecError
from .members import PathMember, SameSpec
from .mixture_map import MAX_PERIOD, MixtureMap, check_period, scheduled_quotas
from .reader import Readable, Routed

__all__ = ["MAX_PERIOD", "Mixture"]


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

    ``schedule``: ``[(position, weights), ...]``, positions increasing from 1: from index
    ``position`` on, ``weights`` (each step's own pattern; every member carries on where
    the steps before left it). ``mixture_map.ramp`` makes the steps of a linear ramp.

    ``length`` None ends the mixture just before any dataset would be asked for a datapoint
    past its end (nothing repeats): under a schedule, before a member that has a weight at
    that index runs out (give a member weight 0 before it runs out to let the others go
    on). An integer ``length`` instead lets the datasets wrap around (a dataset that runs
    out starts again from its first datapoint).

    ``names``: a name for each member (``locate`` returns it, loader states record it); by
    default the path of members read from files, else None.

    >>> mix = Mixture([list("abcdef"), list("XY")], weights=[3, 1], seed=0, period=4)
    >>> len(mix), sorted("".join(mix[k] for k in range(len(mix))))
    (8, ['X', 'Y', 'a', 'b', 'c', 'd', 'e', 'f'])
    >>> later = Mixture([list("abcdef"), list("XYZ")], [1, 0], period=1, schedule=[(2, [0, 1])])
    >>> "".join(later[k] for k in range(len(later)))
    'abXYZ'
    """

    def __init__(self, datasets: Sequence[Any], weights: Sequence[float], seed: int = 0,
                 length: int | None = None, period: int = 1000, start: Sequence[int] | None = None, *,
                 schedule: Sequence[tuple[int, Sequence[float]]] | None = None,
                 names: Sequence[str | None] | None = None) -> None:
        self.members = list(datasets)
        if not self.members:
            raise MixtureError("a mixture needs at least one dataset")
        self._readable = all(isinstance(m, Readable) for m in self.members)  # else plain sequences
        self.names = _names(names, self.members)
        self._labels = None if names is None else self.names  # the user's names, recorded as given
        self._check_specs()
        quotas, positions = scheduled_quotas(weights, schedule, check_period(period), len(self.members))
        self.weights = list(weights)
        self.schedule = [(step[0], list(step[1])) for step in schedule] if schedule else []
        self.seed = seed
        self.map = MixtureMap(quotas, positions, seed, [len(d) for d in self.members], start, length)

    @classmethod
    def from_paths(cls, paths: Sequence[Any], weights: Sequence[float], *, lengths: Sequence[int] | None = None,
                   versions: Sequence[int | None] | None = None, names: Sequence[str] | None = None,
                   seed: int = 0, length: int | None = None, period: int = 1000,
                   start: Sequence[int] | None = None, schedule: Any = None, **open_options: Any) -> Mixture:
        """A mixture of the datasets at ``paths`` (local or URLs), none of whose files is
        opened here: each member opens when first read (its manifest, then the shards a read
        touches), and its files are held in the process-wide table of open files.

        Building the index map needs each member's length: ``lengths=`` gives them (then
        nothing at all is read here, and each member, when it opens, must hold at least
        that many datapoints: the mixture reads the first ``lengths[j]``); else each
        member's manifest is read now (one small file each; a dataset without one is
        surveyed: its ``spec.json`` and each field file's header). ``versions=`` pins a
        version per member (default: the latest when the member opens). ``open_options``
        as for ``open_dataset`` (``storage_options``, ``cache_dir``, ``check_data``, ...);
        ``descriptors`` is False unless given: a member's local files hold no descriptor once
        open and checked (see ``FileReader``), so that a process keeps thousands of members
        open under the bound on mapped files (``max_mapped_files()``) rather than closing
        and opening them again within ``max_open_files()``. A pickled copy (a loader worker) opens members as lazily, each on the version its
        original opened.

        >>> import tempfile, os
        >>> from ffrecord.dataset import DatasetWriter
        >>> folder = tempfile.mkdtemp()
        >>> for name in ("en", "fr"):
        ...     with DatasetWriter(os.path.join(folder, name), {"text": "utf8"}) as writer:
        ...         for k in range(3):
        ...             _ = writer.append({"text": f"{name} {k}"})
        >>> mix = Mixture.from_paths([os.path.join(folder, "en"), os.path.join(folder, "fr")],
        ...                          weights=[1, 1], lengths=[3, 3], names=["en", "fr"])
        >>> mix.open_members(), mix[1], mix.locate(1), mix.open_members()
        (0, {'text': 'en 1'}, (0, 1, 'en'), 1)
        """
        paths = list(paths)
        for given, what in ((lengths, "lengths"), (versions, "versions")):
            if given is not None and len(given) != len(paths):
                raise MixtureError(f"{what}= must hold one value per path: {len(paths)} path(s), {len(given)} {what}")
        same = SameSpec()
        open_options = {"descriptors": False, **open_options}
        members = [PathMember(path, open_options, None if lengths is None else lengths[j],
                              None if versions is None else versions[j], same)
                   for j, path in enumerate(paths)]
        return cls(members, weights, seed, length, period, start, schedule=schedule, names=names)

    def _check_specs(self) -> None:
        """Members whose spec is known without opening them must have the same fields (a
        member opened later is checked as it opens: ``members.SameSpec``)."""
        specs = [getattr(d, "spec", None) for d in self.members if not isinstance(d, PathMember) or d.is_open]
        if any(s is not None for s in specs):
            names = [None if s is None else sorted(s) for s in specs]
            if any(n != names[0] for n in names):
                raise SpecError(f"mixed datasets must have the same fields, got {names}")

    def __len__(self) -> int:
        return self.map.length

    @property
    def quotas(self) -> np.ndarray:
        """Places per period of each member (before any schedule's first step)."""
        return self.map.segments[0].quotas

    @property
    def period(self) -> int:
        return self.map.segments[0].period

    @property
    def start(self) -> np.ndarray:
        return self.map.start

    @property
    def spec(self) -> dict[str, str]:
        return getattr(self.members[0], "spec", {})

    def _route(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.map.route(idx)

    def locate(self, index: int) -> tuple[int, int, str | None]:
        """``(member, index in member, member's name)`` of mixture index ``index``, without
        reading anything.

        >>> Mixture([list("ab"), list("XY")], weights=[1, 1], names=["low", "up"]).locate(-1)
        (0, 1, 'low')
        """
        member, local = self.map.route(np.array([one_index(index, len(self))], np.int64))
        return int(member[0]), int(local[0]), self.names[int(member[0])]

    def consumed(self, position: int) -> list[int]:
        """How many datapoints of each dataset indices ``0 .. position - 1`` use (from each
        dataset's ``start`` on): what a new mixture takes as ``start`` to continue after a
        loader consumed ``position`` indices in order, e.g. with other weights or members.

        >>> mix = Mixture([list("abcdef"), list("XY")], weights=[3, 1], seed=0, period=4)
        >>> mix.consumed(4), mix.consumed(len(mix))
        ([3, 1], [6, 2])
        """
        return self.map.consumed(position)

    def open_members(self) -> int:
        """How many members are open (a member of ``from_paths`` opens when first read)."""
        return sum(not isinstance(m, PathMember) or m.is_open for m in self.members)

    def identity(self, describe: Any = None) -> dict[str, Any]:
        """What makes this mixture's order, as loader states record it (``MixtureMap.
        describe``) and each member's name, length and ``describe(member)`` (an identity of
        its data: ``ffrecord.torch._state.member_id``; "" without ``describe``).

        >>> Mixture([[1, 2], [3]], weights=[1, 1]).identity()["members"]
        {'names': [None, None], 'lengths': [2, 1], 'ids': ['', '']}
        """
        return {**self.map.describe(),
                "members": members_identity(self.members, describe, self._labels)}

    def read(self, indices: Any, mask: Any = None) -> list[Any]:
        if self._readable:
            return super().read(indices, mask)
        if mask is not None:  # plain sequences have no fields to select
            raise TypeError("a mask needs structured datasets as members")
        member, local = self._route(self._indices(indices))
        return [self.members[m][i] for m, i in zip(member.tolist(), local.tolist())]

    def __getitem__(self, key: Any) -> Any:
        if self._readable:
            return super().__getitem__(key)
        return self.read([key])[0]

    def __repr__(self) -> str:
        steps = f", schedule={len(self.schedule)} steps" if self.schedule else ""
        weights = self.weights if len(self.weights) <= 8 else f"[{len(self.weights)} weights]"
        return (f"Mixture({len(self.members)} datasets, weights={weights}{steps}, seed={self.seed}, "
                f"period={self.period}) n={len(self)}")


def _names(names: Sequence[str | None] | None, members: list[Any]) -> list[str | None]:
    if names is None:
        return [member_name(member) for member in members]
    if isinstance(names, (str, bytes)) or len(names) != len(members):
        raise MixtureError(f"names= must hold one name per member ({len(members)}), got {names!r:.80}")
    return [None if name is None else str(name) for name in names]


def members_identity(members: Sequence[Any], describe: Any = None,
                     labels: Sequence[str | None] | None = None) -> dict[str, list[Any]]:
    """Members as loader states record them: each one's name (its path's ``short_name``),
    length and ``describe(member)`` ("" without ``describe``), and the ``labels`` a mixture
    was given as ``names=``, if any (for the ledger to print; a member is known by the rest)."""
    identity = {"names": [short_name(member_name(m)) for m in members], "lengths": [len(m) for m in members],
                "ids": [describe(m) if describe is not None else "" for m in members]}
    return identity if labels is None else {**identity, "labels": list(labels)}


def member_name(member: Any) -> str | None:
    """The path a member reads (its directory), or None for one that reads no files."""
    where = getattr(member, "path", None) or getattr(member, "directory", None)
    return None if where is None else str(where)


def short_name(name: str | None) -> str | None:
    """A member's path as states record it: its last two parts (``corpus/wiki``), so that a
    dataset moved elsewhere is still the same member.

    >>> short_name("/data/corpus/wiki/"), short_name("s3://bucket/mix/en"), short_name("en")
    ('corpus/wiki', 'mix/en', 'en')
    """
    if name is None:
        return None
    return "/".join(name.rstrip("/").split("/")[-2:])

