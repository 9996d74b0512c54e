"""A folder of small files to FFRecord: Ray Data beside ``ffrecord.utils.dump``, one run.

    python benchmarks/ray_convert.py [--files 50000] [--size 1024] [--cpus 2]

Makes ``--files`` files of ``--size`` random bytes in one folder (page cache warm: they were
just written), then converts the folder twice, each into files of ``--per-file`` samples:

- ``dump``: ``ffrecord.utils.dump`` over a list of the paths whose ``[i]`` reads file ``i``
  (worker processes, one per CPU);
- ``ray``, on a local cluster of ``--cpus`` CPUs, then ``ffrecord.ray.write_ffrecord``, two
  ways of reading the files: ``ray.data.read_binary_files(folder)``, and the file paths listed
  by the driver, read by ``map_batches`` tasks (``read_paths``) in 8 blocks. Timed on a
  started, warmed-up cluster (start-up and a first small job that starts the workers are
  printed apart: a real cluster is up before the job).

Both outputs are checked to hold the same samples. Prints both times and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


class FolderFiles:
    """The files of a folder as a sequence of their bytes, for ``dump``."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> bytes:
        with open(self.paths[i], "rb") as f:
            return f.read()


def read_paths(batch: dict) -> dict:
    """``map_batches`` function: the bytes of the files named by a batch of paths."""
    column = np.empty(len(batch["path"]), object)
    for k, path in enumerate(batch["path"]):
        with open(path, "rb") as f:
            column[k] = f.read()
    return {"bytes": column}


def make_folder(folder: Path, files: int, size: int) -> list[str]:
    folder.mkdir()
    rng = np.random.default_rng(0)
    paths = []
    for k in range(files):
        path = folder / f"{k:07d}.bin"
        path.write_bytes(rng.bytes(size))
        paths.append(str(path))
    return paths


def samples(path: Path) -> list[bytes]:
    import ffrecord

    with ffrecord.FileReader(path) as reader:
        return [s.tobytes() for s in reader.read(range(len(reader)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024, help="bytes per file")
    parser.add_argument("--per-file", type=int, default=10_000, help="samples per FFRecord file")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--data-dir", default=None, help="where to put the data (default: a temp dir)")
    args = parser.parse_args(argv)

    import ray

    from ffrecord.ray import write_ffrecord
    from ffrecord.utils import dump

    root = Path(tempfile.mkdtemp(prefix="ray-convert-", dir=args.data_dir))
    try:
        paths = make_folder(root / "files", args.files, args.size)
        nfiles = -(-args.files // args.per_file)

        start = time.perf_counter()
        dump(FolderFiles(paths), root / "dump", nfiles=nfiles, max_workers=args.cpus)
        dump_s = time.perf_counter() - start

        start = time.perf_counter()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        startup_s = time.perf_counter() - start
        try:
            start = time.perf_counter()
            write_ffrecord(ray.data.range(args.cpus * 8, override_num_blocks=args.cpus * 4)
                           .map(lambda row: {"bytes": b"%d" % row["id"]}), root / "warm-up", 8)
            warmup_s = time.perf_counter() - start

            start = time.perf_counter()
            ds = ray.data.read_binary_files(str(root / "files"))
            write_ffrecord(ds, root / "ray-binary", samples_per_file=args.per_file)
            binary_s = time.perf_counter() - start

            start = time.perf_counter()
            names = sorted(os.listdir(root / "files"))
            listed = ray.data.from_items([{"path": str(root / "files" / name)} for name in names],
                                         override_num_blocks=8)
            write_ffrecord(listed.map_batches(read_paths, batch_size=None), root / "ray-paths",
                           samples_per_file=args.per_file)
            paths_s = time.perf_counter() - start
        finally:
            ray.shutdown()

        expected = sorted(samples(root / "dump"))
        for name in ("ray-binary", "ray-paths"):
            assert sorted(samples(root / name)) == expected, f"{name} differs from dump"
        print(f"{args.files} files of {args.size} B -> FFRecord files of {args.per_file} samples, "
              f"{args.cpus} CPUs, Python {sys.version.split()[0]}, Ray {ray.__version__}")
        print(f"(Ray cluster start-up {startup_s:.2f} s and a warm-up job {warmup_s:.2f} s: "
              "not included below)")
        for name, seconds in [("ffrecord.utils.dump", dump_s),
                              ("ray: read_binary_files + write", binary_s),
                              ("ray: read_paths + write", paths_s)]:
            print(f"{name:<34}{seconds:8.2f} s  {args.files / seconds:9.0f} files/s"
                  f"  {seconds / dump_s:6.2f}x dump's time")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
