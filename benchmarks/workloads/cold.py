"""Workload 3: random batch reads from the disk; the cache is emptied before each repetition.

ffrecord, the reference and the Python loop check CRCs (their default; the disk, not the
CRC, is the cost here); the other formats have no per-sample checksum. ffrecord also runs
as ``ffrecord-direct`` (O_DIRECT); the reference runs in a process of its own.
"""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

from ..config import read_batches
from ..context import BenchContext, evict, eviction_method, index_batches
from ..contenders import Contender
from ..contenders.isolated import runner
from ..results import Cell, interleaved


def samples_per_rep(ctx: BenchContext, size: int, batch: int) -> int:
    """At most a quarter of the dataset, so that a repetition rarely meets a sample (or its
    neighbours, pulled in by readahead) twice; whole batches, at least one."""
    n = ctx.spec(size).count
    wanted = min(ctx.config.cold_samples_per_rep, n // 4)
    return max(1, wanted // batch) * batch


def measure(contender: Contender, root: str, n: int, batch: int, count: int, seed: int) -> float:
    """Samples/s of ``count`` random batches read right after the files were evicted."""
    batches = index_batches(n, batch, count, seed=seed)
    evict(contender.files(Path(root)))
    with closing(contender.open(Path(root), True in contender.checks)) as reader:
        start = time.perf_counter()  # after open: a header read at open is not timed
        for indices in batches:
            reader.read(indices)
        return count * batch / (time.perf_counter() - start)


def _cold_rate(ctx: BenchContext, contender: Contender, size: int, batch: int):
    count = samples_per_rep(ctx, size, batch) // batch
    reps = iter(range(10**9))
    args = (str(ctx.store_dir(contender, size)), ctx.spec(size).count, batch, count)
    return lambda: runner(contender, "benchmarks.workloads.cold:measure", *args, 1000 + next(reps))()


def run(ctx: BenchContext) -> None:
    contenders = ctx.with_ffrecord_variant("direct")
    eviction = eviction_method()
    for size in ctx.config.cold_sizes:
        for batch in read_batches(size, ctx.config.cold_batches):
            ctx.log(f"cold read: {size} B batch {batch} ({eviction})")
            runners = {c.name: _cold_rate(ctx, c, size, batch) for c in contenders}
            values = interleaved(runners, ctx.config.reps)
            params = {"sample_size": size, "batch": batch, "eviction": eviction,
                      "samples_per_rep": samples_per_rep(ctx, size, batch)}
            ctx.results.add(Cell("cold_read", params, "samples/s", values, bytes_per_unit=size))
