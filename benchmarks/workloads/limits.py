"""The machine's physical limits, measured in the same run as the contenders.

- memcpy bandwidth, one thread, warm: ``numpy.copyto`` of one large buffer (memory-bound),
  and the copies a perfect in-memory reader would make for the warm 128 KiB workload
  (random batches of 64 samples gathered from the dataset held in RAM: caches help it
  exactly as they help the readers).
- sequential write bandwidth to this disk: 1 MiB ``os.write`` calls then one fsync, the
  pattern of a single-file writer (and the ceiling of the write workload).
- raw random reads at queue depth 64 with O_DIRECT: ``fio`` (io_uring, else libaio) when
  installed; otherwise 64 Python threads issuing O_DIRECT ``preadv`` calls, labelled as such
  (a lower bound: the GIL and thread switches cost more than fio's queue).
"""

from __future__ import annotations

import itertools
import json
import mmap
import os
import random
import shutil
import subprocess
import threading
import time

import numpy as np

from ..context import BenchContext, index_batches
from ..results import Cell, interleaved, rate

QUEUE_DEPTH = 64
_ALIGN = 4096


def memcpy_gb_per_s(nbytes: int, min_seconds: float = 0.2) -> float:
    """Warm copies of ``nbytes`` with numpy for at least ``min_seconds``; returns GB/s.

    Example:
        >>> memcpy_gb_per_s(1 << 20, 0.01) > 0
        True
    """
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.zeros_like(src)
    np.copyto(dst, src)  # fault both buffers in before timing

    def copy() -> int:
        np.copyto(dst, src)
        return nbytes

    return rate(copy, min_seconds) / 1e9


def batch_copy_gb_per_s(samples: list[bytes], batch: int, min_seconds: float) -> float:
    """GB/s of gathering random batches of ``samples`` (held in one buffer) into another.

    Example:
        >>> batch_copy_gb_per_s([b"ab"] * 8, 4, 0.01) > 0
        True
    """
    size = len(samples[0])
    src = np.frombuffer(b"".join(samples), dtype=np.uint8).reshape(len(samples), size)
    dst = np.empty((batch, size), dtype=np.uint8)
    batches = itertools.cycle(index_batches(len(samples), batch, 64, seed=batch))

    def gather() -> int:
        for j, i in enumerate(next(batches).tolist()):  # row by row: np.take is half as fast
            np.copyto(dst[j], src[i])
        return dst.nbytes

    return rate(gather, min_seconds) / 1e9


def write_fsync_gb_per_s(path: str, nbytes: int) -> float:
    """GB/s of writing ``nbytes`` to a new file in 1 MiB blocks, fsync included.

    Example:
        >>> import tempfile, os
        >>> with tempfile.TemporaryDirectory() as d:
        ...     write_fsync_gb_per_s(os.path.join(d, "f"), 1 << 20) > 0
        True
    """
    block = os.urandom(1 << 20)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(max(1, nbytes >> 20)):
            os.write(fd, block)
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - start
    os.unlink(path)
    return max(1, nbytes >> 20) * len(block) / elapsed / 1e9


def fio_iops(path: str, block: int, seconds: float, engine: str) -> float:
    """IOPS of fio random O_DIRECT reads of ``block`` bytes at queue depth 64 on ``path``."""
    cmd = [
        "fio", "--name=raw", f"--filename={path}", "--readonly", "--rw=randread",
        f"--bs={block}", "--direct=1", f"--ioengine={engine}", f"--iodepth={QUEUE_DEPTH}",
        f"--runtime={seconds}", "--time_based", "--output-format=json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(json.loads(out[out.index("{"):])["jobs"][0]["read"]["iops"])


def fio_engine(path: str) -> str | None:
    """The first fio engine that works here (io_uring, then libaio), or None."""
    if shutil.which("fio") is None:
        return None
    for engine in ("io_uring", "libaio"):
        try:
            fio_iops(path, _ALIGN, 0.1, engine)
            return engine
        except (subprocess.CalledProcessError, ValueError, KeyError):
            continue
    return None


def threaded_iops(path: str, block: int, seconds: float, threads: int = QUEUE_DEPTH) -> float:
    """IOPS of ``threads`` Python threads doing random O_DIRECT reads (fio's stand-in).

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(dir="/var/tmp") as f:
        ...     _ = f.write(b"x" * (1 << 20)); f.flush()
        ...     threaded_iops(f.name, 4096, 0.05, threads=2) > 0
        True
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    blocks = os.fstat(fd).st_size // block
    deadline = time.perf_counter() + seconds
    counts = [0] * threads

    def worker(slot: int) -> None:
        buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT requires
        rng = random.Random(slot)
        while time.perf_counter() < deadline:
            os.preadv(fd, [buf], rng.randrange(blocks) * block)
            counts[slot] += 1

    start = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    os.close(fd)
    return sum(counts) / elapsed


def run(ctx: BenchContext) -> None:
    cfg = ctx.config
    ctx.log("limits: memcpy")
    memcpy = lambda: memcpy_gb_per_s(cfg.memcpy_bytes, cfg.warm_min_seconds)  # noqa: E731
    values = interleaved({"memcpy": memcpy}, cfg.reps)
    ctx.results.add(Cell("limits", {"what": "memcpy", "bytes": cfg.memcpy_bytes}, "GB/s", values))
    largest_sample = max(s.size for s in cfg.datasets)
    gather = lambda: batch_copy_gb_per_s(  # noqa: E731
        ctx.samples[largest_sample], 64, cfg.warm_min_seconds)
    values = interleaved({"memcpy": gather}, cfg.reps)
    params = {"what": "memcpy_batches", "sample_size": largest_sample, "batch": 64}
    ctx.results.add(Cell("limits", params, "GB/s", values))

    largest = max(cfg.datasets, key=lambda s: s.size * s.count)
    ctx.log("limits: sequential write + fsync")
    scratch = str(ctx.scratch_dir("limits") / "write")
    nbytes = largest.size * largest.count
    values = interleaved({"write_fsync": lambda: write_fsync_gb_per_s(scratch, nbytes)}, cfg.reps)
    ctx.results.add(Cell("limits", {"what": "sequential_write_fsync", "bytes": nbytes}, "GB/s", values))

    target = max(ctx.contenders[0].files(ctx.store_dir(ctx.contenders[0], largest.size)),
                 key=os.path.getsize)
    engine = fio_engine(target)
    tool = f"fio {engine}" if engine else f"{QUEUE_DEPTH} Python threads, O_DIRECT preadv"
    for block in (4096, 128 << 10):
        ctx.log(f"limits: O_DIRECT random {block} B reads, QD{QUEUE_DEPTH} ({tool})")
        if engine:
            measure = lambda: fio_iops(target, block, cfg.fio_seconds, engine)  # noqa: E731
        else:
            measure = lambda: threaded_iops(target, block, cfg.fio_seconds)  # noqa: E731
        values = interleaved({"raw_qd64": measure}, cfg.reps)
        params = {"what": "odirect_random_read", "block": block, "queue_depth": QUEUE_DEPTH,
                  "tool": tool, "file_bytes": os.path.getsize(target)}
        ctx.results.add(Cell("limits", params, "IOPS", values, bytes_per_unit=block))
