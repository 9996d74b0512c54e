"""Markdown tables of a results file, for the README: ``python -m benchmarks.markdown FILE``.

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
import sys
from pathlib import Path

from .formatting import human

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
        parts.append(f"{p['sample_size'] // 1024} KiB" if p["sample_size"] >= 1024 else f"{p['sample_size']} B")
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
