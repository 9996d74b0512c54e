"""Write a small dataset of pickled samples, then read it back in random batches.

    python examples/quickstart.py [output-folder]     # default: a temporary folder

What it shows: FileWriter, FileReader over a directory of parts, batch reads, validation,
and a reader surviving fork() in a multiprocessing pool.
"""

from __future__ import annotations

import multiprocessing
import pickle
import random
import sys
import tempfile
import time
from pathlib import Path

import ffrecord
from ffrecord import FileReader, FileWriter


def make_sample(i: int) -> dict:
    return {"index": i, "label": i % 10, "text": "lorem ipsum " * (i % 7)}


def write_parts(folder: Path, total: int, parts: int) -> None:
    per_part = -(-total // parts)
    for part in range(parts):
        first, last = part * per_part, min(total, (part + 1) * per_part)
        with FileWriter(folder / f"PART_{part:05d}.ffr", last - first) as writer:
            for i in range(first, last):
                writer.write_one(pickle.dumps(make_sample(i)))


def labels_of(reader: FileReader, indices: list[int]) -> list[int]:
    return [pickle.loads(sample)["label"] for sample in reader.read(indices)]


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        folder = Path(argv[1])
        folder.mkdir(parents=True, exist_ok=True)
        return demo(folder)
    with tempfile.TemporaryDirectory(prefix="ffrecord-demo-") as scratch:
        return demo(Path(scratch))


def demo(folder: Path) -> int:
    total, parts = 10_000, 4

    start = time.perf_counter()
    write_parts(folder, total, parts)
    print(f"ffrecord {ffrecord.__version__}: wrote {total} samples in {parts} files to {folder} "
          f"in {time.perf_counter() - start:.2f}s")

    with FileReader(folder, check_data=True) as reader:
        print(f"opened {reader!r}")
        indices = random.Random(0).sample(range(reader.n), 256)
        start = time.perf_counter()
        batch = reader.read(indices)
        elapsed = time.perf_counter() - start
        samples = [pickle.loads(b) for b in batch]
        assert [s["index"] for s in samples] == indices
        print(f"read a random batch of {len(batch)} samples in {elapsed * 1e3:.2f} ms; "
              f"first: {samples[0]['index']} (label {samples[0]['label']})")
        reader.validate()
        print("validate(): every checksum matches")

        # Workers forked from this process reuse the reader: each loads its own copy of the
        # library and reopens the files by path on first use.
        chunks = [indices[i:i + 64] for i in range(0, len(indices), 64)]
        with multiprocessing.get_context("fork").Pool(2) as pool:
            labels = pool.starmap(labels_of, [(reader, chunk) for chunk in chunks])
        assert [label for chunk in labels for label in chunk] == [i % 10 for i in indices]
        print(f"{len(chunks)} batches read in 2 forked worker processes: labels match")
    print("demo OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
