"""Workload 7: what a training script sees, every contender in a fresh process of its own.

- write: the samples made in the process, then timed until the writer's ``close`` returns;
- epoch: one shuffled epoch of batch reads, page cache warm, open included (default
  checks: ffrecord and the reference verify CRCs);
- loader: one epoch of ``ffrecord.torch.DataLoader`` (2 workers, shuffle, default collate)
  against the reference's DataLoader, over the same file;
- open in workers: a dataset of many samples opened with ``check_data=True``, then one batch
  from each of 2 loader workers (each worker opens it, or inherits it, as it does); beside
  them, torch's DataLoader alone over a dataset that reads nothing, the floor no reader can
  go below.

Repetitions alternate between contenders; the reference reads the files ffrecord wrote.
"""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

import numpy as np

from ..context import BenchContext, read_through
from ..contenders import Contender
from ..contenders.isolated import call
from ..results import Cell, interleaved
from .write import writer

PEERS = ("ffrecord", "reference", "lmdb", "granular", "array-record")
LOADERS = ("ffrecord", "reference")
WORKERS = 2
TORCH_ALONE = "torch-workers-alone"


def epoch(contender: Contender, root: str, n: int, batch: int, seed: int) -> float:
    """Samples/s of opening the store and reading one shuffled epoch in batches."""
    order = np.random.default_rng(seed).permutation(n)
    start = time.perf_counter()
    with closing(contender.open(Path(root), True in contender.checks)) as reader:
        for first in range(0, n, batch):
            reader.read(order[first : first + batch])
    return n / (time.perf_counter() - start)


def loader_epoch(contender: Contender, path: str, batch: int, workers: int) -> float:
    """Samples/s of one shuffled epoch of the contender's DataLoader, workers started inside."""
    from ffrecord.torch import DataLoader

    from .ffrecord_dataset import SamplesDataset

    dataset = SamplesDataset(path, check_data=True)
    start = time.perf_counter()
    samples = 0
    for tensor in DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers):
        samples += len(tensor)
    elapsed = time.perf_counter() - start
    assert samples == len(dataset), (samples, len(dataset))
    return samples / elapsed


def open_in_workers(contender: Contender, path: str, workers: int) -> float:
    """Seconds from opening the dataset to a first batch from each loader worker."""
    from ffrecord.torch import DataLoader

    from .ffrecord_dataset import SamplesDataset

    start = time.perf_counter()
    loader = DataLoader(SamplesDataset(path, check_data=True), batch_size=1, num_workers=workers)
    batches = iter(loader)
    for _ in range(workers):
        next(batches)
    elapsed = time.perf_counter() - start
    del batches
    return elapsed


class _NothingToRead:
    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int) -> int:
        return index


def workers_alone(contender: None, workers: int) -> float:
    """Seconds to a first batch from each of torch's loader workers over a dataset that reads
    nothing: worker start-up alone."""
    import torch.utils.data

    start = time.perf_counter()
    batches = iter(torch.utils.data.DataLoader(_NothingToRead(), batch_size=1, num_workers=workers))
    for _ in range(workers):
        next(batches)
    elapsed = time.perf_counter() - start
    del batches
    return elapsed


def _store(ctx: BenchContext, contender: Contender, size: int) -> Path:
    return ctx.data_dir / "fresh" / contender.store_name / f"{size}B"


def _seeded(contender: Contender, target: str, *args):
    reps = iter(range(10**9))
    return lambda: call(target, contender, *args, next(reps))


def run(ctx: BenchContext) -> None:
    peers = [c for c in ctx.contenders if c.name in PEERS]
    loaders = [c for c in peers if c.name in LOADERS]
    reps = ctx.config.reps
    for spec in ctx.config.fresh_datasets:
        ctx.log(f"fresh: write {spec!r}")
        runners = {c.name: writer(ctx, c, spec, None,
                                  _store(ctx, c, spec.size) if c.owns_store else None, "fresh")
                   for c in peers}
        values = interleaved(runners, reps)
        ctx.results.add(Cell("fresh_write", {"sample_size": spec.size, "samples": spec.count},
                             "samples/s", values, bytes_per_unit=spec.size))
    for spec, batch in zip(ctx.config.fresh_datasets, ctx.config.fresh_batches):
        for c in peers:
            read_through(c.files(_store(ctx, c, spec.size)))
        ctx.log(f"fresh: epoch {spec!r} batch {batch}")
        runners = {c.name: _seeded(c, "benchmarks.workloads.fresh:epoch",
                                   str(_store(ctx, c, spec.size)), spec.count, batch)
                   for c in peers}
        ctx.results.add(Cell("fresh_epoch", {"sample_size": spec.size, "batch": batch,
                                             "samples": spec.count},
                             "samples/s", interleaved(runners, reps), bytes_per_unit=spec.size))
    if not loaders:
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        ctx.results.skipped["fresh_loader"] = "torch is not installed"
        return
    spec, batch = ctx.config.fresh_datasets[0], ctx.config.fresh_batches[0]
    path = loaders[0].files(_store(ctx, loaders[0], spec.size))[0]
    ctx.log(f"fresh: DataLoader epoch {spec!r} batch {batch}, {WORKERS} workers")
    runners = {c.name: lambda c=c: call("benchmarks.workloads.fresh:loader_epoch", c, path, batch,
                                        WORKERS)
               for c in loaders}
    ctx.results.add(Cell("fresh_loader", {"sample_size": spec.size, "batch": batch,
                                          "workers": WORKERS, "samples": spec.count},
                         "samples/s", interleaved(runners, reps), bytes_per_unit=spec.size))
    big = str(ctx.one_byte_samples_file())
    read_through([big])
    ctx.log(f"fresh: open {ctx.config.open_samples:,} samples in {WORKERS} loader workers")
    runners = {c.name: lambda c=c: call("benchmarks.workloads.fresh:open_in_workers", c, big,
                                        WORKERS)
               for c in loaders}
    runners[TORCH_ALONE] = lambda: call("benchmarks.workloads.fresh:workers_alone", None, WORKERS)
    ctx.results.add(Cell("fresh_open_workers", {"samples": ctx.config.open_samples,
                                                "workers": WORKERS},
                         "s", interleaved(runners, reps), higher_is_better=False))
