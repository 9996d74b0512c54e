"""``benchmarks/mixtures.py`` runs end to end at a small scale: every contender's row, the
ledger's timings and a verdict for every goal (a small mixture's figures judge nothing)."""

from __future__ import annotations

import re

from ffr_helpers import run_benchmark


def test_the_mixtures_benchmark_prints_every_figure_and_goal() -> None:
    out = run_benchmark("mixtures.py", "--members", "12", "--per-member", "8", "--rounds", "1", "--epochs", "2",
                        "--ledger-members", "12")
    for label in ("mixture, uniform weights", "mixture, zipf weights", "plain (one dataset, shuffled)"):
        row = next(line for line in out.splitlines() if line.startswith(f"| {label} |"))
        rate, ratio, fds = row.split("|")[2:5]
        assert float(rate.replace(",", "")) > 0 and float(ratio) > 0 and int(fds) > 0, row
    assert len(re.findall(r"^- (loader|state), (sequential|shuffled): [\d,]+ µs$", out, re.MULTILINE)) == 4
    verdicts = re.findall(r": (met|NOT met)\b", out)
    assert len(verdicts) == 7, out  # samples/s, descriptors and memory per weighting; the ledger
