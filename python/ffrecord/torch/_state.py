"""The pieces of a DataLoader state that are not plain numbers: dataset fingerprint, RNG state.

A state must stay small and JSON-serialisable, so a generator's state travels as base64
text, and a dataset is summarised by its length and the names and sizes of its files.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import numpy as np
import torch

from ffrecord import FileReader


def dataset_fingerprint(dataset: Any) -> dict[str, Any]:
    """Length of ``dataset`` and ``[file name, size]`` of every ffrecord file it reads.

    The files are found by walking the dataset's attributes (readers, member datasets), so
    datasets that own their reader directly are covered too. Names are base names, so a
    dataset moved to another directory still matches.

    >>> dataset_fingerprint([1, 2, 3])
    {'length': 3, 'files': []}
    """
    files = []
    for path in _reader_files(dataset, set()):
        try:
            size = os.path.getsize(path)
        except OSError:
            size = None
        files.append([os.path.basename(path), size])
    return {"length": len(dataset), "files": files}


def _reader_files(obj: Any, seen: set[int]) -> list[str]:
    if isinstance(obj, FileReader):
        return list(obj.fnames)
    if callable(getattr(obj, "ffrecord_files", None)):  # datasets that know their files
        return list(obj.ffrecord_files())
    if not isinstance(obj, torch.utils.data.Dataset) or id(obj) in seen:
        return []
    seen.add(id(obj))
    files = []
    for value in vars(obj).values():
        # A list of datasets (ConcatDataset) is walked; a list of indices (Subset) is not.
        is_list = isinstance(value, (list, tuple)) and value and _may_hold_files(value[0])
        for member in value if is_list else [value]:
            files += _reader_files(member, seen)
    return files


def _may_hold_files(obj: Any) -> bool:
    return isinstance(obj, (FileReader, torch.utils.data.Dataset))


def encode_generator_state(state: torch.Tensor) -> str:
    """A generator's state (``torch.Generator.get_state()``) as text.

    >>> g = torch.Generator().manual_seed(1)
    >>> h = torch.Generator().set_state(decode_generator_state(encode_generator_state(g.get_state())))
    >>> bool(torch.equal(torch.randperm(5, generator=g), torch.randperm(5, generator=h)))
    True
    """
    return base64.b64encode(state.numpy().tobytes()).decode("ascii")


def decode_generator_state(text: str) -> torch.Tensor:
    """The tensor ``torch.Generator.set_state`` takes, from ``encode_generator_state`` text."""
    raw = np.frombuffer(base64.b64decode(text.encode("ascii")), dtype=np.uint8)
    return torch.from_numpy(raw.copy())
