"""``benchmarks/workers.py`` (issue 19's goals) cannot rot: its loader sections run on tiny
sizes, in one process (``--smoke --in-process``), and print every figure and ratio.

No timing is asserted (the goals are measured by the benchmark itself, not by CI).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO

NUMBER = r"[\d,]+"
FIGURES = {
    "structured loader": ["ffrecord, 0 workers", "ffrecord, 2 workers", "litdata, 2 workers",
                          "streaming, 2 workers"],
    "one datapoint at a time": ["ffrecord [i]", "streaming [i]"],
    "stock torch DataLoader": ["stock loader over ffrecord", "stock loader over streaming"],
    "1 KiB samples -> tensors": ["ffrecord (shared memory)", "ffrecord (torch's pipe)",
                                 "stock loader, samples in RAM"],
}
RATIOS = ["ffrecord, 2 workers / ffrecord, 0 workers", "ffrecord, 2 workers / litdata, 2 workers",
          "ffrecord, 2 workers / streaming, 2 workers", "ffrecord [i] / streaming [i]",
          "stock loader over ffrecord / stock loader over streaming",
          "ffrecord (shared memory) / stock loader, samples in RAM"]


def test_workers_benchmark_prints_every_figure_and_ratio() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.workers", "--smoke", "--in-process",
         "--only", "structured", "--only", "singles", "--only", "tensors", "--only", "timing"],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    sections = {title: out.index(f"\n{title}") for title in FIGURES}
    assert list(sections.values()) == sorted(sections.values()), "sections out of order"
    for title, names in FIGURES.items():
        section = out[sections[title]:]
        for name in names:
            value = re.search(rf"^  {re.escape(name)} +({NUMBER}) ", section, re.M)
            assert value and int(value.group(1).replace(",", "")) > 0, f"{title}: no figure for {name}"
    for ratio in RATIOS:
        assert re.search(rf"^  {re.escape(ratio)}: \d+\.\d\dx \(goal >= [\d.]+x: (met|MISSED)\)$",
                         out, re.M), f"no ratio {ratio}"
    for mode in ("0 workers", "2 processes", "2 threads"):  # timing's cost, on and off side by side
        for what in ("timing on", "timing off", "1 KiB samples"):
            value = re.search(rf"^  {mode}, {what} +(\d+\.\d\d) us a batch", out, re.M)
            assert value and float(value.group(1)) > 0, f"no figure for {mode}, {what}"
        assert re.search(rf"^  {mode}: timing costs -?\d+\.\d% of the epoch \(goal <= 1\.0%: (met|MISSED)\)$",
                         out, re.M), f"no cost for {mode}"
    assert "data in " in out
    folder = re.search(r"data in (\S+)", out).group(1)
    assert not os.path.exists(folder), "the benchmark must delete its data"
