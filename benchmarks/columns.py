"""Columns side by side with Lance and Megatron-Core: ``python benchmarks/columns.py``.

Same data for every contender, page cache warm, every measurement in a fresh process,
contenders taking turns, the best of ``--rounds`` kept:

- small rows: ``--rows`` (1,000,000) rows ``{i: int64, f: float32, s: 32 bytes}``, ``s``
  stored two ways on each side: fixed-size (ffrecord ``uint8[32]``, Lance a fixed-size list
  of 32 ``uint8``) and variable (ffrecord ``bytes``, Lance ``binary``). Measured: the write
  of the whole table from arrays in memory (ffrecord ``append_batch``, ``durable=False``:
  no fsync, as Lance; Lance ``write_dataset``), a full scan of every column in Arrow
  batches of 65,536 (ffrecord ``iter_batches(arrow=True)``, Lance ``to_batches``: the same
  output), and ffrecord's own scan to numpy arrays and lists (``iter_batches``: a Python
  ``bytes`` object per variable-length value; ``scan-lists``, no peer),
  one column whole (``reader["f"]`` / ``to_table(columns=["f"])``), the whole dataset as an
  Arrow table (``to_arrow`` / ``to_table``), random batches of 64 rows (``read_columns`` /
  ``take``; ``read``, the list of dicts, too) and single rows (``reader[i]`` / ``take([i])``);
- records: ``--records`` (20,000) records ``{data: 16 KiB bytes, label: int64}``: random
  batches of 64 and single records, as above;
- tokens: ``--tokens`` (10,000,000) token ids in documents of 50-5,000 tokens (int32 arrays,
  vocabulary 50,257: stored as uint16 on both sides): ``TokenWriter.write_many`` against
  Megatron-Core's ``IndexedDatasetBuilder`` (``add_document`` per document, ``finalize``),
  which runs in the Python >= 3.12 environment ``--megatron-python`` names (``make
  megatron-venv`` makes one); each given the documents as it takes them (numpy arrays;
  torch tensors), the time from the first document to the dataset complete, unsynced; neither
  told the document count.

Rates are rows (records, tokens) per second; ``GOAL MET``/``GOAL MISSED`` lines compare the
ratios with issue 34's goals. ``--quick`` shrinks everything (code paths, not figures).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BATCH = 64
SCAN_BATCH = 65536
GOALS = {"write": 1.0, "scan": 1.0, "column": 1.0, "to_arrow": 1.0, "random_batches": 3.0, "tokens": 1.0}
VOCAB = 50257


# ---- data ---------------------------------------------------------------------------------

def small_rows(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"i": np.arange(n, dtype=np.int64), "f": rng.random(n, dtype=np.float32),
            "s": rng.integers(0, 256, (n, 32), dtype=np.uint8)}


def arrow_rows(n: int, fixed: bool):
    import pyarrow as pa

    cols = small_rows(n)
    s = cols["s"]
    if fixed:
        s_array = pa.FixedSizeListArray.from_arrays(pa.array(s.reshape(-1)), 32)
    else:
        offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
        s_array = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(s)])
    return pa.table({"i": cols["i"], "f": cols["f"], "s": s_array})


def documents(tokens: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    lengths = []
    while sum(lengths) < tokens:
        lengths.append(int(rng.integers(50, 5001)))
    flat = rng.integers(0, VOCAB, sum(lengths)).astype(np.int32)
    return np.split(flat, np.cumsum(lengths)[:-1])


# ---- what each fresh process measures -----------------------------------------------------

def child(task: str, side: str, variant: str, folder: Path, n: int) -> dict:
    fixed = variant == "fixed"
    path = folder / f"{side}-{variant}"
    if task == "write":
        shutil.rmtree(path, ignore_errors=True)
        if side == "ffrecord":
            from ffrecord import _lib
            from ffrecord.dataset import DatasetWriter

            _lib.current()
            cols = small_rows(n)
            if not fixed:
                cols["s"] = arrow_rows(n, False).column("s")
            start = time.perf_counter()
            with DatasetWriter(path, {"i": "int64", "f": "float32", "s": "uint8[32]" if fixed else "bytes"},
                               durable=False, block_bytes=int(os.environ.get("BLOCK_BYTES", 2048))) as writer:
                writer.append_batch(cols)
        else:
            import lance

            table = arrow_rows(n, fixed)
            start = time.perf_counter()
            lance.write_dataset(table, str(path))
        return {"rate": n / (time.perf_counter() - start)}
    if task == "records-write":
        rng = np.random.default_rng(1)
        data = rng.integers(0, 256, (n, 16384), dtype=np.uint8)
        shutil.rmtree(path, ignore_errors=True)
        import pyarrow as pa

        offsets = np.arange(0, 16384 * n + 1, 16384, dtype=np.int64)
        column = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        if side == "ffrecord":
            from ffrecord.dataset import DatasetWriter

            with DatasetWriter(path, {"data": "bytes", "label": "int64"}, durable=False) as writer:
                writer.append_batch({"data": column, "label": np.arange(n)})
        else:
            import lance

            lance.write_dataset(pa.table({"data": column, "label": np.arange(n)}), str(path))
        return {}
    if task == "tokens":
        return tokens_child(side, folder, n)
    import pyarrow  # noqa: F401 - both sides use Arrow; its import is not what is measured

    reader = _open(side, path)
    rows = len(reader) if side == "ffrecord" else reader.count_rows()
    start = time.perf_counter()
    count = _run(task, side, reader, rows)
    return {"rate": count / (time.perf_counter() - start)}


def _open(side: str, path: Path):
    if side == "ffrecord":
        from ffrecord import _lib
        from ffrecord.dataset import DatasetReader

        _lib.current()  # the library loaded (Go's runtime started), as Lance's is at its import

        return DatasetReader(path)
    import lance

    return lance.dataset(str(path))


def _run(task: str, side: str, reader, rows: int) -> int:
    rng = np.random.default_rng(2)
    ours = side == "ffrecord"
    if task == "scan":
        batches = reader.iter_batches(SCAN_BATCH, arrow=True) if ours else reader.to_batches(batch_size=SCAN_BATCH)
        return sum(batch.num_rows for batch in batches)
    if task == "scan-lists":
        return sum(len(batch["i"]) for batch in reader.iter_batches(SCAN_BATCH))
    if task == "column":
        return len(reader["f"]) if ours else reader.to_table(columns=["f"]).num_rows
    if task == "to_arrow":
        return (reader.to_arrow() if ours else reader.to_table()).num_rows
    if task in ("random_batches", "random_dicts", "records_batches"):
        batches = 2000 if task != "records_batches" else 1000
        order = rng.integers(0, rows, (batches, BATCH))
        for idx in order:
            if task == "random_dicts":
                reader.read(idx)
            elif ours:
                reader.read_columns(idx) if task == "random_batches" else reader.read(idx)
            else:
                reader.take(idx)
        return batches * BATCH
    if task in ("single", "records_single"):
        picks = rng.integers(0, rows, 5000).tolist()
        for i in picks:
            reader[i] if ours else reader.take([i])
        return len(picks)
    raise ValueError(task)


def tokens_child(side: str, folder: Path, n: int) -> dict:
    docs = documents(n)
    count = sum(map(len, docs))
    path = folder / f"tokens-{side}"
    shutil.rmtree(path, ignore_errors=True)
    if side == "ffrecord":
        from ffrecord import _lib
        from ffrecord.tokens import TokenWriter

        _lib.current()
        start = time.perf_counter()
        with TokenWriter(path, VOCAB, durable=False) as writer:
            writer.write_many(docs)
    else:  # run by --megatron-python
        import torch
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

        tensors = [torch.from_numpy(d) for d in docs]
        path.mkdir()
        start = time.perf_counter()
        builder = IndexedDatasetBuilder(str(path / "data.bin"), dtype=np.uint16)
        for tensor in tensors:
            builder.add_document(tensor, [len(tensor)])
        builder.finalize(str(path / "data.idx"))
    return {"rate": count / (time.perf_counter() - start)}


# ---- the runs -----------------------------------------------------------------------------

def run_child(python: str, *args: str) -> dict:
    proc = subprocess.run([python, os.path.abspath(__file__), "--child", *args], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    if proc.returncode:
        raise RuntimeError(f"{args}: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--megatron-python", default=str(Path(__file__).resolve().parent.parent
                                                         / ".venv-megatron" / "bin" / "python"))
    parser.add_argument("--quick", action="store_true", help="small data, one round: the code paths")
    parser.add_argument("--only", nargs="*", help="task names to run (default: all)")
    parser.add_argument("--block-bytes", type=int, default=None,
                        help="ffrecord's column block size (default: the library's, 2048)")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        task, side, variant, folder, n = args.child
        print(json.dumps(child(task, side, variant, Path(folder), int(n))))
        return
    if args.block_bytes:
        os.environ["BLOCK_BYTES"] = str(args.block_bytes)
    if args.quick:
        args.rows, args.records, args.tokens, args.rounds = 20_000, 2_000, 200_000, 1
    folder = Path(tempfile.mkdtemp(prefix="ffrecord-bench-columns-"))
    results: dict[str, dict[str, float]] = {}
    try:
        print(f"{args.rows:,} rows {{i: int64, f: float32, s: 32 bytes}}, {args.records:,} records of 16 KiB, "
              f"{args.tokens:,} tokens; fresh process per run, contenders alternating, best of {args.rounds}")
        small = [("write", v) for v in ("fixed", "variable")]
        small += [(t, v) for t in ("scan", "column", "to_arrow", "random_batches", "single") for v in ("fixed", "variable")]
        plan = [(task, variant, args.rows) for task, variant in small]
        plan += [("scan-lists", v, args.rows) for v in ("fixed", "variable")]
        plan += [("random_dicts", v, args.rows) for v in ("fixed", "variable")]
        plan += [("records-write", "records", args.records), ("records_batches", "records", args.records),
                 ("records_single", "records", args.records), ("tokens", "tokens", args.tokens)]
        if args.only:
            plan = [p for p in plan if p[0] in args.only or p[0] in ("write", "records-write")]
        ours_only = {"scan-lists", "random_dicts"}
        if not Path(args.megatron_python).exists():
            print(f"Megatron-Core: not measured ({args.megatron_python} missing: make megatron-venv)")
            plan = [p for p in plan if p[0] != "tokens"]
        if importlib.util.find_spec("lance") is None:
            print("Lance: not measured (pip install pylance)")
            ours_only |= {task for task, _, _ in plan}
        for round_ in range(args.rounds):
            for task, variant, n in plan:
                if task in ("write", "records-write") and round_ and task == "records-write":
                    continue
                sides = ["ffrecord"] if task in ours_only and task != "tokens" else [
                    "ffrecord", "megatron" if task == "tokens" else "lance"]
                for side in (sides if round_ % 2 == 0 else sides[::-1]):
                    python = args.megatron_python if side == "megatron" else sys.executable
                    got = run_child(python, task, side, variant, str(folder), str(n))
                    if "rate" in got:
                        key = f"{task}/{variant}"
                        results.setdefault(key, {})
                        results[key][side] = max(results[key].get(side, 0.0), got["rate"])
        report(results)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(results: dict[str, dict[str, float]]) -> None:
    print(f"\n{'work':<30} {'ffrecord':>14} {'peer':>14} {'ratio':>8}")
    for key, sides in results.items():
        peer = next((v for k, v in sides.items() if k != "ffrecord"), None)
        ours = sides.get("ffrecord", 0.0)
        ratio = f"{ours / peer:.2f}x" if peer else ""
        print(f"{key:<30} {ours:>14,.0f} {peer or 0:>14,.0f} {ratio:>8}")
    for key, sides in results.items():
        task = key.split("/")[0].replace("records_batches", "random_batches")
        goal = GOALS.get(task)
        peer = next((v for k, v in sides.items() if k != "ffrecord"), None)
        if goal is None or not peer:
            continue
        ratio = sides["ffrecord"] / peer
        print(f"GOAL {'MET' if ratio >= goal else 'MISSED'}: {key} {ratio:.2f}x (goal {goal}x)")


if __name__ == "__main__":
    main()
