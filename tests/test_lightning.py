"""PyTorch Lightning resumes an ffrecord DataLoader mid-epoch without losing a batch.

Each run is ``examples/lightning_datamodule.py`` in its own process (a resume is a new
process), logging the sample indices of every training batch: 8 batches an epoch, 2 epochs,
a checkpoint after step 11 (batch 3 of epoch 1).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning")

from conftest import REPO  # noqa: E402
from torch_scripts.common import child_env  # noqa: E402

EXAMPLE = REPO / "examples" / "lightning_datamodule.py"
STOP_AT = 11


def train(data: Path, log: Path, *args: str) -> list[list[int]]:
    env = child_env() | {"PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, str(EXAMPLE), str(data), "--log-batches", str(log), *args],
                          capture_output=True, text=True, env=env, cwd=data.parent, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[int]]]:
    root = tmp_path_factory.mktemp("lightning")
    return root / "data", train(root / "data", root / "full.jsonl")


@pytest.mark.parametrize("workers", [["--workers", "0"], ["--workers", "2"], ["--workers", "2", "--threads"]],
                         ids=["0", "2 processes", "2 threads"])
def test_resume_continues_with_the_uninterrupted_batches(
        uninterrupted: tuple[Path, list[list[int]]], tmp_path: Path, workers: list[str]) -> None:
    data, full = uninterrupted
    assert len(full) == 16 and sorted(sum(full[:8], [])) == list(range(64))
    checkpoints = tmp_path / "checkpoints"
    first = train(data, tmp_path / "first.jsonl", "--max-steps", str(STOP_AT),
                  "--checkpoint-dir", str(checkpoints), *workers)
    assert first == full[:STOP_AT]
    resumed = train(data, tmp_path / "resumed.jsonl", "--resume", str(checkpoints / f"step={STOP_AT}.ckpt"),
                    *workers)
    assert resumed == full[STOP_AT:]
