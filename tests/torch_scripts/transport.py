"""A dataset of every kind of value the shared-memory transport carries, and a script that
starts a loader, prints its worker pids, and waits to be killed (``-m`` entry point)."""

from __future__ import annotations

import collections
import json
import sys
import time

import numpy as np
import torch

Pair = collections.namedtuple("Pair", "left right")


def value(index: int) -> dict:
    """Datapoint ``index``: a tensor, an array, bytes, a namedtuple of both, a str, an int."""
    return {
        "tensor": torch.full((3, 2), index, dtype=torch.float32),
        "array": np.full(5, index, np.int16),
        "bytes": bytes([index % 256]) * (100 + index),
        "pair": Pair(np.arange(index + 1, dtype=np.int64), bytearray(b"x" * (index + 1))),
        "name": f"item {index}",
        "index": index,
    }


class ValueDataset(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict:
        return value(index)


def as_list(batch: list) -> list:
    """A collate_fn that keeps the datapoints as they are."""
    return list(batch)


def collate_fixed(batch: list) -> dict:
    """torch's default collate of the fields every datapoint has in the same shape."""
    return torch.utils.data.default_collate(
        [{key: d[key] for key in ("tensor", "array", "bytes", "index")} for d in batch])


def main() -> None:
    from ffrecord.torch import DataLoader

    loader = DataLoader(ValueDataset(10_000), batch_size=8, num_workers=2, collate_fn=as_list,
                        multiprocessing_context=sys.argv[1], timeout=60)
    iterator = iter(loader)
    held = [next(iterator) for _ in range(3)]
    assert held[2][0]["bytes"] == value(16)["bytes"]
    print(json.dumps([w.pid for w in iterator._inner._workers]), flush=True)
    time.sleep(120)


if __name__ == "__main__":
    main()
