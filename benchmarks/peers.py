"""ffrecord beside the dataset libraries users come from: LitData, MosaicML Streaming (MDS),
WebDataset and Hugging Face ``datasets``, on the same records (a ``bytes`` field and an
``int`` label), each written by its own library, then read by it.

Workloads: random batches (``batch`` random indices, read the way the library offers: a
batch call where it has one, else one index at a time; WebDataset has no random access) and
one sequential pass. Each measurement runs in a fresh process, contenders alternating, and
the median of ``--repeats`` is printed as a Markdown table with ffrecord's ratio over each.

    python benchmarks/peers.py --records 20000 --size 4096 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CONTENDERS = ("ffrecord", "litdata", "mds", "webdataset", "hf")


def records(n: int, size: int):
    rng = np.random.default_rng(0)
    for k in range(n):
        yield {"data": rng.bytes(size), "label": k}


def write(kind: str, root: Path, n: int, size: int) -> None:
    path = root / kind
    if kind == "ffrecord":
        from ffrecord.dataset import DatasetWriter

        with DatasetWriter(path, {"data": "bytes", "label": "int"}, length=n) as writer:
            for record in records(n, size):
                writer.append(record)
    elif kind == "litdata":
        from litdata.streaming.cache import Cache

        cache = Cache(str(path), chunk_bytes="64MB")
        for k, record in enumerate(records(n, size)):
            cache[k] = record
        cache.done()
        cache.merge()
    elif kind == "mds":
        from streaming import MDSWriter

        with MDSWriter(out=str(path), columns={"data": "bytes", "label": "int"}, size_limit=1 << 26) as writer:
            for record in records(n, size):
                writer.write(record)
    elif kind == "webdataset":
        import webdataset as wds

        path.mkdir()
        with wds.ShardWriter(str(path / "%06d.tar"), maxsize=1 << 26, verbose=0) as sink:
            for k, record in enumerate(records(n, size)):
                sink.write({"__key__": f"{k:08d}", "bin": record["data"], "cls": record["label"]})
    elif kind == "hf":
        import datasets

        datasets.Dataset.from_generator(lambda: records(n, size)).save_to_disk(str(path))


def opener(kind: str, path: Path):
    """(random batch reader or None, sequential pass) for a written dataset."""
    if kind == "ffrecord":
        from ffrecord.dataset import DatasetReader

        ds = DatasetReader(path)
        return (lambda idx: ds.read(idx)), (lambda: sum(1 for _ in ds))
    if kind == "litdata":
        from litdata import StreamingDataset

        ds = StreamingDataset(str(path))
        return (lambda idx: [ds[i] for i in idx.tolist()]), (lambda: sum(1 for _ in ds))
    if kind == "mds":
        from streaming import StreamingDataset

        ds = StreamingDataset(local=str(path), batch_size=1, shuffle=False)
        return (lambda idx: [ds[i] for i in idx.tolist()]), (lambda: sum(1 for _ in ds))
    if kind == "webdataset":
        import webdataset as wds

        tars = sorted(str(p) for p in path.glob("*.tar"))
        return None, (lambda: sum(1 for _ in wds.WebDataset(tars, shardshuffle=False)))
    import datasets

    ds = datasets.load_from_disk(str(path))
    return (lambda idx: ds[idx.tolist()]), (lambda: sum(1 for _ in ds))


def measure(kind: str, root: Path, n: int, batch: int, batches: int) -> dict:
    """Run in a fresh process: samples/s of random batches and of one sequential pass."""
    random_read, sequential = opener(kind, root / kind)
    out = {}
    if random_read is not None:
        rng = np.random.default_rng(1)
        random_read(rng.integers(0, n, batch))  # opened and warmed
        start = time.perf_counter()
        for _ in range(batches):
            random_read(rng.integers(0, n, batch))
        out["random"] = batch * batches / (time.perf_counter() - start)
    start = time.perf_counter()
    count = sequential()
    out["sequential"] = count / (time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(CONTENDERS))
    parser.add_argument("--child", nargs=2, metavar=("KIND", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], Path(args.child[1]), args.records, args.batch, args.batches)))
        return
    root = Path(tempfile.mkdtemp(prefix="ffrecord-peers-"))
    try:
        for kind in args.only:
            write(kind, root, args.records, args.size)
        results: dict[str, dict[str, list[float]]] = {kind: {} for kind in args.only}
        for repeat in range(args.repeats):
            order = args.only if repeat % 2 == 0 else args.only[::-1]  # alternating
            for kind in order:
                child = subprocess.run([sys.executable, __file__, "--records", str(args.records),
                                        "--batch", str(args.batch), "--batches", str(args.batches),
                                        "--child", kind, str(root)],
                                       capture_output=True, text=True, check=True)
                for workload, rate in json.loads(child.stdout.strip().splitlines()[-1]).items():
                    results[kind].setdefault(workload, []).append(rate)
        print(f"{args.records:,} records of {args.size:,} bytes + an int label; random: batches of "
              f"{args.batch}; medians of {args.repeats} fresh processes, alternating; "
              f"load average {os.getloadavg()[0]:.1f}\n")
        print("| workload | " + " | ".join(args.only) + " |")
        print("|---|" + "---|" * len(args.only))
        for workload in ("random", "sequential"):
            ours = statistics.median(results["ffrecord"][workload]) if "ffrecord" in results else None
            cells = []
            for kind in args.only:
                rates = results[kind].get(workload)
                if not rates:
                    cells.append("n/a")
                    continue
                rate = statistics.median(rates)
                ratio = f" ({ours / rate:.1f}x)" if ours and kind != "ffrecord" else ""
                cells.append(f"{rate:,.0f}/s{ratio}")
            print(f"| {workload} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
