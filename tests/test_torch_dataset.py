"""ffrecord.torch datasets: batched reads, both subclassing styles, Subset, ConcatDataset."""

from __future__ import annotations

import os
import pickle

import pytest

torch = pytest.importorskip("torch")

from ffrecord.torch import ConcatDataset, Dataset, Subset  # noqa: E402
from torch_scripts.common import (  # noqa: E402
    InMemoryDataset,
    OwnReaderDataset,
    PickleDataset,
    epoch_batches,
    sample,
    write_samples,
)


class CountingDataset(PickleDataset):
    """Records every batch of indices that reaches ``process``."""

    def __init__(self, fnames: str) -> None:
        super().__init__(fnames)
        self.calls: list[list[int]] = []

    def process(self, indices: list[int], data: list) -> list:
        self.calls.append(list(indices))
        return super().process(indices, data)


@pytest.fixture
def ffr(tmp_path):
    return write_samples(tmp_path / "samples.ffr", 20)


def test_process_style_reads_in_request_order(ffr):
    ds = PickleDataset(ffr)
    assert len(ds) == 20
    assert ds[[5, 1, 3, 5]] == [sample(5), sample(1), sample(3), sample(5)]
    assert ds[2] == sample(2)
    assert ds[-1] == sample(19)
    assert ds[[]] == []


def test_default_process_returns_raw_samples(ffr):
    raw = Dataset(ffr)[[4, 0]]
    assert [bytes(b) for b in raw] == [pickle.dumps(sample(4)), pickle.dumps(sample(0))]


def test_bad_indices_raise(ffr):
    ds = PickleDataset(ffr)
    with pytest.raises(IndexError):
        ds[[0, 20]]
    with pytest.raises(TypeError):
        Subset(ds, [0, 1])[[0.5]]


def test_stock_dataloader_reads_one_batch_per_call(ffr):
    ds = CountingDataset(ffr)
    loader = torch.utils.data.DataLoader(ds, batch_size=6, shuffle=False)
    assert epoch_batches(loader) == [list(range(i, min(i + 6, 20))) for i in range(0, 20, 6)]
    assert ds.calls == [list(range(i, min(i + 6, 20))) for i in range(0, 20, 6)]


def test_own_reader_style_with_stock_and_ffrecord_loaders(ffr):
    from ffrecord.torch import DataLoader

    ds = OwnReaderDataset(ffr)
    stock = epoch_batches(torch.utils.data.DataLoader(ds, batch_size=8))
    assert ds.batches_read == 3
    ours = epoch_batches(DataLoader(ds, batch_size=8, num_workers=2))
    assert stock == ours == [list(range(0, 8)), list(range(8, 16)), list(range(16, 20))]


def test_subset_maps_and_orders(ffr):
    ds = CountingDataset(ffr)
    sub = Subset(ds, [7, 2, 9, 2])
    assert len(sub) == 4
    assert sub[[3, 0, -2]] == [sample(2), sample(7), sample(9)]
    assert ds.calls == [[2, 7, 9]]
    assert sub[1] == sample(2)
    nested = Subset(sub, [2, 0])
    assert nested[[0, 1]] == [sample(9), sample(7)]
    with pytest.raises(IndexError):
        sub[[4]]


def test_concat_splits_per_member_and_restores_order(tmp_path):
    first = CountingDataset(write_samples(tmp_path / "a.ffr", 10))
    second = CountingDataset(write_samples(tmp_path / "b.ffr", 5, first=100))
    both = first + second
    assert isinstance(both, ConcatDataset)
    assert len(both) == 15 and both.cumulative_sizes == [10, 15]
    wanted = [12, 3, 10, 14, 0, -1]
    assert both[wanted] == [sample(102), sample(3), sample(100), sample(104), sample(0), sample(104)]
    assert first.calls == [[3, 0]]
    assert second.calls == [[2, 0, 4, 4]]
    with pytest.raises(IndexError):
        both[[15]]
    with pytest.raises(IndexError):
        both[[-16]]


def test_concat_accepts_plain_torch_datasets(ffr):
    both = ConcatDataset([PickleDataset(ffr), InMemoryDataset(3)])
    assert both[[21, 0, 20]] == [sample(1), sample(0), sample(0)]


def test_pickled_dataset_reopens_by_path_on_first_use(ffr):
    ds = PickleDataset(ffr)
    pickled = pickle.dumps(ds)
    os.rename(ffr, ffr + ".away")
    copy = pickle.loads(pickled)  # opens nothing yet
    os.rename(ffr + ".away", ffr)
    assert copy[[3, 1]] == [sample(3), sample(1)]
    assert "PickleDataset" in repr(copy) and "n=20" in repr(copy)


def test_concat_and_subset_pickle(ffr):
    combined = Subset(PickleDataset(ffr) + PickleDataset(ffr), [25, 1])
    copy = pickle.loads(pickle.dumps(combined))
    assert copy[[0, 1]] == [sample(5), sample(1)]
