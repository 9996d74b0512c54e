"""Workload 5: DataLoader end to end, 2 workers, bytes -> tensor collate, warm cache.

ffrecord.torch.DataLoader over ffrecord.torch.Dataset against the stock
torch.utils.data.DataLoader over the folder of files and over LMDB (same samples, same
collate). "memory" is the stock loader over the samples already in RAM: the ceiling that
worker start-up, collation and inter-process transfer leave on this machine. The first
batches (worker start-up) are not timed.
"""

from __future__ import annotations

import time

from ..context import BenchContext, read_through
from ..results import Cell, interleaved
from .loader_datasets import FolderDataset, InMemoryDataset, LMDBDataset, stack_bytes

WORKERS = 2
_UNTIMED = 2  # batches that absorb worker start-up


def loaders(ctx: BenchContext, size: int, batch: int) -> dict:
    """Factories of the loaders to compare, by contender name."""
    from torch.utils.data import DataLoader as StockLoader

    n = ctx.spec(size).count
    common = {"batch_size": batch, "shuffle": True, "num_workers": WORKERS, "collate_fn": stack_bytes}
    made = {}
    if ctx.contender("ffrecord"):
        try:
            from ffrecord.torch import DataLoader

            from .ffrecord_dataset import SamplesDataset
        except ImportError as e:
            ctx.results.skipped["dataloader/ffrecord"] = f"ffrecord.torch does not import: {e}"
        else:
            ffrecord = ctx.contender("ffrecord")
            paths = ffrecord.files(ctx.store_dir(ffrecord, size))
            made["ffrecord"] = lambda: DataLoader(SamplesDataset(paths, check_data=True), **common)
    # default arguments bind each root now, not when the factory runs
    if ctx.contender("folder"):
        root = ctx.store_dir(ctx.contender("folder"), size)
        made["folder"] = lambda root=root: StockLoader(FolderDataset(root), **common)
    if ctx.contender("lmdb"):
        root = ctx.store_dir(ctx.contender("lmdb"), size)
        made["lmdb"] = lambda root=root: StockLoader(LMDBDataset(root, n), **common)
    samples = ctx.samples[size]
    made["memory"] = lambda: StockLoader(InMemoryDataset(samples), **common)
    return made


def batches_per_second(make_loader, batches: int) -> float:
    """Iterates a fresh loader; returns batches/s over ``batches`` batches after start-up."""
    iterator = iter(make_loader())
    for _ in range(_UNTIMED):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    elapsed = time.perf_counter() - start
    del iterator  # shuts the workers down
    return batches / elapsed


def run(ctx: BenchContext) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        ctx.results.skipped["dataloader"] = "torch is not installed"
        return
    for size, batch in ctx.config.loader_cases:
        made = loaders(ctx, size, batch)
        for name in made.keys() - {"memory"}:
            read_through(ctx.contender(name).files(ctx.store_dir(ctx.contender(name), size)))
        timed = min(ctx.config.loader_batches, ctx.spec(size).count // batch - _UNTIMED)
        ctx.log(f"dataloader: {size} B samples, batch {batch}, {timed} batches, {WORKERS} workers")
        runners = {name: (lambda m=m: batches_per_second(m, timed)) for name, m in made.items()}
        values = interleaved(runners, ctx.config.reps)
        params = {"sample_size": size, "batch": batch, "workers": WORKERS, "timed_batches": timed}
        ctx.results.add(Cell("dataloader", params, "batches/s", values, bytes_per_unit=size * batch))
