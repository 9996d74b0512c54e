"""The read and write speed goals of issue 19, each figure in a fresh process:
``python -m benchmarks.reads [--rounds N] [--only singles,epoch,write,open] [--quick]``.

The contenders of a comparison take turns, round after round (fresh processes through
``benchmarks.contenders.isolated``, page cache warm), so that a busy moment of a shared machine hits
them alike; each goal is judged on the median of the per-round ratios, and their range is
printed beside it.

- singles: ``DatasetReader[i]`` of ``{image: 16 KiB bytes, label: int}``, shuffled, in
  process, against MosaicML Streaming's ``LocalDataset[i]``: >= 1.4x.
- epoch: open a file and read one shuffled epoch of ``read()`` batches, CRC checks on,
  against the reference (>= 4x at 1 KiB, >= 2.5x at 128 KiB) and, at 128 KiB, LMDB's
  ``getmulti`` (ahead).
- write: 128 KiB samples with ``durable=False`` until ``close()`` returns, against the
  reference's writer (which does not fsync): >= 1.2x.
- open: a 5,000,000-sample file (a 60 MB header) opened with ``check_data=True``, against
  the reference: >= 2x.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from .contenders import contender_named
from .contenders.isolated import call

ME = "benchmarks.reads"
SIZES = {"singles": 20_000, "epoch_small": 200_000, "epoch_large": 1_500, "write_large": 800,
         "open": 5_000_000}
QUICK = 100  # --quick divides every count by this: a run that proves the script works, in seconds


def open_seconds(contender: object, path: str) -> float:
    """Seconds to open ``path`` with checks on (this process has loaded the library)."""
    from ffrecord import FileReader

    FileReader(path[:-4] + "-tiny.ffr", True).close()
    start = time.perf_counter()
    reader = FileReader(path, True)
    elapsed = time.perf_counter() - start
    reader.close()
    return elapsed


def write_file(contender, path: str, n: int, size: int, durable: bool) -> float:
    """Bytes/s of writing ``n`` samples of ``size`` bytes, ``close`` included."""
    from ffrecord import FileWriter

    sample = np.random.default_rng(0).bytes(size)
    options = {} if durable else {"durable": False}
    start = time.perf_counter()
    writer = FileWriter(path, n, **options)
    for _ in range(n):
        writer.write_one(sample)
    writer.close()
    elapsed = time.perf_counter() - start
    os.remove(path)
    return n * size / elapsed


def compare(title: str, runners: dict, rounds: int, unit: str,
            goals: list[tuple[str, str, float]], lower_is_better: bool = False) -> None:
    """Runs the runners in turn for ``rounds`` rounds; prints each one's median and range,
    then each goal's per-round ratios (their median decides)."""
    values: dict[str, list[float]] = {name: [] for name in runners}
    for r in range(rounds):
        for name, run in runners.items():
            values[name].append(run())
            print(f"    round {r + 1}: {name:<28} {values[name][-1]:14,.4g}", flush=True)
    print(f"\n{title}")
    for name, got in values.items():
        print(f"  {name:<28} median {statistics.median(got):14,.4g} {unit}  "
              f"(range {min(got):,.4g} - {max(got):,.4g})")
    for a, b, target in goals:
        ratios = [(y / x if lower_is_better else x / y) for x, y in zip(values[a], values[b])]
        median = statistics.median(ratios)
        print(f"  {a} / {b}: {median:.2f}x median of rounds (range {min(ratios):.2f} - "
              f"{max(ratios):.2f}x), goal >= {target}x: {'met' if median >= target else 'MISSED'}")
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="singles,epoch,write,open")
    parser.add_argument("--quick", action="store_true",
                        help=f"every count / {QUICK}, one round: proves the script runs; its ratios are "
                             "start-up costs, not figures")
    args = parser.parse_args()
    only = set(args.only.split(","))
    n = {k: max(v // QUICK, 2) if args.quick else v for k, v in SIZES.items()}
    rounds = 1 if args.quick else args.rounds
    ffrecord, reference, lmdb = (contender_named(n) for n in ("ffrecord", "reference", "lmdb"))
    missing = reference.unavailable_reason()
    if missing is not None:
        raise SystemExit(f"the reference is needed: {missing}")
    root = Path(tempfile.mkdtemp(prefix="ffrecord-reads-bench-"))
    seeds = iter(range(10**6))
    print(f"{rounds} rounds, fresh process per figure, contenders taking turns; data in {root}")
    try:
        from .context import read_tree
        from .workers import write_structured

        if "singles" in only:
            singles = n["singles"]
            paths = write_structured(root / "structured", singles)
            read_tree(root / "structured")
            compare(f"DatasetReader[i], 2 fields, {singles} shuffled, in process",
                    {k: (lambda k=k: call("benchmarks.workers:single_datapoints", None, k, paths[k], singles))
                     for k in ("ffrecord", "streaming")},
                    rounds, "datapoints/s", [("ffrecord", "streaming", 1.4)])
        if "epoch" in only:
            for size, count, batch, goal in ((1 << 10, n["epoch_small"], 256, 4.0),
                                             (128 << 10, n["epoch_large"], 64, 2.5)):
                block = np.random.default_rng(size).bytes(size + 4096)
                samples = [block[k % 4096:k % 4096 + size] for k in range(count)]
                stores = {"ffrecord": root / f"epoch{size}" / "ffrecord"}
                contenders = [ffrecord, reference]
                goals = [("ffrecord", "reference", goal)]
                if size > 64 << 10:
                    stores["lmdb"] = root / f"epoch{size}" / "lmdb"
                    contenders.append(lmdb)
                    goals.append(("ffrecord", "lmdb", 1.0))
                for name, store in stores.items():
                    store.mkdir(parents=True)
                    contender_named(name).write(store, samples)
                del samples
                read_tree(root / f"epoch{size}")
                compare(f"shuffled read() epoch, open included, checks on (LMDB has none), "
                        f"{size >> 10} KiB x {count}, batch {batch}",
                        {c.name: (lambda c=c: call("benchmarks.workloads.fresh:epoch", c,
                                                   str(stores[c.store_name]), count, batch, next(seeds)))
                         for c in contenders},
                        rounds, "samples/s", goals)
        if "write" in only:
            path, written = str(root / "written.ffr"), n["write_large"]
            compare(f"write {written} x 128 KiB, close included",
                    {"ffrecord, durable=False": lambda: call(f"{ME}:write_file", ffrecord, path,
                                                             written, 128 << 10, False) / 1e6,
                     "reference (no fsync)": lambda: call(f"{ME}:write_file", reference, path,
                                                          written, 128 << 10, True) / 1e6},
                    rounds, "MB/s", [("ffrecord, durable=False", "reference (no fsync)", 1.2)])
        if "open" in only:
            from .contenders.python_loop import write_tiny_samples

            (root / "open").mkdir()
            big = str(root / "open" / "big.ffr")
            write_tiny_samples(big, n["open"])
            write_tiny_samples(big[:-4] + "-tiny.ffr", 1)
            read_tree(root / "open")
            compare(f"open a {n['open']:,}-sample file ({n['open'] * 12 / 1e6:.3g} MB header), check_data=True",
                    {c.name: (lambda c=c: call(f"{ME}:open_seconds", c, big) * 1e3)
                     for c in (ffrecord, reference)},
                    rounds, "ms", [("ffrecord", "reference", 2.0)], lower_is_better=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
