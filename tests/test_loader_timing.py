"""Where a loader's time goes (issue 36): ``loader.stats()`` attributes an epoch's time to
the stage that takes it, with 0 workers, worker processes (every start method, task groups)
and threads.

Each case makes one stage slow with sleeps large against a busy machine's noise (tens of
milliseconds per batch, a few batches): a slow transform (the loop waits most of the epoch,
the transform is the top stage), a slow training step (the loop hardly waits), slow storage
behind the tests' range server (the read is the top stage). No speed is asserted.
"""

from __future__ import annotations

import doctest
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ffrecord import FileWriter, UncachedRemoteWarning  # noqa: E402
from ffrecord.torch import DataLoader, Dataset  # noqa: E402

from range_server import RangeServer  # noqa: E402
from remote_fixtures import bucket, s3_endpoint  # noqa: E402, F401 - fixtures

BATCH, BATCHES = 8, 8
N = BATCH * BATCHES
SAMPLE = 4 << 10
# a slow stage's seconds per batch: well above what a worker process's first read adds once
# (its copy of the library loaded, its files opened), even on a busy machine
SLEEP = 0.05
STAGES = ("read", "transform", "collate", "transfer")
MODES = {"0 workers": {},  # (torch takes a timeout for workers only)
         "processes": {"num_workers": 2, "timeout": 60},
         "threads": {"num_workers": 2, "workers": "threads", "timeout": 60}}


class SlowTransform(Dataset):
    """Reads a batch, then sleeps (a transform that takes its time)."""

    def process(self, indices, data):
        time.sleep(SLEEP)
        return data


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    target = tmp_path_factory.mktemp("timing") / "samples.ffr"
    rng = np.random.default_rng(0)
    with FileWriter(target, N) as writer:
        for _ in range(N):
            writer.write_one(rng.integers(0, 256, SAMPLE, dtype=np.uint8).tobytes())
    return target


def top_stage(stats: dict) -> str:
    return max(STAGES, key=lambda stage: stats[f"{stage}_s"])


def run_epoch(loader: DataLoader, step: float = 0.0) -> int:
    batches = 0
    for batch in loader:
        assert len(batch) == BATCH
        batches += 1
        if step:
            time.sleep(step)  # the training step
    return batches


@pytest.mark.parametrize("mode", MODES)
def test_a_slow_transform_is_the_top_stage_and_the_loop_waits(path, mode):
    loader = DataLoader(SlowTransform(str(path)), batch_size=BATCH, shuffle=True, seed=0, **MODES[mode])
    assert run_epoch(loader) == BATCHES
    stats = loader.stats(epoch=0)
    assert (stats["batches"], stats["datapoints"]) == (BATCHES, N)
    assert stats["wait_s"] >= 0.5 * stats["elapsed_s"], stats
    assert top_stage(stats) == "transform", stats
    assert stats["transform_s"] >= 0.9 * BATCHES * SLEEP, stats
    assert loader.stats() == stats  # one epoch: the cumulative figures are its own


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_worker_processes_of_every_start_method_time_their_batches(path, method):
    loader = DataLoader(SlowTransform(str(path)), batch_size=BATCH, num_workers=2, multiprocessing_context=method,
                        timeout=120)
    assert run_epoch(loader) == BATCHES
    stats = loader.stats()
    assert (stats["batches"], stats["datapoints"]) == (BATCHES, N)
    assert top_stage(stats) == "transform" and stats["transform_s"] >= 0.9 * BATCHES * SLEEP, stats


@pytest.mark.parametrize("mode", MODES)
def test_a_slow_training_step_hardly_waits(path, mode):
    options = {**MODES[mode], **({"persistent_workers": True} if MODES[mode] else {})}
    loader = DataLoader(Dataset(str(path)), batch_size=BATCH, shuffle=True, seed=0, **options)
    run_epoch(loader)  # workers start (and stay)
    assert run_epoch(loader, step=SLEEP) == BATCHES
    stats = loader.stats(epoch=1)
    assert stats["batches"] == BATCHES and stats["elapsed_s"] >= BATCHES * SLEEP, stats
    assert stats["wait_s"] <= 0.1 * stats["elapsed_s"], stats
    first, total = loader.stats(epoch=0), loader.stats()
    for key in ("batches", "datapoints"):
        assert total[key] == first[key] + stats[key] == 2 * stats[key]
    for stage in ("wait", "elapsed", *STAGES):
        assert total[f"{stage}_s"] == pytest.approx(first[f"{stage}_s"] + stats[f"{stage}_s"])


@pytest.fixture(scope="module")
def slow_store(path):
    """The samples behind the range server, every answer ``SLEEP`` late."""
    with RangeServer({"/samples.ffr": path.read_bytes()}, latency=SLEEP) as server:
        yield server


@pytest.mark.parametrize("mode", MODES)
def test_slow_storage_makes_the_read_the_top_stage(slow_store, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncachedRemoteWarning)
        # a Dataset whose batches are only read: a worker process's tasks carry 4 batches
        loader = DataLoader(Dataset(slow_store.url + "/samples.ffr"), batch_size=BATCH, shuffle=True, seed=0,
                            **MODES[mode])
    assert run_epoch(loader) == BATCHES
    stats = loader.stats(epoch=0)
    assert (stats["batches"], stats["datapoints"]) == (BATCHES, N)
    assert stats["requests"] >= BATCHES  # a GET a batch at least, each SLEEP late
    assert stats["bytes_delivered"] == N * SAMPLE  # the readers' counters beside the timings
    assert top_stage(stats) == "read", stats
    assert stats["read_s"] >= 0.9 * BATCHES * SLEEP, stats
    assert stats["wait_s"] >= 0.5 * stats["elapsed_s"], stats


def test_a_loader_that_is_not_skippable_times_its_epochs(path):
    loader = DataLoader(SlowTransform(str(path)), batch_size=BATCH, num_workers=2, skippable=False, timeout=60)
    for _ in range(2):
        run_epoch(loader)
    second = loader.stats(epoch=1)
    assert second["batches"] == BATCHES and top_stage(second) == "transform", second
    assert second["wait_s"] >= 0.5 * second["elapsed_s"]


def test_stats_have_one_shape_and_timing_can_be_off(path):
    timed = DataLoader(Dataset(str(path)), batch_size=BATCH)
    untimed = DataLoader(Dataset(str(path)), batch_size=BATCH, timing=False)
    assert list(timed.stats()) == list(untimed.stats())  # the same keys before any epoch
    for loader in (timed, untimed):
        run_epoch(loader)
    on, off = timed.stats(), untimed.stats()
    assert list(on) == list(off)
    assert on["batches"] == BATCHES and on["wait_s"] > 0 and on["collate_s"] > 0
    assert all(off[key] == 0 for key in ("batches", "datapoints", "wait_s", "elapsed_s", *(f"{s}_s" for s in STAGES)))


def test_an_epoch_not_begun_is_a_value_error(path):
    loader = DataLoader(Dataset(str(path)), batch_size=BATCH)
    with pytest.raises(ValueError, match="epoch 0 has not begun on this loader .epochs begun: none"):
        loader.stats(epoch=0)
    run_epoch(loader)
    with pytest.raises(ValueError, match=r"epoch 3 has not begun on this loader \(epochs begun: 0\)"):
        loader.stats(epoch=3)
    with pytest.raises(TypeError):
        loader.stats(epoch="0")


@pytest.mark.parametrize("name", ["", "x" * 101, "http://user:hunter2@host/x", "a b", 7])
def test_a_bad_loader_name_is_refused_without_quoting_it(path, name):
    with pytest.raises(ValueError, match="a DataLoader's name must be 1 to 100") as caught:
        DataLoader(Dataset(str(path)), batch_size=BATCH, name=name)
    assert "hunter2" not in str(caught.value)


def test_docstring_examples_run():
    from ffrecord import _timing
    from ffrecord.torch import _stats, _transport, dataloader

    for module in (_timing, _stats, _transport, dataloader):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__


def test_a_workers_walk_for_remote_readers_is_made_again_only_when_one_opens(tmp_path, bucket, monkeypatch):
    """A loader worker finds the remote readers whose counters it publishes by walking its
    dataset (every member of a mixture): once, and again only when a remote reader opens,
    not at every member a mixture opens (its first epoch was quadratic in its members)."""
    from ffrecord.dataset import DatasetWriter, Mixture
    from ffrecord.torch import _stats

    client, name, opts = bucket
    paths = []
    for j in range(6):
        paths.append(tmp_path / f"m{j}")
        with DatasetWriter(paths[-1], {"a": "bytes"}) as writer:
            for k in range(4):
                writer.append({"a": bytes([j, k])})
    for p in paths[-1].rglob("*"):  # the last member also lies in the bucket
        if p.is_file():
            client.upload_file(str(p), name, f"m/{p.relative_to(paths[-1])}")
    walks = []
    original = _stats._dataset.readers_of
    monkeypatch.setattr(_stats._dataset, "readers_of", lambda obj: walks.append(1) or original(obj))
    publisher = _stats._Publisher(torch.zeros(len(_stats.COLUMNS), dtype=torch.int64))
    with Mixture.from_paths([str(p) for p in paths[:-1]] + [f"s3://{name}/m"], [1] * len(paths),
                            storage_options=opts) as mix:
        assert publisher._remote_readers(mix) == [] and len(walks) == 1
        for k in range(len(mix)):
            if mix.locate(k)[0] < len(paths) - 1:
                mix.read([k])  # opens the local members one by one
                assert publisher._remote_readers(mix) == []
        assert len(walks) == 1
        mix.read([next(k for k in range(len(mix)) if mix.locate(k)[0] == len(paths) - 1)])  # the remote one
        remote = publisher._remote_readers(mix)
        assert len(walks) == 2 and remote and all(f.startswith(f"s3://{name}/m/") for r in remote for f in r.fnames)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_remote_dataset_from_a_manifest_counts_its_requests_past_the_open_files_bound(tmp_path, bucket, workers):
    """The I/O counters of a dataset opened from a manifest on S3 reach ``loader.stats()``
    (its shards' readers, which the table of open files opens and closes as they are read),
    with 0 workers and from worker processes; readers closed mid-epoch take nothing back."""
    from ffrecord.dataset import ShardedDatasetWriter, max_open_files, open_dataset, set_max_open_files
    from ffrecord.torch import StructuredDataset

    client, name, opts = bucket
    local = tmp_path / "ds"
    with ShardedDatasetWriter(local, {"a": "bytes"}, shardlen=4) as writer:
        for k in range(24):
            writer.append({"a": bytes([k]) * 100})
    for p in local.rglob("*"):
        if p.is_file():
            client.upload_file(str(p), name, f"ds/{p.relative_to(local)}")
    before = max_open_files()
    set_max_open_files(2)  # 6 shards: most are closed again as the epoch goes
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncachedRemoteWarning)
            loader = DataLoader(StructuredDataset(open_dataset(f"s3://{name}/ds", storage_options=opts)),
                                batch_size=4, shuffle=True, seed=0, num_workers=workers,
                                **({"timeout": 60} if workers else {}))
        for _ in range(2):
            assert sum(len(batch["a"]) for batch in loader) == 24
        epochs, total = [loader.stats(epoch=e) for e in range(2)], loader.stats()
    finally:
        set_max_open_files(before)
    for epoch in epochs:
        assert epoch["requests"] > 0 and epoch["bytes_delivered"] > 0, epochs
    for key in ("requests", "bytes_fetched", "bytes_delivered"):  # the totals count the opens before too
        assert total[key] >= epochs[0][key] + epochs[1][key], (key, epochs, total)
