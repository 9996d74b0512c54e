"""The benchmark harness cannot rot: its quick mode's code paths run here on tiny sizes.

No timing is asserted (timing goals live in ``benchmarks/``); what is checked is that every
contender whose package is installed was measured, and that the JSON has the structure the
README and plots rely on, with finite numbers.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, golden_dir

sys.path.insert(0, str(REPO))

from benchmarks.contenders import python_loop  # noqa: E402
from benchmarks.workloads.limits import threaded_iops  # noqa: E402

EXPECTED_WORKLOADS = {"write", "warm_read", "limits", "cold_read", "open", "fresh_write",
                      "fresh_epoch"}
TORCH_WORKLOADS = {"dataloader", "resume", "state_dict", "fresh_loader", "fresh_open_workers"}


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def first_cell(doc: dict, workload: str) -> dict:
    return next(c for c in doc["cells"] if c["workload"] == workload)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    """Runs ``benchmarks/run.py`` in smoke mode once; returns (JSON, output dir, stdout)."""
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "results"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--mode", "smoke",
         "--out", str(out), "--data-dir", str(tmp)],
        capture_output=True, text=True, timeout=240, env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    leftovers = [p.name for p in tmp.iterdir() if p.name.startswith("ffrecord-bench-")]
    assert leftovers == [], "the harness must delete its data folder"
    return json.loads((out / "smoke.json").read_text()), out, proc.stdout


def test_every_installed_contender_is_measured(smoke_run: tuple[dict, Path, str]) -> None:
    doc, _, _ = smoke_run
    assert "ffrecord" in doc["contenders"], doc["skipped"]
    assert "python" in doc["contenders"]
    assert "folder" in doc["contenders"]
    for name, package in (("lmdb", "lmdb"), ("hdf5", "h5py"), ("granular", "granular"),
                          ("array-record", "array_record")):
        assert (name in doc["contenders"]) == installed(package), doc["skipped"]
        if not installed(package):
            assert package in doc["skipped"][name]
    writes = [c for c in doc["cells"] if c["workload"] == "write"]
    assert all(set(c["contenders"]) == set(doc["contenders"]) for c in writes)
    assert "ffrecord-direct" in first_cell(doc, "cold_read")["contenders"]
    assert "ffrecord-batch" in first_cell(doc, "warm_read")["contenders"]


def test_reference_is_measured_beside_ffrecord(smoke_run: tuple[dict, Path, str]) -> None:
    """The reference is built and run in processes of its own, in every table it fits; only
    a missing build dependency excuses it, and then the run says which."""
    doc, _, _ = smoke_run
    if "reference" not in doc["contenders"]:
        assert doc["reference"]["measured"] is False and doc["skipped"]["reference"]
        pytest.skip(f"reference not built here: {doc['skipped']['reference']}")
    assert doc["reference"]["measured"] is True
    for workload in ("write", "warm_read", "cold_read", "fresh_write", "fresh_epoch",
                     *(("fresh_loader", "fresh_open_workers") if installed("torch") else ())):
        cell = first_cell(doc, workload)
        assert "reference" in cell["contenders"], workload
        assert "ffrecord/reference" in cell["ratios"], workload
    assert any("reference" in g["goal"] for g in doc["goals"])


def test_json_structure_and_finite_numbers(smoke_run: tuple[dict, Path, str]) -> None:
    doc, _, _ = smoke_run
    assert doc["mode"] == "smoke" and doc["schema"] == 1 and doc["errors"] == {}
    assert doc["machine"]["cores"] >= 1 and doc["machine"]["kernel"]
    workloads = {c["workload"] for c in doc["cells"]}
    expected = EXPECTED_WORKLOADS | (TORCH_WORKLOADS if installed("torch") else set())
    assert expected <= workloads, workloads
    for cell in doc["cells"]:
        assert cell["unit"] and cell["contenders"], cell
        for name, figures in cell["contenders"].items():
            reps = doc["config"]["write_reps" if cell["workload"] == "write" else "reps"]
            assert len(figures["reps"]) == reps, (cell["workload"], name)
            numbers = [*figures["reps"], figures["median"], figures.get("gb_per_s", 0.0)]
            assert all(isinstance(x, float | int) and math.isfinite(x) for x in numbers), cell
            if cell["higher_is_better"]:
                assert figures["median"] > 0, (cell["workload"], cell["params"], name)
        for pair, ratio in cell["ratios"].items():
            assert pair.startswith("ffrecord"), pair
            assert ratio is None or (math.isfinite(ratio) and ratio > 0), (pair, ratio)
    if installed("torch"):
        state = first_cell(doc, "state_dict")
        assert state["notes"]["exact"] is True and state["notes"]["json_bytes"] > 0
    statuses = {g["status"] for g in doc["goals"]}
    assert statuses <= {"PASS", "MISS", "N/A"} and doc["goals"]


def test_table_goals_and_plots_are_written(smoke_run: tuple[dict, Path, str]) -> None:
    doc, out, stdout = smoke_run
    assert "machine: " in stdout and "GOALS" in stdout
    table = (out / "smoke.md").read_text()
    assert table.count("\n| write ") == len([c for c in doc["cells"] if c["workload"] == "write"])
    for goal in doc["goals"]:
        assert f"{goal['status']:<5} {goal['goal']}" in stdout
    if installed("matplotlib"):
        pngs = sorted(out.glob("smoke_*.png"))
        assert len(pngs) == 2
        assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_python_writer_is_byte_identical_to_the_reference(tmp_path: Path) -> None:
    """The pread-loop contender reads files through this layout code: it must be exact."""
    folder = golden_dir()
    if folder is None:
        pytest.skip("golden files not found beside the repository")
    original = (folder / "basic.ffr").read_bytes()
    header = python_loop.read_header(str(folder / "basic.ffr"))
    samples = [original[o : o + s] for o, s in zip(header.offsets.tolist(), header.sizes.tolist())]
    target = tmp_path / "basic.ffr"
    python_loop.write_file(str(target), samples)
    assert target.read_bytes() == original


def test_threaded_odirect_fallback_measures_reads(tmp_path: Path) -> None:
    """The stand-in used when fio is absent does real O_DIRECT reads."""
    path = tmp_path / "blocks"
    path.write_bytes(os.urandom(1 << 20))
    assert threaded_iops(str(path), 4096, 0.05, threads=4) > 0


def _benchmark_imports() -> dict[str, set[str]]:
    """Each benchmarks module and the benchmarks modules it imports, at any depth of its code."""
    import ast

    modules = {}
    for path in (REPO / "benchmarks").rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
                prefix = ".".join(p for p in (base, node.module or "") if p)
                found |= {prefix} | {f"{prefix}.{alias.name}" for alias in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_benchmark_modules_import_no_circle():
    graph = _benchmark_imports()
    assert graph["benchmarks.contenders.reference_store"] >= {"benchmarks.config"}  # parsed
    done, path = set(), []

    def visit(module: str) -> None:
        assert module not in path, "import circle: " + " -> ".join(path[path.index(module):] + [module])
        if module in done:
            return
        path.append(module)
        for imported in sorted(graph[module]):
            visit(imported)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
