"""PNG plots of a run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

from .config import size_label
from .results import Cell, Results

_COLORS = {"ffrecord": "#d62728", "ffrecord-direct": "#ff9896", "python": "#7f7f7f",
           "lmdb": "#1f77b4", "folder": "#2ca02c", "hdf5": "#9467bd", "memory": "#17becf",
           "granular": "#8c564b", "array-record": "#e377c2"}
_REF_STYLE = {"color": "white", "edgecolor": "black", "hatch": "//"}


def _bars(ax, groups: list[tuple[str, dict[str, float]]], ylabel: str, title: str) -> None:
    """Grouped bars: one group per label, one bar per contender (reference hatched)."""
    names = list(dict.fromkeys(n for _, values in groups for n in values))
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        xs = [i + j * width for i, (_, values) in enumerate(groups) if name in values]
        ys = [values[name] for _, values in groups if name in values]
        style = _REF_STYLE if name == "reference" else {"color": _COLORS.get(name, "#bcbd22")}
        label = "reference (C++/libaio)" if name == "reference" else name
        ax.bar(xs, ys, width, label=label, **style)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))], [g for g, _ in groups])
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=4, frameon=False)


def _limit_line(ax, value: float, label: str) -> None:
    """A dashed horizontal line for a physical limit measured in the same run."""
    ax.axhline(value, color="black", linestyle="--", linewidth=1)
    ax.annotate(label, (0.01, value), xycoords=("axes fraction", "data"), va="bottom", fontsize=7)


def _gbps(cell: Cell) -> dict[str, float]:
    return {name: cell.gb_per_s(name) for name in cell.values}


def _medians(cell: Cell) -> dict[str, float]:
    return {name: cell.median(name) for name in cell.values}


def _warm_groups(results: Results, check: bool) -> list[tuple[str, dict[str, float]]]:
    groups = []
    for cell in (c for c in results.cells if c.workload == "warm_read" and c.params["check"] == check):
        size, batch = cell.params["sample_size"], cell.params["batch"]
        groups.append((f"{size_label(size)} b{batch}", _gbps(cell)))
    return groups


def draw(results: Results, out_dir: Path, mode: str) -> list[Path]:
    """Draws the overview and warm-read plots; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    for ax, check in zip(axes, (True, False)):
        _bars(ax, _warm_groups(results, check), "GB/s (log)",
              f"warm random batch reads, check {'on' if check else 'off'}")
    fig.tight_layout()
    written.append(out_dir / f"{mode}_warm_reads.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    cold = []
    for cell in (c for c in results.cells if c.workload == "cold_read"):
        size, batch = cell.params["sample_size"], cell.params["batch"]
        cold.append((f"{size_label(size)} b{batch}", _medians(cell)))
    _bars(axes[0], cold, "samples/s (log)", "cold random batch reads (cache dropped)")
    raw = results.find("limits", what="odirect_random_read", block=4096)
    if raw is not None:
        _limit_line(axes[0], raw.median("raw_qd64"), f"raw O_DIRECT 4 KiB QD64 ({raw.params['tool']})")
    writes = []
    for cell in (c for c in results.cells if c.workload == "write"):
        writes.append((size_label(cell.params["sample_size"]), _gbps(cell)))
    _bars(axes[1], writes, "GB/s (log)", "write throughput")
    disk = results.find("limits", what="sequential_write_fsync")
    if disk is not None:
        _limit_line(axes[1], disk.median("write_fsync"), "disk: sequential write + fsync")
    loaders = [(f"{size_label(c.params['sample_size'])} b{c.params['batch']}", _medians(c))
               for c in results.cells if c.workload == "dataloader"]
    _bars(axes[2], loaders, "batches/s (log)", "DataLoader, 2 workers, bytes -> tensor")
    fig.tight_layout()
    written.append(out_dir / f"{mode}_cold_write_loader.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    return written
