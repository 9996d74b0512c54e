"""Remote reads side by side: ffrecord's core, s3fs (fsspec ``cat_ranges``) and obstore
(``get_ranges``), fetching the same random batches from the same loopback server.

The server (``tests/range_server.py``, in its own process) answers every request after
an injected latency (10 ms by default), as an object store across a network would; it
speaks enough of the S3 API (path-style GET with a Range, HEAD) for all three clients.
Each contender reads the same batches of ``--batch`` random samples of ``--sample`` bytes;
the table gives the median time per batch, samples/s, ffrecord's speed-up over each peer,
and ffrecord's batch time in round trips (injected latencies).

    python benchmarks/remote.py [--latency 0.01] [--batches 20] [--quick]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from tests.range_server import RangeServer  # noqa: E402

BUCKET, KEY = "bench", "data.ffr"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
               "AWS_DEFAULT_REGION": "us-east-1"}


def _serve(path: str, latency: float, ready: Any, stop: Any) -> None:
    data = Path(path).read_bytes()
    with RangeServer({f"/{BUCKET}/{KEY}": data}, latency=latency) as srv:
        ready.put(srv.url)
        stop.wait()


def write_file(path: Path, n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """An ffr file of ``n`` random samples of ``size`` bytes; their offsets and the data."""
    from ffrecord import FileWriter

    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    with FileWriter(path, n) as w:
        w.write_many(data)
    header = 12 + 12 * n
    return header + size * np.arange(n, dtype=np.int64), data


def contenders(url: str, depth: int) -> dict[str, Callable[[], Callable]]:
    """Name -> a function making the reader ``read(indices, offsets, size) -> list of bytes``."""

    def ffrecord_reader() -> Callable:
        from ffrecord import FileReader

        reader = FileReader(f"s3://{BUCKET}/{KEY}", check_data=True,
                            storage_options={"endpoint_url": url, "concurrency": depth})
        return lambda idx, offs, size: reader.read(idx)

    def s3fs_reader() -> Callable:
        import s3fs

        fs = s3fs.S3FileSystem(key="bench", secret="bench", client_kwargs={"endpoint_url": url},
                               skip_instance_cache=True)
        path = f"{BUCKET}/{KEY}"

        def read(idx, offs, size):
            starts = [int(o) for o in offs]
            return fs.cat_ranges([path] * len(starts), starts, [s + size for s in starts])
        return read

    def obstore_reader() -> Callable:
        import obstore
        from obstore.store import S3Store

        store = S3Store(BUCKET, endpoint=url, region="us-east-1", access_key_id="bench",
                        secret_access_key="bench", virtual_hosted_style_request=False,
                        client_options={"allow_http": True})

        def read(idx, offs, size):
            starts = [int(o) for o in offs]
            return obstore.get_ranges(store, KEY, starts=starts, lengths=[size] * len(starts))
        return read

    return {"ffrecord": ffrecord_reader, "s3fs cat_ranges": s3fs_reader,
            "obstore get_ranges": obstore_reader}


def requests_for(batch: np.ndarray) -> int:
    """Runs of adjacent samples in a batch: the range requests needed without bridging gaps."""
    s = np.unique(batch)
    return int(1 + np.count_nonzero(np.diff(s) != 1)) if len(s) else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.01, help="seconds per request (0.01)")
    ap.add_argument("--samples", type=int, default=20_000, help="samples in the file")
    ap.add_argument("--sample", type=int, default=4096, help="bytes per sample")
    ap.add_argument("--batch", type=int, default=256, help="samples per batch")
    ap.add_argument("--batches", type=int, default=20, help="batches timed per contender")
    ap.add_argument("--depth", type=int, default=64, help="ffrecord's concurrency")
    ap.add_argument("--quick", action="store_true", help="a short run (3 batches)")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.samples = 3, 4000
    os.environ.update(CREDENTIALS)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / KEY
        offsets, data = write_file(path, args.samples, args.sample)
        ctx = mp.get_context("spawn")
        ready, stop = ctx.Queue(), ctx.Event()
        server = ctx.Process(target=_serve, args=(str(path), args.latency, ready, stop), daemon=True)
        server.start()
        try:
            url = ready.get(timeout=60)
            rng = np.random.default_rng(1)
            batches = [rng.choice(args.samples, args.batch, replace=False)
                       for _ in range(args.batches + 1)]
            results = {}
            for name, make in contenders(url, args.depth).items():
                results[name] = _measure(name, make, batches, offsets, data, args.sample)
        finally:
            stop.set()
            server.join(10)
    _report(results, batches, args)
    return 0


def _measure(name: str, make: Callable, batches: list, offsets: np.ndarray, data: np.ndarray,
             size: int) -> float | str:
    try:
        read = make()
    except ImportError as exc:
        return f"not installed ({exc.name})"
    times = []
    for k, batch in enumerate(batches):
        t0 = time.perf_counter()
        got = read(batch, offsets[batch], size)
        elapsed = time.perf_counter() - t0
        if k == 0:  # the first batch warms connections up, and checks the bytes
            for i, g in zip(batch, got):
                if bytes(g) != data[i].tobytes():
                    raise AssertionError(f"{name}: sample {i} differs")
            continue
        times.append(elapsed)
    return statistics.median(times)


def _report(results: dict, batches: list, args: argparse.Namespace) -> None:
    print(f"remote reads: {args.batch} random samples of {args.sample} B per batch, "
          f"{args.latency * 1e3:g} ms per request, median of {args.batches} batches")
    ours = results["ffrecord"]
    for name, t in results.items():
        if isinstance(t, str):
            print(f"  {name:<20} {t}")
            continue
        ratio = f"  ffrecord {t / ours:5.1f}x faster" if name != "ffrecord" else ""
        print(f"  {name:<20} {t * 1e3:8.1f} ms/batch  {args.batch / t:9,.0f} samples/s{ratio}")
    runs = statistics.median(requests_for(b) for b in batches[1:])
    print(f"  ffrecord at depth {args.depth}: {runs:.0f} runs of adjacent samples per batch "
          f"({math.ceil(runs / args.depth)} round trips unbridged); a batch took "
          f"{ours / args.latency:.2f} round trips of {args.latency * 1e3:g} ms")


if __name__ == "__main__":
    sys.exit(main())
