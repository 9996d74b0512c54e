"""``ffrecord profile TARGET`` (or ``python -m ffrecord.profile TARGET``): where a loader's
time goes, the first thing to run when a training job is slow.

It gets the loader TARGET names, runs it for a number of batches with a training step that
does nothing, and prints the time per stage (``loader.stats()``: read, transform, collate,
transfer), the *ceiling* (batches and datapoints per second the loader delivers when the
step takes no time: a step slower than its inverse never waits for data) and the stage to
fix first.

TARGET names an ``ffrecord.torch.DataLoader``, or a function that makes one (called with no
argument):

- ``path/to/script.py:NAME`` or ``package.module:NAME``: that attribute;
- ``path/to/script.py`` or ``package.module``: its ``make_loader``, else its ``loader``.

A script runs with ``__name__`` set to ``"__ffrecord_profile__"`` (its ``if __name__ ==
"__main__":`` block, the training, does not run), its folder first on ``sys.path``; a module
is imported with the current folder on ``sys.path``, as ``python -m`` does. See
docs/profiling.md.

>>> stage_to_fix({"read_s": 1.0, "transform_s": 3.0, "collate_s": 0.5, "transfer_s": 0.1})
'transform'
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

__all__ = ["Profile", "load_loader", "main", "profile", "report", "stage_to_fix"]

STAGES = ("read", "transform", "collate", "transfer")
DEFAULT_BATCHES = 50

ADVICE = {
    "read": "storage. Remote data: give the reader a cache_dir (each chunk downloaded once per node) "
            "and a chunk-aware order (ffrecord.order.ChunkShuffle); `ffrecord plan` says what an epoch "
            "costs in requests. Either way more workers keep more reads in flight.",
    "transform": "the dataset's own work after its reads (its __getitems__, process, transform). More "
                 "workers; workers=\"threads\" when that work releases the GIL (numpy, OpenCV, simplejpeg); "
                 "a batch decoded at once (Dataset.process_batch, a transform_batch method).",
    "collate": "collation. Return arrays shaped as the batch from Dataset.process_batch (the batch tensor "
               "is then the buffer the samples were read into), or make the collate_fn cheaper.",
    "transfer": "the hand-over to the training loop. With worker processes keep shared_memory=True (the "
                "default) and fewer, larger batches; workers=\"threads\" has no hand-over; pin_memory "
                "copies every batch once more.",
}


@dataclass
class Profile:
    """What ``profile`` measured: the loader's ``stats()`` over the run (``stats``), the
    batches and datapoints it delivered, the first batch's wait (workers starting) and the
    rate after it (the ceiling)."""

    target: str
    workers: str  # "0 workers", "2 worker processes", "4 threads"
    batches: int
    datapoints: int
    first_batch_s: float
    seconds: float  # the whole run, first batch included
    batches_per_s: float  # after the first batch
    datapoints_per_s: float
    stats: dict[str, float]
    stage_to_fix: str | None  # None when no stage was timed


def stage_to_fix(stats: dict[str, float]) -> str | None:
    """The stage with the most seconds in ``stats`` (None when none took any)."""
    seconds = {stage: stats[f"{stage}_s"] for stage in STAGES}
    top = max(seconds, key=seconds.get)
    return top if seconds[top] > 0 else None


def load_loader(target: str) -> Any:
    """The ``ffrecord.torch.DataLoader`` that ``target`` names (see the module's
    docstring). ValueError when it names nothing, TypeError when it is not such a loader."""
    location, _, name = target.partition(":")
    if not location:
        raise ValueError(f"no script or module in {target!r}: give path/to/script.py[:NAME] or package.module[:NAME]")
    if location.endswith(".py") or os.sep in location:
        if not os.path.isfile(location):
            raise ValueError(f"{location}: no such script")
        folder = os.path.dirname(os.path.abspath(location))
        if folder not in sys.path:
            sys.path.insert(0, folder)
        namespace = runpy.run_path(location, run_name="__ffrecord_profile__")
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        namespace = vars(importlib.import_module(location))
    names = [name] if name else ["make_loader", "loader"]
    for candidate in names:
        if candidate in namespace:
            found = namespace[candidate]
            break
    else:
        raise ValueError(f"{location} has no {' or '.join(names)} (give SCRIPT_OR_MODULE:NAME to name "
                         "a DataLoader or a function that makes one)")
    loader = found() if callable(found) else found
    from ffrecord.torch import DataLoader

    if not isinstance(loader, DataLoader):
        raise TypeError(f"{target} gives a {type(loader).__module__}.{type(loader).__qualname__}, not an "
                        "ffrecord.torch.DataLoader (it takes torch's DataLoader arguments)")
    return loader


def _workers(loader: Any) -> str:
    """What fetches the loader's batches: "0 workers", "2 worker processes", "1 thread"."""
    n = loader.num_workers
    if n == 0:
        return "0 workers"
    kind = ("thread", "threads") if getattr(loader, "_on_threads", False) else ("worker process", "worker processes")
    return f"{n} {kind[n > 1]}"


def profile(loader: Any, batches: int = DEFAULT_BATCHES, target: str = "") -> Profile:
    """Runs ``loader`` for ``batches`` batches (fewer when its epoch ends first) with a
    training step that does nothing, and measures where the time went."""
    if isinstance(batches, bool) or not isinstance(batches, int) or batches < 1:
        raise ValueError(f"batches must be a positive int, not {batches!r}")
    before = loader.stats()
    start = time.perf_counter()
    iterator = iter(loader)
    delivered = 0
    first = 0.0
    for _ in iterator:  # the training step: nothing
        delivered += 1
        if delivered == 1:
            first = time.perf_counter() - start
        if delivered == batches:
            break
    seconds = time.perf_counter() - start
    del iterator  # its workers stop
    after = loader.stats()
    stats = {key: after[key] - before[key] for key in after if key != "fetched_per_delivered"}
    rest = seconds - first
    rate = (delivered - 1) / rest if delivered > 1 and rest > 0 else (delivered / seconds if seconds else 0.0)
    # the workers' figures count the batches they fetched, a few more than delivered (prefetched)
    per_batch = stats["datapoints"] / stats["batches"] if stats["batches"] else 0.0
    return Profile(target, _workers(loader), delivered, round(delivered * per_batch), first, seconds, rate,
                   rate * per_batch, stats, stage_to_fix(stats))


def report(result: Profile) -> str:
    """The profile as text: the ceiling, the stage table and the stage to fix."""
    stats = result.stats
    lines = [f"ffrecord profile {result.target}: {result.batches} batches, {result.datapoints:,} datapoints, "
             f"{result.workers}",
             f"first batch after {result.first_batch_s:.3f} s; then {result.batches_per_s:,.1f} batches/s, "
             f"{result.datapoints_per_s:,.0f} datapoints/s",
             "ceiling: what the loader delivers when the training step takes no time; a step slower than "
             f"{_ms(1 / result.batches_per_s) if result.batches_per_s else '-'} per batch would not wait for data",
             "", f"{'stage':<10} {'seconds':>9} {'per batch':>10} {'share':>6}"]
    total = sum(stats[f"{stage}_s"] for stage in STAGES)
    timed = max(int(stats["batches"]), 1)
    for stage in STAGES:
        value = stats[f"{stage}_s"]
        share = f"{100 * value / total:.0f}%" if total else "-"
        lines.append(f"{stage:<10} {value:>9.3f} {_ms(value / timed):>10} {share:>6}")
    waited = stats["wait_s"] / stats["elapsed_s"] if stats["elapsed_s"] else 0.0
    summed = "" if result.workers == "0 workers" else f"stages summed over {result.workers}; "
    lines.append(f"({summed}the loop waited {stats['wait_s']:.3f} s of {stats['elapsed_s']:.3f} s, {waited:.0%})")
    lines.append("")
    if result.stage_to_fix is None:
        lines.append("no stage was timed: the loader was made with timing=False, or its worker processes "
                     "send batches through torch's pipe (shared_memory=False), where they are not timed")
    else:
        lines.append(f"stage to fix: {result.stage_to_fix}: {ADVICE[result.stage_to_fix]}")
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``ffrecord profile``'s arguments."""
    parser.add_argument("target", metavar="SCRIPT_OR_MODULE",
                        help="path/to/script.py[:NAME] or package.module[:NAME]: a DataLoader, or a "
                             "function that makes one (default NAME: make_loader, else loader)")
    parser.add_argument("--batches", type=int, default=DEFAULT_BATCHES, metavar="N",
                        help=f"batches to run (default {DEFAULT_BATCHES}; fewer if the epoch ends first)")
    parser.add_argument("--json", action="store_true", help="print the measurements as one JSON object")


def run(args: argparse.Namespace) -> int:
    """``ffrecord profile`` with parsed ``args``."""
    result = profile(load_loader(args.target), args.batches, args.target)
    print(json.dumps(asdict(result)) if args.json else report(result))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ffrecord.profile ARGS``: ``ffrecord profile ARGS``."""
    from .cli import main as cli_main

    return cli_main(["profile", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
