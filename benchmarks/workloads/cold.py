"""Workload 3: random batch reads from the disk; the cache is emptied before each repetition.

ffrecord and the Python loop check CRCs (their default; the disk, not the CRC, is the cost
here); the other formats have no per-sample checksum.
"""

from __future__ import annotations

import time

from ..cache import eviction_method, evict
from ..context import BenchContext, index_batches
from ..contenders import Contender
from ..results import Cell
from ..timing import interleaved
from .warm import LARGE_SAMPLE


def samples_per_rep(ctx: BenchContext, size: int, batch: int) -> int:
    """At most a quarter of the dataset, so that a repetition rarely meets a sample (or its
    neighbours, pulled in by readahead) twice; whole batches, at least one."""
    n = ctx.spec(size).count
    wanted = min(ctx.config.cold_samples_per_rep, n // 4)
    return max(1, wanted // batch) * batch


def batch_sizes(ctx: BenchContext, size: int) -> tuple[int, ...]:
    """Large samples are read in batches of 64 only (as warm reads and the reference do)."""
    return (64,) if size >= LARGE_SAMPLE else ctx.config.cold_batches


def _cold_rate(ctx: BenchContext, contender: Contender, size: int, batch: int):
    root = ctx.store_dir(contender, size)
    n = ctx.spec(size).count
    count = samples_per_rep(ctx, size, batch) // batch
    rep = 0

    def measure() -> float:
        nonlocal rep
        batches = index_batches(n, batch, count, seed=1000 + rep)
        rep += 1
        check = True in contender.checks
        evict(contender.files(root))
        reader = contender.open(root, check)
        try:
            start = time.perf_counter()  # after open: a header read at open is not timed
            for indices in batches:
                reader.read(indices)
            return count * batch / (time.perf_counter() - start)
        finally:
            reader.close()

    return measure


def run(ctx: BenchContext, extra: tuple[Contender, ...] = ()) -> None:
    """Measures ``ctx.contenders`` plus ``extra`` variants (e.g. ffrecord with O_DIRECT)."""
    contenders = ctx.with_variants(extra)
    for size in ctx.config.cold_sizes:
        for batch in batch_sizes(ctx, size):
            ctx.log(f"cold read: {size} B batch {batch} ({eviction_method()})")
            runners = {c.name: _cold_rate(ctx, c, size, batch) for c in contenders}
            values = interleaved(runners, ctx.config.reps)
            params = {"sample_size": size, "batch": batch, "eviction": eviction_method(),
                      "samples_per_rep": samples_per_rep(ctx, size, batch)}
            ctx.results.add(Cell("cold_read", params, "samples/s", values, bytes_per_unit=size))
