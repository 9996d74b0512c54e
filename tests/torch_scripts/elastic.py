"""Elastic resume: loaders of each kind of dataset and order, and one phase of the scenario.

The scenario (``tests/test_torch_elastic.py``): 2 ranks × 2 workers stop at batch 3, one
rank without workers resumes from rank 1's state for 2 batches, 3 ranks × 1 worker finish
the epoch. A phase runs every kind of loader in turn (so torchrun starts once per phase):

    torchrun ... -m torch_scripts.elastic ROOT PHASE STEPS WORKERS [BATCH_SIZE]
    python -m torch_scripts.elastic ROOT PHASE STEPS WORKERS [BATCH_SIZE]

Each rank loads ``ROOT/<kind>.state.json`` when it exists, takes ``STEPS`` batches (all that
are left when STEPS is -1), writes the datapoint ids it was handed to
``ROOT/<kind>.<PHASE>.rank<r>.json`` and, rank 1 (or the only rank) its state back to
``ROOT/<kind>.state.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ffrecord.dataset import DatasetReader, DatasetWriter, Mixture, ShardedDatasetReader, ShardedDatasetWriter
from ffrecord.order import ChunkShuffle
from ffrecord.torch import DataLoader, StructuredDataset
from torch_scripts.common import PickleDataset, write_samples

KINDS = ("file", "chunks", "mixture", "sharded")
N = 61  # samples of the plain file; odd, so that padding and cut tails show
SEED = 7


def build(root: Path) -> None:
    """Writes the datasets every kind of loader reads."""
    root.mkdir(parents=True, exist_ok=True)
    write_samples(root / "samples.ffr", N)
    for name, first, count in (("a", 0, 40), ("b", 1000, 30)):
        with DatasetWriter(root / name, {"n": "int"}) as writer:
            for k in range(first, first + count):
                writer.append({"n": k})
    with ShardedDatasetWriter(root / "sharded", {"n": "int"}, shardlen=13) as writer:
        for k in range(2000, 2000 + N):
            writer.append({"n": k})


def datapoint_id(datapoint: dict) -> int:
    return datapoint["n"]


def dataset(root: Path, kind: str) -> Any:
    if kind in ("file", "chunks"):
        return PickleDataset(str(root / "samples.ffr"))
    if kind == "mixture":
        members = [DatasetReader(root / "a"), DatasetReader(root / "b")]
        return StructuredDataset(Mixture(members, weights=[0.6, 0.4], seed=1), transform=datapoint_id)
    return StructuredDataset(ShardedDatasetReader(root / "sharded"), transform=datapoint_id)


def loader(root: Path, kind: str, **kwargs: Any) -> DataLoader:
    """A loader of ``kind``; ``kwargs`` go to the DataLoader (batch size, ranks, workers)."""
    data = dataset(root, kind)
    if kind == "chunks":  # about 4 samples per chunk, windows of 2 chunks, 2 canonical partitions
        return DataLoader(data, order=ChunkShuffle.of(data, chunk_size=120, seed=SEED, window=2, partitions=2),
                          **kwargs)
    return DataLoader(data, shuffle=True, seed=SEED, **kwargs)


def ids(batch: Any) -> list[int]:
    """The datapoint ids of a collated batch (a pickle dataset's are ``(index, 3 * index)``)."""
    if isinstance(batch, (list, tuple)):
        index, value = batch
        assert torch.equal(value, 3 * index)
        return index.tolist()
    return batch.tolist()


def every_id(root: Path, kind: str) -> list[int]:
    """The ids of a whole epoch, in index order."""
    data = dataset(root, kind)
    samples = data[list(range(len(data)))]
    return [s[0] if isinstance(s, tuple) else s for s in samples]


def take(it_loader: DataLoader, steps: int) -> list[list[int]]:
    """The ids of the next ``steps`` batches (-1: the rest of the epoch) of a fresh iterator."""
    seen: list[list[int]] = []
    iterator = iter(it_loader)
    while steps < 0 or len(seen) < steps:
        batch = next(iterator, None)
        if batch is None:
            break
        seen.append(ids(batch))
    return seen


def run_phase(root: Path, phase: str, steps: int, rank: int, world_size: int, workers: int,
              batch_size: int = 4) -> None:
    for kind in KINDS:
        state_file = root / f"{kind}.state.json"
        it_loader = loader(root, kind, batch_size=batch_size, rank=rank, world_size=world_size, num_workers=workers)
        if state_file.exists():
            it_loader.load_state_dict(json.loads(state_file.read_text()))
        seen = take(it_loader, steps)
        state = it_loader.state_dict()
        (root / f"{kind}.{phase}.rank{rank}.json").write_text(json.dumps(seen))
        if world_size > 1:
            dist.barrier()  # every rank loaded the state before it is replaced
        if rank == min(1, world_size - 1):
            state_file.write_text(json.dumps(state))


def main() -> None:
    root, phase, steps, workers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    batch_size = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo")
        run_phase(root, phase, steps, dist.get_rank(), dist.get_world_size(), workers, batch_size)
        dist.destroy_process_group()
    else:
        run_phase(root, phase, steps, 0, 1, workers, batch_size)


if __name__ == "__main__":
    main()
