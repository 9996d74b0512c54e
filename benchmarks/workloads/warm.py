"""Workload 2: random batch reads with the page cache warm, data checks on and off.

ffrecord also runs as ``ffrecord-batch`` (``read_batch``): what the API costs without
per-sample arrays.
"""

from __future__ import annotations

import itertools
from contextlib import closing

from ..config import read_batches
from ..context import BenchContext, index_batches, read_through
from ..contenders import Contender
from ..results import Cell
from ..timing import interleaved, rate


def _reader_rate(ctx: BenchContext, contender: Contender, size: int, batch: int, check: bool):
    root = ctx.store_dir(contender, size)
    batches = index_batches(ctx.spec(size).count, batch, 64, seed=batch)

    def measure() -> float:
        cycle = itertools.cycle(batches)
        with closing(contender.open(root, check)) as reader:
            reader.read(next(cycle))  # first call pays lazy set-up

            def one_batch() -> int:
                indices = next(cycle)
                reader.read(indices)
                return len(indices)

            return rate(one_batch, ctx.config.warm_min_seconds)

    return measure


def run(ctx: BenchContext) -> None:
    contenders = ctx.with_ffrecord_variant("batch")
    for spec in ctx.config.datasets:
        for contender in ctx.contenders:
            read_through(contender.files(ctx.store_dir(contender, spec.size)))
        for batch in read_batches(spec.size, ctx.config.warm_batches):
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
