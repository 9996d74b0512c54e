"""``benchmarks/manifest_open.py`` runs end to end at a small scale (peers left out: the
script asks nothing of them that the peers' own tests do not cover) and judges its goals."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO


def test_the_open_benchmark_runs_and_judges_its_goals() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "manifest_open.py"), "--shards", "12",
                           "--per-shard", "4", "--latency", "0", "--peers", "", "--distinct", "3"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 12 |")]
    assert len(rows) == 2 and "| ffrecord | 2 |" in rows[0] and "without manifest | 61 |" in rows[1]
    assert "at most 2 requests to open whatever the shard count (goal 4): met" in done.stdout
