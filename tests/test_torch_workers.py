"""Workers under every start method, a script without a main guard, and torchrun with 2 ranks.

Child processes run with timeouts: a hang fails the test instead of stalling the run.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from ffr_helpers import garbage_pending  # noqa: E402
from ffrecord.torch import DataLoader  # noqa: E402
from torch_scripts.common import (  # noqa: E402
    TESTS_DIR,
    PickleDataset,
    child_env,
    epoch_batches,
    indices_of,
    make_loader,
    write_samples,
)

N = 30


@pytest.fixture(scope="module")
def ffr(tmp_path_factory):
    return write_samples(tmp_path_factory.mktemp("workers") / "samples.ffr", N)


@pytest.mark.parametrize("method", [None, "fork", "forkserver", "spawn"])
def test_workers_under_every_start_method(ffr, method):
    expected = epoch_batches(make_loader(ffr, shuffle=True, seed=3))  # the library is live here
    loader = make_loader(ffr, shuffle=True, seed=3, num_workers=2, multiprocessing_context=method, timeout=60)
    assert epoch_batches(loader) == expected


def test_persistent_workers_resume(ffr):
    options = dict(shuffle=True, seed=6, num_workers=2, persistent_workers=True, timeout=60)
    loader = make_loader(ffr, **options)
    epoch_batches(loader)
    iterator = iter(loader)
    indices_of(next(iterator))
    state = json.loads(json.dumps(loader.state_dict()))
    expected = [epoch_batches(iterator), epoch_batches(loader)]
    restored = make_loader(ffr, **options)
    restored.load_state_dict(state)
    assert [epoch_batches(restored) for _ in range(2)] == expected


def test_dataset_read_before_forking_workers(ffr):
    dataset = PickleDataset(ffr)
    assert dataset[[0]] == [(0, 0)]
    loader = torch.utils.data.DataLoader(dataset, batch_size=7, num_workers=2,
                                         multiprocessing_context="fork", timeout=60)
    assert list(itertools.chain(*epoch_batches(loader))) == list(range(N))


class CollectingDataset(PickleDataset):
    """Collects garbage before every batch: in a worker, whatever its collector can see."""

    def process(self, indices: list[int], data: list) -> list:
        gc.collect()
        return super().process(indices, data)


@pytest.mark.parametrize("method, shared_memory", [(None, True), ("fork", False)])
def test_forked_workers_never_finalize_the_parents_garbage(ffr, tmp_path, method, shared_memory):
    """A finalizer of the training process's garbage runs there, never in a worker (some
    crash in a forked child: Ray's gRPC clients); the parent's collector works as before."""
    record = tmp_path / "finalized"
    with garbage_pending(record):
        loader = DataLoader(CollectingDataset(ffr), batch_size=4, num_workers=2, timeout=60,
                            multiprocessing_context=method, shared_memory=shared_memory)
        assert list(itertools.chain(*epoch_batches(loader))) == list(range(N))
        assert not record.exists(), f"finalized in a worker: {record.read_text()}"
        assert gc.get_freeze_count() == 0
    assert record.read_text().split() == [str(os.getpid())]


def test_objects_the_process_froze_stay_frozen(ffr):
    marker = [object()]  # a container: the collector tracks it
    gc.freeze()
    try:
        loader = make_loader(ffr, num_workers=2, timeout=60)
        assert list(itertools.chain(*epoch_batches(loader))) == list(range(N))
        assert not any(o is marker for o in gc.get_objects()), "unfrozen by the loader"
    finally:
        gc.unfreeze()
    assert any(o is marker for o in gc.get_objects())


def test_script_without_main_guard(ffr):
    done = subprocess.run([sys.executable, str(TESTS_DIR / "torch_scripts" / "no_main_guard.py"), ffr],
                          capture_output=True, text=True, timeout=120, env=child_env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == sorted(list(range(N)) * 2)


def test_torchrun_two_ranks(ffr, tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "torch_scripts.ddp", ffr, str(tmp_path)]
    done = subprocess.run(command, cwd=TESTS_DIR, capture_output=True, text=True, timeout=180, env=child_env())
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(r["world_size"] == 2 for r in ranks)
    for epoch in range(2):
        shares = [list(itertools.chain(*r["epochs"][epoch])) for r in ranks]
        assert len(shares[0]) == len(shares[1]) == N // 2
        assert sorted(shares[0] + shares[1]) == list(range(N))  # disjoint and complete
    assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1]
    for r in ranks:
        assert r["resumed_own"] == r["resumed_other"] == r["expected_after_state"]
