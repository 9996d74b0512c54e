"""The report of a run: its results printed as tables, written as JSON, rendered as Markdown.

``python -m benchmarks.report FILE`` prints the Markdown of a results file again (the tables
of ``benchmarks/README.md``); plots are drawn by ``plots.py``.

Example:
    >>> doc = {"machine": {"cores": 2, "cpu": "x", "kernel": "6", "memory_gib": 1,
    ...        "load_average_1m": 0.5, "disk": "d", "filesystem": "ext4"},
    ...        "mode": "quick", "eviction": "fadvise", "goals": [], "reference": {"source": "r", "measured": True},
    ...        "cells": [{"workload": "write", "params": {"sample_size": 1024}, "unit": "samples/s",
    ...                   "contenders": {"ffrecord": {"median": 2e5}}, "ratios": {}}]}
    >>> "| write 1 KiB | 200k samples/s |" in to_markdown(doc)
    True
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from .config import size_label
from .goals import Goal
from .results import Cell, Results


def human(x: float | None) -> str:
    """A short rendering of a figure.

    Example:
        >>> human(1234567), human(0.000012), human(None)
        ('1.23M', '1.2e-05', '-')
    """
    if x is None or not math.isfinite(x):
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2g}"


def _params(cell: Cell) -> str:
    shown = {k: v for k, v in cell.params.items() if k not in ("eviction", "file_bytes", "tool")}
    return " ".join(f"{k}={'on' if v is True else 'off' if v is False else v}" for k, v in shown.items())


def format_cell(cell: Cell) -> str:
    """One block of the table: a row per contender, with GB/s and ffrecord's ratio to it.

    "advantage: ffrecord 2.00x" on a row means ffrecord did twice as well as that contender
    (twice the throughput, or half the time or memory), as a median of per-repetition ratios.
    """
    lines = [f"{cell.workload}  {_params(cell)}  [{cell.unit}, median of {len(next(iter(cell.values.values())))}]"]
    ratios = cell.ratios()
    ours = [c for c in cell.values if c.startswith("ffrecord")]
    for name in cell.values:
        gbps = cell.gb_per_s(name)
        row = f"  {name:<16}{human(cell.median(name)):>10}"
        row += f"{(human(gbps) + ' GB/s') if gbps is not None else '':>14}"
        vs = [f"{a} {ratios[f'{a}/{name}']:.2f}x" for a in ours if f"{a}/{name}" in ratios]
        if vs:
            row += "   advantage: " + ", ".join(vs)
        lines.append(row)
    return "\n".join(lines)


def format_goals(goals: list[Goal]) -> str:
    lines = ["GOALS"]
    for g in goals:
        bound = "<=" if g.at_most else ">="
        lines.append(f"  {g.status:<5} {g.name}: measured {human(g.measured)}{g.unit} "
                     f"(target {bound} {g.target}{g.unit}; {g.basis})")
    return "\n".join(lines)


def format_machine(facts: dict) -> str:
    pkgs = ", ".join(f"{k} {v}" for k, v in facts["packages"].items() if v)
    return (f"machine: {facts['cores']} cores ({facts['cpu']}), kernel {facts['kernel']}, "
            f"{facts['memory_gib']} GiB RAM, load average {facts['load_average_1m']}, disk {facts['disk']} {facts['filesystem']}, "
            f"Python {facts['python']}, root={facts['root']}, fio={facts['fio']}\n"
            f"packages: {pkgs}")


def _finite_or_none(value: object) -> object:
    """NaN and infinities become null: the file stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value


def to_json(results: Results, goals: list[Goal], meta: dict) -> dict:
    return _finite_or_none({
        **meta,
        "skipped": results.skipped,
        "errors": results.errors,
        "cells": [c.to_json() for c in results.cells],
        "goals": [g.to_json() for g in goals],
    })


def write_json(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n")


_ORDER = ["ffrecord", "ffrecord-batch", "ffrecord-direct", "reference", "python", "lmdb",
          "granular", "array-record", "folder", "hdf5",
          "memory", "sampler-walk", "memcpy", "raw_qd64", "write_fsync"]


def _label(cell: dict) -> str:
    p = cell["params"]
    parts = [cell["workload"]]
    if "what" in p:
        parts.append(p["what"] + (f" {p['block'] // 1024} KiB QD{p['queue_depth']} ({p['tool']})"
                                  if "block" in p else ""))
    if "bytes" in p:
        parts.append(f"{p['bytes'] >> 20} MiB")
    if "sample_size" in p:
        parts.append(size_label(p["sample_size"]))
    if "batch" in p and cell["workload"] != "resume":
        parts.append(f"b{p['batch']}")
    if "check" in p:
        parts.append("check on" if p["check"] else "check off")
    if "metric" in p:
        parts.append(f"{p['samples']:,} samples, {p['metric']}")
    if "step" in p:
        parts.append(f"set_step({p['step']:,}) + first batch")
    return " ".join(parts)


def _figure(figures: dict, unit: str) -> str:
    text = f"{human(figures['median'])} {unit}"
    if figures.get("gb_per_s") is not None and unit != "GB/s":
        text += f" ({human(figures['gb_per_s'])} GB/s)"
    return text


def to_markdown(doc: dict) -> str:
    """The figures table (medians; ffrecord's pair-by-pair advantage in brackets) and goals."""
    present = {name for cell in doc["cells"] for name in cell["contenders"]}
    columns = [c for c in _ORDER if c in present] + sorted(present - set(_ORDER))
    m = doc["machine"]
    lines = [
        f"Mode `{doc['mode']}` on {m['cores']} cores ({m['cpu']}), kernel {m['kernel']}, "
        f"{m['memory_gib']} GiB RAM, {m['disk']} {m['filesystem']}, load average "
        f"{m['load_average_1m']} at start; cold runs evict with `{doc['eviction']}`. Medians of "
        f"repetitions; `(N.NNx)` is ffrecord's advantage over that contender, the median of "
        f"per-repetition ratios (higher is better for ffrecord).",
        "",
        "| workload | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for cell in doc["cells"]:
        row = []
        for name in columns:
            figures = cell["contenders"].get(name)
            if figures is None:
                row.append("")
                continue
            ratio = cell["ratios"].get(f"ffrecord/{name}")
            row.append(_figure(figures, cell["unit"]) + (f" ({ratio:.2f}x)" if ratio else ""))
        lines.append(f"| {_label(cell)} | " + " | ".join(row) + " |")
    ref = doc["reference"]
    where = ("measured in this run, built from " + ref["source"] if ref["measured"]
             else f"not measured: {ref.get('skipped')}")
    lines += ["", f"Goals (the reference: {where}):", "",
              "| status | goal | measured | target |", "|---|---|---|---|"]
    for g in doc["goals"]:
        bound = "<=" if g["at_most"] else ">="
        lines.append(f"| {g['status']} | {g['goal']} | {human(g['measured'])}{g['unit']} | "
                     f"{bound} {g['target']}{g['unit']} ({g['basis']}) |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    for path in argv:
        print(to_markdown(json.loads(Path(path).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
