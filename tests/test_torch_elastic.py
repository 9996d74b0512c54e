"""Resume on any topology: one canonical order, states that move between world sizes, batch
sizes and worker counts, mixtures whose weights change, per-datapoint seeds, bad states."""

from __future__ import annotations

import collections
import doctest
import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ffrecord.order  # noqa: E402
from ffrecord import FileReader, FileWriter  # noqa: E402
from ffrecord.dataset import DatasetReader, DatasetWriter, Mixture, mixture  # noqa: E402
from ffrecord.order import ChunkShuffle, FullShuffle, RankShare, Sequential, chunk_bounds, shuffle_quality  # noqa: E402
from ffrecord.torch import DataLoader, StructuredDataset, batch_seeds, mixture_start  # noqa: E402
from torch_scripts import elastic  # noqa: E402
from torch_scripts.common import TESTS_DIR, child_env, epoch_batches, make_loader, write_samples  # noqa: E402


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("elastic")
    elastic.build(path)
    return path


def through_json(state):
    return json.loads(json.dumps(state))


def flat(batches):
    return list(itertools.chain(*batches))


def padding(remaining: int, world_size: int) -> int:
    return -remaining % world_size


# -- the order itself -------------------------------------------------------------------


def test_module_examples_run():
    from ffrecord import _permutation
    from ffrecord.torch import _resume, _state, dataloader, sampler, structured

    for module in (ffrecord.order, _permutation, sampler, _state, _resume, dataloader, structured, mixture):
        assert doctest.testmod(module).failed == 0, module.__name__


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("window", [1, 3, 1000])
def test_chunk_shuffle_is_a_permutation_of_each_epoch(partitions, window):
    rng = np.random.default_rng(partitions * 31 + window)
    bounds = np.concatenate([[0], np.cumsum(rng.integers(1, 9, size=40))])
    order = ChunkShuffle(bounds, seed=5, window=window, partitions=partitions)
    n = order.n
    epochs = [order.indices(e, np.arange(n)) for e in range(2)]
    for got in epochs:
        assert sorted(got.tolist()) == list(range(n))
    assert (epochs[0] != epochs[1]).any()
    # any split of the positions gives the same answer: no state besides the position
    parts = [order.indices(1, np.arange(a, b)) for a, b in [(0, 7), (7, 50), (50, n)]]
    assert np.array_equal(np.concatenate(parts), epochs[1])


def test_chunk_shuffle_windows_hold_their_chunks():
    bounds = np.arange(0, 401, 10)  # 40 chunks of 10
    order = ChunkShuffle(bounds, seed=1, window=4)
    got = order.indices(0, np.arange(400)) // 10
    for first in range(0, 400, 40):  # each window is 40 consecutive positions over 4 chunks
        assert len(set(got[first:first + 40].tolist())) == 4
    quality = [shuffle_quality(ChunkShuffle(bounds, seed=1, window=w), 16)["distinct_chunks"] for w in (1, 4, 40)]
    assert quality[0] < 3 and quality[0] < quality[1] < quality[2]  # 16 positions span 2 or 3 chunks


def test_partitions_give_each_starting_rank_its_own_chunks():
    bounds = np.arange(0, 801, 8)  # 100 chunks of 8 samples
    order = ChunkShuffle(bounds, seed=2, window=2, partitions=4)
    chunks_of_rank = []
    for rank in range(4):
        share = RankShare(order.n, batch_size=5, rank=rank, world_size=4, drop_last=True)
        idx = order.indices(0, share.positions(0, share.samples_per_rank))
        chunks_of_rank.append(set((idx // 8).tolist()))
    for a, b in itertools.combinations(chunks_of_rank, 2):
        assert not a & b
    # another world size reads them all the same, once each
    share = [RankShare(order.n, 3, rank, 3) for rank in range(3)]
    union = flat(order.indices(0, s.positions(0, s.samples_per_rank)).tolist() for s in share)
    assert sorted(set(union)) == list(range(order.n))


def test_chunk_bounds_follow_the_rule(tmp_path):
    sizes = [[30, 30, 30, 200, 10, 10], [50, 60, 5]]  # a sample above the chunk size; two files
    for k, file_sizes in enumerate(sizes):
        with FileWriter(tmp_path / f"p{k}.ffr", len(file_sizes)) as w:
            for size in file_sizes:
                w.write_one(bytes(size))
    reader = FileReader([str(tmp_path / "p0.ffr"), str(tmp_path / "p1.ffr")])
    assert chunk_bounds(reader, 64).tolist() == [0, 2, 3, 4, 6, 7, 8, 9]
    assert chunk_bounds(reader, 10**9).tolist() == [0, 6, 9]  # never across files
    with pytest.raises(ValueError):
        chunk_bounds(reader, 0)
    for bad in ([1, 4], [0, 3, 3], [[0, 1]]):
        with pytest.raises((TypeError, ValueError)):
            ChunkShuffle(bad, seed=0, window=1)


def test_datapoint_seeds_depend_on_position_only():
    seeds = ffrecord.order.datapoint_seeds(3, 1, np.arange(1000))
    assert len(set(seeds.tolist())) == 1000
    assert ffrecord.order.datapoint_seed(3, 1, 999) == int(seeds[999])
    assert ffrecord.order.datapoint_seed(3, 2, 999) != int(seeds[999])


# -- elastic resume, simulated ranks ----------------------------------------------------


def run_segment(root, kind, world_size, batch_size, steps, state, workers=0):
    """Every rank of a topology takes ``steps`` batches (-1: the rest) after loading
    ``state``; returns the ids delivered and rank 1's (or the only rank's) state."""
    delivered, states = [], []
    for rank in range(world_size):
        it_loader = elastic.loader(root, kind, batch_size=batch_size, rank=rank, world_size=world_size,
                                   num_workers=workers)
        if state is not None:
            it_loader.load_state_dict(through_json(state))
        delivered.append(elastic.take(it_loader, steps))
        states.append(it_loader.state_dict())
    assert len({len(batches) for batches in delivered}) == 1  # equal batch counts: no DDP hang
    return flat(flat(delivered)), states[min(1, world_size - 1)]


@pytest.mark.parametrize("kind", elastic.KINDS)
def test_an_epoch_across_three_topologies_delivers_each_sample_once(root, kind):
    everything = elastic.every_id(root, kind)
    first, state = run_segment(root, kind, world_size=2, batch_size=4, steps=3, state=None)
    second, state = run_segment(root, kind, world_size=1, batch_size=5, steps=2, state=state)
    assert state["position"] == 2 * 3 * 4 + 2 * 5
    third, state = run_segment(root, kind, world_size=3, batch_size=3, steps=-1, state=state)
    delivered = first + second + third
    counts = collections.Counter(delivered)
    assert set(counts) == set(everything)
    pad = padding(len(everything) - 34, 3)
    assert len(delivered) == len(everything) + pad  # padded duplicates come from the last segment only
    assert sum(c - 1 for c in counts.values()) == pad and all(counts[i] == 1 for i in first + second)
    # the next epoch is what a run started at the last topology sees
    assert (state["epoch"], state["position"]) == (1, 0)
    fresh = [elastic.loader(root, kind, batch_size=3, rank=r, world_size=3) for r in range(3)]
    for f in fresh:
        f.set_epoch(1)
    resumed = [elastic.loader(root, kind, batch_size=3, rank=r, world_size=3) for r in range(3)]
    for r in resumed:
        r.load_state_dict(through_json(state))
    assert [elastic.take(r, -1) for r in resumed] == [elastic.take(f, -1) for f in fresh]


def test_drop_last_cuts_only_the_last_segment(root):
    def segment(world_size, batch_size, steps, state):
        batches, states = [], []
        for rank in range(world_size):
            it_loader = elastic.loader(root, "file", batch_size=batch_size, rank=rank, world_size=world_size,
                                       drop_last=True)
            if state is not None:
                it_loader.load_state_dict(state)
            batches.append(elastic.take(it_loader, steps))
            states.append(it_loader.state_dict())
        return flat(flat(batches)), states[0]

    first, state = segment(2, 4, 3, None)
    rest, state = segment(3, 4, -1, state)
    delivered = first + rest
    assert len(set(delivered)) == len(delivered)  # nothing twice
    remaining = elastic.N - 24
    assert len(rest) == (remaining // 3) // 4 * 4 * 3  # the tail cut, then each rank's partial batch


def test_same_topology_resumes_at_the_exact_batch_with_chunks(root):
    full = elastic.take(elastic.loader(root, "chunks", batch_size=4, rank=1, world_size=2), -1)
    saved = elastic.loader(root, "chunks", batch_size=4, rank=0, world_size=2)
    elastic.take(saved, 5)
    resumed = elastic.loader(root, "chunks", batch_size=4, rank=1, world_size=2, num_workers=2)
    resumed.load_state_dict(through_json(saved.state_dict()))
    assert len(resumed) == len(full)  # the whole epoch, as before (Lightning)
    assert elastic.take(resumed, -1) == full[5:]


def seeded_crop(datapoint, seed):
    """A random augmentation: a crop of a noisy vector, drawn from the datapoint's seed."""
    rng = np.random.default_rng(seed)
    start = int(rng.integers(0, 4))
    values = datapoint["n"] + rng.standard_normal(8)
    return torch.from_numpy(values[start:start + 4])


def test_augmentation_is_bitwise_identical_after_an_elastic_resume(root):
    def run(world_size, batch_size, steps, state, workers=0):
        """(canonical position, transformed tensor) of every row every rank was handed."""
        rows, saved = [], None
        for rank in range(world_size):
            it_loader = DataLoader(StructuredDataset(DatasetReader(root / "a"), transform=seeded_crop),
                                   batch_size=batch_size, shuffle=True, seed=3, rank=rank,
                                   world_size=world_size, num_workers=workers)
            if state is not None:
                it_loader.load_state_dict(state)
            share = RankShare(40, batch_size, rank, world_size, base=0 if state is None else state["position"])
            it = iter(it_loader)
            tensors = [row for batch in (itertools.islice(it, steps) if steps >= 0 else it) for row in batch]
            rows += zip(share.positions(0, len(tensors)).tolist(), tensors)
            saved = it_loader.state_dict()
        return rows, saved

    reference, _ = run(1, 8, -1, None)
    reference = dict(reference)
    head, state = run(2, 4, 3, None, workers=2)
    tail, _ = run(3, 2, -1, through_json(state))
    assert {p for p, _ in head} == set(range(24)) and {p for p, _ in tail} == set(range(24, 40))
    assert len(tail) == 16 + padding(16, 3)
    for position, tensor in head + tail:
        assert torch.equal(tensor, reference[position])
    assert not torch.equal(reference[0], seeded_crop({"n": 0}, 0))  # the seed is not the index


def test_seeds_reach_a_datasets_process(root):
    def seeds_by_index(world_size):
        seen = {}

        class Seeds(elastic.PickleDataset):
            def process(self, indices, data):
                seen.update(zip(indices, batch_seeds(indices)))
                return super().process(indices, data)

        for rank in range(world_size):
            epoch_batches(DataLoader(Seeds(str(root / "samples.ffr")), batch_size=5, shuffle=True, seed=4,
                                     rank=rank, world_size=world_size))
        return seen

    alone = seeds_by_index(1)
    assert len(alone) == elastic.N and len(set(alone.values())) == elastic.N
    assert seeds_by_index(2) == alone


# -- bad states ---------------------------------------------------------------------------


def test_damaged_states_are_value_errors(root):
    it_loader = elastic.loader(root, "file", batch_size=4, rank=0, world_size=2)
    elastic.take(it_loader, 3)
    good = through_json(it_loader.state_dict())
    fresh = elastic.loader(root, "file", batch_size=4, rank=0, world_size=2)
    fresh.load_state_dict(good)  # the untouched state loads
    damaged = {
        "negative step": {"step": -1}, "step past the end": {"step": 9}, "float step": {"step": 3.0},
        "position inconsistent": {"position": 23}, "position past the end": {"position": 10**6},
        "base past the end": {"base": 62}, "negative epoch": {"epoch": -1}, "string epoch": {"epoch": "0"},
        "bool world size": {"world_size": True}, "zero batch size": {"batch_size": 0},
        "seed as text": {"seed": "7"}, "another seed": {"seed": 8}, "another kind": {"order": "sequential"},
        "another window": {"order_identity": {**good["order_identity"], "n": 60}},
        "missing position": {"position": None}, "drop_last text": {"drop_last": "no"},
    }
    for what, change in damaged.items():
        with pytest.raises(ValueError):
            elastic.loader(root, "file", batch_size=4, rank=0, world_size=2).load_state_dict({**good, **change})
            pytest.fail(what)
    with pytest.raises(ValueError):
        fresh.load_state_dict([good])
    with pytest.raises(ValueError, match="seed"):  # another shuffle seed given explicitly
        DataLoader(elastic.dataset(root, "file"), batch_size=4, shuffle=True, seed=8, rank=0,
                   world_size=2).load_state_dict(good)


def test_generator_states_are_checked_when_loaded(tmp_path):
    path = write_samples(tmp_path / "g.ffr", 10)
    state = make_loader(path, shuffle=True, generator=torch.Generator().manual_seed(1)).state_dict()
    for bad in (None, "not base64!", "AAAA", 5):
        with pytest.raises(ValueError, match="generator_state"):
            make_loader(path, shuffle=True, generator=torch.Generator()).load_state_dict({**state, "generator_state": bad})


def test_chunk_orders_must_match(root):
    state = elastic.loader(root, "chunks", batch_size=4).state_dict()
    data = elastic.dataset(root, "chunks")
    for order in (ChunkShuffle.of(data, 120, seed=elastic.SEED, window=3, partitions=2),
                  ChunkShuffle.of(data, 240, seed=elastic.SEED, window=2, partitions=2),
                  ChunkShuffle.of(data, 120, seed=elastic.SEED + 1, window=2, partitions=2)):
        with pytest.raises(ValueError, match="another order|seed"):
            DataLoader(data, batch_size=4, order=order).load_state_dict(state)


def test_same_names_and_sizes_in_another_directory_differ(tmp_path):
    def part(directory, fill):
        (tmp_path / directory).mkdir(parents=True)
        path = tmp_path / directory / "part.ffr"
        with FileWriter(path, 20) as writer:
            for k in range(20):
                writer.write_one(bytes([fill, k]) * 4)  # 8 bytes each: equal sizes everywhere
        return str(path)

    train, val, moved = part("train", 1), part("val", 2), part("elsewhere/train", 3)
    loaders = {path: DataLoader(elastic.PickleDataset(path), batch_size=4, shuffle=True, seed=1)
               for path in (train, val, moved)}
    state = loaders[train].state_dict()
    with pytest.raises(ValueError, match="different dataset"):  # another directory name
        loaders[val].load_state_dict(state)
    with pytest.raises(ValueError, match="different dataset"):  # same names and sizes, other samples
        loaders[moved].load_state_dict(state)
    again = part("elsewhere2/train", 1)  # the same samples moved elsewhere still match
    DataLoader(elastic.PickleDataset(again), batch_size=4, shuffle=True, seed=1).load_state_dict(state)


# -- mixtures -----------------------------------------------------------------------------


def mixture_loader(root, weights, seed=1, members=("a", "b"), **kwargs):
    datasets = [DatasetReader(root / name) for name in members]
    return DataLoader(StructuredDataset(Mixture(datasets, weights=weights, seed=seed, **kwargs),
                                        transform=elastic.datapoint_id), batch_size=4, shuffle=False)


def test_a_mixture_state_names_its_weights_and_seed(root):
    saved = mixture_loader(root, [0.5, 0.5], seed=0)
    elastic.take(saved, 2)
    state = saved.state_dict()
    for weights, seed in (([0.9, 0.1], 3), ([0.9, 0.1], 0), ([0.5, 0.5], 3)):
        with pytest.raises(ValueError, match="different mixture"):
            mixture_loader(root, weights, seed=seed).load_state_dict(state)
    shuffled = elastic.loader(root, "mixture", batch_size=4).state_dict()
    changed = DataLoader(StructuredDataset(Mixture([DatasetReader(root / "a"), DatasetReader(root / "b")],
                                                   weights=[0.9, 0.1], seed=1)), batch_size=4, shuffle=True,
                         seed=elastic.SEED)
    with pytest.raises(ValueError, match="own order"):
        changed.load_state_dict(shuffled)


def test_mixture_weights_and_members_change_at_a_checkpoint(root, tmp_path):
    with DatasetWriter(tmp_path / "c", {"n": "int"}) as writer:
        for k in range(5000, 5030):
            writer.append({"n": k})
    before = mixture_loader(root, [0.5, 0.5])
    used = flat(elastic.take(before, 3))
    state = through_json(before.state_dict())
    a_used = [i for i in used if i < 1000]
    # b removed, c added, new weights: a continues after what it gave, c starts at 0
    members = [DatasetReader(root / "a"), DatasetReader(tmp_path / "c")]
    start = mixture_start(state, members)
    assert start == [len(a_used), 0]
    after = DataLoader(StructuredDataset(Mixture(members, weights=[0.25, 0.75], seed=2, start=start),
                                         transform=elastic.datapoint_id), batch_size=4)
    after.load_state_dict(state)
    rest = flat(elastic.take(after, -1))
    a_rest = [i for i in rest if i < 1000]
    assert a_rest[0] == len(a_used) and sorted(a_used + a_rest) == list(range(len(a_used) + len(a_rest)))
    assert [i for i in rest if i >= 5000][:3] == [5000, 5001, 5002]
    c_share = sum(i >= 5000 for i in rest) / len(rest)
    assert 0.6 < c_share < 0.9
    wrong = DataLoader(StructuredDataset(Mixture(members, weights=[0.25, 0.75], seed=2)), batch_size=4)
    with pytest.raises(ValueError, match=r"start=\[12, 0\]|start=\["):
        wrong.load_state_dict(state)


def test_mixture_memory_does_not_grow_with_integer_weights():
    import pickle

    big = Mixture([range(2_000_000), range(2_000_003)], weights=[2_000_000, 2_000_003])
    assert len(pickle.dumps(big)) < 200_000 and big.period <= mixture.MAX_PERIOD
    exact = Mixture([range(2_000_000), range(2_000_000)], weights=[2_000_000, 2_000_000])
    assert exact.quotas.tolist()[0] == exact.quotas.tolist()[1]
    for bad in (["0.5", "0.5"], "ab", [True, False]):
        with pytest.raises(TypeError):
            Mixture([[1], [2]], weights=bad)
    with pytest.raises(ValueError):
        Mixture([[1], [2]], weights=[1, 1], period=mixture.MAX_PERIOD + 1)


# -- torchrun: 2 ranks × 2 workers → 1 rank × 0 workers → 3 ranks × 1 worker ------------------


def torchrun(nproc, *args):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "torch_scripts.elastic", *args]
    done = subprocess.run(command, cwd=TESTS_DIR, capture_output=True, text=True, timeout=240, env=child_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_torchrun_epoch_across_topologies(tmp_path):
    elastic.build(tmp_path)
    torchrun(2, str(tmp_path), "A", "3", "2")
    done = subprocess.run([sys.executable, "-m", "torch_scripts.elastic", str(tmp_path), "B", "2", "0", "5"],
                          cwd=TESTS_DIR, capture_output=True, text=True, timeout=120, env=child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    torchrun(3, str(tmp_path), "C", "-1", "1", "3")
    for kind in elastic.KINDS:
        phases = {phase: [json.loads((tmp_path / f"{kind}.{phase}.rank{r}.json").read_text()) for r in range(n)]
                  for phase, n in (("A", 2), ("B", 1), ("C", 3))}
        for ranks in phases.values():
            assert len({len(batches) for batches in ranks}) == 1, kind  # equal batch counts
        before = flat(flat(phases["A"]) + flat(phases["B"]))
        after = flat(flat(phases["C"]))
        everything = elastic.every_id(tmp_path, kind)
        assert len(before) == 2 * 3 * 4 + 2 * 5 == len(set(before))
        counts = collections.Counter(before + after)
        assert set(counts) == set(everything), kind
        assert len(before + after) == len(everything) + padding(len(everything) - 34, 3), kind


def test_a_state_of_format_1_still_resumes_at_its_batch(root):
    full = elastic.take(elastic.loader(root, "file", batch_size=4), -1)
    path = str(root / "samples.ffr")
    size = (root / "samples.ffr").stat().st_size
    old = {"format": "ffrecord.torch.DataLoader/1", "epoch": 0, "step": 5, "seed": elastic.SEED,
           "generator_state": None, "rank": 0, "order": "seed", "batch_size": 4, "drop_last": False,
           "world_size": 1, "dataset": {"length": elastic.N, "files": [["samples.ffr", size]]}}
    resumed = DataLoader(elastic.PickleDataset(path), batch_size=4, shuffle=True)
    resumed.load_state_dict(old)
    assert elastic.take(resumed, -1) == full[5:]


def test_len_after_an_elastic_resume_adds_the_batches_left_to_those_delivered(root):
    """A trainer restoring its batch counter with the state (Lightning) stops at len(loader):
    it must be the state's step plus what the resumed loader yields, on any topology."""
    saved = elastic.loader(root, "file", batch_size=4, rank=0, world_size=2)
    elastic.take(saved, 5)
    state = through_json(saved.state_dict())
    for world_size, batch_size in ((2, 4), (3, 5)):
        resumed = elastic.loader(root, "file", batch_size=batch_size, rank=world_size - 1, world_size=world_size)
        resumed.load_state_dict(state)
        expected = len(resumed)
        left = elastic.take(resumed, -1)
        assert expected == state["step"] + len(left)
        assert len(resumed) == len(elastic.loader(root, "file", batch_size=batch_size, rank=0, world_size=world_size))
