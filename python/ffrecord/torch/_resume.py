"""A DataLoader state: what it records, and what loading one means on any topology.

A state records how far the epoch's canonical order (``ffrecord.order``) was consumed
(``position``), the segment the saving loader was reading (``base``, ``step``: exact for a
loader of the same topology), what identifies the order (its description, seed, the
dataset's fingerprint) and the saving loader's topology. Loading it:

- same batch size, ``drop_last`` and world size: resumes at the exact batch;
- otherwise (another world size, rank count, per-rank batch size): the epoch continues
  from ``position`` on, split among the new ranks (elastic resume);
- a ``Mixture`` whose weights or members changed (sequential order only): each member
  continues from where the state left it (the new mixture's ``start``), from index 0 of
  the new mixture.

A state taken on an earlier version of a dataset read from its manifest, which grew since
(shards appended, fields added), finishes the epoch it interrupted over that version's
datapoints, the grown dataset's first ones (``earlier_version``): the loader pins the epoch.

Anything inconsistent or damaged is a ``StateError``, a state of another dataset, seed or
order a ``ForeignStateError`` (both ``ValueError``).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Any

import torch

from ffrecord.errors import ForeignStateError, StateError
from ffrecord.ledger import FORMAT_1 as _FORMAT_1
from ffrecord.ledger import STATE_FORMAT, count as _count, saved_share as _saved_share

from ._state import decode_generator_state

__all__ = ["STATE_FORMAT", "Resumption", "earlier_version", "interpret", "start_after"]

_TOPOLOGY = ("batch_size", "drop_last", "world_size")
_NOT_CANONICAL = ("generator", "custom")  # orders we cannot compute per position


@dataclass
class Resumption:
    """Where a loaded state makes the loader start."""

    epoch: int
    start: int  # batch of the segment
    base: int  # canonical position the segment begins at
    seed: int | None  # the order's seed, to adopt
    generator_state: torch.Tensor | None
    elastic: bool


def interpret(state: Any, mine: dict[str, Any], n: int) -> Resumption:
    """What loading ``state`` into a loader described by ``mine`` (``DataLoader._config``,
    plus ``seed_given``, ``order_identity``, ``dataset``) over ``n`` samples means."""
    if not isinstance(state, dict) or state.get("format") not in (STATE_FORMAT, _FORMAT_1):
        raise StateError(f"not a state of this DataLoader (expected format {STATE_FORMAT!r})")
    epoch, step = _count(state, "epoch"), _count(state, "step")
    if state["format"] == _FORMAT_1 and state.get("order") == "seed":  # format 1's name of it
        state = {**state, "order": "shuffle"}
    if state.get("order") != mine["order"]:
        raise ForeignStateError(f"the state was taken with another order: {state.get('order')!r} != {mine['order']!r}")
    seed = _seed(state, mine)
    generator_state = _generator_state(state) if mine["order"] == "generator" else None
    if state["format"] == _FORMAT_1:  # its fingerprint held base names and sizes only
        ours = mine["dataset"]
        mine = {**mine, "dataset": {"length": ours["length"], "files": [
            [name.split("/")[-1], size] for name, size, _ in ours.get("files", [])]}}
    if state.get("dataset") != mine["dataset"]:
        return _changed_mixture(state, mine, epoch, seed)
    if state["format"] == STATE_FORMAT and mine["order"] not in _NOT_CANONICAL:
        identity = dict(mine["order_identity"], seed=seed) if seed is not None else mine["order_identity"]
        if state.get("order_identity") != identity:
            raise ForeignStateError(f"the state was taken with another order: {state.get('order_identity')} != {identity}")
    if mine["order"] == "custom":  # a sampler of the user's: positions mean nothing to us
        _same_topology(state, mine)
        if step > mine["num_batches"]:
            raise StateError(f"damaged state: step {step} is past the epoch's {mine['num_batches']} batches")
        return Resumption(epoch, step, 0, None, None, elastic=False)
    saved = _saved_share(state, n)
    if step > saved.num_batches:
        raise StateError(f"damaged state: step {step} is past the segment's {saved.num_batches} batches")
    position = saved.consumed(step)
    if state["format"] == STATE_FORMAT and _count(state, "position") != position:
        raise StateError(f"damaged state: position {state['position']} does not follow from base "
                         f"{saved.base} and step {step} ({position})")
    if all(state.get(key) == mine[key] for key in _TOPOLOGY):
        return Resumption(epoch, step, saved.base, seed, generator_state, elastic=False)
    if mine["order"] == "generator":
        _same_topology(state, mine)
    return Resumption(epoch, 0, position, seed, None, elastic=True)


def earlier_version(theirs: Any, ours: dict[str, Any]) -> dict[str, Any] | None:
    """The version identity (``_state.versioned_identity``) in a state's dataset fingerprint
    ``theirs`` when it names an earlier version of the dataset this loader's fingerprint
    ``ours`` names (same name and share of shards, a lower version number); else None.

    >>> v = lambda k: {"length": 4 * k, "dataset": {"name": "d", "version": k, "digest": "%016x" % k}}
    >>> earlier_version(v(1), v(3))["version"], earlier_version(v(3), v(1))
    (1, None)
    """
    if not (isinstance(theirs, dict) and isinstance(theirs.get("dataset"), dict) and "dataset" in ours):
        return None
    saved, mine = theirs["dataset"], ours["dataset"]
    version = saved.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not isinstance(saved.get("digest"), str):
        return None
    same = all(saved.get(key) == mine.get(key) for key in ("name", "shards"))
    return saved if same and isinstance(mine.get("version"), int) and 1 <= version < mine["version"] else None


def _same_topology(state: dict[str, Any], mine: dict[str, Any]) -> None:
    theirs = {key: state.get(key) for key in _TOPOLOGY}
    ours = {key: mine[key] for key in _TOPOLOGY}
    if theirs != ours:
        raise ForeignStateError(f"the state was taken with another loader configuration: {theirs} != {ours}; "
                         f"a {mine['order']} order cannot resume on another topology (give the loader "
                         f"a seed= instead of a generator or sampler)")


def _seed(state: dict[str, Any], mine: dict[str, Any]) -> int | None:
    if mine["order"] not in ("shuffle", "chunks"):
        return None
    seed = state.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise StateError(f"damaged state: 'seed' must be an integer, got {seed!r:.80}")
    if mine["seed_given"] and seed != mine["seed"]:
        raise ForeignStateError(f"the state was taken with seed {seed}, this loader has seed {mine['seed']}")
    return seed


def _generator_state(state: dict[str, Any]) -> torch.Tensor:
    text = state.get("generator_state")
    if not isinstance(text, str):
        raise StateError(f"damaged state: 'generator_state' must be text, got {type(text).__name__}")
    try:
        tensor = decode_generator_state(text)
        torch.Generator().set_state(tensor)  # refused now, not at the next iter()
    except (binascii.Error, ValueError, RuntimeError) as e:
        raise StateError(f"damaged state: 'generator_state' is not a generator's state ({e})") from None
    return tensor


def _changed_mixture(state: dict[str, Any], mine: dict[str, Any], epoch: int, seed: int | None) -> Resumption:
    """A state of a mixture whose weights, schedule or members changed since: allowed in
    the mixture's own order when the new mixture starts each member where the state left it."""
    theirs, ours = state.get("dataset"), mine["dataset"]
    if not (isinstance(theirs, dict) and "mixture" in theirs and "mixture" in ours):
        raise ForeignStateError(f"the state was taken on a different dataset: {_shown(theirs)} != {_shown(ours)}")
    if mine["order"] != "sequential":
        raise ForeignStateError("the state was taken on a different mixture: a mixture whose weights or members "
                                "changed resumes only in its own order (shuffle=False)")
    expected = start_after(state, ours["mixture"]["members"])
    if ours["mixture"]["start"] != expected:
        raise ForeignStateError(f"the state was taken on a different mixture: to continue each member where "
                                f"it left off, build the new Mixture with start={expected}")
    return Resumption(epoch, 0, 0, seed, None, elastic=True)


def start_after(state: dict[str, Any], members: dict[str, list[Any]]) -> list[int]:
    """Per member (``members``: names, lengths and ids, as ``Mixture.identity`` gives them),
    where a state of a mixture left it: the member of the same name, length and id; a
    member the state does not know starts at 0."""
    mixture = (state.get("dataset") or {}).get("mixture")
    consumed = state.get("mixture_consumed")
    if not isinstance(mixture, dict) or not isinstance(consumed, list):
        raise StateError("the state holds no mixture progress")
    saved = _members(mixture.get("members"))
    if len(saved) != len(consumed) or not all(isinstance(c, int) and c >= 0 for c in consumed):
        raise StateError("damaged state: 'mixture_consumed' must hold one count per member")
    left = dict(enumerate(saved))
    start = []
    for member in _members(members):
        match = next((k for k, identity in left.items() if identity == member), None)
        if match is not None:
            del left[match]
        start.append(0 if match is None else consumed[match])
    return start


def _members(columns: Any) -> list[tuple[Any, ...]]:
    """(name, length, id) of each member of ``Mixture.identity``'s columns."""
    if not isinstance(columns, dict) or not all(isinstance(columns.get(k), list) for k in ("names", "lengths", "ids")):
        raise StateError("damaged state: a mixture's members must give their names, lengths and ids")
    rows = list(zip(columns["names"], columns["lengths"], columns["ids"]))
    if len(rows) != len(columns["lengths"]):
        raise StateError("damaged state: a mixture's members give unequal numbers of names, lengths and ids")
    return rows


def _shown(fingerprint: Any) -> str:
    """A fingerprint in a message: long lists (a dataset's files, a mixture's members) cut."""
    return f"{fingerprint!r:.400}"
