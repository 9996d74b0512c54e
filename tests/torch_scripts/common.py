"""Datasets and loaders shared by the torch tests and their child-process scripts.

Every sample is ``pickle.dumps((index, 3 * index))``, so a collated batch's first tensor
names the indices it holds and its second checks that the bytes were read correctly.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.utils.data

from ffr_helpers import write_dataset
from ffrecord import FileReader
from ffrecord.torch import DataLoader, Dataset

TESTS_DIR = Path(__file__).resolve().parent.parent


def sample(index: int) -> tuple[int, int]:
    return (index, 3 * index)


def write_samples(path: str | os.PathLike[str], n: int, first: int = 0) -> str:
    """An ffr file holding ``sample(first) ... sample(first + n - 1)``."""
    return str(write_dataset(path, (pickle.dumps(sample(i)) for i in range(first, first + n))))


class PickleDataset(Dataset):
    """The first subclassing style: override ``process``."""

    def process(self, indices: list[int], data: list) -> list:
        return [pickle.loads(b) for b in data]


class OwnReaderDataset(Dataset):
    """The second subclassing style: own reader, ``__len__`` and ``__getitem__(indices)``."""

    def __init__(self, fnames: str, check_data: bool = True) -> None:
        self.reader = FileReader(fnames, check_data)
        self.batches_read = 0

    def __len__(self) -> int:
        return self.reader.n

    def __getitem__(self, indices: list[int]) -> list:
        self.batches_read += 1
        return [pickle.loads(b.tobytes()) for b in self.reader.read(indices)]


class InMemoryDataset(torch.utils.data.Dataset):
    """The same samples without ffrecord, for the stock DataLoader to compare against."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[int, int]:
        return sample(index)


def indices_of(batch: Any) -> list[int]:
    """The sample indices of a collated batch, checking each sample's payload on the way."""
    index, value = batch
    assert torch.equal(value, 3 * index), "sample bytes do not match their index"
    return index.tolist()


def epoch_batches(iterable: Any) -> list[list[int]]:
    return [indices_of(batch) for batch in iterable]


def make_loader(path: str, **kwargs: Any) -> DataLoader:
    kwargs.setdefault("batch_size", 4)
    return DataLoader(PickleDataset(path), **kwargs)


def run_script(module: str, *args: str, timeout: float = 90) -> Any:
    """Runs ``python -m torch_scripts.<module> args...``; returns the JSON it prints last."""
    done = subprocess.run(
        [sys.executable, "-m", f"torch_scripts.{module}", *args],
        cwd=TESTS_DIR, capture_output=True, text=True, timeout=timeout, env=child_env(),
    )
    assert done.returncode == 0, f"{module} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def child_env() -> dict[str, str]:
    """This process's environment, with the ffrecord package it imported first on the path."""
    import ffrecord

    package_root = str(Path(ffrecord.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([package_root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env
