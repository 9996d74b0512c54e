"""Printing the results as tables and writing them as JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .goals import Goal
from .formatting import human
from .results import Cell, Results


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
