"""The stock ``torch.utils.data.DataLoader`` over a ``DatasetReader``: ``bytes`` values and
small tensors cross its worker queue through shared memory (``ffrecord.torch._stock``) and
arrive as what was written, with every start method; a payload is never read twice or
after its slot was reused; full slots fall back to the pipe; a killed worker leaves
nothing behind."""

from __future__ import annotations

import gc
import io
import os
import pickle
import signal
import time
from multiprocessing.reduction import ForkingPickler

import pytest

torch = pytest.importorskip("torch")

import torch.utils.data  # noqa: E402

from ffrecord.dataset import (DatasetReader, DatasetWriter, Mixture, ShardedDatasetReader,  # noqa: E402
                              ShardedDatasetWriter)
from ffrecord.torch import _stock, _transport  # noqa: E402
from test_torch_transport import open_fds, shm_entries  # noqa: E402

N = 96


def image(index: int) -> bytes:
    """Sizes from below ``MIN_SHARED`` (piped as they are) to several pages."""
    return bytes([index % 251]) * (index * 97 % 9000) + index.to_bytes(4, "little")


SPEC = {"image": "bytes", "label": "int", "name": "utf8"}


def fill(writer) -> None:
    for i in range(N):
        writer.append({"image": image(i), "label": i, "name": f"n{i}"})


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("stock") / "ds")
    with DatasetWriter(path, SPEC) as writer:
        fill(writer)
    return path


def forking_round_trip(value, reducers: dict | None = None):
    """``value`` pickled as torch's worker queue does (``reducers``: this pickler's own)."""
    buf = io.BytesIO()
    pickler = ForkingPickler(buf)
    pickler.dispatch_table.update(reducers or {})
    pickler.dump(value)
    return buf.getvalue()


@pytest.mark.parametrize("workers, method", [(0, None), (2, "fork"), (2, "forkserver"), (2, "spawn")])
def test_stock_loader_reads_what_was_written(dataset, workers, method):
    loader = torch.utils.data.DataLoader(DatasetReader(dataset), batch_size=16, shuffle=True,
                                         num_workers=workers, multiprocessing_context=method,
                                         timeout=60 if workers else 0)
    seen, iterator = [], iter(loader)
    pids = [w.pid for w in getattr(iterator, "_workers", [])]
    for batch in iterator:
        labels = batch["label"]
        assert type(labels) is torch.Tensor and labels.dtype == torch.int64
        for label, got, name in zip(labels.tolist(), batch["image"], batch["name"]):
            assert type(got) is bytes and got == image(label) and name == f"n{label}"
        seen += labels.tolist()
    assert sorted(seen) == list(range(N))
    through_slots = {m.pid for m in _transport._RECEIVER.mapped.values()} & set(pids)
    assert len(through_slots) == workers


def test_shards_mixtures_and_views_send_through_their_readers(dataset, tmp_path):
    sharded = str(tmp_path / "sharded")
    with ShardedDatasetWriter(sharded, SPEC, shardlen=40) as writer:
        fill(writer)
    sources = [ShardedDatasetReader(sharded), DatasetReader(dataset).select(range(N - 1, -1, -1)),
               Mixture([DatasetReader(dataset), ShardedDatasetReader(sharded)], weights=[1, 1])]
    for source in sources:
        iterator = iter(torch.utils.data.DataLoader(source, batch_size=16, num_workers=2, timeout=60))
        pids = {w.pid for w in iterator._workers}
        for batch in iterator:
            assert all(type(got) is bytes and got == image(label)
                       for label, got in zip(batch["label"].tolist(), batch["image"]))
        assert {m.pid for m in _transport._RECEIVER.mapped.values()} & pids == pids


def test_persistent_workers(dataset):
    loader = torch.utils.data.DataLoader(DatasetReader(dataset), batch_size=8, num_workers=2,
                                         persistent_workers=True, timeout=60)
    for _ in range(3):  # every slot freed by the epoch before
        batches = list(loader)
        assert [label for b in batches for label in b["label"].tolist()] == list(range(N))
        assert all(type(got) is bytes and got == image(8 * b + k)
                   for b, batch in enumerate(batches) for k, got in enumerate(batch["image"]))


def test_values_cross_once_then_refuse():
    value = _stock.SharedBytes(b"abc" * 1000)
    payload = forking_round_trip(value)
    assert len(payload) < 400  # the slot's address, not the value
    got = pickle.loads(payload)
    assert type(got) is bytes and got == value
    with pytest.raises(RuntimeError, match="unpickled twice"):
        pickle.loads(payload)
    reused = forking_round_trip(_stock.SharedBytes(b"xyz" * 1000))  # the same slot, a new sequence
    with pytest.raises(RuntimeError, match="unpickled twice"):
        pickle.loads(payload)
    assert pickle.loads(reused) == b"xyz" * 1000


def test_small_values_and_other_picklers_carry_plain_bytes():
    small = _stock.SharedBytes(b"s" * (_stock.MIN_SHARED - 1))
    for payload in (forking_round_trip(small), pickle.dumps(_stock.SharedBytes(b"p" * 5000))):
        got = pickle.loads(payload)
        assert type(got) is bytes and got in (small, b"p" * 5000)


def test_full_slots_fall_back_to_the_pipe(monkeypatch):
    monkeypatch.setattr(_stock, "_SLOTS", None)
    monkeypatch.setattr(_stock, "_ARENA_BYTES", 8 * 8192)  # 8 slots of 8 KiB
    monkeypatch.setattr(_stock, "_MAX_ARENAS", 1)
    values = [_stock.SharedBytes(bytes([k]) * 6000) for k in range(10)]
    payloads = [forking_round_trip(v) for v in values]
    assert [len(p) < 400 for p in payloads] == [True] * 8 + [False] * 2  # no wait, no loss
    assert [pickle.loads(p) for p in payloads] == values
    assert len(forking_round_trip(values[0])) < 400  # freed slots are taken again
    larger = forking_round_trip(_stock.SharedBytes(b"L" * 20_000))  # outgrows the slots
    assert len(larger) > 20_000 and pickle.loads(larger) == b"L" * 20_000


@pytest.mark.parametrize("tensor", [
    torch.arange(64), torch.tensor(3.5), torch.ones(2, 3, dtype=torch.bfloat16),
    torch.arange(10)[::2], torch.zeros(4, 4)[1], torch.ones(3).share_memory_(),
], ids=["labels", "0-dim", "bfloat16", "strided", "view", "shared"])
def test_tensors_arrive_equal(tensor):
    """Small tensors of their own memory go in a slot; views and tensors already shared
    take torch's way. Either way, the same dtype, shape and values."""
    payload = forking_round_trip(tensor, {torch.Tensor: _stock._reduce_tensor})
    got = pickle.loads(payload)
    assert got.dtype == tensor.dtype and got.shape == tensor.shape and torch.equal(got, tensor)
    assert got.is_shared() == (b"_received_tensor" not in payload)


def test_killed_worker_leaves_nothing_behind(dataset):
    shm_before, fds_before = shm_entries(), open_fds()
    loader = torch.utils.data.DataLoader(DatasetReader(dataset), batch_size=16, num_workers=2, timeout=60)
    iterator = iter(loader)
    held = next(iterator)
    pids = [w.pid for w in iterator._workers]
    assert [m for m in _transport._RECEIVER.mapped.values() if m.pid == pids[0]]
    os.kill(pids[0], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="worker"):
        for _ in range(N):
            next(iterator)
    assert held["image"][15] == image(15)  # received values are the main process's own
    del iterator, loader
    deadline = time.monotonic() + 20
    while True:
        gc.collect()
        _transport.forget_exited_workers()
        mapped = [m for m in _transport._RECEIVER.mapped.values() if m.pid in pids]
        clean = not mapped and open_fds() <= fds_before and not shm_entries(pids) - shm_before
        if clean or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not mapped, f"arenas of the killed loader's workers still mapped: {mapped}"
    assert shm_entries(pids) - shm_before == set()
    assert open_fds() <= fds_before, sorted(os.listdir("/proc/self/fd"))


def test_docstring_examples_run():
    import doctest

    assert doctest.testmod(_stock).failed == 0
