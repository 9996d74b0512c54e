"""Workload 3: random batch reads from the disk; the cache is emptied before each repetition.

ffrecord and the Python loop check CRCs (their default; the disk, not the CRC, is the cost
here); the other formats have no per-sample checksum. ffrecord also runs as
``ffrecord-direct`` (O_DIRECT).
"""

from __future__ import annotations

import time
from contextlib import closing

from ..cache import eviction_method, evict
from ..config import read_batches
from ..context import BenchContext, index_batches
from ..contenders import Contender
from ..results import Cell
from ..timing import interleaved


def samples_per_rep(ctx: BenchContext, size: int, batch: int) -> int:
    """At most a quarter of the dataset, so that a repetition rarely meets a sample (or its
    neighbours, pulled in by readahead) twice; whole batches, at least one."""
    n = ctx.spec(size).count
    wanted = min(ctx.config.cold_samples_per_rep, n // 4)
    return max(1, wanted // batch) * batch


def _cold_rate(ctx: BenchContext, contender: Contender, size: int, batch: int):
    root = ctx.store_dir(contender, size)
    n = ctx.spec(size).count
    count = samples_per_rep(ctx, size, batch) // batch
    check = True in contender.checks
    rep = 0

    def measure() -> float:
        nonlocal rep
        batches = index_batches(n, batch, count, seed=1000 + rep)
        rep += 1
        evict(contender.files(root))
        with closing(contender.open(root, check)) as reader:
            start = time.perf_counter()  # after open: a header read at open is not timed
            for indices in batches:
                reader.read(indices)
            return count * batch / (time.perf_counter() - start)

    return measure


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
