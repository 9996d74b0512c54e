"""The token benchmark cannot rot: ``benchmarks/tokens.py --smoke`` runs every code path
(conversion, the loaders in process and with 2 persistent workers over 2 epochs,
``TokenBlocks.read``, packing) on a tiny set, side by side with LitData, and prints every
figure. No timing is asserted (speed goals live in
``benchmarks/``)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

NUMBER = r"([\d,.]+)"


def test_smoke_run_prints_every_figure(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "tokens.py"), "--smoke", "--tokens", "20000",
         "--rounds", "1", "--epochs", "2", "--workers", "2", "--block", "64", "--files", "2"],
        capture_output=True, text=True, timeout=240, env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("ffrecord-bench-")]
    assert leftovers == [], "the benchmark must delete its data folder"
    convert = re.search(rf"convert: ffrecord {NUMBER} M tokens/s .* litdata {NUMBER} M tokens/s .*: {NUMBER}x", out)
    assert convert, out
    for label in ("DataLoader in process", "DataLoader 2 workers", r"in process, TokenBlocks\.read per batch"):
        line = re.search(rf"blocks, {label}.*: ffrecord {NUMBER}/s .* litdata {NUMBER}/s .*: {NUMBER}x, "
                         rf"by median batch {NUMBER}x", out)
        assert line, (label, out)
        figures = [float(x.replace(",", "")) for x in line.groups()]
        assert all(math.isfinite(x) and x > 0 for x in figures), line.group(0)
    assert len(re.findall(r"^  start-up: ffrecord [\d.]+ s import and open, first batch [\d.]+ s", out,
                          re.MULTILINE)) == 3, out
    goals = re.findall(r"^GOAL (MET|MISSED) +(.+): ([\d.]+)x LitData", out, re.MULTILINE)
    assert [name for _, name, _ in goals] == ["conversion tokens/s", "blocks/s, DataLoader in process",
                                              "blocks/s, DataLoader 2 workers",
                                              "blocks/s, in process, TokenBlocks.read per batch"], out
    assert len(re.findall(r"^packing: best-fit window=\w+: padding [\d.]+% .* points", out, re.MULTILINE)) == 3
