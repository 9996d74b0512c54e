"""The shared-memory batch transport: what arrives, slot lifetime, and nothing left behind
when a worker or the main process is killed."""

from __future__ import annotations

from collections.abc import Iterable

import gc
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ffrecord.torch import DataLoader, _transport  # noqa: E402
from torch_scripts.common import TESTS_DIR, child_env  # noqa: E402
from torch_scripts.transport import Pair, ValueDataset, as_list, collate_fixed, value  # noqa: E402


def same_value(got: dict, want: dict, bytes_type: type = memoryview) -> None:
    """``bytes_type``: a view of the slot, or with a user's own collate_fn what it made."""
    assert type(got["tensor"]) is torch.Tensor and torch.equal(got["tensor"], want["tensor"])
    assert type(got["array"]) is np.ndarray and np.array_equal(got["array"], want["array"])
    assert got["array"].dtype == want["array"].dtype
    assert type(got["bytes"]) is bytes_type and got["bytes"] == want["bytes"]
    assert bytes_type is not memoryview or got["bytes"].readonly
    assert type(got["pair"]) is Pair and np.array_equal(got["pair"].left, want["pair"].left)
    assert bytes(got["pair"].right) == want["pair"].right
    assert (got["name"], got["index"]) == (want["name"], want["index"])


def shm_entries(pids: Iterable[int] = ()) -> set[str]:
    """What this test's processes could leave in /dev/shm: torch's segments (``torch_<pid>_…``)
    of this process and of ``pids`` (its workers, a child), and anything named after
    ffrecord's batches. Segments of other processes (another test run on the machine) are
    not this test's."""
    mine = {str(os.getpid()), *map(str, pids)}
    return {name for name in os.listdir("/dev/shm")
            if (name.startswith("torch_") and name.split("_")[1] in mine) or "batches" in name}


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_pack_unpack_and_slot_lifetime():
    sender = _transport._Sender()
    packed = sender.pack([value(7), value(8)])
    assert type(packed) is _transport.Packed
    arena = sender.arenas[0]
    assert arena.states[packed.slot] == _transport.BUSY
    batch = _transport.receive(packed)
    same_value(batch[0], value(7))
    same_value(batch[1], value(8))
    view = batch[1]["bytes"]
    del batch
    gc.collect()
    assert arena.states[packed.slot] == _transport.BUSY, "a view still held must keep its slot"
    del view
    gc.collect()
    assert arena.states[packed.slot] == _transport.FREE
    # a batch with nothing to carry is sent as it is
    assert sender.pack([1, "two", b""]) == [1, "two", b""]


def test_scratch_memory_travels_without_a_copy_and_slots_grow():
    sender = _transport._Sender()
    scratch = sender.scratch(4096)
    scratch.copy_(torch.arange(4096) % 251)
    packed = sender.pack({"rows": scratch.view(4, 1024)})
    assert packed.skeleton["rows"].offset == 0  # where it was read, not copied after it
    rows = _transport.receive(packed)["rows"]
    assert torch.equal(rows.reshape(-1), torch.arange(4096) % 251)
    big = np.arange(200_000, dtype=np.int64)  # outgrows the slot: a bigger arena, then retired
    got = _transport.receive(sender.pack([big]))[0]
    assert np.array_equal(got, big) and len(sender.arenas) == 2
    del rows, got
    gc.collect()
    _transport.receive(sender.pack([big]))
    assert [a.slot_size for a in sender.arenas] == [sender.slot_size]
    assert sender.retired == []  # told to the main process with that batch


def test_pin_memory_copies_then_releases(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a: self.clone(), raising=False)
    sender = _transport._Sender()
    packed = sender.pack({"x": torch.arange(10)})
    pinned = torch.utils.data._utils.pin_memory.pin_memory(packed)
    gc.collect()
    assert torch.equal(pinned["x"], torch.arange(10))
    assert sender.arenas[0].states[packed.slot] == _transport.FREE


def test_a_forked_copy_never_releases_the_parents_slot():
    sender = _transport._Sender()
    packed = sender.pack([np.ones(10)])
    batch = _transport.receive(packed)
    pid = os.fork()
    if pid == 0:
        del batch
        gc.collect()
        os._exit(0)
    os.waitpid(pid, 0)
    assert sender.arenas[0].states[packed.slot] == _transport.BUSY
    del batch


def test_loader_batches_match_the_pipe(method="fork"):
    """(Every start method carries ffrecord datasets' batches in test_torch_workers.)"""
    dataset = ValueDataset(40)
    loader = DataLoader(dataset, batch_size=8, num_workers=2, collate_fn=as_list,
                        multiprocessing_context=method, timeout=60)
    held = list(loader)  # every batch held: slots are never reused under them
    assert len(_transport._RECEIVER.mapped) >= 2
    for b, batch in enumerate(held):
        for k, datapoint in enumerate(batch):
            same_value(datapoint, value(8 * b + k), bytes)  # a user's collate_fn: its own types
    options = dict(batch_size=8, num_workers=2, collate_fn=collate_fixed, timeout=60,
                   multiprocessing_context=method)
    shared = next(iter(DataLoader(dataset, **options)))
    piped = next(iter(DataLoader(dataset, shared_memory=False, **options)))
    assert all(torch.equal(shared[key], piped[key]) for key in ("tensor", "array", "index"))
    assert shared["bytes"] == piped["bytes"] and type(piped["bytes"][0]) is type(shared["bytes"][0]) is bytes


def test_slots_are_reused_once_released():
    loader = DataLoader(ValueDataset(400), batch_size=4, num_workers=2, collate_fn=as_list,
                        persistent_workers=True, timeout=60)
    for _ in range(2):
        for batch in loader:
            assert batch[0]["bytes"] == value(batch[0]["index"])["bytes"]
    iterator = loader._iterator
    pids = {w.pid for w in iterator._workers}
    arenas = [key for key, mapped in _transport._RECEIVER.mapped.items() if mapped.pid in pids]
    assert len(arenas) == 2  # one arena per worker served 200 batches


def test_killed_worker_leaves_nothing_behind():
    shm_before, fds_before = shm_entries(), open_fds()
    loader = DataLoader(ValueDataset(10_000), batch_size=8, num_workers=2, collate_fn=as_list, timeout=60)
    iterator = iter(loader)
    held = next(iterator)
    pids = [w.pid for w in iterator._inner._workers]
    os.kill(pids[0], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="worker"):
        for _ in range(50):
            next(iterator)
    same_value(held[3], value(3), bytes)  # a batch already received outlives its worker
    del iterator, held, loader
    gc.collect()
    _transport.forget_exited_workers()
    deadline = time.monotonic() + 20
    while (open_fds() > fds_before or shm_entries(pids) - shm_before) and time.monotonic() < deadline:
        time.sleep(0.2)
        gc.collect()
        _transport.forget_exited_workers()
    assert shm_entries(pids) - shm_before == set()
    assert open_fds() <= fds_before


def test_killed_main_process_leaves_nothing_behind():
    shm_before = shm_entries()
    child = subprocess.Popen([sys.executable, "-m", "torch_scripts.transport", "fork"], cwd=TESTS_DIR,
                             env=child_env(), stdout=subprocess.PIPE, text=True)
    try:
        workers = json.loads(child.stdout.readline())
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 30  # workers notice their parent is gone within 5 s
    while any(os.path.exists(f"/proc/{pid}") for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in workers)
    assert shm_entries([child.pid, *workers]) - shm_before == set()


def test_every_dtype_shape_and_layout_round_trips():
    batch = {
        "bfloat16": torch.arange(6, dtype=torch.bfloat16).view(2, 3),
        "complex": torch.ones(3, dtype=torch.complex64),
        "bool": torch.tensor([True, False]),
        "scalar": torch.tensor(5),
        "transposed": torch.arange(12).view(3, 4).t(),
        "big_endian": np.arange(4, dtype=">i4"),
        "int_view": memoryview(np.arange(3, dtype=np.int32)),
        "grad": torch.ones(2, requires_grad=True),  # left to torch's pickling
    }
    got = _transport.receive(_transport._Sender().pack(batch))
    for key in ("bfloat16", "complex", "bool", "scalar", "transposed"):
        assert got[key].dtype == batch[key].dtype and torch.equal(got[key], batch[key]), key
    assert got["big_endian"].dtype == np.dtype(">i4") and np.array_equal(got["big_endian"], batch["big_endian"])
    assert bytes(got["int_view"]) == bytes(batch["int_view"])
    assert got["grad"] is batch["grad"]
