"""Workload 2: random batch reads with the page cache warm, data checks on and off.

ffrecord also runs as ``ffrecord-batch`` (``read_batch`` into a preallocated buffer): what
the API costs without per-sample arrays or fresh memory. The reference runs the same loop
in a process of its own, on the same file.
"""

from __future__ import annotations

import itertools
from contextlib import closing
from pathlib import Path

from ..config import read_batches
from ..context import BenchContext, index_batches, read_through
from ..contenders import Contender
from ..contenders.isolated import runner
from ..results import Cell, interleaved, rate


def measure(contender: Contender, root: str, n: int, batch: int, check: bool,
            min_seconds: float) -> float:
    """Samples/s of reading random batches of ``batch`` for at least ``min_seconds``."""
    cycle = itertools.cycle(index_batches(n, batch, 64, seed=batch))
    with closing(contender.open(Path(root), check)) as reader:
        reader.read(next(cycle))  # first call pays lazy set-up

        def one_batch() -> int:
            indices = next(cycle)
            reader.read(indices)
            return len(indices)

        return rate(one_batch, min_seconds)


def run(ctx: BenchContext) -> None:
    contenders = ctx.with_ffrecord_variant("batch")
    for spec in ctx.config.datasets:
        for contender in ctx.contenders:
            read_through(contender.files(ctx.store_dir(contender, spec.size)))
        for batch in read_batches(spec.size, ctx.config.warm_batches):
            for check in (True, False):
                ctx.log(f"warm read: {spec.label} batch {batch} check {'on' if check else 'off'}")
                runners = {
                    c.name: runner(c, "benchmarks.workloads.warm:measure",
                                   str(ctx.store_dir(c, spec.size)), spec.count, batch, check,
                                   ctx.config.warm_min_seconds)
                    for c in contenders
                    if check in c.checks
                }
                params = {"sample_size": spec.size, "batch": batch, "check": check}
                values = interleaved(runners, ctx.config.reps)
                ctx.results.add(Cell("warm_read", params, "samples/s", values, bytes_per_unit=spec.size))
