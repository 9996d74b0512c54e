"""Image training pipelines, side by side: ``python benchmarks/vision.py [--quick] [--cold]``.

The workload of issue 24: JPEGs of 500×375 in 10 class folders (2,000; 400 with ``--quick``),
the ImageNet training transform, batch 64, shuffle, 2 workers, one epoch:

- ``torchvision``: ``torchvision.datasets.ImageFolder`` with ``RandomResizedCrop(224)``,
  ``RandomHorizontalFlip()``, ``ToTensor()`` in torch's ``DataLoader`` (float batches);
- ``ffrecord``: the same images converted once into a structured dataset (bytes as stored),
  ``StructuredDataset(reader, transform=ffrecord.vision.RandomResizedCrop(224))`` in
  ``ffrecord.torch.DataLoader`` (uint8 batches; normalisation belongs on the GPU).

Every epoch runs in a fresh process; the contenders alternate, ``--rounds`` times each. With
``--cold`` the page cache is dropped (``echo 3 > /proc/sys/vm/drop_caches``, root only) before
every epoch as well. Then, in one process and one thread each: images per CPU-second of
PIL + torchvision's transform against ``ffrecord.vision``'s (``threads=1``), same images.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WIDTH, HEIGHT, CLASSES, BATCH, WORKERS, SIZE = 500, 375, 10, 64, 2, 224
SEED = 0


def make_images(root: Path, count: int) -> None:
    """``count`` photo-like JPEGs (smooth colour waves and grain, ~80 KB at quality 90), in
    ``root/class_k/``: a few base pictures, each file a different shift, mirror and grain."""
    from PIL import Image

    rng = np.random.default_rng(SEED)
    y, x = np.mgrid[0:HEIGHT * 2, 0:WIDTH * 2].astype(np.float32)
    bases = []
    for _ in range(8):
        img = np.zeros((HEIGHT * 2, WIDTH * 2, 3), np.float32)
        for c in range(3):
            for _ in range(5):
                fx, fy = rng.uniform(0.005, 0.06, 2)
                img[..., c] += rng.uniform(10, 40) * np.sin(x * fx + y * fy + rng.uniform(0, 6))
        bases.append(img + 128)
    for k in range(count):
        top, left = rng.integers(0, HEIGHT), rng.integers(0, WIDTH)
        img = bases[k % len(bases)][top:top + HEIGHT, left:left + WIDTH]
        img = np.clip(img + rng.normal(0, 14, img.shape), 0, 255).astype(np.uint8)
        folder = root / f"class_{k % CLASSES}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(folder / f"{k:05d}.jpg", quality=90)


def convert(root: Path, dataset: Path) -> None:
    """The folder as a structured dataset: ``{image: the JPEG's bytes, label: class}``."""
    from ffrecord.dataset import DatasetWriter

    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    with DatasetWriter(dataset, {"image": "jpg", "label": "int"}, encoders={"jpg": bytes}) as writer:
        for label, name in enumerate(classes):
            for path in sorted((root / name).iterdir()):
                writer.append({"image": path.read_bytes(), "label": label})


def torchvision_transform():
    from torchvision import transforms

    return transforms.Compose([transforms.RandomResizedCrop(SIZE), transforms.RandomHorizontalFlip(),
                               transforms.ToTensor()])


def epoch(contender: str, root: Path, dataset: Path) -> dict:
    """One shuffled epoch with 2 workers in this (fresh) process: images/s, wall time from
    creating the loader to the last batch (worker start-up included, as a user sees it)."""
    import torch

    start = time.perf_counter()
    if contender == "torchvision":
        from torchvision.datasets import ImageFolder

        loader = torch.utils.data.DataLoader(
            ImageFolder(str(root), transform=torchvision_transform()), batch_size=BATCH, shuffle=True,
            num_workers=WORKERS)
        key = 0
    else:
        from ffrecord.dataset import DatasetReader
        from ffrecord.torch import DataLoader, StructuredDataset
        from ffrecord.vision import ENCODED, RandomResizedCrop

        data = StructuredDataset(DatasetReader(dataset, decoders=ENCODED), transform=RandomResizedCrop(SIZE))
        loader = DataLoader(data, batch_size=BATCH, shuffle=True, num_workers=WORKERS, seed=SEED)
        key = "image"
    images, dtype = 0, None
    for batch in loader:
        images += len(batch[key])
        dtype = str(batch[key].dtype)
    seconds = time.perf_counter() - start
    return {"images": images, "seconds": seconds, "images_per_s": images / seconds, "dtype": dtype}


def in_process(root: Path, dataset: Path, count: int) -> dict:
    """Images per CPU-second in one process, one thread: PIL + torchvision's transform over
    the folder against ``ffrecord.vision`` over the dataset, same images, alternating."""
    import torch
    from PIL import Image

    from ffrecord.dataset import DatasetReader
    from ffrecord.vision import ENCODED, RandomResizedCrop

    torch.set_num_threads(1)
    paths = sorted(root.rglob("*.jpg"))[:count]
    transform = torchvision_transform()
    reader = DatasetReader(dataset, decoders=ENCODED)
    indices = np.arange(len(paths))

    def theirs_run() -> None:
        for path in paths:
            with open(path, "rb") as f:
                transform(Image.open(f).convert("RGB"))

    def ours_run(ours: RandomResizedCrop = RandomResizedCrop(SIZE, threads=1)) -> None:
        for start in range(0, len(indices), BATCH):
            ours.transform_batch(reader.read(indices[start:start + BATCH]), seeds=indices[start:start + BATCH])

    cpu: dict = {"torchvision": [], "ffrecord": []}
    for _ in range(3):
        for name, run in (("torchvision", theirs_run), ("ffrecord", ours_run)):
            begin = time.process_time()
            run()
            cpu[name].append(len(paths) / (time.process_time() - begin))
    result = {name: max(rates) for name, rates in cpu.items()}
    # the batch's thread pool: wall time of one thread over that of one per core, alternating
    # (> 1: decoding releases the GIL; on a busy machine each thread still gets its share)
    walls: dict = {1: [], len(os.sched_getaffinity(0)): []}
    for _ in range(2):
        for threads in walls:
            begin = time.perf_counter()
            ours_run(RandomResizedCrop(SIZE, threads=threads))
            walls[threads].append(time.perf_counter() - begin)
    result["pool_speedup"] = min(walls[1]) / min(walls[max(walls)])
    return result


def drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{args[0]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="400 images instead of 2,000")
    parser.add_argument("--cold", action="store_true", help="also drop the page cache before every epoch (root)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, help="folder to keep the images in between runs (default: a temp dir)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        root, dataset = Path(rest[0]), Path(rest[1])
        result = (in_process(root, dataset, int(rest[2])) if args.child == "in_process"
                  else epoch(args.child, root, dataset))
        print(json.dumps(result))
        return

    count = 400 if args.quick else 2000
    with tempfile.TemporaryDirectory(prefix="ffrecord-vision-") as tmp:
        base = args.data or Path(tmp)
        root, dataset = base / f"images-{count}", base / f"images-{count}.ffds"
        if not root.exists():
            make_images(root, count)
        if not dataset.exists():
            convert(root, dataset)
        size = sum(p.stat().st_size for p in root.rglob("*.jpg"))
        print(f"{count} JPEGs of {WIDTH}×{HEIGHT}, {size / count / 1024:.0f} KiB on average; "
              f"batch {BATCH}, shuffle, {WORKERS} workers, one epoch per fresh process; "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        caches = ["warm"] + (["cold"] if args.cold else [])
        results: dict = {}
        for cache in caches:
            rates: dict = {"torchvision": [], "ffrecord": []}
            for r in range(args.rounds):
                order = ["torchvision", "ffrecord"] if r % 2 == 0 else ["ffrecord", "torchvision"]
                for name in order:
                    if cache == "cold" and not drop_caches():
                        raise SystemExit("--cold needs root (echo 3 > /proc/sys/vm/drop_caches)")
                    got = child(["--child", name, str(root), str(dataset)])
                    assert got["images"] == count, got
                    rates[name].append(got["images_per_s"])
            ratios = [f / t for f, t in zip(rates["ffrecord"], rates["torchvision"])]
            results[cache] = {"rates": rates, "ratio_median": statistics.median(ratios)}
            print(f"page cache {cache}: torchvision ImageFolder {_spread(rates['torchvision'])} images/s, "
                  f"ffrecord.vision {_spread(rates['ffrecord'])} images/s: "
                  f"{statistics.median(ratios):.2f}× (median of per-round ratios "
                  f"{', '.join(f'{r:.2f}' for r in ratios)})")
        per_core = child(["--child", "in_process", str(root), str(dataset), str(min(count, 400))])
        results["in_process"] = per_core
        print(f"in process, one thread: PIL + torchvision {per_core['torchvision']:.0f} images per CPU-second, "
              f"ffrecord.vision {per_core['ffrecord']:.0f}: {per_core['ffrecord'] / per_core['torchvision']:.2f}×; "
              f"its thread pool (a thread per core) {per_core['pool_speedup']:.2f}× one thread's speed")
        print(json.dumps(results))


def _spread(values: list) -> str:
    return f"{min(values):.0f}–{max(values):.0f}" if len(values) > 1 else f"{values[0]:.0f}"


if __name__ == "__main__":
    main()
