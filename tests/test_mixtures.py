"""Mixtures of many members: weight schedules whose index map stays a pure function, members
opened on demand within the process-wide bound on files (1,000 members, 10,000 under
``ulimit -n 1024``), pickled copies that stay lazy, and every bad input's typed error.

Property cases are seeded loops: a failure names its seed (rerun alone with
``FFRECORD_PROPERTY_SEED=<seed>``)."""

from __future__ import annotations

import gc
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ffrecord.dataset import (DatasetWriter, Mixture, MixtureError, ShardedDatasetWriter, SpecError,
                              max_open_files, mixture_map, open_dataset)
from ffrecord.dataset.members import PathMember
from ffrecord.dataset.mixture_map import MixtureMap, ramp

SPEC = {"source": "int", "n": "int"}
SEEDS = [int(os.environ["FFRECORD_PROPERTY_SEED"])] if "FFRECORD_PROPERTY_SEED" in os.environ else range(60)


def write_member(path: Path, source: int, n: int, sharded: bool = False) -> Path:
    writer = ShardedDatasetWriter(path, SPEC, shardlen=7) if sharded else DatasetWriter(path, SPEC)
    with writer:
        for k in range(n):
            writer.append({"source": source, "n": k})
    return path


def open_fds(collect: bool = True) -> int:
    """The process's open descriptors, garbage collected first (a loader of an earlier test
    collected during a test would close its pipes then); ``collect=False`` in loops."""
    if collect:
        gc.collect()
    return len(os.listdir("/proc/self/fd"))


def random_mixture(seed: int) -> tuple[Mixture, list[int]]:
    """A mixture of ranges (member j's datapoint i is ``1000 * j + i``) with random weights
    (integers or fractions, some 0), a random schedule, start and period."""
    rng = np.random.default_rng(seed)
    members = int(rng.integers(1, 7))
    lengths = rng.integers(0, 300, members).tolist()

    def weights() -> list:
        w = rng.integers(0, 5, members) if rng.random() < 0.5 else rng.random(members) * (rng.random(members) < 0.8)
        w[int(rng.integers(members))] = max(w.max(), 1)  # never all 0
        w[np.asarray(lengths) == 0] = 0  # an empty member has no weight
        if not w.any():
            return [0] * members
        return w.tolist()

    first = weights()
    positions = np.cumsum(rng.integers(1, 120, int(rng.integers(0, 5)))).tolist()
    schedule = [(p, weights()) for p in positions]
    start = [int(rng.integers(0, max(1, n // 3) + 1)) if n else 0 for n in lengths]
    datasets = [range(1000 * j, 1000 * j + n) for j, n in enumerate(lengths)]
    return Mixture(datasets, first, seed=seed, period=int(rng.integers(1, 40)), start=start,
                   schedule=schedule), start


def usable(seed: int) -> bool:
    try:
        random_mixture(seed)
    except MixtureError:  # all weights 0 where members are empty: a bad input, tested below
        return False
    return True


# ---- schedules: the index map -------------------------------------------------------


@pytest.mark.parametrize("seed", [s for s in SEEDS if usable(s)])
def test_every_member_is_read_in_order_once_and_each_step_keeps_its_quotas(seed: int) -> None:
    mix, start = random_mixture(seed)
    values = np.array([mix[k] for k in range(len(mix))], np.int64)
    member, local = mix.map.route(np.arange(len(mix), dtype=np.int64))
    assert np.array_equal(values, 1000 * member + local), f"seed {seed}"
    for j in range(len(mix.members)):
        got = local[member == j]
        assert np.array_equal(got, np.arange(start[j], start[j] + len(got))), f"seed {seed}: member {j}"
    assert mix.consumed(len(mix)) == [start[j] + int((member == j).sum()) for j in range(len(mix.members))]
    bounds = mix.map.positions + [len(mix)]
    for s, segment in enumerate(mix.map.segments):  # each whole period of a step holds its quotas
        first, end = bounds[s], min(bounds[s + 1], len(mix))
        for block in range(first, end - segment.period + 1, segment.period):
            counts = np.bincount(member[block:block + segment.period], minlength=len(mix.members))
            assert np.array_equal(counts, segment.quotas), f"seed {seed}: step {s}"
    # the end: the next index would ask a member with places for a datapoint it lacks
    if len(mix) and not mix.map.wrap:
        s = int(np.searchsorted(mix.map.positions, len(mix), side="right") - 1)
        segment = mix.map.segments[s]
        after = segment.pattern[(len(mix) - mix.map.positions[s]) % segment.period]
        assert mix.consumed(len(mix))[after] == mix.map.lengths[after], f"seed {seed}"


@pytest.mark.parametrize("seed", [s for s in SEEDS[:20] if usable(s)])
def test_the_map_is_a_pure_function_of_its_description(seed: int) -> None:
    mix, _ = random_mixture(seed)
    everything = np.arange(len(mix), dtype=np.int64)
    scattered = np.random.default_rng(seed).permutation(everything)
    whole, parts = mix.map.route(everything), mix.map.route(scattered)
    assert np.array_equal(whole[0][scattered], parts[0]) and np.array_equal(whole[1][scattered], parts[1])
    described = json.loads(json.dumps(mix.identity()))
    again = MixtureMap.from_description(described, described["members"]["lengths"])
    copied = pickle.loads(pickle.dumps(mix))
    for other in (again.route(everything), copied.map.route(everything)):
        assert np.array_equal(other[0], whole[0]) and np.array_equal(other[1], whole[1]), f"seed {seed}"


def test_a_schedule_moves_the_weights_from_its_positions_on() -> None:
    a, b, c = range(0, 500), range(1000, 1500), range(2000, 2500)
    mix = Mixture([a, b, c], weights=[1, 0, 0], period=10, schedule=[(100, [0, 1, 0]), (150, [1, 1, 2])])
    sources = [mix[k] // 1000 for k in range(270)]
    assert set(sources[:100]) == {0} and set(sources[100:150]) == {1}
    assert mix.map.segments[2].period == 12  # integer weights kept exact: [3, 3, 6] places
    assert [sources[150:270].count(j) for j in range(3)] == [30, 30, 60]
    assert [mix[k] for k in range(100, 103)] == [1000, 1001, 1002]
    assert mix.consumed(150) == [100, 50, 0] and mix.locate(99) == (0, 99, None)


def test_the_end_of_a_member_under_a_schedule() -> None:
    short, long_ = range(0, 10), range(1000, 1100)
    # a member with a weight that runs out ends the mixture, whatever comes after
    ends = Mixture([short, long_], weights=[1, 1], period=2, schedule=[(100, [0, 1])])
    assert len(ends) == 20 and ends.consumed(20) == [10, 10]
    # given weight 0 before it runs out, the others go on until they run out
    goes_on = Mixture([short, long_], weights=[1, 1], period=2, schedule=[(16, [0, 1])])
    assert len(goes_on) == 16 + 92 and goes_on.consumed(len(goes_on)) == [8, 100]
    # with length=, members wrap around instead
    wraps = Mixture([short, long_], weights=[1, 1], period=2, length=300, schedule=[(16, [0, 1])])
    assert len(wraps) == 300 and [wraps[k] for k in (16 + 91, 16 + 92)] == [1099, 1000]


def test_a_ramp_is_steps_of_a_linear_ramp() -> None:
    steps = ramp(1000, 2000, [1.0, 0.0], [0.0, 1.0], 4)
    assert [p for p, _ in steps] == [1000, 1250, 1500, 1750, 2000]
    assert steps[0][1] == [0.875, 0.125] and steps[-1][1] == [0.0, 1.0]
    mix = Mixture([range(10_000), range(10_000, 20_000)], weights=[1, 0], period=8, schedule=steps)
    share = [np.mean([mix[k] >= 10_000 for k in range(p, p + 200)]) for p, _ in steps]
    assert share == sorted(share) and share[0] < 0.2 and share[-1] == 1.0


# ---- bad inputs ------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, error, words", [
    ({"weights": [1, -1]}, MixtureError, "non-negative"),
    ({"weights": [float("nan"), 1]}, MixtureError, "finite"),
    ({"weights": [0, 0]}, MixtureError, "not all 0"),
    ({"weights": [1]}, MixtureError, "one weight per member"),
    ({"weights": ["1", "1"]}, TypeError, "numbers"),
    ({"weights": [1, 1], "schedule": [(5, [1, 0]), (5, [0, 1])]}, MixtureError, "increase"),
    ({"weights": [1, 1], "schedule": [(9, [1, 0]), (5, [0, 1])]}, MixtureError, "increase"),
    ({"weights": [1, 1], "schedule": [(0, [1, 0])]}, MixtureError, "increase"),
    ({"weights": [1, 1], "schedule": [(4, [1])]}, MixtureError, "one weight per member"),
    ({"weights": [1, 1], "schedule": [(4, [0, 0])]}, MixtureError, "from position 4 on must be finite"),
    ({"weights": [1, 1], "schedule": [(4, [1, float("inf")])]}, MixtureError, "finite"),
    ({"weights": [1, 1], "schedule": [(2.5, [1, 1])]}, MixtureError, "integers"),
    ({"weights": [1, 1], "schedule": "soon"}, TypeError, "list of"),
    ({"weights": [1, 1], "schedule": [(4,)]}, TypeError, "position, weights"),
    ({"weights": [1, 1], "schedule": [(4, [0, 1])], "datasets": [[1], []]}, MixtureError, "empty"),
    ({"weights": [1, 1], "period": 0}, MixtureError, "period"),
    ({"weights": [1, 1], "start": [5, 0]}, MixtureError, "start"),
    ({"weights": [1, 1], "names": ["one"]}, MixtureError, "one name per member"),
])
def test_bad_mixtures_get_typed_errors(kwargs, error, words) -> None:
    datasets = kwargs.pop("datasets", [[1, 2], [3, 4]])
    with pytest.raises(error, match=words):
        Mixture(datasets, **kwargs)
    assert issubclass(MixtureError, ValueError)


def test_bad_lengths_and_members_of_from_paths(tmp_path: Path) -> None:
    a, b = write_member(tmp_path / "a", 0, 5), write_member(tmp_path / "b", 1, 5)
    with pytest.raises(MixtureError, match="one value per path"):
        Mixture.from_paths([a, b], [1, 1], lengths=[5])
    with pytest.raises(MixtureError, match="negative"):
        Mixture.from_paths([a, b], [1, 1], lengths=[5, -1])
    too_long = Mixture.from_paths([a, b], [1, 1], lengths=[5, 9], period=2)
    assert too_long[0] == {"source": 0, "n": 0}  # a reads; b, when it opens, is refused
    with pytest.raises(MixtureError, match="holds 5 datapoints .*lengths= says 9"):
        too_long.read(range(len(too_long)))
    with DatasetWriter(tmp_path / "other", {"label": "int", "n": "int"}) as writer:
        writer.append({"label": 1, "n": 1})
    mixed = Mixture.from_paths([a, tmp_path / "other"], [1, 1], lengths=[5, 1], period=2)
    with pytest.raises(SpecError, match="other: fields .*differ"):
        mixed.read(range(len(mixed)))
    with pytest.raises(SpecError, match="same fields"):  # measured members are checked at once
        Mixture.from_paths([a, tmp_path / "other"], [1, 1])
    with pytest.raises(FileNotFoundError):
        Mixture.from_paths([a, tmp_path / "nowhere"], [1, 1])


# ---- members opened on demand ------------------------------------------------------------


def test_from_paths_opens_nothing_up_front_and_a_pickle_stays_lazy(tmp_path: Path) -> None:
    paths = [write_member(tmp_path / f"m{j}", j, 20 + j, sharded=j % 2 == 1) for j in range(6)]
    shutil.rmtree(paths[2] / "_manifest")  # a dataset without a manifest is surveyed
    before = open_fds()
    given = Mixture.from_paths(paths, [1] * 6, lengths=[20] * 6, period=6)
    measured = Mixture.from_paths(paths, [1] * 6, period=6)  # each manifest read (or dataset surveyed)
    assert open_fds() == before and given.open_members() == 0 and measured.open_members() == 6
    assert len(given) == 6 * 20 and len(measured) > len(given)
    copy = pickle.loads(pickle.dumps(given))
    assert copy.open_members() == 0
    assert copy[0]["source"] == given.locate(0)[0] and copy.open_members() == 1
    everything = [(d["source"], d["n"]) for d in copy.read(range(len(copy)))]
    assert everything == [copy.locate(k)[:2] for k in range(len(copy))]
    assert open_fds() - before <= max_open_files()
    for mixture in (given, measured, copy):
        mixture.close()
    assert open_fds() == before


def test_a_member_copy_reads_the_version_its_original_opened(tmp_path: Path) -> None:
    path = write_member(tmp_path / "grows", 0, 10, sharded=True)
    mix = Mixture.from_paths([path], [1])
    pickled = pickle.dumps(mix)
    with ShardedDatasetWriter(path, SPEC, shardlen=7, mode="append") as writer:
        for k in range(10, 30):
            writer.append({"source": 0, "n": k})
    copy = pickle.loads(pickled)
    assert len(copy) == 10 and [d["n"] for d in copy.read(range(10))] == list(range(10))
    assert len(Mixture.from_paths([path], [1])) == 30 and open_dataset(path).version == 2
    pinned = Mixture.from_paths([path], [1], versions=[1])
    assert len(pinned) == 10


def test_a_thousand_members_hold_a_bounded_number_of_files(tmp_path: Path) -> None:
    one = write_member(tmp_path / "one", 0, 12)
    paths = [one] + [shutil.copytree(one, tmp_path / f"d{k}", copy_function=os.link) for k in range(999)]
    before, rss = open_fds(), _rss()
    mix = Mixture.from_paths(paths, [1] * 1000, lengths=[12] * 1000, period=1000)
    most, read = 0, 0
    for first in range(0, 10_000, 250):
        read += len(mix.read(range(first, first + 250)))
        most = max(most, open_fds(collect=False) - before)
    assert read == 10_000 and most <= 256 and mix.open_members() == 1000
    assert _rss() - rss < 300 << 20
    mix.close()
    assert open_fds() == before


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))


TEN_THOUSAND = r"""
import json, operator, os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from ffrecord.dataset import Mixture
from ffrecord.torch import DataLoader, StructuredDataset

root = sys.argv[1]
paths = [os.path.join(root, name) for name in sorted(os.listdir(root))]
mix = Mixture.from_paths(paths, [1] * len(paths))  # each member's manifest: one small read each
out = {"members": len(paths), "length": len(mix), "most_fds": 0}
for workers, kind in ((0, "processes"), (2, "processes")):  # threads share the process's table
    loader = DataLoader(StructuredDataset(mix, transform=operator.itemgetter("n")), batch_size=100,
                        num_workers=workers, workers=kind)
    read = 0
    for batch in loader:
        assert batch.tolist() == [0] * len(batch)
        read += len(batch)
        out["most_fds"] = max(out["most_fds"], len(os.listdir("/proc/self/fd")))
    out[f"{kind}-{workers}"] = read
print(json.dumps(out))
"""


def test_ten_thousand_members_read_under_ulimit_1024(tmp_path: Path) -> None:
    root = tmp_path / "members"
    root.mkdir()
    one = write_member(tmp_path / "one", 0, 1)
    for k in range(10_000):
        shutil.copytree(one, root / f"{k:05d}", copy_function=os.link)
    done = subprocess.run([sys.executable, "-c", TEN_THOUSAND, str(root)], capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out == {"members": 10_000, "length": 10_000, "most_fds": out["most_fds"], "processes-0": 10_000,
                   "processes-2": 10_000}
    assert out["most_fds"] <= 256
