"""Batches built from the one batch buffer equal torch's default_collate, or fall back to it."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import default_collate as torch_collate  # noqa: E402
from torch.utils.data._utils import collate as torch_collate_module  # noqa: E402

from ffrecord import FileReader, FileWriter  # noqa: E402
from ffrecord.torch import DataLoader, Dataset  # noqa: E402
from ffrecord.torch.collate import default_collate  # noqa: E402

N = 48


def write(path, sizes) -> str:
    rng = np.random.default_rng(len(sizes))
    with FileWriter(path, len(sizes)) as w:
        for size in sizes:
            w.write_one(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    return str(path)


@pytest.fixture
def fixed(tmp_path) -> str:
    return write(tmp_path / "fixed.ffr", [64] * N)


@pytest.fixture
def varying(tmp_path) -> str:
    return write(tmp_path / "varying.ffr", [16 + i % 5 for i in range(N)])


class Float32s(Dataset):
    def process(self, indices, data):
        return [np.frombuffer(d, np.float32).reshape(4, 4) for d in data]


class Pairs(Dataset):
    def process(self, indices, data):
        return [(d, i) for d, i in zip(data, indices)]


class Int16s(Dataset):
    def process(self, indices, data):
        return [d.view(np.int16) for d in data]


class KeepsFirst(Dataset):
    """Hands on the list it was given, with one sample replaced."""

    def process(self, indices, data):
        data[0] = np.zeros_like(data[0])
        return data


class Reshaped(Dataset):
    """Hands on its list after changing one sample's shape in place (torch refuses it)."""

    def process(self, indices, data):
        data[1].shape = (8, 8)
        return data


class Retyped(Dataset):
    """Hands on its list after changing every sample's dtype in place."""

    def process(self, indices, data):
        for d in data:
            d.dtype = np.int8
        return data


class WholeBatch(Dataset):
    def process_batch(self, indices, buffer, offsets):
        return buffer.view(np.float64).reshape(len(indices), 2, 4)


class CachedTable(Dataset):
    """Returns an array that is not the batch's memory: it must be copied, not aliased."""

    table = np.arange(N * 3, dtype=np.float32).reshape(N, 3)

    def process_batch(self, indices, buffer, offsets):
        return self.table[: len(indices)]


def expected(dataset: Dataset, indices: list[int]):
    """What torch's default_collate makes of the samples, read without ffrecord's collate."""
    return torch_collate(dataset.process(indices, FileReader(dataset.fnames).read(indices)))


def assert_same(got, want) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.numpy().tobytes() == want.numpy().tobytes()  # bitwise: random floats hold NaNs
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
    else:
        assert got == want


def same_outcome(ours, theirs) -> None:
    """Both calls return the same batch, or raise the same error."""
    try:
        want = theirs()
    except Exception as e:  # noqa: BLE001 - whatever torch raises, ours must raise too
        with pytest.raises(type(e)) as got:
            ours()
        assert str(got.value) == str(e)
        return
    assert_same(ours(), want)


@pytest.mark.parametrize("dataset_type",
                         [Dataset, Float32s, Pairs, Int16s, KeepsFirst, Reshaped, Retyped])
def test_collate_equals_torch_default_collate(fixed, varying, dataset_type):
    indices = [7, 3, 3, 40, 0]
    for path in (fixed, varying):
        same_outcome(lambda: default_collate(dataset_type(path)[indices]),
                     lambda: expected(dataset_type(path), indices))


def test_rows_of_the_buffer_become_the_batch_without_copy(fixed):
    dataset = Dataset(fixed)
    samples = dataset[[1, 2, 3]]
    batch = default_collate(samples)
    assert batch.data_ptr() == samples[0].ctypes.data
    assert torch.equal(batch, torch_collate(samples))


def test_unequal_sizes_fall_back_to_torch(varying):
    dataset = Dataset(varying)
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate(dataset[[0, 1, 2]])
    assert_same(default_collate(dataset[[0, 5]]), torch_collate(FileReader(varying).read([0, 5])))


def test_process_batch_array_is_the_batch(fixed):
    dataset = WholeBatch(fixed)
    indices = [5, 9, 1]
    got = default_collate(dataset[indices])
    buffer, offsets = FileReader(fixed).read_batch(indices)
    want = torch_collate(WholeBatch(fixed).process_batch(indices, buffer, offsets))
    assert_same(got, want)
    assert got.shape == (3, 2, 4) and got.dtype == torch.float64


def test_array_outside_the_batch_is_copied(fixed):
    got = default_collate(CachedTable(fixed)[[0, 1]])
    assert_same(got, torch_collate(CachedTable.table[:2]))
    got += 1
    assert CachedTable.table[0, 0] == 0


@pytest.mark.parametrize("batch", [
    [1, 2], [1.5, 2.5], ["a", "b"], [(np.ones(2), 1), (np.zeros(2), 2)],
    [np.float32(1), np.float32(2)], np.arange(4), np.ones((2, 3), ">f4"),
    [np.array(["a"]), np.array(["b"])], [np.ones(2, np.uint16), np.ones(2, np.uint16)],
    [np.ones((2, 2))[:, 0], np.ones((2, 2))[:, 1]], [np.ones(2, np.float16), np.ones(2)],
])
def test_other_batches_equal_torch(batch):
    same_outcome(lambda: default_collate(batch), lambda: torch_collate(batch))


def test_user_registered_array_collate_is_respected(monkeypatch):
    table = dict(torch_collate_module.default_collate_fn_map)
    table[np.ndarray] = lambda batch, *, collate_fn_map: "custom"
    monkeypatch.setattr(torch_collate_module, "default_collate_fn_map", table)
    assert default_collate([np.ones(3), np.ones(3)]) == "custom"


def collate_lists(batch):
    return [type(batch).__name__, [s.tobytes() for s in batch]]


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_batches_equal_torch_and_honour_custom_collate(fixed, workers):
    kwargs = dict(batch_size=10, shuffle=True, seed=3, num_workers=workers)
    reader = FileReader(fixed)
    order = [list(b) for b in DataLoader(list(range(N)), **kwargs)]
    batches = list(DataLoader(Dataset(fixed), **kwargs))
    assert len(batches) == len(order)
    for got, indices in zip(batches, order):
        assert_same(got, torch_collate(reader.read(indices)))
    custom = list(DataLoader(Dataset(fixed), collate_fn=collate_lists, **kwargs))
    assert custom == [["list", [s.tobytes() for s in reader.read(i)]] for i in order]
    whole = list(DataLoader(WholeBatch(fixed), **kwargs))
    assert [b.shape[1:] for b in whole] == [(2, 4)] * len(order)


def test_pin_memory_and_unequal_sizes_in_workers(varying):
    with pytest.raises(RuntimeError, match="equal size"):
        list(DataLoader(Dataset(varying), batch_size=4, num_workers=2))
    if torch.cuda.is_available():
        batch = next(iter(DataLoader(Float32s(varying), batch_size=1, pin_memory=True)))
        assert batch.is_pinned()
