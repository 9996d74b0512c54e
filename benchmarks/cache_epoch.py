"""Shuffled DataLoader epochs from object storage with the node-local chunk cache.

One loopback server (``tests/range_server.py``, its own process, ``--latency`` per
request, objects answered from memory, GETs and bytes counted) serves the dataset: N
samples of 16 KiB as a plain ``.ffr`` file and as a structured ``{image, label}`` dataset.
A shuffled epoch (``ffrecord.torch.DataLoader``, 2 workers, batch 64) is read, each epoch
in a fresh process:

- ``cold``: an empty cache directory; ``warm``: the same directory, a new process (as a
  restarted job or the next epoch would find it); ``local``: the same file on local disk.
- ``uncached, N workers``: no cache directory, what a user who sets none gets, with the
  loader such a user writes (``shuffle=True``, no transform: a worker reads several batches
  per task), 0 and 2 workers. Every epoch without a cache downloads its samples again; the
  goal is that it downloads nothing else (bytes downloaded within 1.15x the dataset's).

Each contender's time runs from opening its dataset (ffrecord: headers, and the first chunk
that comes with one; the peers: their index files) to the epoch's last batch.

The order is chunk-aware, ``ffrecord.order.ChunkShuffle``: chunks (``FileReader.chunk_bounds``)
are permuted and read a window of ``--window`` chunks at a time, samples shuffled within the
window. Printed per epoch: samples/s, the CPU seconds the epoch took (its process and the
loader's workers: a figure the machine's load swings far less than wall time), GETs, bytes
downloaded (and their ratio to the dataset's bytes) and bytes in the cache, and the goals:
GETs per cold epoch within 1.1x of bytes/chunk size, no data GET when warm, warm within 10%
of local disk, an uncached epoch's bytes within 1.15x the dataset's.

    python benchmarks/cache_epoch.py [--samples 20000] [--latency 0.02] [--quick] [--repeat 3] [--pairs 2]

With ``--repeat``, that many rounds run (each: ffrecord cold, its cache emptied first, then
``--pairs`` pairs of a warm and a local epoch, alternating which goes first; then each peer
cold and warm), and the goals compare medians (the ratio of each side-by-side pair is
printed too). Every ffrecord epoch reads the same order; after each cold epoch the cache's
dirty pages are written back (``sync``, not timed), so that the kernel does not write them
in the middle of a later epoch. The epochs are short (a fraction of a second for 20,000
samples), so a shared machine's load swings single figures: compare the pairs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from tests.range_server import STATS_PATH, RangeServer  # noqa: E402

SAMPLE = 16 << 10


def _serve(root: str, latency: float, ready: Any, stop: Any) -> None:
    objects = {"/" + str(p.relative_to(root)): p.read_bytes() for p in Path(root).rglob("*") if p.is_file()}
    with RangeServer(objects, latency=latency) as srv:
        ready.put(srv.url)
        stop.wait()


def counters(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url + STATS_PATH) as answer:
        return json.loads(answer.read())


def write_data(root: Path, n: int, chunk_size: int, peers: list[str]) -> None:
    """The dataset in each contender's format, under ``root`` (served as ``/bench/...``)."""
    from ffrecord import FileWriter
    from ffrecord.dataset import DatasetWriter

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, SAMPLE), dtype=np.uint8)
    with FileWriter(root / "plain.ffr", n) as w:
        w.write_many(images)
    with DatasetWriter(root / "structured", {"image": "bytes", "label": "int"}) as w:
        for i in range(n):
            w.append({"image": images[i].tobytes(), "label": i % 1000})
    for kind in ("plain", "structured"):
        if "streaming" in peers:
            from streaming import MDSWriter

            columns = {"image": "bytes", "label": "int"} if kind == "structured" else {"image": "bytes"}
            with MDSWriter(out=str(root / f"mds-{kind}"), columns=columns, size_limit=chunk_size) as w:
                for i in range(n):
                    w.write({"image": images[i].tobytes(), "label": i % 1000} if kind == "structured"
                            else {"image": images[i].tobytes()})
        if "litdata" in peers:
            import litdata

            litdata.optimize(fn=_LitItem(images, kind), inputs=list(range(n)), num_workers=1,
                             output_dir=str(root / f"lit-{kind}"), chunk_bytes=chunk_size)


class _LitItem:
    """LitData's per-item function (picklable)."""

    def __init__(self, images: np.ndarray, kind: str) -> None:
        self.images, self.kind = images, kind

    def __call__(self, i: int) -> Any:
        image = self.images[i].tobytes()
        return {"image": image, "label": i % 1000} if self.kind == "structured" else {"image": image}


# -- one epoch, in a fresh process ------------------------------------------------------

def _images(indices, data):
    return [d.nbytes for d in data]


def _structured(d):
    return len(d["image"]) + d["label"]


def epoch(kind: str, where: str, cache: str | None, chunk_size: int, window: int,
          workers: int = 2) -> dict[str, float]:
    """Reads one shuffled epoch of ``kind`` (plain/structured) from ``where`` (a URL or a
    local directory): the chunk-aware order, each sample's bytes counted by a transform;
    with ``window`` 0, a new user's loader instead (a full shuffle, batches as read and
    collated: a worker reads several per task). Returns samples/s and the CPU seconds."""
    import time
    import warnings

    from ffrecord import UncachedRemoteWarning

    from ffrecord.dataset import DatasetReader
    from ffrecord.order import ChunkShuffle
    from ffrecord.torch import DataLoader, Dataset, StructuredDataset

    opts = {"cache_dir": cache, "chunk_size": chunk_size} if cache else None
    base = where.rstrip("/")
    start, cpu = time.perf_counter(), _cpu_seconds()  # opening counts: it downloads the headers and a first chunk
    if kind == "plain":
        dataset = Dataset(base + "/plain.ffr", storage_options=opts)
        if window:
            dataset.process = _images
        bounds = dataset.reader.chunk_bounds(chunk_size)
    else:
        reader = DatasetReader(base + "/structured/", storage_options=opts)
        dataset = StructuredDataset(reader, transform=_structured if window else None)
        bounds = reader.field_reader("image").chunk_bounds(chunk_size)
    order = {"order": ChunkShuffle(bounds, seed=0, window=window)} if window else {"shuffle": True, "seed": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncachedRemoteWarning)  # the point of the uncached epochs
        loader = DataLoader(dataset, batch_size=64, num_workers=workers, **order)
    n = sum(len(batch["label"] if isinstance(batch, dict) else batch) for batch in loader)
    return {"samples_per_s": n / (time.perf_counter() - start), "samples": n, "cpu_s": _cpu_seconds() - cpu}


def peer_epoch(peer: str, kind: str, url: str, local: str) -> dict[str, float]:
    """One shuffled epoch of a peer over its own format at ``s3://bench/...`` (endpoint in the
    environment), with its own cache in ``local``."""
    import time

    import torch.utils.data

    start, cpu = time.perf_counter(), _cpu_seconds()  # opening counts, as ffrecord's does (index files)
    if peer == "streaming":
        from streaming import StreamingDataset

        dataset = StreamingDataset(remote=f"s3://bench/mds-{kind}", local=local, shuffle=True,
                                   shuffle_seed=0, batch_size=64)
        # Forked workers would share the parent's boto3 connection: drop it before forking.
        for stream in getattr(dataset, "streams", []):
            downloader = getattr(stream, "_downloader", None)
            if hasattr(downloader, "_s3_client"):
                downloader._s3_client = None  # each worker makes its own
    else:
        import litdata
        from litdata.streaming import downloader

        # The loopback server speaks plain HTTP, which obstore (LitData's fast client)
        # refuses unless its client options allow it (reqwest: BadScheme otherwise).
        downloader._OBSTORE_CLIENT_OPTIONS = {**downloader._OBSTORE_CLIENT_OPTIONS, "allow_http": True}
        dataset = litdata.StreamingDataset(f"s3://bench/lit-{kind}", shuffle=True, seed=0,
                                           cache_dir=local)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=2,
                                         collate_fn=_count_collate)
    n = sum(loader)
    return {"samples_per_s": n / (time.perf_counter() - start), "samples": n, "cpu_s": _cpu_seconds() - cpu}


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the loader's workers, joined when
    an epoch ends): a figure that a shared machine's load swings far less than wall time."""
    import resource

    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _count_collate(batch: list) -> int:
    return len(batch)


def _child(args: list[str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--epoch", json.dumps(args)], capture_output=True,
                         text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--chunk-size", type=int, default=16 << 20)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="4,000 samples, 2 MiB chunks")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every epoch, side by side")
    parser.add_argument("--pairs", type=int, default=2,
                        help="warm and local epochs per round, side by side, which goes first alternating")
    parser.add_argument("--peers", default="streaming,litdata",
                        help="comma-separated: streaming (mosaicml-streaming), litdata; '' for none")
    parser.add_argument("--epoch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.epoch:
        call = json.loads(args.epoch)
        print(json.dumps(peer_epoch(*call[1:]) if call[0] == "peer" else epoch(*call)))
        return
    if args.quick:
        args.samples, args.chunk_size = 4000, 2 << 20
    work = Path(tempfile.mkdtemp(prefix="ffr-cache-bench-"))
    try:
        peers = [p for p in args.peers.split(",") if p]
        top = work / "data"
        root = top / "bench"
        root.mkdir(parents=True)
        write_data(root, args.samples, args.chunk_size, peers)
        ctx = mp.get_context("spawn")
        ready, stop = ctx.Queue(), ctx.Event()
        server = ctx.Process(target=_serve, args=(str(top), args.latency, ready, stop), daemon=True)
        server.start()
        server_url = ready.get(timeout=300)
        url = server_url + "/bench"
        os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                           "AWS_DEFAULT_REGION": "us-east-1", "S3_ENDPOINT_URL": server_url,
                           "AWS_ENDPOINT_URL": server_url, "AWS_ALLOW_HTTP": "true"})
        data_bytes = args.samples * SAMPLE
        print(f"{args.samples:,} samples of 16 KiB ({data_bytes / 2**20:.0f} MiB), {args.latency * 1000:.0f} ms "
              f"per request, chunks of {args.chunk_size / 2**20:g} MiB, windows of {args.window} chunks; "
              "DataLoader: 2 workers, batch 64; every epoch in a fresh process")
        print(f"Every ffrecord epoch (cold, warm, local) reads the same chunk-aware order (ChunkShuffle, seed 0, "
              f"windows of {args.window} chunks); the peers use their own shuffles. Each round: a cold epoch, then "
              f"{args.pairs} pairs of a warm and a local epoch, alternating which goes first.")
        print("| dataset | epoch | samples/s | CPU s | GETs (of .ffr files) | MiB downloaded | ÷ dataset | MiB in cache |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        results: dict[tuple[str, str], list[tuple[float, int, int, int]]] = {}

        def measure(kind: str, name: str, call: list[Any], cache: Path | None) -> None:
            before = counters(server_url)
            try:
                r = _child(call)
            except Exception as exc:  # a peer failing is reported, not hidden
                print(f"| {kind} | {name} | failed: {str(exc).splitlines()[-1][:120]} | | | | | |", flush=True)
                return
            after = counters(server_url)
            gets = sum(after["gets"].values()) - sum(before["gets"].values())
            data_gets = sum(n - before["gets"].get(p, 0) for p, n in after["gets"].items() if p.endswith(".ffr"))
            got = after["bytes"] - before["bytes"]
            in_cache = dir_bytes(cache) if cache is not None and cache.exists() else 0
            if name.endswith("cold"):  # its cache's dirty pages written back now, not by the
                os.sync()  # kernel in the middle of a later epoch (not timed)
            results.setdefault((kind, name), []).append((r["samples_per_s"], gets, got, data_gets, r["cpu_s"]))
            ours = "" if " " in name and "uncached" not in name else f" ({data_gets:,})"
            print(f"| {kind} | {name} | {r['samples_per_s']:,.0f} | {r['cpu_s']:.2f} | {gets:,}{ours} | "
                  f"{got / 2**20:,.1f} | {got / data_bytes:.3f} | {in_cache / 2**20:,.1f} |", flush=True)

        # Each round: every contender cold (its cache emptied first) then warm, and the local
        # epoch, side by side; --repeat rounds (the machine is shared: figures are noisy).
        for kind in ("plain", "structured"):
            for _ in range(args.repeat):
                cache = work / f"cache-{kind}"
                shutil.rmtree(cache, ignore_errors=True)
                ours = {"warm": ([kind, url, str(cache), args.chunk_size, args.window], cache),
                        "local": ([kind, str(root), None, args.chunk_size, args.window], None)}
                measure(kind, "cold", *ours["warm"])
                for pair in range(args.pairs):
                    for name in ("warm", "local") if pair % 2 == 0 else ("local", "warm"):
                        measure(kind, name, *ours[name])
                for workers in (0, 2):
                    measure(kind, f"uncached, {workers} workers",
                            [kind, url, None, args.chunk_size, 0, workers], None)
                for peer in peers:
                    local = work / f"{peer}-{kind}"
                    shutil.rmtree(local, ignore_errors=True)
                    for name in ("cold", "warm"):
                        measure(kind, f"{peer} {name}", ["peer", peer, kind, url, str(local)], local)
        print()
        chunks = -(-data_bytes // args.chunk_size)
        for kind in ("plain", "structured"):
            colds, warms, locals_ = (results[kind, e] for e in ("cold", "warm", "local"))
            cold, warm, local = (median(r[0] for r in runs) for runs in (colds, warms, locals_))
            ratios = [w[0] / lo[0] for w, lo in zip(warms, locals_)]
            print(f"{kind}: cold GETs {max(c[1] for c in colds)} vs 1.1 x bytes/chunk = {1.1 * chunks:.0f} "
                  f"({'met' if all(c[1] <= 1.1 * chunks for c in colds) else 'missed'}); warm data GETs "
                  f"{max(w[3] for w in warms)} ({'met' if all(w[3] == 0 for w in warms) else 'missed'}); "
                  f"warm/local {warm / local:.2f} (medians of {len(warms)}; pairs "
                  f"{min(ratios):.2f}-{max(ratios):.2f}) ({'met' if warm >= 0.9 * local else 'missed'}); CPU s "
                  f"warm/local {median(w[4] for w in warms) / median(lo[4] for lo in locals_):.2f} (medians)")
            for workers in (0, 2):
                uncached = results[kind, f"uncached, {workers} workers"]
                worst = max(u[2] for u in uncached) / data_bytes
                print(f"{kind}: uncached epoch, {workers} workers: bytes downloaded {worst:.3f}x the dataset's "
                      f"(goal 1.15: {'met' if worst <= 1.15 else 'missed'}), "
                      f"{median(u[0] for u in uncached):,.0f} samples/s (median)")
            for peer in peers:
                theirs = results.get((kind, f"{peer} cold"))
                if theirs:
                    pairs = [c[0] / t[0] for c, t in zip(colds, theirs)]
                    print(f"{kind}: cold ffrecord / {peer} = {cold / median(t[0] for t in theirs):.2f} "
                          f"(medians; pairs {min(pairs):.2f}-{max(pairs):.2f}) (goal 1.5)")
        stop.set()
        server.join(10)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
