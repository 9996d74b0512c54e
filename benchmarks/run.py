"""The benchmark driver, one pipeline: workloads x contenders -> results -> report.

``python -m benchmarks.run [--quick]`` (or ``python benchmarks/run.py``): the configuration
of the mode (``config.py``) and the installed contenders (``contenders/``) go into a
``BenchContext`` (``context.py``); the writes run first, then every chosen workload
(``workloads/``) adds its cells to the results (``results.py``); the goals (``goals.py``)
are judged on them, and the report (``report.py``, ``plots.py``) prints them and writes
``<out>/<mode>.json``, ``.md`` and PNGs.

Example:
    >>> parse_args(["--quick"]).mode
    'quick'
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

if __name__ == "__main__":
    # The repository root replaces this script's folder on the path: the package is imported
    # as ``benchmarks``, and its module names cannot shadow the standard library's.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from benchmarks import goals as goal_list  # noqa: E402
from benchmarks.config import preset  # noqa: E402
from benchmarks.contenders import all_contenders  # noqa: E402
from benchmarks.contenders.reference_store import source_dir  # noqa: E402
from benchmarks.context import BenchContext, eviction_method, machine_facts  # noqa: E402
from benchmarks.report import (  # noqa: E402
    format_cell, format_goals, format_machine, to_json, to_markdown, write_json)
from benchmarks.workloads import (  # noqa: E402
    cold, dataloader, fresh, limits, open_memory, resume, warm, write)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
WORKLOADS = {"warm": warm.run, "limits": limits.run, "cold": cold.run,
             "dataloader": dataloader.run, "open": open_memory.run, "resume": resume.run,
             "fresh": fresh.run}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", dest="mode", action="store_const", const="quick", default="full",
                   help="smaller files and fewer repetitions (a few minutes)")
    p.add_argument("--mode", choices=("full", "quick", "smoke"), help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=RESULTS_DIR, help="where JSON and PNGs go")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="parent of the scratch data folder (default: the system temp dir)")
    p.add_argument("--only", default=",".join(WORKLOADS),
                   help=f"comma-separated workloads after the writes (default: all of {','.join(WORKLOADS)})")
    p.add_argument("--contenders", default=None, help="comma-separated contender names")
    p.add_argument("--keep-data", action="store_true", help="leave the data folder in place")
    p.add_argument("--no-plots", action="store_true")
    return p.parse_args(argv)


def _ensure_ffrecord_importable() -> None:
    """Falls back to the source tree's package when ffrecord is not installed (development)."""
    try:
        import ffrecord  # noqa: F401
    except ImportError:
        sys.path.append(str(Path(__file__).resolve().parent.parent / "python"))


def _contenders(names: str | None, skipped: dict[str, str], log) -> list:
    chosen = []
    for contender in all_contenders():
        if names and contender.name not in names.split(","):
            continue
        reason = contender.unavailable_reason()
        if reason:
            skipped[contender.name] = reason
            log(f"skipping {contender.name}: {reason}")
        else:
            chosen.append(contender)
    return chosen


def _timed(ctx: BenchContext, name: str, workload) -> None:
    """Runs one workload; a failure is recorded (and makes the exit status 1), the rest runs."""
    start = time.perf_counter()
    try:
        workload(ctx)
    except Exception:  # one broken workload must not lose the others' figures
        ctx.results.errors[name] = traceback.format_exc()
        ctx.log(f"{name}: FAILED\n{ctx.results.errors[name]}")
        return
    ctx.log(f"{name}: done in {time.perf_counter() - start:.1f} s")


def _plot(ctx: BenchContext, out: Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        print("no plots: matplotlib is not installed (pip install -r benchmarks/requirements.txt)")
        return
    from benchmarks.plots import draw

    for path in draw(ctx.results, out, ctx.config.mode):
        print(f"wrote {path}")


def _run_workloads(ctx: BenchContext, names: list[str]) -> None:
    write.run(ctx)  # every other workload reads what it writes
    for name in names:
        _timed(ctx, name, WORKLOADS[name])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _ensure_ffrecord_importable()
    config = preset(args.mode)
    # SIGTERM (e.g. a CI timeout) unwinds like Ctrl-C, so the data folder is still deleted
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    data_dir = Path(tempfile.mkdtemp(prefix="ffrecord-bench-", dir=args.data_dir))
    started = time.time()
    ctx = BenchContext(config, data_dir, [])
    ctx.contenders = _contenders(args.contenders, ctx.results.skipped, ctx.log)
    facts = machine_facts(str(data_dir))
    print(format_machine(facts), flush=True)
    try:
        _run_workloads(ctx, args.only.split(","))
    finally:
        if not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    for cell in ctx.results.cells:
        print(format_cell(cell))
    goals = goal_list.evaluate(ctx.results)
    print(format_goals(goals))
    meta = {
        "schema": 1,
        "mode": config.mode,
        "started_utc": datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(),
        "duration_s": time.time() - started,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "eviction": eviction_method(),
        "machine": facts,
        "config": dataclasses.asdict(config),
        "contenders": {c.name: c.label for c in ctx.contenders},
        "reference": {"source": str(source_dir()),
                      "measured": ctx.contender("reference") is not None,
                      "skipped": ctx.results.skipped.get("reference")},
    }
    out = args.out / f"{config.mode}.json"
    document = to_json(ctx.results, goals, meta)
    write_json(out, document)
    out.with_suffix(".md").write_text(to_markdown(document))
    print(f"wrote {out} and {out.with_suffix('.md').name}")
    if not args.no_plots:
        _plot(ctx, args.out)
    print(f"total {time.time() - started:.0f} s")
    for name in ctx.results.errors:
        print(f"FAILED: {name} (traceback in the JSON, key 'errors')")
    return 1 if ctx.results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
