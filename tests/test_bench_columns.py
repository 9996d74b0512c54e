"""The columns benchmark cannot rot: ``benchmarks/columns.py`` on tiny data, one round, runs
every measurement of ffrecord and of Lance in fresh processes and prints a figure and a
goal line for each (Megatron-Core's token build where ``make megatron-venv`` made its
interpreter). No timing is asserted (speed goals live in ``benchmarks/``)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_tiny_run_prints_every_figure(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "columns.py"), "--rows", "3000", "--records", "100",
         "--tokens", "20000", "--rounds", "1"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("ffrecord-bench-")] == []
    rows = dict(re.findall(r"^(\S+/\S+) +([\d,]+) +[\d,]+", out, re.MULTILINE))
    for variant in ("fixed", "variable"):
        for task in ("write", "scan", "column", "to_arrow", "random_batches", "single", "scan-lists", "random_dicts"):
            figure = float(rows[f"{task}/{variant}"].replace(",", ""))
            assert math.isfinite(figure) and figure > 0, (task, variant, out)
    for key in ("records_batches/records", "records_single/records"):
        assert float(rows[key].replace(",", "")) > 0, out
    goals = re.findall(r"^GOAL (?:MET|MISSED): (\S+) [\d.]+x \(goal [\d.]+x\)$", out, re.MULTILINE)
    expected = {f"{t}/{v}" for t in ("write", "scan", "column", "to_arrow", "random_batches") for v in ("fixed", "variable")}
    assert expected | {"records_batches/records"} <= set(goals), out
    megatron = REPO / ".venv-megatron" / "bin" / "python"
    assert ("tokens/tokens" in goals) == megatron.exists(), out
