"""``ffrecord profile SCRIPT_OR_MODULE`` and ``python -m ffrecord.profile`` (issue 36): the
loader a script or a module names runs for N batches with a step that does nothing; the
stage table, the ceiling and the stage to fix come out; bad targets get a one-line error
and exit status 2."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

from conftest import REPO  # noqa: E402

SCRIPT = textwrap.dedent("""
    import time

    import numpy as np
    from ffrecord import FileWriter
    from ffrecord.torch import DataLoader, Dataset

    PATH = {path!r}

    class Slow(Dataset):
        def process(self, indices, data):
            time.sleep(0.02)
            return data

    def make_loader():
        with FileWriter(PATH, 96) as writer:
            for k in range(96):
                writer.write_one(np.full(512, k, np.uint8).tobytes())
        return DataLoader(Slow(PATH), batch_size=8, {workers})

    if __name__ == "__main__":
        raise SystemExit("the training ran")
""")


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=240, cwd=cwd, env=env)


@pytest.mark.parametrize("workers", ["num_workers=0", "num_workers=2", "num_workers=2, workers='threads'"])
def test_a_script_s_loader_is_profiled_and_its_slow_stage_named(tmp_path, workers):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(path=str(tmp_path / "samples.ffr"), workers=workers))
    done = run("-m", "ffrecord", "profile", str(script), "--batches", "6", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"ffrecord profile {script}: 6 batches, 48 datapoints, ")
    assert "batches/s" in out and "ceiling: " in out
    for stage in ("read", "transform", "collate", "transfer"):
        assert any(line.split()[:1] == [stage] for line in out.splitlines()), stage
    assert "stage to fix: transform: " in out


def test_a_module_s_function_named_with_json(tmp_path):
    (tmp_path / "mypipeline.py").write_text(SCRIPT.format(path=str(tmp_path / "samples.ffr"),
                                                          workers="num_workers=2"))
    done = run("-m", "ffrecord.profile", "mypipeline:make_loader", "--batches", "5", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["target"] == "mypipeline:make_loader" and result["workers"] == "2 worker processes"
    assert (result["batches"], result["datapoints"]) == (5, 40)
    assert result["stage_to_fix"] == "transform"
    assert result["stats"]["transform_s"] >= 0.9 * 5 * 0.02
    assert result["batches_per_s"] > 0 and result["first_batch_s"] > 0


@pytest.mark.parametrize("target, files, message", [
    ("missing.py", {}, "missing.py: no such script"),
    ("empty.py", {"empty.py": "x = 1\n"}, "empty.py has no make_loader or loader"),
    ("empty:other", {"empty.py": "x = 1\n"}, "empty has no other"),
    ("plain.py:loader", {"plain.py": "import torch.utils.data\n"
                                     "loader = torch.utils.data.DataLoader([1, 2])\n"},
     "gives a torch.utils.data.dataloader.DataLoader, not an ffrecord.torch.DataLoader"),
    ("nosuchmodule_w36", {}, "No module named 'nosuchmodule_w36'"),
    (":make_loader", {}, "no script or module in ':make_loader'"),
])
def test_a_bad_target_is_a_usage_error(tmp_path, target, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    done = run("-m", "ffrecord", "profile", target, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("ffrecord profile: error: ") and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_batches_must_be_positive(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(path=str(tmp_path / "samples.ffr"), workers="num_workers=0"))
    done = run("-m", "ffrecord", "profile", str(script), "--batches", "0", cwd=tmp_path)
    assert done.returncode == 2 and "batches must be a positive int, not 0" in done.stderr


def test_docstring_examples_run():
    from ffrecord import profile

    assert doctest.testmod(profile).failed == 0


def test_the_profiling_doc_is_linked_from_the_readme():
    assert "(docs/profiling.md)" in (REPO / "README.md").read_text()
