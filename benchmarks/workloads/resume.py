"""Workload 6: resuming mid-epoch with ffrecord.torch.DataLoader.

``set_step(k)`` then the first batch, for k = 1, 10^3, 10^6, over a file of many 1-byte
samples (batch size 1, shuffled); beside it, the cost of what the reference does instead —
walking k batches of a torch sampler. Then a ``state_dict()`` taken mid-epoch goes through
JSON into a fresh loader, which must yield the same next batch.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time

from ..context import BenchContext
from ..results import Cell, interleaved

_TRIES = 5


def _seconds(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _walk_sampler(n: int, k: int) -> None:
    """Skips k batches the reference's way: draws them from a shuffled batch sampler."""
    import torch
    from torch.utils.data import BatchSampler, RandomSampler

    sampler = BatchSampler(RandomSampler(range(n), generator=torch.Generator().manual_seed(0)), 1, False)
    batches = iter(sampler)
    next(itertools.islice(batches, k, k), None)
    next(batches)


def round_trip(make_loader) -> dict:
    """Takes state mid-epoch, restores it through JSON; reports sizes, times and exactness."""
    loader = make_loader()
    batches = iter(loader)
    for _ in range(3):
        next(batches)
    start = time.perf_counter()
    state = loader.state_dict()
    state_s = time.perf_counter() - start
    encoded = json.dumps(state)
    restored = make_loader()
    start = time.perf_counter()
    restored.load_state_dict(json.loads(encoded))
    load_s = time.perf_counter() - start
    expected, got = next(batches), next(iter(restored))
    return {"state_dict_s": state_s, "load_state_dict_s": load_s, "json_bytes": len(encoded),
            "exact": bool((expected == got).all())}


def run(ctx: BenchContext) -> None:
    if ctx.contender("ffrecord") is None:
        ctx.results.skipped["resume"] = "ffrecord is not available"
        return
    try:
        from ffrecord.torch import DataLoader

        from .ffrecord_dataset import SamplesDataset
        from .loader_datasets import stack_bytes
    except ImportError as e:
        ctx.results.skipped["resume"] = f"ffrecord.torch does not import: {e}"
        return
    n = ctx.config.open_samples
    path = ctx.one_byte_samples_file()

    def make_loader():
        dataset = SamplesDataset(str(path), check_data=True)
        return DataLoader(dataset, batch_size=1, shuffle=True, seed=0, collate_fn=stack_bytes)

    for k in ctx.config.resume_steps:
        ctx.log(f"resume: set_step({k})")
        loader = make_loader()
        next(iter(loader))  # the first iteration pays one-time set-up: not part of a resume

        def set_step_then_batch(k: int = k) -> float:
            # sub-millisecond: a median of a few tries keeps one preemption from deciding it
            return statistics.median(
                _seconds(lambda: (loader.set_step(k), next(iter(loader)))) for _ in range(_TRIES))

        runners = {"ffrecord": set_step_then_batch,
                   "sampler-walk": lambda k=k: _seconds(lambda: _walk_sampler(n, k))}
        # sampler-walk: what the reference's set_step costs (it draws k batches to skip them)
        values = interleaved(runners, ctx.config.reps)
        ctx.results.add(Cell("resume", {"step": k, "samples": n, "batch": 1}, "s", values,
                             higher_is_better=False))
    ctx.log("resume: state_dict round trip")
    trips = [round_trip(make_loader) for _ in range(ctx.config.reps)]
    cell = Cell("state_dict", {"samples": n}, "s",
                {"ffrecord": [t["state_dict_s"] for t in trips]}, higher_is_better=False)
    cell.notes = {"json_bytes": trips[0]["json_bytes"], "exact": all(t["exact"] for t in trips),
                  "load_state_dict_s": [t["load_state_dict_s"] for t in trips]}
    ctx.results.add(cell)
