"""Workload 1: write throughput. The first repetition's output is the dataset later reads use
(the reference, which reads ffrecord's files, writes to scratch only, in its own process)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..config import SizeSpec
from ..context import BenchContext, index_batches, make_samples
from ..contenders import Contender
from ..results import Cell, interleaved


def write_rate(contender: Contender, target: Path, samples: Sequence[bytes]) -> float:
    """Samples/s of ``contender.write`` into ``target`` until it returns (files closed)."""
    start = time.perf_counter()
    contender.write(target, samples)
    return len(samples) / (time.perf_counter() - start)


def write_generated(contender: Contender, target: str, size: int, count: int) -> float:
    """``write_rate`` of the run's samples of ``size`` bytes, made here (another process)."""
    return write_rate(contender, Path(target), make_samples(SizeSpec(size, count), seed=size))


def writer(ctx: BenchContext, contender: Contender, spec: SizeSpec, samples: list[bytes] | None,
           keep: Path | None, scratch: str):
    """A runner writing the samples: into ``keep`` the first time (when given), else into a
    scratch directory deleted afterwards. Without ``samples`` (and for an isolated
    contender) a fresh process makes and writes them."""
    rep = 0

    def write_once() -> float:
        nonlocal rep
        if rep == 0 and keep is not None:
            target = keep
            target.mkdir(parents=True, exist_ok=True)
        else:
            target = ctx.scratch_dir(f"{scratch}-{contender.name}-{spec.size}")
        rep += 1
        if samples is None or contender.isolated:
            from ..contenders.isolated import call

            rate = call("benchmarks.workloads.write:write_generated", contender, str(target),
                        spec.size, spec.count)
        else:
            rate = write_rate(contender, target, samples)
        if target != keep:
            shutil.rmtree(target)
        return rate

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
        runners = {c.name: writer(ctx, c, spec, samples,
                                  ctx.store_dir(c, spec.size) if c.owns_store else None, "write")
                   for c in ctx.contenders}
        values = interleaved(runners, ctx.config.write_reps)
        for contender in ctx.contenders:
            if not contender.isolated:
                verify(ctx, contender, spec.size)
        ctx.results.add(
            Cell("write", {"sample_size": spec.size, "samples": spec.count}, "samples/s",
                 values, bytes_per_unit=spec.size)
        )
