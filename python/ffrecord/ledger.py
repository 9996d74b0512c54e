"""The ledger of a loader's steps, from a ``ffrecord.torch.DataLoader`` state alone: which
dataset indices (and for a ``Mixture``, which member and datapoint of it) each rank's batch
of any step holds, and an audit of a set of rank states for samples delivered twice or
never. No loader, dataset or training script is needed, nor torch.

The loader draws a batch with ``ffrecord.order.batch_indices`` (a rank's canonical
positions → dataset indices) and a mixture routes an index with ``MixtureMap.route``; the
ledger calls the same two functions, rebuilt from what a state records: the order's
description (kind, length, seed), the topology (batch size, world size, ``drop_last``), the
segment of the epoch being read (``base``, ``step``), the batches skipped
(``DataLoader.skip``) and the dataset's fingerprint (a mixture's map: seed, quotas per
schedule step, start, length; each member's name, length and data id).

What needs more than a state: a chunk-aware order (``ChunkShuffle``: its chunks are not in
states), an order drawn from a ``generator`` (torch's ``randperm``, which depends on how
torch's iterators drew from it) and a sampler of the user's; ``DataLoader.indices``
answers for the first two in the training process.

>>> state = {"format": "ffrecord.torch.DataLoader/2", "epoch": 0, "step": 1, "base": 0,
...          "position": 4, "seed": None, "generator_state": None, "rank": 0,
...          "order": "sequential", "batch_size": 2, "drop_last": False, "world_size": 2,
...          "order_identity": {"kind": "sequential", "n": 6}, "dataset": {"length": 6, "files": []}}
>>> ledger = Ledger(state)
>>> [batch.tolist() for batch in ledger.indices(1)], ledger.status(0, 0), ledger.status(0, 1)
([[4, 5], [0, 1]], 'delivered', 'ahead')
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ForeignStateError, StateError
from .order import FullShuffle, RankShare, Sequential, batch_indices

STATE_FORMAT = "ffrecord.torch.DataLoader/2"
FORMAT_1 = "ffrecord.torch.DataLoader/1"  # before elastic resume: no base or position
MAX_STATE_BYTES = 256 << 20  # a state file larger than this is not a loader's state


def count(state: dict[str, Any], key: str) -> int:
    """``state[key]``, a non-negative integer (``StateError`` otherwise)."""
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StateError(f"damaged state: {key!r} must be a non-negative integer, got {value!r:.80}")
    return value


def saved_share(state: dict[str, Any], n: int, rank: int = 0) -> RankShare:
    """The segment of ``n`` samples the saving loader read, as rank ``rank`` of its world
    (rank 0's view by default: ranks move in step)."""
    batch_size, world_size = state.get("batch_size") or 1, state.get("world_size")
    drop_last = state.get("drop_last")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise StateError(f"damaged state: 'batch_size' must be a positive integer, got {batch_size!r:.80}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise StateError(f"damaged state: 'world_size' must be a positive integer, got {world_size!r:.80}")
    if not isinstance(drop_last, bool):
        raise StateError(f"damaged state: 'drop_last' must be a bool, got {drop_last!r:.80}")
    base = count(state, "base") if state.get("format") == STATE_FORMAT else 0
    if base > n:
        raise StateError(f"damaged state: base {base} is past the end of the dataset ({n})")
    return RankShare(n, batch_size, rank, world_size, drop_last, base)


def skips(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The batches a state says were skipped (``DataLoader.skip``): ``{"epoch", "step",
    "batches", "positions": [first, end] or None}`` each (none in states from before)."""
    recorded = state.get("skipped", [])
    if not isinstance(recorded, list):
        raise StateError(f"damaged state: 'skipped' must be a list, got {type(recorded).__name__}")
    for entry in recorded:
        if not isinstance(entry, dict):
            raise StateError(f"damaged state: a 'skipped' entry is not an object: {entry!r:.80}")
        for key in ("epoch", "step", "batches"):
            count(entry, key)
        span = entry.get("positions")
        if span is not None and not (isinstance(span, list) and len(span) == 2 and
                                     all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in span)
                                     and span[0] <= span[1]):
            raise StateError(f"damaged state: a 'skipped' entry's positions must be [first, end], got {span!r:.80}")
    return recorded


class Ledger:
    """What a loader state says about the batches of its epoch (and of any epoch, for
    orders that are a function of the epoch): ``indices(step)``, ``locate(indices)``,
    ``status(epoch, step)``. ``StateError`` for a state it cannot use (damaged, or of an
    order it cannot compute: see the module)."""

    def __init__(self, state: Any) -> None:
        if not isinstance(state, dict) or state.get("format") not in (STATE_FORMAT, FORMAT_1):
            raise StateError(f"not a state of ffrecord's DataLoader (expected format {STATE_FORMAT!r})")
        self.state = state
        dataset = state.get("dataset")
        if not isinstance(dataset, dict):
            raise StateError("damaged state: no 'dataset' fingerprint")
        self.n = count(dataset, "length")
        self.epoch, self.step = count(state, "epoch"), count(state, "step")
        self.kind = state.get("order")
        self.segment = saved_share(state, self.n)
        self.batch_size, self.world_size = self.segment.batch_size, self.segment.world_size
        if self.step > self.segment.num_batches:
            raise StateError(f"damaged state: step {self.step} is past the segment's {self.segment.num_batches} batches")
        if state["format"] == STATE_FORMAT and count(state, "position") != self.segment.consumed(self.step):
            raise StateError(f"damaged state: position {state['position']} does not follow from base "
                             f"{self.segment.base} and step {self.step}")
        self.skipped = skips(state)
        self.mixture, self.names = _mixture(dataset)
        self._order = self._canonical_order()

    def _canonical_order(self) -> Any:
        described = self.state.get("order_identity")
        if self.kind == "sequential":
            return Sequential(self.n)
        if self.kind == "shuffle":
            if not isinstance(described, dict) or described.get("n") != self.n or \
                    not isinstance(described.get("seed"), int) or isinstance(described.get("seed"), bool):
                raise StateError(f"damaged state: a shuffled order's 'order_identity' must give its n and seed, "
                                 f"got {described!r:.120}")
            return FullShuffle(self.n, described["seed"])
        if self.kind == "generator":
            raise StateError("a generator's order is torch's randperm, drawn as each epoch begins from a "
                             "generator the state does not say how torch used: call DataLoader.indices(epoch, "
                             "step) in the training process (or give the loader seed= instead)")
        if self.kind == "chunks":
            raise StateError("a chunk-aware order's ledger needs its chunks, which states do not hold: "
                             "call DataLoader.indices(epoch, step) in the training process")
        raise StateError(f"a state of a {self.kind!r} order (a sampler of the user's) has no ledger: "
                         "its batches are the sampler's")

    def order(self, epoch: int) -> Any:
        """The canonical order (a function of the epoch)."""
        return self._order

    def share(self, rank: int, epoch: int | None = None) -> RankShare:
        """Rank ``rank``'s share of ``epoch`` (by default the state's, from its segment)."""
        epoch = self.epoch if epoch is None else epoch
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} out of range for a world of {self.world_size}")
        base = self.segment.base if epoch == self.epoch else 0
        return RankShare(self.n, self.batch_size, rank, self.world_size, self.segment.drop_last, base)

    def indices(self, step: int, rank: int | None = None, epoch: int | None = None) -> Any:
        """The dataset indices of batch ``step`` of ``epoch`` (the state's by default, whose
        steps count from its segment's start, as ``state["step"]`` does): one array for
        ``rank``, else a list of one per rank."""
        epoch = self.epoch if epoch is None else epoch
        order = self.order(epoch)
        out = []
        for r in range(self.world_size) if rank is None else [rank]:
            share = self.share(r, epoch)
            if not 0 <= step < share.num_batches:
                raise IndexError(f"step {step} out of range: epoch {epoch} has {share.num_batches} batches"
                                 + (f" from position {share.base} on" if share.base else ""))
            out.append(batch_indices(order, epoch, share, step, step + 1)[1])
        return out[0] if rank is not None else out

    def locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(member, index in member) of each dataset index, for a mixture; None otherwise."""
        return None if self.mixture is None else self.mixture.route(np.asarray(indices, np.int64))

    def status(self, epoch: int, step: int) -> str:
        """``"delivered"``, ``"skipped"`` or ``"ahead"``: what the loader had done with
        batch ``step`` of ``epoch`` when the state was taken."""
        if epoch != self.epoch:
            return "delivered" if epoch < self.epoch else "ahead"
        first = self.share(0, epoch).consumed(step)
        for entry in self.skipped:
            span = entry["positions"]
            if entry["epoch"] == epoch and span is not None and span[0] <= first < span[1]:
                return "skipped"
        return "delivered" if step < self.step else "ahead"

    def rows(self, steps: range, rank: int | None = None, epoch: int | None = None) -> Any:
        """One dict per sample of ``steps``: step, rank, index, status (and for a mixture:
        member, member_index, name)."""
        epoch = self.epoch if epoch is None else epoch
        ranks = range(self.world_size) if rank is None else [rank]
        for step in steps:
            status = self.status(epoch, step)
            for r in ranks:
                idx = self.indices(step, r, epoch)
                located = self.locate(idx)
                for k, index in enumerate(idx.tolist()):
                    row: dict[str, Any] = {"epoch": epoch, "step": step, "rank": r, "index": index}
                    if located is not None:
                        member, local = int(located[0][k]), int(located[1][k])
                        row.update(member=member, member_index=local, name=self.names[member])
                    row["status"] = status
                    yield row


def _mixture(dataset: dict[str, Any]) -> tuple[Any, list[Any]]:
    described = dataset.get("mixture")
    if described is None:
        return None, []
    from .dataset.mixture_map import MixtureMap

    members = described.get("members") if isinstance(described, dict) else None
    if not isinstance(members, dict) or not isinstance(members.get("lengths"), list) or \
            not isinstance(members.get("names"), list) or len(members["names"]) != len(members["lengths"]):
        raise StateError("damaged state: the mixture's members must give their names and lengths")
    try:
        made = MixtureMap.from_description(described, members["lengths"])
    except ValueError as exc:
        raise StateError(f"damaged state: {exc}") from None
    if made.length != count(dataset, "length"):
        raise StateError(f"damaged state: the mixture makes {made.length} indices, the dataset has {dataset['length']}")
    labels = members.get("labels")
    return made, labels if isinstance(labels, list) and len(labels) == len(members["names"]) else members["names"]


# -- reading states ---------------------------------------------------------------------


def load(path: Any) -> dict[str, Any]:
    """The loader state in the file ``path``: JSON (``json.dump(loader.state_dict())``) or a
    torch checkpoint holding one (the one dict in it whose ``format`` is a loader's, at any
    depth). ``StateError`` when it holds none, or several."""
    with open(path, "rb") as f:
        if not os.path.isfile(path) or os.fstat(f.fileno()).st_size > MAX_STATE_BYTES:
            raise StateError(f"{path}: not a loader state (not a regular file of at most "
                             f"{MAX_STATE_BYTES >> 20} MiB)")
        raw = f.read()
    try:
        found = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        found = _torch_checkpoint(path)
    states = list(_states_in(found))
    if len(states) != 1:
        raise StateError(f"{path}: holds {len(states)} loader states; expected one")
    return states[0]


def _torch_checkpoint(path: Any) -> Any:
    try:
        import torch
    except ImportError:
        raise StateError(f"{path}: not JSON, and torch (to read a checkpoint) is not installed") from None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - whatever torch says, the file is no state
        raise StateError(f"{path}: neither JSON nor a torch checkpoint ({type(exc).__name__}: {exc})") from None


def _states_in(value: Any, depth: int = 0) -> Any:
    if depth > 8:
        return
    if isinstance(value, dict):
        if value.get("format") in (STATE_FORMAT, FORMAT_1):
            yield value
            return
        for item in value.values():
            yield from _states_in(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _states_in(item, depth + 1)


# -- a dataset named with a state -------------------------------------------------------


def check_dataset(ledger: Ledger, paths: list[Any], options: dict[str, Any] | None = None) -> None:
    """``ForeignStateError`` unless the state was taken on the dataset at ``paths`` (one
    path; a mixture's members, in order), compared as the state's fingerprint records it:
    a dataset from a manifest by name, version and digest (one small read each); a member
    by name, length and data id; a dataset of plain files by their identities."""
    from .dataset.mixture import member_name, short_name
    from .dataset.versioned import open_version

    dataset = ledger.state["dataset"]
    options = options or {}
    if ledger.mixture is not None:
        members = dataset["mixture"]["members"]
        if len(paths) != len(members["lengths"]):
            raise ForeignStateError(f"the state's mixture has {len(members['lengths'])} members; "
                                    f"{len(paths)} path(s) given")
        ids = members.get("ids") or [""] * len(paths)
        for j, path in enumerate(paths):
            reader = open_version(path, **options)
            saved_name, saved_length = members["names"][j], members["lengths"][j]
            if ids[j]:  # the data's digest: the same data wherever it lies now
                if ids[j] != reader.digest():
                    raise ForeignStateError(f"member {j}: {path} is not the data of the state's member "
                                            f"{saved_name} (digest {reader.digest()}, the state's {ids[j]})")
            elif short_name(member_name(reader)) != saved_name or len(reader) < saved_length:
                raise ForeignStateError(f"member {j}: {path} ({len(reader)} datapoints) is not the state's member "
                                        f"{saved_name} (read for {saved_length} datapoints)")
        return
    if len(paths) != 1:
        raise ForeignStateError(f"the state's dataset is not a mixture: give one path, not {len(paths)}")
    from .dataset.versioned import VersionedReader  # noqa: F401 - the kind open_version makes

    reader = open_version(paths[0], **options)
    if len(reader) != ledger.n:
        raise ForeignStateError(f"{paths[0]} holds {len(reader)} datapoints; the state's dataset held {ledger.n}")
    recorded = dataset.get("dataset")
    if isinstance(recorded, dict) and recorded.get("digest") not in (None, reader.digest()):
        raise ForeignStateError(f"{paths[0]} (version {reader.version}, digest {reader.digest()}) is not the "
                                f"dataset of the state ({recorded.get('name')}, version {recorded.get('version')}, "
                                f"digest {recorded.get('digest')})")


# -- auditing ---------------------------------------------------------------------------


@dataclass
class Audit:
    """What an audit of a set of rank states found, in canonical positions of the states'
    epoch (a permutation of the dataset's indices: a position delivered twice is a sample
    delivered twice). ``earlier``: positions of the epoch read before the states' segment
    (by an earlier run, on another topology), which the states count but cannot show."""

    epoch: int
    step: int
    num_batches: int
    n: int
    base: int
    once: int = 0
    twice: list[int] = field(default_factory=list)
    skipped: int = 0
    never: list[tuple[int, int]] = field(default_factory=list)  # [first, end) never delivered
    ahead: int = 0
    repeated_in_members: int | None = None  # a mixture with length=: member datapoints taken again

    @property
    def clean(self) -> bool:
        """No sample delivered twice, none passed over (skips aside, which were asked for)."""
        return not self.twice and not self.never

    def lines(self, ledger: Ledger) -> list[str]:
        finished = self.step >= self.num_batches
        out = [f"epoch {self.epoch}: step {self.step} of {self.num_batches}, world size {ledger.world_size}, "
               f"batch size {ledger.batch_size}; {self.n} samples"]
        if self.base:
            out.append(f"positions 0..{self.base - 1}: read before these states' segment (an earlier run of the "
                       "epoch): not checkable from these states")
        out.append(f"delivered once: {self.once}")
        out.append(f"delivered twice: {len(self.twice)}" + _examples(ledger, self.twice))
        out.append(f"skipped (DataLoader.skip): {self.skipped}")
        never = sum(b - a for a, b in self.never)
        starts = [a for a, _ in self.never[:10]]
        out.append(f"never delivered: {never}" + _examples(ledger, starts, "first of each run"))
        if not finished:
            out.append(f"ahead (the rest of the epoch): {self.ahead}")
        if self.repeated_in_members:
            out.append(f"member datapoints taken again (the mixture wraps its members, length=): "
                       f"{self.repeated_in_members}")
        return out


def _examples(ledger: Ledger, positions: list[int], what: str = "") -> str:
    if not positions:
        return ""
    shown = positions[:10]
    indices = ledger.order(ledger.epoch).indices(ledger.epoch, np.asarray(shown, np.int64))
    located = ledger.locate(indices)
    if located is None:
        text = ", ".join(f"position {p} → index {i}" for p, i in zip(shown, indices.tolist()))
    else:
        text = ", ".join(f"position {p} → {ledger.names[m] or f'member {m}'}[{i}]"
                         for p, m, i in zip(shown, located[0].tolist(), located[1].tolist()))
    more = f", … ({len(positions) - len(shown)} more)" if len(positions) > len(shown) else ""
    return f" ({what + ': ' if what else ''}{text}{more})"


_SAME = ("format", "epoch", "step", "base", "position", "seed", "order", "batch_size", "drop_last",
         "world_size", "order_identity", "dataset", "generator_state")


def audit(states: list[dict[str, Any]]) -> tuple[Ledger, Audit]:
    """Checks the states of every rank of a job, taken at one point (a checkpoint), for
    samples of their epoch delivered twice or never: see ``Audit``. ``ForeignStateError``
    when they are not one job's states at one point (another dataset, order, topology,
    step or epoch; a rank missing or given twice)."""
    if not states:
        raise StateError("no state to audit")
    ledger = Ledger(states[0])
    ranks = []
    for k, state in enumerate(states):
        Ledger(state)  # each one valid
        for key in _SAME:
            if state.get(key) != states[0].get(key):
                raise ForeignStateError(f"state {k} differs from state 0 in {key!r} ({state.get(key)!r:.120} != "
                                        f"{states[0].get(key)!r:.120}): not one job's states at one point")
        ranks.append(state.get("rank"))
    if sorted(ranks) != list(range(ledger.world_size)):
        raise ForeignStateError(f"the states are of ranks {sorted(ranks)}; a world of {ledger.world_size} "
                                f"needs each of 0..{ledger.world_size - 1} once")
    return ledger, _positions_audit(ledger, [skips(s) for s in states])


def _positions_audit(ledger: Ledger, skipped_by_rank: list[list[dict[str, Any]]]) -> Audit:
    """Every rank at step ``s`` of the segment from ``base``: the ranks' batches filled the
    segment's *slots* ``[0, s·B·W)`` (B: batch size, W: ranks; fewer when the segment ends),
    slot ``o`` holding offset ``o`` of the segment, or ``o - remaining`` for the few slots
    past its end (padding, without ``drop_last``); a skipped batch's slots delivered
    nothing. Skips recorded before the segment (an earlier run) lie below ``base``."""
    segment, step = ledger.segment, ledger.step
    remaining, per_step = ledger.n - segment.base, ledger.batch_size * ledger.world_size
    reached = min(step * ledger.batch_size, segment.samples_per_rank) * ledger.world_size
    slots, before = [], 0
    for entries in skipped_by_rank:
        for entry in entries:
            if entry["epoch"] != ledger.epoch or entry["positions"] is None:
                continue
            first, end = entry["positions"]
            if first < segment.base:
                before += min(end, segment.base) - first
            else:
                slots.append((entry["step"] * per_step, (entry["step"] + entry["batches"]) * per_step))
    skipped = _clip(_union(slots), 0, reached)
    unwrapped = min(reached, remaining)
    unwrapped_skipped = _measure(_clip(skipped, 0, unwrapped))
    # the slots past the segment's end: under one per rank
    wrapped = [o - remaining for o in range(remaining, reached) if not _inside(skipped, o)]
    twice = [o for o in wrapped if not _inside(skipped, o)]
    refilled = len(wrapped) - len(twice)  # skipped, then delivered by the padding
    report = Audit(ledger.epoch, step, segment.num_batches, ledger.n, segment.base)
    report.once = (segment.base - before) + (unwrapped - unwrapped_skipped) + refilled - len(twice)
    report.twice = [segment.base + o for o in twice]
    report.skipped = before + unwrapped_skipped - refilled
    if step >= segment.num_batches:
        report.never = [(segment.base + unwrapped, ledger.n)] if unwrapped < remaining else []
    else:
        report.ahead = remaining - unwrapped
    if ledger.mixture is not None and ledger.mixture.wrap and ledger.kind == "sequential":
        used = np.asarray(ledger.mixture.consumed(segment.consumed(step)))
        report.repeated_in_members = int(np.maximum(used - ledger.mixture.lengths, 0).sum())
    return report


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _clip(spans: list[tuple[int, int]], low: int, high: int) -> list[tuple[int, int]]:
    return [(max(a, low), min(b, high)) for a, b in spans if min(b, high) > max(a, low)]


def _measure(spans: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in spans)


def _inside(spans: list[tuple[int, int]], offset: int) -> bool:
    return any(a <= offset < b for a, b in spans)
