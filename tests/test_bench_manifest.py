"""``benchmarks/manifest_open.py`` runs end to end at a small scale (peers left out: the
script asks nothing of them that the peers' own tests do not cover) and judges its goals."""

from __future__ import annotations

from ffr_helpers import run_benchmark


def test_the_open_benchmark_runs_and_judges_its_goals() -> None:
    out = run_benchmark("manifest_open.py", "--shards", "12", "--per-shard", "4", "--latency", "0", "--peers", "",
                        "--distinct", "3")
    rows = [line for line in out.splitlines() if line.startswith("| 12 |")]
    assert len(rows) == 2 and "| ffrecord | 2 |" in rows[0] and "without manifest | 61 |" in rows[1]
    assert "at most 2 requests to open whatever the shard count (goal 4): met" in out
