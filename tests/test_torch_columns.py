"""A structured batch read by a loader worker straight into its shared-memory slot: each
``bytes`` field crosses as one column (``_transport.BytesColumn``), values back to back, and
arrives as the list of read-only ``memoryview`` objects the default collate gives."""

from __future__ import annotations

import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ffrecord.dataset import DatasetReader, DatasetWriter  # noqa: E402
from ffrecord.torch import DataLoader, _transport  # noqa: E402
from ffrecord.torch.structured import StructuredDataset  # noqa: E402

N = 50


def image(k: int) -> bytes:
    return bytes([k % 251]) * (5 + k % 7)  # odd sizes: values back to back, not aligned


def test_pin_memory_keeps_bytes_views(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a: self.clone(), raising=False)
    sender = _transport._Sender()
    column = _transport.BytesColumn(np.frombuffer(b"abcd", np.uint8), np.array([0, 1, 4]))
    pinned = torch.utils.data._utils.pin_memory.pin_memory(
        sender.pack({"image": column, "label": torch.tensor([7, 8])}))
    assert [type(v) for v in pinned["image"]] == [memoryview] * 2
    assert [bytes(v) for v in pinned["image"]] == [b"a", b"bcd"] and pinned["label"].tolist() == [7, 8]


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("columns") / "ds")
    with DatasetWriter(path, {"image": "bytes", "label": "int", "name": "utf8"}) as writer:
        for k in range(N):
            writer.append({"image": image(k), "label": k, "name": f"n{k}"})
    return path


def address(view: memoryview) -> int:
    return np.frombuffer(view, np.uint8).ctypes.data


def test_a_column_in_the_slot_crosses_without_a_copy_and_holds_its_slot():
    sender = _transport._Sender()
    values = [b"ab", b"", b"cde"]
    buffer = sender.scratch(5).numpy()
    buffer[:] = np.frombuffer(b"".join(values), np.uint8)
    column = _transport.BytesColumn(buffer, np.array([0, 2, 2, 5]))
    packed = sender.pack({"image": column, "label": torch.tensor([1, 2, 3])})
    assert packed.skeleton["image"].offset == 0  # where it was read, not copied after it
    batch = _transport.receive(packed)
    views = batch["image"]
    assert [type(v) for v in views] == [memoryview] * 3 and all(v.readonly for v in views)
    assert [bytes(v) for v in views] == values and batch["label"].tolist() == [1, 2, 3]
    del batch
    gc.collect()
    arena = sender.arenas[0]
    assert arena.states[packed.slot] == _transport.BUSY, "a view still held must keep its slot"
    del views
    gc.collect()
    assert arena.states[packed.slot] == _transport.FREE
    outside = _transport.BytesColumn(np.frombuffer(b"xyz", np.uint8), np.array([0, 1, 3]))
    assert [bytes(v) for v in _transport.receive(sender.pack([outside]))[0]] == [b"x", b"yz"]
    assert _transport.slot_bytes(3).nbytes == 3  # outside a worker: a plain array


def test_worker_batches_are_columns_equal_to_in_process_ones(dataset_dir: str):
    """Workers forked (WorkerStart and the datasets pickle for spawn as they always did)."""
    def batches(workers: int, **options) -> list:
        loader = DataLoader(StructuredDataset(DatasetReader(dataset_dir), **options), batch_size=8,
                            shuffle=True, seed=5, num_workers=workers, timeout=60 if workers else 0)
        return list(loader)

    want, got = batches(0), batches(2)
    assert len(got) == len(want) == -(-N // 8)
    for g, w in zip(got, want):
        assert list(g) == list(w) == ["image", "label", "name"]
        assert [bytes(v) for v in g["image"]] == w["image"]
        assert all(type(v) is memoryview and v.readonly for v in g["image"])
        ends = [address(v) + len(v) for v in g["image"]]
        starts = [address(v) for v in g["image"]]
        assert starts[1:] == ends[:-1], "one column, back to back: read straight into the slot"
        assert torch.equal(g["label"], w["label"]) and g["label"].dtype == torch.int64
        assert g["name"] == w["name"]
    # A mask without bytes fields, a transform, or a user's collate_fn: batches as before.
    labels = batches(2, mask=["label"])
    assert [b["label"].tolist() for b in labels] == [b["label"].tolist() for b in want]
    transformed = batches(2, transform=lambda d: bytes(d["image"]))
    assert [list(b) for b in transformed] == [b["image"] for b in want]
    loader = DataLoader(StructuredDataset(DatasetReader(dataset_dir), mask=["image"]), batch_size=8,
                        num_workers=2, timeout=60, collate_fn=lambda points: [p["image"] for p in points])
    got = [v for batch in loader for v in batch]  # a user's collate_fn gets what it always got
    assert got == [image(k) for k in range(N)] and {type(v) for v in got} == {bytes}


def test_int_and_float_fields_cross_as_tensors_read_into_the_slot(tmp_path, monkeypatch):
    """int and float values are read by one call per field, 8 bytes each, into the slot;
    the batch equals the in-process one (int64 and float64 tensors). A file whose values
    are not 8 bytes fails as the reader fails."""
    path = str(tmp_path / "ds")
    with DatasetWriter(path, {"image": "bytes", "n": "int", "x": "float"}) as writer:
        for k in range(20):
            writer.append({"image": image(k), "n": k - 2**40, "x": k / 3})
    reads = []
    monkeypatch.setattr(StructuredDataset, "_number_column", lambda self, *a, _f=StructuredDataset._number_column:
                        reads.append(a[0]) or _f(self, *a))
    with monkeypatch.context() as worker:  # as a loader worker reads (outside a slot)
        worker.setattr(_transport, "columns_welcome", lambda dataset: True)
        got = StructuredDataset(DatasetReader(path))[list(range(0, 20, 3))]
    assert sorted(set(reads)) == ["n", "x"]
    assert got["n"].dtype == torch.int64 and got["n"].tolist() == [k - 2**40 for k in range(0, 20, 3)]
    assert got["x"].dtype == torch.float64 and got["x"].tolist() == [k / 3 for k in range(0, 20, 3)]

    def batches(workers: int) -> list:
        loader = DataLoader(StructuredDataset(DatasetReader(path)), batch_size=6, shuffle=True, seed=2,
                            num_workers=workers, timeout=60 if workers else 0)
        return list(loader)

    for g, w in zip(batches(2), batches(0), strict=True):
        assert torch.equal(g["n"], w["n"]) and torch.equal(g["x"], w["x"]) and g["x"].dtype == torch.float64
    from ffrecord import FileWriter

    with FileWriter(str(tmp_path / "ds" / "n.ffr"), 20) as bad:  # 4-byte values
        for k in range(20):
            bad.write_one(k.to_bytes(4, "little"))
    with monkeypatch.context() as worker, pytest.raises(Exception) as in_worker:
        worker.setattr(_transport, "columns_welcome", lambda dataset: True)
        StructuredDataset(DatasetReader(path))[[0, 1]]
    with pytest.raises(Exception) as in_process:
        StructuredDataset(DatasetReader(path))[[0, 1]]
    assert type(in_worker.value) is type(in_process.value) and str(in_worker.value) == str(in_process.value)

