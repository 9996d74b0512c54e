"""Workload 1: write throughput. The first repetition's output is the dataset later reads use."""

from __future__ import annotations

import shutil
import time

import numpy as np

from ..context import BenchContext, index_batches, make_samples
from ..contenders import Contender
from ..results import Cell
from ..timing import interleaved


def _writer(ctx: BenchContext, contender: Contender, samples: list[bytes], size: int):
    rep = 0

    def write_once() -> float:
        nonlocal rep
        if rep == 0:
            target = ctx.store_dir(contender, size)
            target.mkdir(parents=True, exist_ok=True)
        else:
            target = ctx.scratch_dir(f"write-{contender.name}-{size}")
        start = time.perf_counter()
        contender.write(target, samples)
        elapsed = time.perf_counter() - start
        if rep:
            shutil.rmtree(target)
        rep += 1
        return len(samples) / elapsed

    return write_once


def verify(ctx: BenchContext, contender: Contender, size: int) -> None:
    """Reads a random batch back and compares it with what was written."""
    samples = ctx.samples[size]
    indices = index_batches(len(samples), 32, 1, seed=size)[0]
    for check in contender.checks:
        reader = contender.open(ctx.store_dir(contender, size), check)
        try:
            got = [np.frombuffer(s, dtype=np.uint8).tobytes() for s in reader.read(indices)]
        finally:
            reader.close()
        if got != [samples[i] for i in indices.tolist()]:
            raise AssertionError(f"{contender.name} read back wrong bytes ({size}-byte samples)")


def run(ctx: BenchContext) -> None:
    for spec in ctx.config.datasets:
        ctx.log(f"write: {spec!r}")
        samples = ctx.samples[spec.size] = make_samples(spec, seed=spec.size)
        runners = {c.name: _writer(ctx, c, samples, spec.size) for c in ctx.contenders}
        values = interleaved(runners, ctx.config.write_reps)
        for contender in ctx.contenders:
            verify(ctx, contender, spec.size)
        ctx.results.add(
            Cell("write", {"sample_size": spec.size, "samples": spec.count}, "samples/s",
                 values, bytes_per_unit=spec.size)
        )
