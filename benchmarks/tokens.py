"""Token streams, side by side with LitData: ``python benchmarks/tokens.py [--tokens N]``.

Same documents, same tokenizer (UTF-8 bytes, ``ffrecord.tokens.byte_tokenizer``), same worker
count, page cache warm; every measurement runs in a fresh process, ffrecord and LitData taking
turns, the best of ``--rounds`` kept:

- convert: JSONL files of documents of 50-5,000 tokens -> ``ffrecord.tokens.convert_text``
  against LitData's ``optimize(fn, files, item_loader=TokensLoader())`` (its ``fn`` reads a
  file and yields each document's tokens), tokens per second, pool start-up included;
- blocks of ``L + 1`` tokens (ours: ``TokenBlocks(block_size=L)``, block ``i`` = tokens
  ``[iL, iL+L+1)``; LitData, as its docs show this path:
  ``StreamingDataset(item_loader=TokensLoader(L + 1), shuffle=True, drop_last=True)``),
  shuffled, batch 8, ``drop_last`` on both sides, in process (``ffrecord.torch.DataLoader`` /
  LitData's ``StreamingDataLoader``, ``num_workers=0``; ours also as bare
  ``TokenBlocks.read`` calls) and through each DataLoader with 2 workers, the workers
  ``persistent_workers=True`` on both sides. Each process runs ``--epochs`` epochs: the
  first one starts the loader (its workers, its first reads); the rate is blocks per second
  of the fastest epoch after it (on a shared machine a stall from another job hits one epoch
  of whichever side is running), and of the median wait per batch over those epochs. The start-up is reported apart: the first batch's wait after
  ``iter()`` (workers started, first reads), and the first epoch's rate with it included;
- packing: padding of windowed best-fit against first-fit decreasing over the whole set.

``--smoke`` runs every measurement in this one process (the code paths, quickly: the
figures are then not comparable); ``GOAL MET``/``GOAL MISSED`` lines sum up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BATCH = 8
_smoke = False  # --smoke: everything in this process, LitData's conversion workers forked
GOALS = {"read": 2.0, "loader": 2.0, "convert": 1.0, "padding_points": 1.0}


def make_jsonl(folder: Path, tokens: int, files: int) -> int:
    """Documents of 50-5,000 random ASCII characters (one token per byte), ``tokens`` in all."""
    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     .,", np.uint8)
    handles = [open(folder / f"part-{k:03d}.jsonl", "w") for k in range(files)]
    written = k = 0
    while written < tokens:
        size = int(rng.integers(50, 5001))
        text = alphabet[rng.integers(0, len(alphabet), size)].tobytes().decode()
        handles[k % files].write(json.dumps({"text": text}) + "\n")
        written += size
        k += 1
    for f in handles:
        f.close()
    return written


# ---- what each fresh process measures ----------------------------------------------------

def litdata_tokenize(path: str):
    import torch

    from ffrecord.tokens import byte_tokenizer

    with open(path) as f:
        for line in f:
            yield torch.from_numpy(byte_tokenizer(json.loads(line)["text"]).astype(np.int16))


def child(task: str, side: str, data: Path, out: Path, workers: int, block: int, epochs: int) -> dict:
    files = sorted(str(p) for p in data.glob("*.jsonl"))
    if task == "convert":
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        if side == "ffrecord":
            from ffrecord.tokens import byte_tokenizer, convert_text

            convert_text(files, out, byte_tokenizer, 256, workers=workers, progress=False)
        else:
            from litdata import TokensLoader, optimize

            optimize(fn=litdata_tokenize, inputs=files, output_dir=str(out), chunk_size=(block + 1) * 512,
                     item_loader=TokensLoader(), num_workers=workers, verbose=False,
                     start_method="fork" if _smoke else None)  # --smoke: no fresh interpreter
        return {"seconds": time.perf_counter() - start}
    start = time.perf_counter()
    if side == "ffrecord-read":
        from ffrecord.tokens import TokenBlocks

        blocks = TokenBlocks(out, block_size=block)
        order = np.random.default_rng(0).permutation(len(blocks))
        batches = len(order) // BATCH * BATCH  # drop_last, as the loaders
        loader = Batches(lambda: (blocks.read(order[at:at + BATCH]) for at in range(0, batches, BATCH)))
    elif side == "ffrecord":
        from ffrecord.tokens import TokenBlocks
        from ffrecord.torch import DataLoader

        loader = DataLoader(TokenBlocks(out, block_size=block), batch_size=BATCH, shuffle=True, drop_last=True,
                            num_workers=workers, persistent_workers=workers > 0)
    else:
        from litdata import StreamingDataLoader, StreamingDataset, TokensLoader

        dataset = StreamingDataset(str(out), item_loader=TokensLoader(block_size=block + 1), shuffle=True,
                                   drop_last=True)
        loader = StreamingDataLoader(dataset, batch_size=BATCH, num_workers=workers,
                                     persistent_workers=workers > 0)
    opened = time.perf_counter()
    runs = [read_epoch(loader, block) for _ in range(epochs)]
    first, steady = runs[0], runs[1:] or runs  # --epochs 1: the first epoch is all there is
    return {"open": opened - start, "first_batch": first["first_batch"],
            "first_epoch_blocks_per_s": first["blocks"] / first["seconds"],
            "blocks_per_s": max(r["blocks"] / r["seconds"] for r in steady),
            "median_blocks_per_s": float(np.median([BATCH / r["median_wait"] for r in steady]))}


class Batches:
    """An iterable of the batches ``make()`` yields, a new pass at each ``iter()``."""

    def __init__(self, make) -> None:
        self.make = make

    def __iter__(self):
        return self.make()


def read_epoch(loader, block: int) -> dict:
    """One epoch of ``loader``: its time from ``iter()``, its first batch's wait, the median wait."""
    began = time.perf_counter()
    iterator = iter(loader)
    batch = next(iterator)
    first = time.perf_counter()
    count, waits = len(batch), []
    while True:
        before = time.perf_counter()
        batch = next(iterator, None)
        if batch is None:
            break
        waits.append(time.perf_counter() - before)
        assert batch.shape[1] == block + 1, batch.shape
        count += len(batch)
    return {"seconds": time.perf_counter() - began, "first_batch": first - began, "blocks": count,
            "median_wait": float(np.median(waits or [first - began]))}


def run_child(*args: str, in_process: bool = False) -> dict:
    if in_process:  # --smoke: the code paths, not figures
        global _smoke
        _smoke = True
        task, side, data, out, workers, block, epochs = args
        return child(task, side, Path(data), Path(out), int(workers), int(block), int(epochs))
    proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{args}: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=10_000_000)
    parser.add_argument("--block", type=int, default=2048)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=5,
                        help="epochs per read process: the first starts the loader, the fastest "
                             "of the others is its rate (a stall hits one epoch)")
    parser.add_argument("--smoke", action="store_true",
                        help="every measurement in this process: checks the code paths, quickly")
    parser.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        task, side, data, out, workers, block, epochs = args.child
        print(json.dumps(child(task, side, Path(data), Path(out), int(workers), int(block), int(epochs))))
        return

    folder = Path(tempfile.mkdtemp(prefix="ffrecord-bench-tokens-"))
    try:
        data = folder / "jsonl"
        data.mkdir()
        tokens = make_jsonl(data, args.tokens, args.files)
        print(f"{tokens:,} tokens in {sum(1 for f in data.glob('*.jsonl') for _ in open(f)):,} documents, "
              f"block {args.block}, batch {BATCH}, {args.workers} workers, best of {args.rounds} rounds "
              f"(reads: {args.epochs} epochs each, the first the start-up, then the fastest epoch; workers "
              f"persistent on both sides), fresh process per run, contenders alternating"
              + (" -- SMOKE: all in one process, figures not comparable" if args.smoke else ""))
        outs = {"ffrecord": folder / "ffr", "litdata": folder / "lit"}
        results: dict[str, dict] = {}  # the best run of each
        rounds: dict[str, list[dict]] = {}  # every run, in round order

        def measure(key: str, task: str, side: str, out: Path, workers: int, better) -> None:
            got = run_child(task, side, str(data), str(out), str(workers), str(args.block), str(args.epochs),
                            in_process=args.smoke)
            rounds.setdefault(key, []).append(got)
            if key not in results or better(got, results[key]):
                results[key] = got

        faster = lambda a, b: a["seconds"] < b["seconds"]  # noqa: E731
        more = lambda a, b: a["blocks_per_s"] > b["blocks_per_s"]  # noqa: E731
        for _ in range(args.rounds):
            for side in ("ffrecord", "litdata"):
                measure(f"convert {side}", "convert", side, outs[side], args.workers, faster)
        for round_ in range(args.rounds):
            sides = ("ffrecord", "litdata") if round_ % 2 == 0 else ("litdata", "ffrecord")
            measure("read ffrecord TokenBlocks.read", "read", "ffrecord-read", outs["ffrecord"], 0, more)
            for workers in sorted({0, args.workers}):
                for side in sides:
                    measure(f"read {side} loader {workers} workers", "read", side, outs[side], workers, more)
        report(results, rounds, tokens, args)
        padding(folder, outs["ffrecord"], args.block)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(results: dict, rounds: dict, tokens: int, args: argparse.Namespace) -> None:
    goals = []
    ours, theirs = results["convert ffrecord"]["seconds"], results["convert litdata"]["seconds"]
    print(f"convert: ffrecord {tokens / ours / 1e6:.2f} M tokens/s ({ours:.2f} s), litdata "
          f"{tokens / theirs / 1e6:.2f} M tokens/s ({theirs:.2f} s): {theirs / ours:.2f}x "
          f"(goal >= {GOALS['convert']}x)")
    goals.append(("conversion tokens/s", theirs / ours, GOALS["convert"]))
    for label, ours, theirs in (
            ("DataLoader in process", "read ffrecord loader 0 workers", "read litdata loader 0 workers"),
            (f"DataLoader {args.workers} workers", f"read ffrecord loader {args.workers} workers",
             f"read litdata loader {args.workers} workers"),
            ("in process, TokenBlocks.read per batch (vs LitData's loader in process)",
             "read ffrecord TokenBlocks.read", "read litdata loader 0 workers")):
        if ours == theirs.replace("litdata", "ffrecord") and args.workers == 0 and "0 workers" in label:
            continue  # --workers 0: the loaders in process only, reported once
        a, b = results[ours], results[theirs]
        ratio = a["blocks_per_s"] / b["blocks_per_s"]
        paired = [x["blocks_per_s"] / y["blocks_per_s"] for x, y in zip(rounds[ours], rounds[theirs])]
        print(f"blocks, {label}: ffrecord {a['blocks_per_s']:,.0f}/s (median batch: "
              f"{a['median_blocks_per_s']:,.0f}/s), litdata {b['blocks_per_s']:,.0f}/s (median batch: "
              f"{b['median_blocks_per_s']:,.0f}/s): {ratio:.2f}x, by median batch "
              f"{a['median_blocks_per_s'] / b['median_blocks_per_s']:.2f}x (goal >= {GOALS['read']}x); "
              f"round by round {min(paired):.2f}-{max(paired):.2f}x")
        print(f"  start-up: ffrecord {a['open']:.2f} s import and open, first batch {a['first_batch']:.3f} s "
              f"after iter(), first epoch {a['first_epoch_blocks_per_s']:,.0f} blocks/s; litdata "
              f"{b['open']:.2f} s, {b['first_batch']:.3f} s, {b['first_epoch_blocks_per_s']:,.0f} blocks/s: "
              f"first epoch {a['first_epoch_blocks_per_s'] / b['first_epoch_blocks_per_s']:.2f}x")
        goals.append((f"blocks/s, {label.split(' (')[0]}", ratio, GOALS["read"]))
    for name, ratio, goal in goals:
        print(f"GOAL {'MET   ' if ratio >= goal else 'MISSED'} {name}: {ratio:.2f}x LitData (goal >= {goal}x)")


def padding(folder: Path, dataset: Path, block: int) -> None:
    from ffrecord.tokens import TokenStream, pack

    lengths = TokenStream(dataset).lengths
    ffd = pack(lengths, block, "first_fit")
    for window in (256, 1000, None):
        start = time.perf_counter()
        plan = pack(lengths, block, "best_fit", window=window, seed=0)
        seconds = time.perf_counter() - start
        points = 100 * (plan.padding_fraction - ffd.padding_fraction)
        print(f"packing: best-fit window={window}: padding {plan.padding_fraction:.2%} vs first-fit "
              f"decreasing over the whole set {ffd.padding_fraction:.2%}: {points:+.2f} points "
              f"(goal <= {GOALS['padding_points']}), planned in {seconds:.2f} s")


if __name__ == "__main__":
    main()
