"""Sizes and repetition counts for each benchmark mode.

Example:
    >>> cfg = preset("quick")
    >>> cfg.reps >= 3
    True
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

#: the repository's root. Defined here, in a module importing nothing of the harness, so that
#: the modules needing it (``contenders.isolated``, ``contenders.reference_store``) import no
#: circle through the ``contenders`` package.
REPO = Path(__file__).resolve().parent.parent
KiB = 1024
#: samples this big are read in batches of 64 only, as the reference's benchmark did.
LARGE_SAMPLE = 64 * KiB


def size_label(size: int) -> str:
    """How tables, goals and plots name a sample size.

    Example:
        >>> size_label(4096), size_label(512)
        ('4 KiB', '512 B')
    """
    return f"{size // KiB} KiB" if size >= KiB else f"{size} B"


@dataclass(frozen=True)
class SizeSpec:
    """A dataset shape: ``count`` samples of ``size`` bytes each."""

    size: int
    count: int

    @property
    def label(self) -> str:
        return size_label(self.size)

    def __repr__(self) -> str:
        return f"SizeSpec({self.label} x {self.count})"


@dataclass(frozen=True)
class BenchConfig:
    """Every knob of one benchmark run; the presets below are the only supported values."""

    mode: str
    reps: int
    #: repetitions of the write workload (the folder of files writes slowly here).
    write_reps: int
    datasets: tuple[SizeSpec, ...]
    # Warm reads: each repetition loops over batches for at least this long.
    warm_min_seconds: float
    warm_batches: tuple[int, ...]
    # Cold reads: sample sizes to test, batch sizes, and samples read per repetition.
    cold_sizes: tuple[int, ...]
    cold_batches: tuple[int, ...]
    cold_samples_per_rep: int
    # Open time / private memory: one file of this many 1-byte samples.
    open_samples: int
    # DataLoader: (sample size, batch size) pairs and batches timed per loader.
    loader_cases: tuple[tuple[int, int], ...]
    loader_batches: int
    # Resume: set_step values (batch size 1 over the open_samples file).
    resume_steps: tuple[int, ...]
    # Fresh-process goals: datasets written, then read one epoch with these batch sizes
    # (the first also feeds the DataLoader epoch).
    fresh_datasets: tuple[SizeSpec, ...]
    fresh_batches: tuple[int, ...]
    memcpy_bytes: int
    fio_seconds: float


def read_batches(size: int, configured: tuple[int, ...]) -> tuple[int, ...]:
    """The batch sizes to read ``size``-byte samples with.

    Example:
        >>> read_batches(KiB, (64, 256)), read_batches(128 * KiB, (64, 256))
        ((64, 256), (64,))
    """
    return (64,) if size >= LARGE_SAMPLE else configured


def preset(mode: str) -> BenchConfig:
    """Returns the configuration of ``mode``: ``full``, ``quick`` or ``smoke`` (tests only)."""
    full = BenchConfig(
        mode="full",
        reps=5,
        write_reps=3,
        datasets=(SizeSpec(KiB, 32768), SizeSpec(4 * KiB, 16384), SizeSpec(128 * KiB, 512)),
        warm_min_seconds=0.3,
        warm_batches=(64, 256),
        cold_sizes=(KiB, 4 * KiB, 128 * KiB),
        cold_batches=(64, 256, 512),
        cold_samples_per_rep=4096,
        open_samples=5_000_000,
        loader_cases=((KiB, 256), (4 * KiB, 256), (128 * KiB, 64)),
        loader_batches=120,
        resume_steps=(1, 10**3, 10**6),
        fresh_datasets=(SizeSpec(KiB, 200_000), SizeSpec(128 * KiB, 2000)),
        fresh_batches=(256, 64),
        memcpy_bytes=256 << 20,
        fio_seconds=3.0,
    )
    if mode == "full":
        return full
    if mode == "quick":
        return replace(
            full,
            mode=mode,
            reps=3,
            write_reps=2,
            datasets=(SizeSpec(KiB, 8192), SizeSpec(4 * KiB, 8192), SizeSpec(128 * KiB, 256)),
            warm_min_seconds=0.1,
            warm_batches=(256,),
            cold_sizes=(4 * KiB,),
            cold_batches=(256,),
            cold_samples_per_rep=2048,
            loader_cases=((KiB, 256),),
            loader_batches=30,
            fresh_datasets=(SizeSpec(KiB, 50_000), SizeSpec(128 * KiB, 500)),
            memcpy_bytes=64 << 20,
            fio_seconds=1.5,
        )
    if mode == "smoke":
        return replace(
            full,
            mode=mode,
            reps=1,  # the smoke test checks code paths, not figures
            write_reps=1,
            datasets=(SizeSpec(KiB, 512), SizeSpec(4 * KiB, 256), SizeSpec(128 * KiB, 16)),
            warm_min_seconds=0.0,
            warm_batches=(64,),
            cold_sizes=(4 * KiB,),
            cold_batches=(64,),
            cold_samples_per_rep=128,
            open_samples=20_000,
            loader_cases=((4 * KiB, 32),),
            loader_batches=3,
            resume_steps=(1, 10, 1000),
            # one dataset: a second size would run the same code in ten more processes
            fresh_datasets=(SizeSpec(KiB, 2048),),
            fresh_batches=(256,),
            memcpy_bytes=1 << 20,
            fio_seconds=0.5,
        )
    raise ValueError(f"unknown mode {mode!r}: expected full, quick or smoke")
