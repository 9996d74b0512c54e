"""Workers that add speed (issue 19): ``python -m benchmarks.workers [--quick]``.

Every figure is one measurement in a fresh process (``contenders.isolated``); the contenders
of a comparison take turns, round after round, so that a busy moment of a shared machine
hits them alike; the best round of each is reported, then the ratios. Page cache warm (the
data is read through before the rounds).

1. Structured loader: ``{image: 16 KiB bytes, label: int}``, shuffled, batch 64: ffrecord's
   DataLoader over ``StructuredDataset`` with 0 and 2 workers, LitData's
   ``StreamingDataLoader`` and MosaicML Streaming's ``StreamingDataset`` in torch's loader,
   2 workers each (LitData and Streaming from PyPI, written by their own writers).
2. One datapoint at a time: ``DatasetReader[i]`` against Streaming's ``LocalDataset[i]``
   (``get_item``), in process, shuffled; then the stock ``torch.utils.data.DataLoader``
   over each (batch 64, 2 workers, torch's per-item fetch and pipe).
3. 1 KiB samples, batch 256, collated to tensors, 2 workers: ffrecord's loader (through
   shared memory, and through torch's pipe with ``shared_memory=False``), the reference's
   DataLoader over the same file, and the stock DataLoader over the samples held in RAM.

4. What timing the stages costs (issue 36), with 0 workers, 2 worker processes and 2
   threads: the CPU a batch takes (this process's and its workers') with ``timing=True``
   and ``timing=False`` side by side, on batches of one int (nothing else to do: the
   difference is timing's own cost, which a machine's noise would drown in real batches),
   against the CPU a batch of 256 1 KiB samples takes (read by ffrecord's ``Dataset``,
   shuffled, collated to tensors). Goal: timing costs at most 1% of the epoch.

The read and write goals without a loader (a shuffled ``read()`` epoch, 128 KiB writes,
opening a large file) are measured by ``benchmarks.reads``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from .contenders import contender_named
from .contenders.isolated import call, runner
from .context import read_tree

IMAGE, STRUCT_BATCH = 16 << 10, 64
TENSOR_SAMPLE, TENSOR_BATCH = 1 << 10, 256
UNTIMED = 2  # batches that absorb worker start-up
SIZES = {  # structured datapoints, loader batches timed (300: nearly an epoch of 20,000 / 64,
    # so that start-up weighs as in training), datapoints read one by one,
    # 1 KiB samples
    # timing: turns of each contender, and the tiny batches of an epoch measuring its cost
    "full": dict(points=20_000, batches=300, singles=20_000, small=40_000, rounds=3, timing_rounds=6,
                 timing_tiny=10_000),
    "quick": dict(points=20_000, batches=300, singles=10_000, small=40_000, rounds=2, timing_rounds=4,
                  timing_tiny=5_000),
    # tests/test_bench_workers.py: every code path, tiny, figures meaningless
    "smoke": dict(points=640, batches=3, singles=200, small=2_048, rounds=1, timing_rounds=1, timing_tiny=20),
}
ME = "benchmarks.workers"


# -- measurements (each runs in a fresh process) ------------------------------------------

def _timed_batches(loader, batches: int, per_batch: int) -> float:
    """Samples/s over ``batches`` batches after ``UNTIMED`` (worker start-up)."""
    iterator = iter(loader)
    for _ in range(UNTIMED):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        batch = next(iterator)
        del batch
    elapsed = time.perf_counter() - start
    del iterator
    return batches * per_batch / elapsed


def structured_loader(contender: None, kind: str, path: str, workers: int, batches: int) -> float:
    """Samples/s of a shuffled structured loader, batch 64."""
    if kind == "ffrecord":
        from ffrecord.dataset import DatasetReader
        from ffrecord.torch import DataLoader
        from ffrecord.torch.structured import StructuredDataset

        loader = DataLoader(StructuredDataset(DatasetReader(path)), batch_size=STRUCT_BATCH,
                            shuffle=True, num_workers=workers)
    elif kind == "litdata":
        import litdata

        loader = litdata.StreamingDataLoader(litdata.StreamingDataset(path, shuffle=True),
                                             batch_size=STRUCT_BATCH, num_workers=workers)
    else:
        import streaming
        import torch.utils.data

        streaming.base.util.clean_stale_shared_memory()
        dataset = streaming.StreamingDataset(local=path, shuffle=True, batch_size=STRUCT_BATCH)
        loader = torch.utils.data.DataLoader(dataset, batch_size=STRUCT_BATCH, num_workers=workers)
    return _timed_batches(loader, batches, STRUCT_BATCH)


def _map_dataset(kind: str, path: str):
    if kind == "ffrecord":
        from ffrecord.dataset import DatasetReader

        return DatasetReader(path)
    import streaming

    return streaming.LocalDataset(path)


def single_datapoints(contender: None, kind: str, path: str, count: int) -> float:
    """Datapoints/s of ``dataset[i]``, one at a time, shuffled, in this process."""
    dataset = _map_dataset(kind, path)
    order = np.random.default_rng(1).permutation(len(dataset))[:count].tolist()
    dataset[order[0]]
    start = time.perf_counter()
    for i in order:
        dataset[i]
    return count / (time.perf_counter() - start)


def stock_loader(contender: None, kind: str, path: str, batches: int) -> float:
    """Samples/s of the stock torch DataLoader over the map-style dataset (2 workers)."""
    import torch.utils.data

    loader = torch.utils.data.DataLoader(_map_dataset(kind, path), batch_size=STRUCT_BATCH,
                                         shuffle=True, num_workers=2)
    return _timed_batches(loader, batches, STRUCT_BATCH)


def tensor_loader(contender, kind: str, path: str, batches: int) -> float:
    """Samples/s of 1 KiB samples collated to uint8 tensors, batch 256, 2 workers. The
    reference runs with its own ``ffrecord`` first on the import path."""
    common = dict(batch_size=TENSOR_BATCH, shuffle=True, num_workers=2)
    if kind == "memory":
        import torch.utils.data

        from ffrecord import FileReader

        from .workloads.loader_datasets import InMemoryDataset, stack_bytes

        with FileReader(path) as reader:
            samples = [s.tobytes() for s in reader.read(np.arange(reader.n))]
        loader = torch.utils.data.DataLoader(InMemoryDataset(samples), collate_fn=stack_bytes, **common)
    else:
        from ffrecord.torch import DataLoader

        from .workloads.ffrecord_dataset import SamplesDataset

        if kind == "ffrecord-pipe":
            common["shared_memory"] = False
        loader = DataLoader(SamplesDataset(path, check_data=True), **common)
    return _timed_batches(loader, batches, TENSOR_BATCH)


TIMING_MODES = {"0 workers": {}, "2 processes": {"num_workers": 2}, "2 threads": {"num_workers": 2, "workers": "threads"}}


def _cpu_seconds() -> float:
    """CPU time of this process (all its threads) and of its children that exited (a
    loader's worker processes of finished epochs)."""
    import resource

    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def _cpu_per_batch(loader, batches: int) -> float:
    """Microseconds of CPU an epoch of ``loader`` takes per batch."""
    start = _cpu_seconds()
    for _ in loader:
        pass
    return (_cpu_seconds() - start) / batches * 1e6


def timing_cost(contender: None, mode: str, path: str, rounds: int, tiny: int) -> dict[str, float]:
    """What timing a loader's stages costs, in CPU per batch, side by side: epochs of
    ``tiny`` batches of one int (nothing but the loader's own work per batch) with timing on
    and off taking turns (on, off, off, on, ...); then what an epoch of 1 KiB samples, batch
    256, shuffled, takes per batch (timing off). The best (least) of ``rounds`` turns each."""
    from ffrecord.torch import DataLoader, Dataset

    options = TIMING_MODES[mode]
    tiny_loaders = {state: DataLoader(list(range(tiny)), batch_size=1, collate_fn=_first, timing=state == "on",
                                      **options) for state in ("on", "off")}
    best = {"on": float("inf"), "off": float("inf")}
    for turn in range(2 * rounds):
        state = ("on", "off", "off", "on")[turn % 4]
        best[state] = min(best[state], _cpu_per_batch(tiny_loaders[state], tiny))
    samples = DataLoader(Dataset(path), batch_size=TENSOR_BATCH, shuffle=True, seed=0, timing=False, **options)
    batches = len(samples)
    epoch = min(_cpu_per_batch(samples, batches) for _ in range(rounds))
    return {"on": best["on"], "off": best["off"], "batch": epoch}


def _first(batch: list) -> object:
    return batch[0]


# -- the run ------------------------------------------------------------------------------

def measure(target: str, contender, *args):
    """``target(contender, *args)`` in a fresh process (``--in-process``: in this one)."""
    return call(target, contender, *args)


def _in_this_process(target: str, contender, *args):
    return runner(contender, target, *args)()

def rounds(runners: dict, count: int) -> dict:
    """The best of ``count`` rounds of each runner, taking turns."""
    best = dict.fromkeys(runners, 0.0)
    for r in range(count):
        for name, run in runners.items():
            value = run()
            best[name] = max(best[name], value)
            print(f"    round {r + 1}: {name:<28} {value:12,.0f}", flush=True)
    return best


def show(title: str, best: dict, unit: str, ratios: list[tuple[str, str, float]]) -> None:
    print(f"\n{title}")
    for name, value in best.items():
        print(f"  {name:<30} {value:14,.0f} {unit}")
    for a, b, goal in ratios:
        ratio = best[a] / best[b]
        print(f"  {a} / {b}: {ratio:.2f}x (goal >= {goal}x: {'met' if ratio >= goal else 'MISSED'})")


def write_structured(root: Path, points: int) -> dict[str, str]:
    import litdata.streaming.writer
    import streaming

    from ffrecord.dataset import DatasetWriter

    rng = np.random.default_rng(0)
    images = [rng.bytes(IMAGE) for _ in range(64)]
    paths = {k: str(root / k) for k in ("ffrecord", "litdata", "streaming")}
    with DatasetWriter(paths["ffrecord"], {"image": "bytes", "label": "int"}, length=points,
                       durable=False) as writer:
        for i in range(points):
            writer.append({"image": images[i % 64], "label": i})
    lit = litdata.streaming.writer.BinaryWriter(paths["litdata"], chunk_bytes="64MB")
    for i in range(points):
        lit.add_item(i, {"image": images[i % 64], "label": i})
    lit.done()
    lit.merge()
    with streaming.MDSWriter(out=paths["streaming"], columns={"image": "bytes", "label": "int"}) as mds:
        for i in range(points):
            mds.write({"image": images[i % 64], "label": i})
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round: checks the harness runs")
    parser.add_argument("--in-process", action="store_true",
                        help="measure in this process, without the reference (for the smoke test)")
    parser.add_argument("--only", choices=["structured", "singles", "tensors", "timing"],
                        action="append")
    args = parser.parse_args()
    size = SIZES["smoke" if args.smoke else "quick" if args.quick else "full"]
    only = set(args.only or ["structured", "singles", "tensors", "timing"])
    global measure
    if args.in_process:
        measure = _in_this_process
    reference = contender_named("reference")
    missing = "not measured with --in-process" if args.in_process else reference.unavailable_reason()
    root = Path(tempfile.mkdtemp(prefix="ffrecord-workers-bench-"))
    try:
        from ffrecord.utils import dump

        n_rounds = size["rounds"]
        print(f"{n_rounds} rounds, fresh process per figure, contenders taking turns; data in {root}")
        if only & {"structured", "singles"}:
            paths = write_structured(root, size["points"])
            read_tree(root)
        if "structured" in only:
            batches = size["batches"]
            runners = {
                "ffrecord, 0 workers": lambda: measure(f"{ME}:structured_loader", None, "ffrecord", paths["ffrecord"], 0, batches),
                "ffrecord, 2 workers": lambda: measure(f"{ME}:structured_loader", None, "ffrecord", paths["ffrecord"], 2, batches),
                "litdata, 2 workers": lambda: measure(f"{ME}:structured_loader", None, "litdata", paths["litdata"], 2, batches),
                "streaming, 2 workers": lambda: measure(f"{ME}:structured_loader", None, "streaming", paths["streaming"], 2, batches),
            }
            show(f"structured loader, {{image: 16 KiB, label}}, shuffled, batch 64, {batches} batches",
                 rounds(runners, n_rounds), "samples/s",
                 [("ffrecord, 2 workers", "ffrecord, 0 workers", 1.6),
                  ("ffrecord, 2 workers", "litdata, 2 workers", 2.0),
                  ("ffrecord, 2 workers", "streaming, 2 workers", 2.0)])
        if "singles" in only:
            count = size["singles"]
            runners = {f"{k} [i]": (lambda k=k: measure(f"{ME}:single_datapoints", None, k, paths[k], count))
                       for k in ("ffrecord", "streaming")}
            show(f"one datapoint at a time (2 fields), in process, {count} shuffled",
                 rounds(runners, n_rounds), "datapoints/s", [("ffrecord [i]", "streaming [i]", 1.4)])
            runners = {f"stock loader over {k}": (lambda k=k: measure(f"{ME}:stock_loader", None, k, paths[k], size["batches"]))
                       for k in ("ffrecord", "streaming")}
            show("stock torch DataLoader over the map-style dataset, batch 64, 2 workers",
                 rounds(runners, n_rounds), "samples/s",
                 [("stock loader over ffrecord", "stock loader over streaming", 1.5)])
        if "tensors" in only:
            path = str(root / "small.ffr")
            dump([np.random.default_rng(k).bytes(TENSOR_SAMPLE) for k in range(size["small"])], path, 1, durable=False)
            read_tree(root)
            batches = min(size["batches"], size["small"] // TENSOR_BATCH - UNTIMED - 1)
            runners = {
                "ffrecord (shared memory)": lambda: measure(f"{ME}:tensor_loader", None, "ffrecord", path, batches),
                "ffrecord (torch's pipe)": lambda: measure(f"{ME}:tensor_loader", None, "ffrecord-pipe", path, batches),
                "stock loader, samples in RAM": lambda: measure(f"{ME}:tensor_loader", None, "memory", path, batches),
            }
            goals = [("ffrecord (shared memory)", "stock loader, samples in RAM", 1.2)]
            if missing is None:
                runners["reference"] = lambda: measure(f"{ME}:tensor_loader", reference, "reference", path, batches)
                goals.insert(0, ("ffrecord (shared memory)", "reference", 2.0))
            show(f"1 KiB samples -> tensors, batch 256, 2 workers, {batches} batches",
                 rounds(runners, n_rounds), "samples/s", goals)
        if "timing" in only:
            path = str(root / "timing.ffr")
            dump([np.random.default_rng(k).bytes(TENSOR_SAMPLE) for k in range(size["small"])], path, 1, durable=False)
            read_tree(root)
            turns, tiny = size["timing_rounds"], size["timing_tiny"]
            print(f"\ntiming's cost: CPU per batch (this process and its workers) of {tiny:,} batches of one int, "
                  f"timing on and off taking turns, best of {turns}; against an epoch of {size['small']:,} 1 KiB "
                  "samples, batch 256, timing off")
            for mode in TIMING_MODES:
                figures = measure(f"{ME}:timing_cost", None, mode, path, turns, tiny)
                cost = (figures["on"] - figures["off"]) / figures["batch"]
                print(f"  {mode + ', timing on':<30} {figures['on']:10.2f} us a batch of one int")
                print(f"  {mode + ', timing off':<30} {figures['off']:10.2f} us a batch of one int")
                print(f"  {mode + ', 1 KiB samples':<30} {figures['batch']:10.2f} us a batch of 256")
                print(f"  {mode}: timing costs {cost:.1%} of the epoch (goal <= 1.0%: {'met' if cost <= 0.01 else 'MISSED'})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
