"""Loader workers side by side (issue 38): ``python -m benchmarks.loaders [--quick]``.

For each workload, ``ffrecord.torch.DataLoader`` with 0 workers, 2 worker processes and 2
threads (``workers="threads"``), pinned and not (pinned only where CUDA is), beside the
stock ``torch.utils.data.DataLoader`` (2 worker processes) and, for images, SPDL (8
threads). Every figure is one run in a fresh process; the contenders take turns, in an
order that alternates round by round, so that a busy moment of a shared machine hits them
alike. Each run prints:

- samples/s: the epochs' samples after the first batch over the time after it (workers
  persistent, so that later epochs pay no start-up);
- CPU seconds per sample: user + system time of the process and its children (workers are
  waited for before it is read), from before the loader is made to the end, over all samples;
- first batch: seconds from making the loader (and opening its dataset; the modules are
  imported before, by every contender alike) to holding its first batch;
- peak RSS: the process's, and the largest child's.

Workloads (page cache warm):

- ``structured``: 20,000 datapoints ``{image: 16 KiB bytes, label: int}``, shuffled, batch 64;
- ``vision``: 2,000 JPEGs of 500×375, ``RandomResizedCrop(224)`` + flip, batch 64 (the stock
  loader: torchvision's ``ImageFolder`` with its transforms, float batches);
- ``tokens``: 10M tokens in blocks of 2,048, shuffled, batch 8, ``drop_last``.

The goals of issue 38 on a small machine are judged on the medians of per-round ratios:
threads ≥ 1.3× the better of 0 workers and 2 processes in samples/s, ≤ 0.7× the CPU per
sample of 2 processes, a first batch ≤ 0.25× that of 2 processes.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from .contenders.isolated import call, runner
from .context import read_tree

ME = "benchmarks.loaders"
WORKERS = 2
SPDL_THREADS = 8
GOALS = {"speed": 1.3, "cpu": 0.7, "first_batch": 0.25}
SIZES = {  # datapoints, JPEGs, tokens, epochs per run by workload, rounds
    "full": dict(points=20_000, images=2_000, tokens=10_000_000, epochs={"structured": 3, "vision": 2, "tokens": 5},
                 rounds=5),
    "quick": dict(points=20_000, images=400, tokens=2_000_000, epochs={"structured": 2, "vision": 2, "tokens": 3},
                  rounds=3),
    # tests/test_bench_loaders.py: every code path, tiny, figures meaningless
    "smoke": dict(points=512, images=24, tokens=60_000, epochs={"structured": 2, "vision": 2, "tokens": 2},
                  rounds=1),
}
BATCH = {"structured": 64, "vision": 64, "tokens": 8}
BLOCK = 2048
SMOKE_BLOCK = 256


# -- what one fresh process measures -------------------------------------------------------

def _loader(workload: str, kind: str, path: str, pin: bool):
    """The loader of ``kind`` over the workload's data at ``path``, and the key of a batch
    whose length counts its samples (None: the batch itself)."""
    import torch

    batch = BATCH[workload]
    workers = 0 if kind == "ffrecord-0" else WORKERS
    if kind.startswith("ffrecord"):
        from ffrecord.torch import DataLoader

        options = dict(batch_size=batch, shuffle=True, seed=0, num_workers=workers, pin_memory=pin)
        if workers:
            options.update(persistent_workers=True, workers=kind.split("-")[1])
        return DataLoader(_ffrecord_dataset(workload, path), **options), _key(workload)
    if kind == "stock":
        options = dict(batch_size=batch, shuffle=True, num_workers=workers, pin_memory=pin, persistent_workers=True)
        if workload == "structured":
            from ffrecord.dataset import DatasetReader

            return torch.utils.data.DataLoader(DatasetReader(path), **options), "label"
        if workload == "vision":
            from torchvision.datasets import ImageFolder

            from .vision import torchvision_transform

            return torch.utils.data.DataLoader(ImageFolder(path, transform=torchvision_transform()), **options), 0
        return torch.utils.data.DataLoader(_ffrecord_dataset(workload, path), drop_last=True, **options), None
    return _spdl_images(path, batch), None


def _ffrecord_dataset(workload: str, path: str):
    from ffrecord.dataset import DatasetReader
    from ffrecord.torch import StructuredDataset

    if workload == "structured":
        return StructuredDataset(DatasetReader(path))
    if workload == "vision":
        from ffrecord.vision import ENCODED, RandomResizedCrop

        return StructuredDataset(DatasetReader(path, decoders=ENCODED), transform=RandomResizedCrop(224))
    from ffrecord.tokens import TokenBlocks

    return TokenBlocks(path, block_size=_block(path))


def _block(path: str) -> int:
    return SMOKE_BLOCK if "smoke" in Path(path).name else BLOCK


def _key(workload: str):
    return {"structured": "label", "vision": "image", "tokens": None}[workload]


class _SpdlEpochs:
    """SPDL's image pipeline as a re-iterable loader: each ``iter()`` builds a pipeline of
    the shuffled files (``SPDL_THREADS`` threads decoding, cropping and resizing with
    FFmpeg), batched by 64 and converted to one uint8 tensor."""

    def __init__(self, root: str, batch: int) -> None:
        self.paths = sorted(str(p) for p in Path(root).rglob("*.jpg"))
        self.batch = batch
        self.epoch = 0

    def __iter__(self):
        import spdl.io
        import torch
        from spdl.pipeline import PipelineBuilder

        from ffrecord.vision.crops import random_resized_crop_box

        from .vision import HEIGHT, WIDTH

        order = np.random.default_rng(self.epoch).permutation(len(self.paths))
        self.epoch += 1

        def decode(k: int):  # torchvision's crop distribution, drawn per image
            rng = np.random.default_rng((self.epoch, k))
            top, left, h, w = random_resized_crop_box(HEIGHT, WIDTH, (0.08, 1.0), (3 / 4, 4 / 3), rng)
            flip = ",hflip" if rng.random() < 0.5 else ""
            packets = spdl.io.demux_image(self.paths[k])
            return spdl.io.decode_packets(packets, filter_desc=f"crop={w}:{h}:{left}:{top},scale=224:224{flip},"
                                                               "format=rgb24")

        def collate(frames):
            return torch.from_numpy(spdl.io.to_numpy(spdl.io.convert_frames(frames)))

        pipeline = (PipelineBuilder().add_source(order.tolist())
                    .pipe(decode, concurrency=SPDL_THREADS).aggregate(self.batch).pipe(collate)
                    .add_sink(4).build(num_threads=SPDL_THREADS))
        with pipeline.auto_stop():
            yield from pipeline


def _spdl_images(root: str, batch: int):
    return _SpdlEpochs(root, batch)


def _cpu_seconds() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def run(contender: None, workload: str, kind: str, path: str, pin: bool, epochs: int) -> dict:
    """One run of ``epochs`` epochs of ``kind`` over ``workload`` in this (fresh) process."""
    import gc

    import torch  # noqa: F401 (imported before the clock starts, by every contender alike)

    if kind.startswith("ffrecord") or workload != "vision":
        import ffrecord.dataset  # noqa: F401
        import ffrecord.torch  # noqa: F401
    if workload == "tokens":
        import ffrecord.tokens  # noqa: F401
    if kind.startswith("ffrecord") and workload == "vision":
        import ffrecord.vision  # noqa: F401
    if kind == "stock" and workload == "vision":
        import torchvision  # noqa: F401
    cpu = _cpu_seconds()
    start = time.perf_counter()
    loader, key = _loader(workload, kind, path, pin)
    samples = first = 0
    for epoch in range(epochs):
        for batch in loader:
            samples += len(batch if key is None else batch[key])
            if not first:
                first = time.perf_counter()
                first_samples = samples
            del batch
    end = time.perf_counter()
    del loader
    gc.collect()  # persistent workers are joined: their CPU time is counted
    cpu = _cpu_seconds() - cpu
    return {"samples": samples, "rate": (samples - first_samples) / (end - first), "first_batch": first - start,
            "cpu_per_sample": cpu / samples,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "child_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


# -- data ----------------------------------------------------------------------------------

def write_structured(root: Path, points: int) -> str:
    from ffrecord.dataset import DatasetWriter

    rng = np.random.default_rng(0)
    images = [rng.bytes(16 << 10) for _ in range(64)]
    path = root / "structured"
    with DatasetWriter(path, {"image": "bytes", "label": "int"}, length=points, durable=False) as writer:
        for i in range(points):
            writer.append({"image": images[i % 64], "label": i})
    return str(path)


def write_images(root: Path, count: int) -> tuple[str, str]:
    from .vision import convert, make_images

    folder, dataset = root / "images", root / "images.ffds"
    make_images(folder, count)
    convert(folder, dataset)
    return str(folder), str(dataset)


def write_tokens(root: Path, tokens: int, smoke: bool) -> str:
    from ffrecord.tokens import byte_tokenizer, convert_text

    from .tokens import make_jsonl

    (root / "jsonl").mkdir()
    make_jsonl(root / "jsonl", tokens, 4)
    out = root / ("tokens-smoke" if smoke else "tokens")
    convert_text(sorted(str(p) for p in (root / "jsonl").glob("*.jsonl")), out, byte_tokenizer, 256,
                 workers=1, progress=False)
    return str(out)


# -- the run -------------------------------------------------------------------------------

def _available(kind: str) -> str | None:
    """Why ``kind`` cannot run here, or None."""
    if kind != "spdl":
        return None
    try:
        import spdl.io  # noqa: F401
        import spdl.pipeline  # noqa: F401
    except Exception as exc:  # a missing package, or FFmpeg's libraries
        return f"{type(exc).__name__}: {exc}"
    return None


def contenders(workload: str, pinned: bool) -> list[tuple[str, str, bool]]:
    """(label, kind, pin) of each contender of ``workload``."""
    kinds = [("ffrecord, 0 workers", "ffrecord-0"), ("ffrecord, 2 processes", "ffrecord-processes"),
             ("ffrecord, 2 threads", "ffrecord-threads"), ("stock DataLoader, 2 processes", "stock")]
    if workload == "vision":
        kinds.append((f"SPDL, {SPDL_THREADS} threads", "spdl"))
    out = [(label, kind, False) for label, kind in kinds]
    if pinned:
        out += [(f"{label}, pinned", kind, True) for label, kind in kinds[:4]]
    return out


def measure_workload(workload: str, paths: dict, size: dict, pinned: bool, in_process: bool) -> None:
    entries = []
    for label, kind, pin in contenders(workload, pinned):
        why = _available(kind)
        if why is None:
            entries.append((label, kind, pin))
        else:
            print(f"  {label}: not measured ({why})")
    path_of = {"stock": paths.get(f"{workload}-folder", paths[workload]), "spdl": paths.get(f"{workload}-folder")}
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in entries}
    for r in range(size["rounds"]):
        order = entries if r % 2 == 0 else entries[::-1]
        for label, kind, pin in order:
            args = (workload, kind, path_of.get(kind) or paths[workload], pin, size["epochs"][workload])
            got = runner(None, f"{ME}:run", *args)() if in_process else call(f"{ME}:run", None, *args)
            runs[label].append(got)
            print(f"    round {r + 1}: {label:<36} {got['rate']:12,.0f} samples/s  "
                  f"{got['cpu_per_sample'] * 1e6:8.1f} us CPU/sample  first batch {got['first_batch'] * 1e3:7.1f} ms",
                  flush=True)
    show(workload, runs)


def _median_spread(values: list[float], scale: float = 1.0, fmt: str = ",.0f") -> str:
    values = [v * scale for v in values]
    text = format(statistics.median(values), fmt)
    return text if len(values) == 1 else f"{text} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def show(workload: str, runs: dict[str, list[dict]]) -> None:
    print(f"\n{workload}: median (min-max) of {len(next(iter(runs.values())))} rounds")
    print(f"  {'contender':<36} {'samples/s':>24} {'CPU us/sample':>20} {'first batch ms':>22} {'peak RSS MiB (child)':>22}")
    for label, got in runs.items():
        print(f"  {label:<36} {_median_spread([g['rate'] for g in got]):>24} "
              f"{_median_spread([g['cpu_per_sample'] for g in got], 1e6, '.1f'):>20} "
              f"{_median_spread([g['first_batch'] for g in got], 1e3, '.1f'):>22} "
              f"{statistics.median(g['rss_mib'] for g in got):>12.0f} ({statistics.median(g['child_rss_mib'] for g in got):.0f})")
    for suffix in ("", ", pinned"):
        threads, zero, procs = (runs.get(f"ffrecord, {k}{suffix}") for k in ("2 threads", "0 workers", "2 processes"))
        if not (threads and zero and procs):
            continue
        per_round = list(zip(threads, zero, procs))
        speed = [t["rate"] / max(z["rate"], p["rate"]) for t, z, p in per_round]
        cpu = [t["cpu_per_sample"] / p["cpu_per_sample"] for t, _, p in per_round]
        first = [t["first_batch"] / p["first_batch"] for t, _, p in per_round]
        for name, ratios, goal, better in (
                ("samples/s, threads / best of 0 workers and 2 processes", speed, GOALS["speed"], max),
                ("CPU per sample, threads / 2 processes", cpu, GOALS["cpu"], min),
                ("first batch, threads / 2 processes", first, GOALS["first_batch"], min)):
            median = statistics.median(ratios)
            met = median >= goal if better is max else median <= goal
            print(f"  GOAL {'MET   ' if met else 'MISSED'} {workload}{suffix}: {name}: {median:.2f}x "
                  f"(rounds {min(ratios):.2f}-{max(ratios):.2f}; goal {'>=' if better is max else '<='} {goal}x)")
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round: checks the harness runs")
    parser.add_argument("--in-process", action="store_true", help="measure in this process (for the smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds (default: 5; --quick 3)")
    parser.add_argument("--only", choices=["structured", "vision", "tokens"], action="append")
    args = parser.parse_args()
    size = dict(SIZES["smoke" if args.smoke else "quick" if args.quick else "full"])
    if args.rounds:
        size["rounds"] = args.rounds
    only = args.only or ["structured", "vision", "tokens"]
    import torch

    pinned = torch.cuda.is_available()
    root = Path(tempfile.mkdtemp(prefix="ffrecord-loaders-bench-"))
    try:
        paths: dict[str, str] = {}
        if "structured" in only:
            paths["structured"] = write_structured(root, size["points"])
        if "vision" in only:
            paths["vision-folder"], paths["vision"] = write_images(root, size["images"])
        if "tokens" in only:
            paths["tokens"] = write_tokens(root, size["tokens"], args.smoke)
        read_tree(root)
        print(f"{size['rounds']} rounds, fresh process per figure, contenders alternating; {WORKERS} workers; "
              f"load average {__import__('os').getloadavg()[0]:.1f}; pinned batches "
              + ("measured" if pinned else "not measured (no CUDA device here)"), flush=True)
        for workload in only:
            print(f"\n{workload} ({size['epochs'][workload]} epochs a run)")
            measure_workload(workload, paths, size, pinned, args.in_process)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
