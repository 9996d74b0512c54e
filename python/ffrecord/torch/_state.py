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
    """What identifies ``dataset`` in a loader state: its length, every ffrecord file it reads
    (``[parent/name, size, header checksum]``) and, for a ``Mixture``, how it mixes.

    The files are found by walking the dataset's attributes (readers, member datasets), so
    datasets that own their reader directly are covered too. A file is named by its
    directory's name and its own (``train/PART_00000.ffr``: a dataset moved elsewhere still
    matches, ``train/`` and ``val/`` differ) and carries the CRC-32 its header stores of the
    sample tables (local files; ``None`` for URLs), so datasets of equal names and sizes but
    other samples differ too.

    >>> dataset_fingerprint([1, 2, 3])
    {'length': 3, 'files': []}
    """
    files = [_file_identity(path) for path in _reader_files(dataset, set())]
    fingerprint: dict[str, Any] = {"length": len(dataset), "files": files}
    mixture = _find_mixture(dataset)
    if mixture is not None:
        fingerprint["mixture"] = mixture.identity(member_files)
    return fingerprint


def member_files(member: Any) -> list[list[Any]]:
    """The identities of the files a mixture's member reads (see ``dataset_fingerprint``)."""
    files = getattr(member, "files", None)
    paths = list(files) if isinstance(files, (list, tuple)) else _reader_files(member, set())
    return [_file_identity(path) for path in paths]


def _file_identity(path: Any) -> list[Any]:
    text = str(path)
    name = "/".join(text.rstrip("/").split("/")[-2:])
    try:
        size = os.path.getsize(text)
        with open(text, "rb") as f:
            header_crc = int.from_bytes(f.read(4), "little")
    except OSError:
        size = header_crc = None
    return [name, size, header_crc]


def _find_mixture(dataset: Any) -> Any:
    from ffrecord.dataset.mixture import Mixture

    for candidate in (dataset, getattr(dataset, "source", None)):
        if isinstance(candidate, Mixture):
            return candidate
    return None


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
