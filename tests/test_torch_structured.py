"""Structured datasets in ``ffrecord.torch.DataLoader``: masks, transforms, workers, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ffrecord.dataset import (DatasetReader, DatasetWriter, MaskError, Mixture,  # noqa: E402
                              ShardedDatasetReader, ShardedDatasetWriter)
from ffrecord.torch import DataLoader, StructuredDataset  # noqa: E402
from ffrecord.torch._state import dataset_fingerprint, member_files, member_id  # noqa: E402

SPEC = {"source": "int", "n": "int", "frames": "bytes[]"}


def point(source: int, n: int) -> dict:
    return {"source": source, "n": n, "frames": [bytes([n % 256]) * (e + 1) for e in range(4)]}


def to_sample(datapoint: dict) -> dict:
    """A picklable transform: ids and the length of the frames read."""
    return {"id": datapoint["source"] * 1000 + datapoint["n"],
            "frames": sum(len(f) for f in datapoint["frames"])}


@pytest.fixture(scope="module")
def mixture(tmp_path_factory: pytest.TempPathFactory) -> Mixture:
    root = tmp_path_factory.mktemp("structured")
    with DatasetWriter(root / "plain", SPEC) as writer:
        for n in range(40):
            writer.append(point(1, n))
    with ShardedDatasetWriter(root / "sharded", SPEC, shardlen=7) as writer:
        for n in range(30):
            writer.append(point(2, n))
    return Mixture([DatasetReader(root / "plain"), ShardedDatasetReader(root / "sharded")],
                   weights=[0.6, 0.4], seed=5, period=20)


def ids(batches: list) -> list[list[int]]:
    return [batch["id"].tolist() for batch in batches]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_mid_epoch_is_exact(mixture: Mixture, num_workers: int) -> None:
    data = StructuredDataset(mixture, mask={"source": True, "n": True, "frames": range(1, 3)},
                             transform=to_sample)
    options = dict(batch_size=6, shuffle=True, seed=11, num_workers=num_workers,
                   timeout=60 if num_workers else 0)
    full = list(DataLoader(data, **options))
    assert sorted(sum(ids(full), [])) == sorted(
        d["source"] * 1000 + d["n"] for d in mixture.read(range(len(mixture)), ["source", "n"]))
    assert all((batch["frames"] == 5).all() for batch in full)  # elements 1 and 2: 2 + 3 bytes

    loader = DataLoader(data, **options)
    iterator = iter(loader)
    head = [next(iterator) for _ in range(3)]
    state = json.loads(json.dumps(loader.state_dict()))
    del iterator
    resumed = DataLoader(data, **options)
    resumed.load_state_dict(state)
    assert ids(head) + ids(list(resumed)) == ids(full)

    jumped = DataLoader(data, **options)
    jumped.set_step(4)
    assert ids(list(jumped)) == ids(full)[4:]


def test_fingerprint_covers_the_field_files(mixture: Mixture) -> None:
    members = dataset_fingerprint(StructuredDataset(mixture))["mixture"]["members"]
    files = [member_files(member) for member in mixture.members]
    assert [len(f) for f in files] == [3, 3 * 5] and all(size > 0 for f in files for _, size, _ in f)
    assert members["ids"] == [member_id(member) for member in mixture.members] and len(set(members["ids"])) == 2
    assert members["lengths"] == [40, 30] and [name.split("/")[-1] for name in members["names"]] == ["plain", "sharded"]


def test_bad_mask_fails_at_construction(mixture: Mixture) -> None:
    with pytest.raises(MaskError):
        StructuredDataset(mixture, mask=["nope"])
    single = StructuredDataset(mixture.members[0], mask=["n"])
    assert single[3] == {"n": 3} and single[[1, 0]] == [{"n": 1}, {"n": 0}]


def test_module_example() -> None:
    import doctest

    from ffrecord.torch import structured

    assert doctest.testmod(structured).failed == 0


class _HintedSource:
    """A structured source that records the prefetch hints it gets."""

    files: list[str] = []

    def __init__(self) -> None:
        self.hints: list[list[int]] = []

    def __len__(self) -> int:
        return 40

    def read(self, indices, mask=None):
        return [{"i": int(i)} for i in indices]

    def prefetch(self, indices, mask=None) -> int:
        self.hints.append([int(i) for i in indices])
        return 1


def test_the_loader_hints_a_structured_source_its_next_batch():
    """Download ahead reaches structured datasets: each batch's read is preceded by a
    prefetch of a later batch of the order."""
    from ffrecord.torch import DataLoader, StructuredDataset

    source = _HintedSource()
    loader = DataLoader(StructuredDataset(source, transform=lambda d: d["i"]), batch_size=4,
                        shuffle=True, seed=0)
    batches = [batch.tolist() for batch in loader]
    assert source.hints and source.hints == batches[1:len(source.hints) + 1]


def same(a, b) -> bool:
    """Equal batches, down to the types of their values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    return a == b


@pytest.fixture(scope="module", params=["", ":lz4", ":zstd"])
def columns(tmp_path_factory: pytest.TempPathFactory, request) -> Path:
    """Every kind of field a batch is read in columns around: bytes of varying sizes (empty
    ones too) and of one size, numbers, text, arrays; stored plain, or compressed by each
    codec."""
    import numpy as np

    path = tmp_path_factory.mktemp("columns") / "data"
    codec = request.param  # "blob" stays plain, for the batch to be read in columns around the others
    spec = {"blob": "bytes", "fixed": f"bytes{codec}", "n": f"int{codec}", "x": "float", "name": "utf8",
            "v": f"array{codec}"}
    with DatasetWriter(path, spec) as writer:
        for k in range(50):
            writer.append({"blob": bytes([k]) * (k % 7), "fixed": bytes([k, 255 - k, 7]), "n": k - 20,
                           "x": k / 3, "name": f"d{k}é", "v": np.full(2, k, np.int16)})
    return path


@pytest.mark.parametrize("mask", [None, ["blob", "n"], ["fixed"], "blob", ["fixed", "name", "v"]])
def test_0_workers_read_in_columns_give_the_batches_of_datapoints(columns: Path, mask) -> None:
    reader = DatasetReader(columns)
    data = StructuredDataset(reader, mask=mask)
    selected = [mask] if isinstance(mask, str) else mask or list(reader.spec)
    # a field of plain bytes selected: the batch is read in columns (compressed ones are not)
    assert data.reads_in_columns == any(reader.spec[name] == "bytes" for name in selected)
    for options in (dict(batch_size=7, shuffle=True, seed=3), dict(batch_size=50), dict(batch_size=1)):
        # torch's own collate takes datapoints: the loader reads them one by one
        expected = list(DataLoader(data, collate_fn=torch.utils.data.default_collate, **options))
        got = list(DataLoader(data, **options))  # every batch kept: none shares another's memory
        assert len(got) == len(expected) and all(same(g, e) for g, e in zip(got, expected)), (mask, options)


def test_0_workers_read_sharded_and_mixed_sources_in_columns(tmp_path: Path) -> None:
    spec = {"blob": "bytes", "n": "int"}
    with ShardedDatasetWriter(tmp_path / "sharded", spec, shardlen=6) as writer:
        for k in range(20):
            writer.append({"blob": b"s" * k, "n": k})
    with DatasetWriter(tmp_path / "plain", spec) as writer:
        for k in range(9):
            writer.append({"blob": b"p" * (k % 3), "n": -k})
    sharded = ShardedDatasetReader(tmp_path / "sharded")
    for source in (sharded, Mixture([sharded, DatasetReader(tmp_path / "plain")], weights=[1, 1], seed=2)):
        data = StructuredDataset(source, mask=["blob", "n"])
        assert data.reads_in_columns
        options = dict(batch_size=4, shuffle=True, seed=1)
        expected = list(DataLoader(data, collate_fn=torch.utils.data.default_collate, **options))
        assert all(same(g, e) for g, e in zip(DataLoader(data, **options), expected))


def test_a_transform_or_a_collate_of_ones_own_reads_datapoints(columns: Path) -> None:
    reader = DatasetReader(columns)
    assert not StructuredDataset(reader, transform=lambda d: d).reads_in_columns
    seen = []
    list(DataLoader(StructuredDataset(reader, mask=["blob"]), batch_size=5, collate_fn=seen.append))
    assert all(type(batch) is list and type(batch[0]) is dict for batch in seen)


def test_a_0_worker_loader_read_in_columns_frees_its_dataset_without_the_garbage_collector(columns: Path) -> None:
    import gc
    import weakref

    data = StructuredDataset(DatasetReader(columns), mask=["blob", "n"])
    assert data.reads_in_columns
    gone = weakref.ref(data)
    enabled = gc.isenabled()
    gc.disable()
    try:
        loader = DataLoader(data, batch_size=4)
        iterator = iter(loader)
        next(iterator)
        del data, loader, iterator  # reference counts alone free them (its files close at once)
        assert gone() is None
    finally:
        if enabled:
            gc.enable()
