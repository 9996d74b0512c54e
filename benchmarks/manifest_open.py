"""Opening a sharded dataset on S3 and reading its first random batch, against its shard
count: ffrecord from its manifest, ffrecord without one (shard by shard, as before
manifests), MosaicML Streaming and LitData, each on its own format of the same shards.

moto's S3 server runs in this process behind the tests' counting proxy
(``tests/counting_proxy.py``), which waits ``--latency`` (20 ms) before forwarding each
request, as a distant store answers. Every shard holds ``--per-shard`` datapoints
``{image: 256 bytes, label: int}``; the objects are put straight into moto's store (no
upload requests). Each figure is a fresh process that opens the dataset with an empty cache
directory of its own (ffrecord: ``cache_dir``, the chunk cache; the peers: their local
directory) and reads one batch of 64 random datapoints (LitData: its own shuffled loader's first batch,
which draws from a few chunks); printed: the requests the open made, those of the first
batch, and the seconds from the start of the open to the end of the batch.

    python benchmarks/manifest_open.py [--shards 100,300,1000,10000] [--latency 0.02]
                                       [--peers streaming,litdata] [--legacy-max 1000]

ffrecord's shard files are written once per ``--distinct`` shards and put under every shard
name in turn (10,000 shards written one by one would take minutes of fsyncs); the peers
write theirs with their own writers. Goals (issue 33): ffrecord's open at most 4 requests
whatever the shard count, and its first batch over 300 shards within 2 s of the open's start.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
# the tests' loopback servers import each other as the tests do: by their own names
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))

BUCKET = "bench"
SPEC = {"image": "bytes", "label": "int"}
IMAGE = 256
BATCH = 64
_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def _image(k: int) -> bytes:
    return hashlib.sha256(k.to_bytes(8, "little")).digest() * (IMAGE // 32)


def put_ffrecord(store: Any, endpoint: str, work: Path, shards: int, per_shard: int, distinct: int) -> None:
    """ffrecord's shards under ``ffr-N/`` (with a manifest) and ``old-N/`` (without)."""
    from ffrecord import _remote
    from ffrecord.dataset import DatasetWriter
    from ffrecord.dataset import manifest
    from ffrecord.dataset.spec import parse_spec

    templates = []
    for t in range(min(distinct, shards)):
        path = work / f"template-{t}"
        if not path.exists():
            with DatasetWriter(path, SPEC, length=per_shard, manifest=False, durable=False) as writer:
                for j in range(per_shard):
                    k = t * per_shard + j
                    writer.append({"image": _image(k), "label": k})
        files = {name: (path / f"{name}.ffr").read_bytes() for name in SPEC}
        spec = (path / "spec.json").read_bytes()
        described = {name: manifest.describe(path / f"{name}.ffr")._replace(etag=hashlib.md5(data).hexdigest())
                     for name, data in files.items()}
        templates.append((files, spec, described))
    entries = []
    for k in range(shards):
        files, spec, described = templates[k % len(templates)]
        for prefix in (f"ffr-{shards}", f"old-{shards}"):
            for name, data in files.items():
                store.put_object(BUCKET, f"{prefix}/{k:06d}/{name}.ffr", data)
            store.put_object(BUCKET, f"{prefix}/{k:06d}/spec.json", spec)
        entries.append(manifest.ShardEntry(f"{k:06d}", per_shard, described))
    root = _remote.as_path(f"s3://{BUCKET}/ffr-{shards}", {"endpoint_url": endpoint})
    manifest.publish(root, manifest.Manifest.build(1, parse_spec(SPEC), {}, entries))


def put_peer(peer: str, store: Any, work: Path, shards: int, per_shard: int) -> None:
    """A peer's dataset of the same shape, written by its own writer, under ``PEER-N/``."""
    out = work / f"{peer}-{shards}"
    n = shards * per_shard
    if peer == "streaming":
        from streaming import MDSWriter

        # a shard closes when the next sample would pass size_limit: per_shard samples each
        limit = per_shard * (IMAGE + 8 + 16) + 64
        with MDSWriter(out=str(out), columns={"image": "bytes", "label": "int"}, size_limit=limit) as writer:
            for k in range(n):
                writer.write({"image": _image(k), "label": k})
    else:
        from litdata.streaming.cache import Cache

        cache = Cache(str(out), chunk_size=per_shard)
        for k in range(n):
            cache[k] = {"image": _image(k), "label": k}
        cache.done()
        cache.merge()
    for path in out.rglob("*"):
        if path.is_file():
            store.put_object(BUCKET, f"{peer}-{shards}/{path.relative_to(out)}", path.read_bytes())


# -- one figure, in a fresh process ---------------------------------------------------------

def _count(endpoint: str) -> int:
    from counting_proxy import COUNT_PATH

    with urllib.request.urlopen(endpoint + COUNT_PATH) as answer:
        return int(answer.read())


def figure(contender: str, shards: int, per_shard: int, endpoint: str) -> dict[str, Any]:
    """Opens the dataset, reads one random batch; the requests and seconds of each."""
    local = tempfile.mkdtemp(prefix="ffr-open-bench-")
    n = shards * per_shard
    batch = np.random.default_rng(0).choice(n, min(BATCH, n), replace=False).tolist()
    # imported before the clock starts: a process imports its loader once, whatever it opens
    if contender.startswith("ffrecord"):
        from ffrecord.dataset import ShardedDatasetReader, open_dataset
    elif contender == "streaming":
        from streaming import StreamingDataset
    else:
        import litdata
        from litdata.streaming import downloader

        downloader._OBSTORE_CLIENT_OPTIONS = {**downloader._OBSTORE_CLIENT_OPTIONS, "allow_http": True}
    before = _count(endpoint)
    start = time.perf_counter()
    if contender.startswith("ffrecord"):
        options = {"endpoint_url": endpoint, "cache_dir": local}  # empty, as the peers' are
        if contender == "ffrecord":
            dataset = open_dataset(f"s3://{BUCKET}/ffr-{shards}", storage_options=options)
        else:
            dataset = ShardedDatasetReader(f"s3://{BUCKET}/old-{shards}", storage_options=options)
        opened, opened_at = _count(endpoint), time.perf_counter()
        got = dataset.read(batch)
    elif contender == "streaming":
        dataset = StreamingDataset(remote=f"s3://{BUCKET}/streaming-{shards}", local=local, batch_size=BATCH)
        opened, opened_at = _count(endpoint), time.perf_counter()
        got = [dataset[i] for i in batch]
    else:
        dataset = litdata.StreamingDataset(f"s3://{BUCKET}/litdata-{shards}", cache_dir=local, shuffle=True,
                                           seed=0)
        opened, opened_at = _count(endpoint), time.perf_counter()
        # Its own shuffled loader's first batch: LitData reads a chunk whole before its items
        # (dataset[i] outside its loader reads a chunk still being downloaded), and its shuffle
        # takes a batch from a few chunks, not from 64 anywhere.
        labels = next(iter(litdata.StreamingDataLoader(dataset, batch_size=len(batch))))["label"].tolist()
        got = [{"label": label} for label in labels]
        batch = labels
    done = time.perf_counter()
    if [int(d["label"]) % per_shard for d in got] != [k % per_shard for k in batch] or len(got) != min(BATCH, n):
        raise AssertionError(f"{contender}: the batch read holds other datapoints")
    return {"open_requests": opened - before, "batch_requests": _count(endpoint) - opened,
            "open_s": opened_at - start, "first_batch_s": done - start}


def _child(contender: str, shards: int, per_shard: int, endpoint: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(_ENV, S3_ENDPOINT_URL=endpoint, AWS_ENDPOINT_URL=endpoint, AWS_ALLOW_HTTP="true")
    out = subprocess.run([sys.executable, __file__, "--figure", json.dumps([contender, shards, per_shard, endpoint])],
                         capture_output=True, text=True, timeout=1800, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", default="100,300,1000,10000")
    parser.add_argument("--per-shard", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--peers", default="streaming,litdata", help="comma-separated; '' for none")
    parser.add_argument("--legacy-max", type=int, default=1000,
                        help="the largest shard count ffrecord without a manifest is timed at")
    parser.add_argument("--distinct", type=int, default=50, help="distinct ffrecord shards written")
    parser.add_argument("--quick", action="store_true", help="100 and 300 shards")
    parser.add_argument("--figure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.figure:
        print(json.dumps(figure(*json.loads(args.figure))))
        return
    os.environ.update(_ENV)
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    from counting_proxy import CountingProxy

    counts = [100, 300] if args.quick else [int(s) for s in args.shards.split(",")]
    peers = [p for p in args.peers.split(",") if p]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    moto = f"http://{host}:{port}"
    import boto3

    boto3.client("s3", endpoint_url=moto, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    store = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    work = Path(tempfile.mkdtemp(prefix="ffr-open-bench-"))
    print(f"{args.per_shard} datapoints of {IMAGE} + 8 bytes per shard; {args.latency * 1000:.0f} ms per request; "
          f"a fresh process per figure, empty caches; first batch: {BATCH} random datapoints")
    print("| shards | contender | requests to open | requests, first batch | open s | open to first batch s |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    results: dict[tuple[int, str], dict[str, Any]] = {}
    with CountingProxy(moto, latency=args.latency) as proxy:
        for shards in counts:
            put_ffrecord(store, moto, work, shards, args.per_shard, args.distinct)
            for peer in peers:
                put_peer(peer, store, work, shards, args.per_shard)
            contenders = ["ffrecord"] + (["ffrecord without manifest"] if shards <= args.legacy_max else []) + peers
            for contender in contenders:
                try:
                    r = results[shards, contender] = _child(contender, shards, args.per_shard, proxy.url)
                except Exception as exc:  # a peer failing is reported, not hidden
                    print(f"| {shards:,} | {contender} | failed: {str(exc)[:100]} | | | |", flush=True)
                    continue
                print(f"| {shards:,} | {contender} | {r['open_requests']:,} | {r['batch_requests']:,} | "
                      f"{r['open_s']:.2f} | {r['first_batch_s']:.2f} |", flush=True)
    ours = [results[s, "ffrecord"] for s in counts if (s, "ffrecord") in results]
    server.stop()
    if len(ours) < len(counts):
        sys.exit("ffrecord failed: see the table")
    most = max(r["open_requests"] for r in ours)
    print(f"\nffrecord: at most {most} requests to open whatever the shard count (goal 4): "
          f"{'met' if most <= 4 else 'missed'}")
    if (300, "ffrecord") in results:
        first = results[300, "ffrecord"]["first_batch_s"]
        print(f"ffrecord: first batch over 300 shards {first:.2f} s after the open began (goal 2 s): "
              f"{'met' if first <= 2 else 'missed'}")


if __name__ == "__main__":
    main()
