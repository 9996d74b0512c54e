"""The lean per-batch path of a structured loader: equal-sized ``bytes`` values cross as a
column with no offsets, a warm source is not hinted every batch, and the worker queues
pickle with a pickler they keep."""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from multiprocessing.reduction import ForkingPickler  # noqa: E402

from ffrecord.dataset import DatasetReader, DatasetWriter  # noqa: E402
from ffrecord.torch import DataLoader, StructuredDataset, _transport  # noqa: E402
from ffrecord.torch._channel import DirectQueue  # noqa: E402
from ffrecord.torch.sampler import PREFETCH_PAUSE  # noqa: E402

N = 40


@pytest.mark.parametrize("size", [0, 1, 24])
def test_equal_sized_values_cross_as_a_column_read_equal_to_written(tmp_path, size: int):
    """Values of one size (empty ones included) arrive as the list of views they were
    written as, with 0 and 2 workers, back to back in the slot; a bad index fails in a
    worker as it fails in process."""
    path = str(tmp_path / "ds")
    written = [bytes([k % 251]) * size for k in range(N)]
    with DatasetWriter(path, {"image": "bytes", "label": "int"}) as writer:
        for k, value in enumerate(written):
            writer.append({"image": value, "label": k})

    def batches(workers: int) -> list:
        loader = DataLoader(StructuredDataset(DatasetReader(path)), batch_size=16, shuffle=True, seed=3,
                            num_workers=workers, timeout=60 if workers else 0)
        return [(b["label"].tolist(), [bytes(v) for v in b["image"]], b["image"]) for b in loader]

    for (labels, images, views), (want_labels, want_images, _) in zip(batches(2), batches(0), strict=True):
        assert labels == want_labels and images == want_images == [written[k] for k in labels]
        assert all(type(v) is memoryview and v.readonly for v in views)
        if size:
            starts = [np.frombuffer(v, np.uint8).ctypes.data for v in views]
            assert np.diff(starts).tolist() == [size] * (len(views) - 1), "one column, read into the slot"
    sender = _transport._Sender()
    column = _transport.BytesColumn.equal_sized(np.frombuffer(b"".join(written[:3]), np.uint8), 3, size)
    assert [bytes(v) for v in _transport.receive(sender.pack({"image": column}))["image"]] == written[:3]
    for bad in ([0, N], [-N - 1]):
        with pytest.raises(IndexError) as in_process:
            StructuredDataset(DatasetReader(path))[bad]
        with pytest.MonkeyPatch.context() as worker, pytest.raises(IndexError) as in_worker:
            worker.setattr(_transport, "columns_welcome", lambda dataset: True)
            StructuredDataset(DatasetReader(path))[bad]
        assert str(in_worker.value) == str(in_process.value)


class _WarmSource(list):
    """A structured source whose data is always cached: each prefetch queues nothing."""

    files: list[str] = []

    def __init__(self) -> None:
        super().__init__({"i": k} for k in range(N))
        self.hints: list[list[int]] = []

    def read(self, indices, mask=None) -> list:
        return [self[int(i)] for i in indices]

    def prefetch(self, indices, mask=None) -> int:
        self.hints.append(list(indices))
        return 0


def test_a_warm_source_is_hinted_once_per_pause():
    source = _WarmSource()
    loader = DataLoader(StructuredDataset(source, transform=lambda d: d["i"]), batch_size=2, shuffle=True, seed=0)
    batches = [batch.tolist() for batch in loader]
    assert source.hints == batches[1::PREFETCH_PAUSE + 1]


class _Later:
    """Pickled by a reducer registered after the queue's first message."""


def test_the_kept_pickler_survives_a_failure_large_messages_and_new_reducers():
    queue = DirectQueue(ctx=multiprocessing.get_context())
    queue.put([1, 2])
    with pytest.raises((pickle.PicklingError, TypeError, AttributeError)):
        queue.put(lambda: None)  # pickling fails half-way
    assert queue.get(timeout=5) == [1, 2]
    big = b"x" * (1 << 17)
    queue.put(("big", big))
    assert queue.get(timeout=5) == ("big", big)
    ForkingPickler.register(_Later, lambda obj: (str, ("reduced",)))
    try:
        queue.put(_Later())
        assert queue.get(timeout=5) == "reduced"
    finally:
        del ForkingPickler._extra_reducers[_Later]
