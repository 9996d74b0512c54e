"""Workload 2: random batch reads with the page cache warm, data checks on and off."""

from __future__ import annotations

import itertools

from ..context import BenchContext, index_batches, read_through
from ..contenders import Contender
from ..results import Cell
from ..timing import interleaved, rate

LARGE_SAMPLE = 64 << 10  # samples this big are read in batches of 64 only, as the reference did


def batch_sizes(ctx: BenchContext, size: int) -> tuple[int, ...]:
    return (64,) if size >= LARGE_SAMPLE else ctx.config.warm_batches


def _reader_rate(ctx: BenchContext, contender: Contender, size: int, batch: int, check: bool):
    root = ctx.store_dir(contender, size)
    n = ctx.spec(size).count

    def measure() -> float:
        batches = itertools.cycle(index_batches(n, batch, 64, seed=batch))
        reader = contender.open(root, check)
        try:
            reader.read(next(batches))  # first call pays lazy set-up

            def one_batch() -> int:
                indices = next(batches)
                reader.read(indices)
                return len(indices)

            return rate(one_batch, ctx.config.warm_min_seconds)
        finally:
            reader.close()

    return measure


def run(ctx: BenchContext, extra: tuple[Contender, ...] = ()) -> None:
    """Measures ``ctx.contenders`` plus ``extra`` variants (e.g. ffrecord's read_batch)."""
    contenders = ctx.with_variants(extra)
    for spec in ctx.config.datasets:
        for contender in ctx.contenders:
            read_through(contender.files(ctx.store_dir(contender, spec.size)))
        for batch in batch_sizes(ctx, spec.size):
            for check in (True, False):
                ctx.log(f"warm read: {spec.label} batch {batch} check {'on' if check else 'off'}")
                runners = {
                    c.name: _reader_rate(ctx, c, spec.size, batch, check)
                    for c in contenders
                    if check in c.checks
                }
                params = {"sample_size": spec.size, "batch": batch, "check": check}
                values = interleaved(runners, ctx.config.reps)
                ctx.results.add(Cell("warm_read", params, "samples/s", values, bytes_per_unit=spec.size))
