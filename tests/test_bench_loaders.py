"""``benchmarks/loaders.py`` (issue 38's goals) cannot rot: every workload runs on tiny sizes,
in one process (``--smoke --in-process``), and prints every figure and goal line.

No timing is asserted (the goals are measured by the benchmark itself, not by CI).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO

CONTENDERS = ["ffrecord, 0 workers", "ffrecord, 2 processes", "ffrecord, 2 threads", "stock DataLoader, 2 processes"]
GOALS = ["samples/s, threads / best of 0 workers and 2 processes", "CPU per sample, threads / 2 processes",
         "first batch, threads / 2 processes"]


def test_loaders_benchmark_prints_every_figure_and_goal() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.loaders", "--smoke", "--in-process"],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for workload in ("structured", "vision", "tokens"):
        table = out[out.index(f"\n{workload}: median"):]
        table = table[:table.index("\n\n")]
        for label in CONTENDERS + (["SPDL, 8 threads"] if workload == "vision" and "SPDL, 8 threads: not" not in out
                                   else []):
            assert re.search(rf"\n  {re.escape(label)} +[\d,]+ ", table), (workload, label, table)
        for goal in GOALS:
            assert re.search(rf"GOAL (MET   |MISSED) {workload}: {re.escape(goal)}: [\d.]+x", table), (goal, table)
