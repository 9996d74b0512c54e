"""Token streams, side by side with LitData: ``python benchmarks/tokens.py [--tokens N]``.

Same documents, same tokenizer (UTF-8 bytes, ``ffrecord.tokens.byte_tokenizer``), same worker
count, page cache warm; every measurement runs in a fresh process, ffrecord and LitData taking
turns, the best of ``--rounds`` kept:

- convert: JSONL files of documents of 50-5,000 tokens -> ``ffrecord.tokens.convert_text``
  against LitData's ``optimize(fn, files, item_loader=TokensLoader())`` (its ``fn`` reads a
  file and yields each document's tokens), tokens per second, pool start-up included;
- blocks of ``L + 1`` tokens (ours: ``TokenBlocks(block_size=L)``, block ``i`` = tokens
  ``[iL, iL+L+1)``; LitData: ``StreamingDataset(item_loader=TokensLoader(L + 1))``), shuffled,
  batch 8, ``--epochs`` epochs per process (the fastest kept: on a shared machine a stall
  hits one epoch of whichever side is running): in process (``ffrecord.torch.DataLoader`` /
  LitData's ``StreamingDataLoader``, ``num_workers=0``; ours also as bare
  ``TokenBlocks.read`` calls) and through each DataLoader with 2 workers; blocks per second
  over the epoch from the second batch on (the first epoch's start-up reported apart), and
  from the median wait per batch;
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
        loader = (blocks.read(order[at:at + BATCH]) for at in range(0, len(order), BATCH))
    elif side == "ffrecord":
        from ffrecord.tokens import TokenBlocks
        from ffrecord.torch import DataLoader

        loader = DataLoader(TokenBlocks(out, block_size=block), batch_size=BATCH, shuffle=True,
                            num_workers=workers)
    else:
        from litdata import StreamingDataLoader, StreamingDataset, TokensLoader

        dataset = StreamingDataset(str(out), item_loader=TokensLoader(block_size=block + 1), shuffle=True)
        loader = StreamingDataLoader(dataset, batch_size=BATCH, num_workers=workers)
    best: dict = {}
    for epoch in range(epochs):
        if epoch and side == "ffrecord-read":
            loader = (blocks.read(order[at:at + BATCH]) for at in range(0, len(order), BATCH))
        iterator = iter(loader)
        batch = next(iterator)  # start-up: opening, workers, the first batch
        first = time.perf_counter()
        waits, count = [], 0
        while True:
            before = time.perf_counter()
            batch = next(iterator, None)
            if batch is None:
                break
            waits.append(time.perf_counter() - before)
            assert batch.shape[1] == block + 1, batch.shape
            count += len(batch)
        end = time.perf_counter()
        got = {"startup": first - start, "seconds": end - first, "blocks": count,
               "blocks_per_s": count / (end - first), "median_blocks_per_s": BATCH / float(np.median(waits))}
        if not best or got["blocks_per_s"] > best["blocks_per_s"]:
            best = got | {"startup": best.get("startup", got["startup"])}
        start = time.perf_counter()
    return best


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
                        help="epochs per read process, the fastest kept (a stall hits one epoch)")
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
              f"(reads: of {args.epochs} epochs each), fresh process per run, contenders alternating"
              + (" -- SMOKE: all in one process, figures not comparable" if args.smoke else ""))
        outs = {"ffrecord": folder / "ffr", "litdata": folder / "lit"}
        results: dict[str, dict] = {}

        def measure(key: str, task: str, side: str, out: Path, workers: int, better) -> None:
            got = run_child(task, side, str(data), str(out), str(workers), str(args.block), str(args.epochs),
                            in_process=args.smoke)
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
        report(results, tokens, args)
        padding(folder, outs["ffrecord"], args.block)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(results: dict, tokens: int, args: argparse.Namespace) -> None:
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
        print(f"blocks, {label}: ffrecord {a['blocks_per_s']:,.0f}/s (median batch: "
              f"{a['median_blocks_per_s']:,.0f}/s, start {a['startup']:.2f} s), litdata "
              f"{b['blocks_per_s']:,.0f}/s (median batch: {b['median_blocks_per_s']:,.0f}/s, start "
              f"{b['startup']:.2f} s): {ratio:.2f}x, by median batch "
              f"{a['median_blocks_per_s'] / b['median_blocks_per_s']:.2f}x (goal >= {GOALS['read']}x)")
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
