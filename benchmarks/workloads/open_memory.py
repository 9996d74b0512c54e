"""Workload 4: time and private memory to open a file of many samples, in a fresh process.

The samples are 1 byte each: only the header (12 bytes per sample) matters. The library is
loaded (by opening a 1-sample file) before the baseline is taken, so the figures are what the
open itself adds, then what 1000 random reads add. Memory is read from
``/proc/self/smaps_rollup``: RSS (everything resident, including page-cache pages of a mapped
file, which other processes share) and Anonymous (heap: memory private to this process).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ..contenders.isolated import child_env
from ..contenders.python_loop import write_tiny_samples
from ..context import BenchContext
from ..results import Cell, interleaved

# Runs in a fresh interpreter; argv: opener name, big file, tiny file. Prints one JSON line.
_CHILD = r"""
import json, sys, time
import numpy as np

def memory_kib():
    fields = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    return fields["Rss"], fields["Anonymous"]

opener, big, tiny, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if opener == "ffrecord":
    from ffrecord import FileReader as open_file
else:  # the reference's way: the whole header read and checked into private memory
    from benchmarks.contenders.python_loop import PreadLoopReader as open_file
open_file(tiny, True).close()
rss0, anon0 = memory_kib()
start = time.perf_counter()
reader = open_file(big, True)
seconds = time.perf_counter() - start
rss1, anon1 = memory_kib()
rng = np.random.default_rng(0)
for _ in range(10):
    reader.read(rng.integers(0, n, size=100))
rss2, anon2 = memory_kib()
print(json.dumps({"open_s": seconds, "rss_mib": (rss1 - rss0) / 1024,
                  "anon_mib": (anon1 - anon0) / 1024,
                  "rss_after_reads_mib": (rss2 - rss0) / 1024,
                  "anon_after_reads_mib": (anon2 - anon0) / 1024}))
"""

METRICS = {
    "open_s": "s",
    "rss_mib": "MiB",
    "anon_mib": "MiB",
    "rss_after_reads_mib": "MiB",
    "anon_after_reads_mib": "MiB",
}


def measure_open(opener: str, big: Path, tiny: Path, n: int) -> dict[str, float]:
    """Runs one fresh process that opens ``big`` with ``opener``; returns its figures."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, opener, str(big), str(tiny), str(n)],
        capture_output=True, text=True, env=child_env(), check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(ctx: BenchContext) -> None:
    n = ctx.config.open_samples
    ctx.log(f"open: {n} one-byte samples")
    big = ctx.one_byte_samples_file()
    tiny = ctx.scratch_dir("open") / "one.ffr"
    write_tiny_samples(str(tiny), 1)
    openers = [c.name for c in ctx.contenders if c.name in ("ffrecord", "python")]
    figures: dict[str, list[dict]] = {name: [] for name in openers}

    def runner(name: str):
        def once() -> float:
            figures[name].append(measure_open(name, big, tiny, n))
            return figures[name][-1]["open_s"]
        return once

    ctx.log("open: fresh processes")
    interleaved({name: runner(name) for name in openers}, ctx.config.reps)
    for metric, unit in METRICS.items():
        values = {name: [f[metric] for f in figures[name]] for name in openers}
        params = {"samples": n, "metric": metric, "file_bytes": big.stat().st_size}
        ctx.results.add(Cell("open", params, unit, values, higher_is_better=False))
    tiny.unlink()
