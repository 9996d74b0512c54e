"""The goals, judged against this run's figures only (the reference is measured in the run)."""

from __future__ import annotations

from dataclasses import dataclass

from .config import size_label
from .results import Cell, Results, finite, pair_ratio


@dataclass(frozen=True)
class Goal:
    """One goal: ``measured`` (a ratio unless ``unit`` says otherwise) against ``target``.

    Example:
        >>> Goal("x >= 4x y", "same run", 4.5, 4.0).status
        'PASS'
        >>> Goal("rss < 16 MiB", "fresh process", 20.0, 16.0, "MiB", at_most=True).status
        'MISS'
    """

    name: str
    basis: str
    measured: float | None
    target: float
    unit: str = "x"
    at_most: bool = False

    @property
    def status(self) -> str:
        if not finite(self.measured):
            return "N/A"
        met = self.measured <= self.target if self.at_most else self.measured >= self.target
        return "PASS" if met else "MISS"

    def to_json(self) -> dict:
        return {"goal": self.name, "basis": self.basis, "measured": self.measured,
                "target": self.target, "unit": self.unit, "at_most": self.at_most,
                "status": self.status}

    def __repr__(self) -> str:
        return f"Goal({self.name!r}, {self.status})"


def _median(results: Results, contender: str, workload: str, **params: object) -> float | None:
    cell = results.find(workload, **params)
    if cell is None or contender not in cell.values:
        return None
    return cell.median(contender)


def _gb_per_s(results: Results, contender: str, workload: str, **params: object) -> float | None:
    cell = results.find(workload, **params)
    if cell is None or contender not in cell.values:
        return None
    return cell.gb_per_s(contender)


def _over(value: float | None, base: float | None) -> float | None:
    return value / base if finite(value) and finite(base) and base else None


def _fresh_goals(results: Results) -> list[Goal]:
    """The goals measured in fresh processes, every contender beside the reference."""
    goals = []
    basis = "fresh processes, alternating, same files"
    cell = results.find("fresh_loader")
    if cell is not None:
        goals.append(Goal(
            f"ffrecord.torch.DataLoader, {cell.params['workers']} workers, shuffle, batch "
            f"{cell.params['batch']}, {_size(cell)} samples, one epoch >= 2x reference", basis,
            cell.ratios().get("ffrecord/reference"), 2.0))
    for cell in (c for c in results.cells if c.workload == "fresh_epoch"):
        what = f"one shuffled epoch of read(), {_size(cell)} batch {cell.params['batch']}"
        goals.append(Goal(f"{what} >= 4x reference", basis + ", page cache warm",
                          cell.ratios().get("ffrecord/reference"), 4.0))
        if cell.params["sample_size"] >= 128 << 10:
            goals.append(Goal(f"{what} ahead of LMDB", basis + ", page cache warm",
                              cell.ratios().get("ffrecord/lmdb"), 1.0))
    for cell in (c for c in results.cells if c.workload == "cold_read"
                 and c.params["sample_size"] == 4096 and c.params["batch"] == 256):
        for variant in ("ffrecord", "ffrecord-direct"):
            goals.append(Goal(f"cold page cache random 4 KiB batch 256, {variant} >= 5x reference",
                              "same run, reference in its own processes",
                              cell.ratios().get(f"{variant}/reference"), 5.0))
    targets = {1024: 2.0, 128 << 10: 1.2}
    for cell in (c for c in results.cells if c.workload == "fresh_write"):
        target = targets.get(cell.params["sample_size"])
        if target is not None:
            goals.append(Goal(f"write {cell.params['samples']:,} x {_size(cell)} until close() "
                              f"returns >= {target}x reference", basis,
                              cell.ratios().get("ffrecord/reference"), target))
    cell = results.find("fresh_open_workers")
    if cell is not None:
        goals.append(Goal(f"open a {cell.params['samples']:,}-sample file with check_data=True in "
                          f"{cell.params['workers']} loader workers >= 4x reference",
                          basis + " (time ratio)", cell.ratios().get("ffrecord/reference"), 4.0))
        floor = cell.values.get("torch-workers-alone")
        if floor and "reference" in cell.values:
            # What 4x would need, against what torch's worker start-up alone takes.
            goals.append(Goal("  the best ratio any reader could reach here: reference / torch's "
                              "workers alone", basis + " (time ratio)",
                              pair_ratio(cell.values["reference"], floor), 4.0))
    return goals


def _size(cell: Cell) -> str:
    return size_label(cell.params["sample_size"])


def evaluate(results: Results) -> list[Goal]:
    """Every goal that this run has the figures for (others come out N/A)."""
    goals = _fresh_goals(results)
    for cell in (c for c in results.cells if c.workload == "warm_read" and not c.params["check"]):
        what = f"warm read() {_size(cell)} b{cell.params['batch']}"
        if {"ffrecord", "ffrecord-batch"} <= cell.values.keys():
            goals.append(Goal(f"{what} within 10% of read_batch(out=)", "same run",
                              pair_ratio(cell.values["ffrecord"], cell.values["ffrecord-batch"]),
                              0.9))
        if "lmdb" in cell.values:
            goals.append(Goal(f"{what} ahead of LMDB", "same run",
                              cell.ratios().get("ffrecord/lmdb"), 1.0))
    memcpy = _median(results, "memcpy", "limits", what="memcpy_batches")
    for check in (True, False):
        gbps = _gb_per_s(results, "ffrecord", "warm_read", sample_size=128 << 10, batch=64,
                         check=check)
        goals.append(Goal(f"warm 128 KiB b64 check {'on' if check else 'off'} >= 80% of memcpy",
                          "same run: numpy gathering the same batches from RAM, one thread",
                          _over(gbps, memcpy), 0.8))
    raw = _median(results, "raw_qd64", "limits", what="odirect_random_read", block=4096)
    for cell in (c for c in results.cells if c.workload == "cold_read" and c.params["sample_size"] == 4096):
        for variant in ("ffrecord", "ffrecord-direct"):
            goals.append(Goal(f"cold 4 KiB b{cell.params['batch']} {variant} >= 80% of raw QD64 IOPS",
                              "same run", _over(_median(results, variant, "cold_read",
                                                        sample_size=4096, batch=cell.params["batch"]),
                                                raw), 0.8))
    for metric in ("rss_mib", "rss_after_reads_mib", "anon_after_reads_mib"):
        cell = results.find("open", metric=metric)
        if cell is None:
            continue
        samples = cell.params["samples"]
        goals.append(Goal(f"open {samples:,}-sample file adds < 16 MiB ({metric})",
                          "fresh process", _median(results, "ffrecord", "open", metric=metric),
                          16.0, "MiB", at_most=True))
    for cell in (c for c in results.cells if c.workload == "dataloader"):
        size, batch = cell.params["sample_size"], cell.params["batch"]
        goals.append(Goal(f"DataLoader {size_label(size)} b{batch} >= 3x folder of files",
                          "same run", cell.ratios().get("ffrecord/folder"), 3.0))
    one = _median(results, "ffrecord", "resume", step=1)
    for cell in (c for c in results.cells if c.workload == "resume" and c.params["step"] > 1):
        step_k = cell.median("ffrecord") if "ffrecord" in cell.values else None
        goals.append(Goal(f"set_step({cell.params['step']}) + first batch <= 2x set_step(1)",
                          "same run (time ratio k / 1)", _over(step_k, one), 2.0, at_most=True))
    cell = results.find("state_dict")
    if cell is not None:
        goals.append(Goal("state_dict() through JSON resumes at the exact next batch",
                          "same run", float(cell.notes["exact"]), 1.0, "bool"))
    return goals
