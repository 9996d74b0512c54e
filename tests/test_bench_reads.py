"""The read and write benchmark cannot rot: ``python -m benchmarks.reads --quick`` runs every
comparison of issue 19's read/write goals on tiny data (fresh processes, the reference, MDS
and LMDB beside ffrecord) and prints each figure and ratio. No timing is asserted (speed goals
live in ``benchmarks/``; at these sizes the ratios are start-up costs)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

NUMBER = r"([\d,.]+(?:e[+-]\d+)?)"


def test_quick_run_prints_every_comparison(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.reads", "--quick"], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("ffrecord-reads-bench-")] == [], \
        "the benchmark must delete its data folder"
    medians = re.findall(rf"^  (.+?) +median +{NUMBER} ", out, re.MULTILINE)
    assert [name for name, _ in medians] == [
        "ffrecord", "streaming",  # DatasetReader[i]
        "ffrecord", "reference",  # 1 KiB epoch
        "ffrecord", "reference", "lmdb",  # 128 KiB epoch
        "ffrecord, durable=False", "reference (no fsync)",  # writes
        "ffrecord", "reference",  # open
    ], out
    assert all(math.isfinite(v) and v > 0 for v in (float(x.replace(",", "")) for _, x in medians)), out
    goals = re.findall(r"^  (.+) / (.+): ([\d.]+)x median of rounds .*goal >= ([\d.]+)x: (met|MISSED)$",
                       out, re.MULTILINE)
    assert [(a, b, float(goal)) for a, b, _, goal, _ in goals] == [
        ("ffrecord", "streaming", 1.4), ("ffrecord", "reference", 4.0), ("ffrecord", "reference", 2.5),
        ("ffrecord", "lmdb", 1.0), ("ffrecord, durable=False", "reference (no fsync)", 1.2),
        ("ffrecord", "reference", 2.0),
    ], out
