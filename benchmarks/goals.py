"""The speed goals, judged against this run's figures (and the reference's constants)."""

from __future__ import annotations

from dataclasses import dataclass

from . import reference as ref
from .formatting import human
from .results import Results, finite


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


def _ratio(results: Results, pair: str, workload: str, **params: object) -> float | None:
    cell = results.find(workload, **params)
    return None if cell is None else cell.ratios().get(pair)


def _over(value: float | None, base: float | None) -> float | None:
    return value / base if finite(value) and finite(base) and base else None


def evaluate(results: Results) -> list[Goal]:
    """Every goal that this run has the figures for (others come out N/A)."""
    goals = []
    for check in (True, False):
        on = "on" if check else "off"
        ours = _median(results, "ffrecord", "warm_read", sample_size=1024, batch=256, check=check)
        goals.append(Goal(f"warm 1 KiB b256 check {on} >= 4x reference", f"{ref.SOURCE}: "
                          f"{ref.WARM_1K_B256[check]:.0f} samples/s",
                          _over(ours, ref.WARM_1K_B256[check]), 4.0))
        # 4x the reference, expressed against the pread loop measured beside it.
        needed = round(4 * ref.WARM_1K_B256[check] / ref.PREAD_1K_B256[check], 1)
        goals.append(Goal(f"warm 1 KiB b256 check {on} >= {needed}x pread loop", "same run",
                          _ratio(results, "ffrecord/python", "warm_read", sample_size=1024,
                                 batch=256, check=check), needed))
    memcpy = _median(results, "memcpy", "limits", what="memcpy_batches")
    for check in (True, False):
        on = "on" if check else "off"
        gbps = _gb_per_s(results, "ffrecord", "warm_read", sample_size=128 << 10, batch=64,
                         check=check)
        goals.append(Goal(f"warm 128 KiB b64 check {on} >= 2x reference",
                          f"{ref.SOURCE}: {ref.WARM_128K_B64_GBPS[check]} GB/s",
                          _over(gbps, ref.WARM_128K_B64_GBPS[check]), 2.0))
        goals.append(Goal(f"warm 128 KiB b64 check {on} >= 80% of memcpy",
                          "same run: numpy gathering the same batches from RAM, one thread",
                          _over(gbps, memcpy), 0.8))
    raw = _median(results, "raw_qd64", "limits", what="odirect_random_read", block=4096)
    for batch, reference_rate in ref.COLD_4K.items():
        for variant in ("ffrecord", "ffrecord-direct"):
            ours = _median(results, variant, "cold_read", sample_size=4096, batch=batch)
            goals.append(Goal(f"cold 4 KiB b{batch} {variant} >= 5x reference",
                              f"{ref.SOURCE}: {reference_rate:.0f} samples/s",
                              _over(ours, reference_rate), 5.0))
            goals.append(Goal(f"cold 4 KiB b{batch} {variant} >= 4x pread loop", "same run",
                              _ratio(results, f"{variant}/python", "cold_read",
                                     sample_size=4096, batch=batch), 4.0))
            goals.append(Goal(f"cold 4 KiB b{batch} {variant} >= 80% of raw QD64 IOPS",
                              "same run", _over(ours, raw), 0.8))
    disk = _median(results, "write_fsync", "limits", what="sequential_write_fsync")
    for size, reference_gbps in ref.WRITE_GBPS.items():
        gbps = _gb_per_s(results, "ffrecord", "write", sample_size=size)
        goals.append(Goal(f"write {size // 1024} KiB >= 2x reference",
                          f"{ref.SOURCE}: {reference_gbps} GB/s; this disk's sequential write + "
                          f"fsync in the same run: {human(disk)} GB/s",
                          _over(gbps, reference_gbps), 2.0))
    for metric in ("rss_mib", "rss_after_reads_mib", "anon_after_reads_mib"):
        cell = results.find("open", metric=metric)
        samples = cell.params["samples"] if cell else 0
        goals.append(Goal(f"open {samples:,}-sample file adds < 16 MiB ({metric})",
                          "fresh process", _median(results, "ffrecord", "open", metric=metric),
                          16.0, "MiB", at_most=True))
    for cell in (c for c in results.cells if c.workload == "dataloader"):
        size, batch = cell.params["sample_size"], cell.params["batch"]
        goals.append(Goal(f"DataLoader {size // 1024} KiB b{batch} >= 3x folder of files",
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
