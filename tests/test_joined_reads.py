"""A batch spread over many datasets (a mixture's members, a dataset's shards) read from its
leaves at once (``ffrecord.dataset.joined``): what it returns equals each datapoint read on
its own, for every kind of field, mask and member, through ``read`` and ``__getitems__``; a
damaged sample is reported by its file; members it cannot join are read one by one.

Property cases are seeded loops: a failure names its seed (rerun alone with
``FFRECORD_PROPERTY_SEED=<seed>``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ffrecord import CorruptFileError
from ffrecord.dataset import (DatasetReader, DatasetWriter, Mixture, ShardedDatasetWriter, max_mapped_files,
                              max_open_files, open_dataset, set_max_mapped_files, set_max_open_files)
from ffrecord.dataset import joined

SPEC = {"blob": "bytes", "text": "utf8", "n": "int", "x": "float", "tokens": "int32[]", "score": "float32",
        "vec": "uint8[3]", "z": "bytes:zstd"}
SEEDS = [int(os.environ["FFRECORD_PROPERTY_SEED"])] if "FFRECORD_PROPERTY_SEED" in os.environ else range(12)


def datapoint(member: int, k: int) -> dict:
    size = (member * 7 + k * 13) % 40  # empty values too
    return {"blob": bytes([member % 251]) * size, "text": f"m{member}-{k}" * (k % 3), "n": member * 1000 + k,
            "x": k / 4, "tokens": list(range(3 + k % 5)), "score": float(k % 7), "vec": [member % 256, k % 256, 3], "z": b"z" * (k * 50)}


def write(path: Path, member: int, n: int, sharded: bool = False) -> Path:
    writer = ShardedDatasetWriter(path, SPEC, shardlen=5) if sharded else DatasetWriter(path, SPEC)
    with writer:
        for k in range(n):
            writer.append(datapoint(member, k))
    return path


def same(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(np.array_equal(np.asarray(got[k]), np.asarray(want[k])) for k in got)


@pytest.fixture(scope="module")
def members(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("members")
    return [write(root / f"m{j}", j, 9 + j, sharded=j % 2 == 1) for j in range(6)]


MASKS = [None, ["blob", "n"], {"tokens": range(1, 3), "text": True}, ["score", "vec"], ["x"]]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_mixture_batch_equals_each_datapoint_read_alone(members, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lazily = seed % 2 == 0
    weights = rng.integers(1, 5, len(members)).tolist()
    with (Mixture.from_paths([str(p) for p in members], weights) if lazily else
          Mixture([open_dataset(p) for p in members], weights, seed=seed)) as mix:
        idx = rng.integers(0, len(mix), int(rng.integers(2, 40)))
        mask = MASKS[seed % len(MASKS)]
        batch = mix.read(idx, mask)
        for k, i in zip(idx.tolist(), batch):
            m, local, _ = mix.locate(k)
            want = datapoint(m, local)
            if mask is not None:
                chosen = mask if isinstance(mask, list) else list(mask)
                want = {f: want[f] for f in chosen}
                if isinstance(mask, dict):
                    want["tokens"] = want["tokens"][1:3]
            assert same(i, want), (seed, k)
        if mask is None:
            assert all(same(a, b) for a, b in zip(mix.__getitems__(idx), batch)), seed


def test_a_sharded_dataset_reads_a_random_batch_from_its_shards_at_once(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path / "ds", 3, 47, sharded=True)
    calls = []
    original = joined._read_pairs
    monkeypatch.setattr(joined, "_read_pairs", lambda *a: calls.append(len(np.unique(a[1]))) or original(*a))
    with open_dataset(path) as reader:
        idx = np.random.default_rng(0).permutation(47)[:30]
        assert all(same(got, datapoint(3, k)) for k, got in zip(idx.tolist(), reader.read(idx)))
    # one call for each plain field (bytes, utf8, int, float, zstd bytes), the shards' files all in it
    assert len(calls) == 5 and min(calls) > 1


def test_a_copy_learns_its_own_handles_and_a_closed_one_is_read_again(members) -> None:
    import pickle

    plain = ["blob", "text", "n", "tokens"]  # no column: read through the handles
    with Mixture.from_paths([str(p) for p in members[::2]], [1, 1, 1]) as mix:
        idx = np.arange(len(mix))
        want = mix.read(idx, plain)
        assert mix.__dict__["_leaf_handles"].known.all()
        copy = pickle.loads(pickle.dumps(mix))
        assert "_leaf_handles" not in copy.__dict__
        assert all(same(a, b) for a, b in zip(copy.read(idx, plain), want))
        before = max_open_files(), max_mapped_files()
        set_max_open_files(1)
        set_max_mapped_files(1)  # with the line above, closes every file the table holds: each kept handle
        try:
            assert all(same(a, b) for a, b in zip(mix.read(idx, plain), want))
            assert not mix.__dict__["_leaf_handles"].known.any()  # met a closed one: forgotten, read by leaves
        finally:
            set_max_open_files(before[0])
            set_max_mapped_files(before[1])


def test_a_damaged_sample_is_reported_with_its_file(tmp_path: Path) -> None:
    good, bad = write(tmp_path / "good", 0, 6), write(tmp_path / "bad", 1, 6)
    blob = bad / "blob.ffr" if (bad / "blob.ffr").exists() else next(bad.glob("**/blob*"))
    data = bytearray(blob.read_bytes())
    data[-3] ^= 0xFF  # in the last sample's bytes
    blob.write_bytes(bytes(data))
    with Mixture([DatasetReader(good), DatasetReader(bad)], [1, 1]) as mix:
        with pytest.raises(CorruptFileError, match="blob"):
            mix.read(np.arange(len(mix)), ["blob"])
        assert mix.read(np.arange(len(mix)), ["n"])  # the other fields still read


def test_members_that_decode_differently_or_hold_values_are_read_alone(members) -> None:
    upper = {"utf8": lambda view: bytes(view).decode().upper()}
    readers = [DatasetReader(members[0], decoders=upper), DatasetReader(members[2], cache_keys=["n"]),
               DatasetReader(members[4])]
    with Mixture(readers, [1, 1, 1]) as mix:
        idx = np.arange(len(mix))
        for k, got in zip(idx.tolist(), mix.read(idx)):
            m, local, _ = mix.locate(k)
            want = datapoint([0, 2, 4][m], local)
            if m == 0:
                want["text"] = want["text"].upper()
            assert same(got, want), k


def test_plain_sequences_as_members_are_read_one_by_one() -> None:
    mix = Mixture([range(10), range(100, 110)], [1, 1])
    assert mix.read([0, 1, 2, 3]) == [mix[k] for k in range(4)]


@pytest.mark.parametrize("descriptors", [True, False])
def test_reads_under_a_bound_of_two_files_stay_right(members, descriptors: bool) -> None:
    before = max_open_files(), max_mapped_files()
    set_max_open_files(2)
    set_max_mapped_files(2)
    try:
        with Mixture.from_paths([str(p) for p in members], [1] * len(members), descriptors=descriptors) as mix:
            idx = np.arange(len(mix))
            assert all(same(got, datapoint(*mix.locate(k)[:2])) for k, got in zip(idx.tolist(), mix.read(idx)))
    finally:
        set_max_open_files(before[0])
        set_max_mapped_files(before[1])


def test_members_from_paths_hold_no_descriptor_and_count_as_mapped(members) -> None:
    from ffrecord.dataset.open_files import READERS

    held, files = READERS.held, READERS.files
    with Mixture.from_paths([str(p) for p in members], [1] * len(members)) as mix:
        mix.read(np.arange(len(mix)))
        opened = READERS.files - files
        assert opened >= 2 * len(SPEC) and READERS.held == held  # every member's files, no descriptor
        assert all(r.descriptors_held == 0 for m in mix.members for r in m.file_readers())


@pytest.mark.parametrize("sharded", [False, True])
def test_datasets_without_a_manifest_open_without_descriptors_and_pickle_so(tmp_path: Path, sharded: bool) -> None:
    import pickle
    import shutil

    path = write(tmp_path / "ds", 2, 12, sharded=sharded)
    shutil.rmtree(path / "_manifest", ignore_errors=True)  # read as the files say
    with open_dataset(path, descriptors=False) as reader:
        assert not isinstance(reader, Mixture) and reader.descriptors is False
        assert all(r.descriptors_held == 0 for r in reader.file_readers())
        copy = pickle.loads(pickle.dumps(reader))
        assert copy.descriptors is False and all(r.descriptors_held == 0 for r in copy.file_readers())
        assert all(same(a, datapoint(2, k)) for k, a in enumerate(copy.read(range(12))))
        copy.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_fields_read_at_once_equal_each_field_read_alone(members, seed: int, monkeypatch) -> None:
    """A loader worker's columns (``_field_batches``): every field's stored values by one call
    through the kept handles, each into a buffer of its own, as each field read alone gives
    them; a batch meeting members that cannot be read so (shards) is read field by field."""
    rng = np.random.default_rng(seed)
    single_leaves = seed % 3 != 0
    paths = [str(p) for p in (members[::2] if single_leaves else members)]
    names = [str(n) for n in rng.permutation(["blob", "n", "x"])[:int(rng.integers(1, 4))]]  # columns' kinds
    calls = []
    original = joined._read_sized
    monkeypatch.setattr(joined, "_read_sized", lambda *a: calls.append(len(a[1])) or original(*a))
    with Mixture.from_paths(paths, rng.integers(1, 5, len(paths)).tolist()) as mix:
        idx = rng.integers(0, len(mix), int(rng.integers(1, 40)))
        buffers = []
        together = mix._field_batches(names, idx, lambda nbytes: buffers.append(np.empty(nbytes, np.uint8))
                                      or buffers[-1])
        if single_leaves:
            assert calls == [len(idx) * len(names)], seed
        alone = {name: mix._field_batch(name, idx, None) for name in names}
    assert list(together) == names and len(buffers) == len(names)
    for name, (values, sizes, common) in together.items():
        want_values, want_sizes, want_common = alone[name]
        assert values.tobytes() == want_values.tobytes() and sizes.tolist() == want_sizes.tolist(), (seed, name)
        assert common == want_common, (seed, name)
        assert any(np.shares_memory(values, b) for b in buffers), (seed, name)
    original_member = [int(p.rsplit("m", 1)[1]) for p in paths]
    located = [(original_member[m], local) for m, local, _ in map(mix.locate, idx.tolist())]
    if "blob" in names:
        values, sizes, _ = together["blob"]
        assert values.tobytes() == b"".join(datapoint(*where)["blob"] for where in located), seed
    if "n" in names:
        assert together["n"][0].view("<i8").tolist() == [datapoint(*where)["n"] for where in located], seed
