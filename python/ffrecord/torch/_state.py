"""The pieces of a DataLoader state that are not plain numbers: dataset fingerprint, RNG state.

A state must stay small and JSON-serialisable, so a generator's state travels as base64
text, and a dataset is summarised by its length and what identifies its data (a manifest's
digest, or the names, sizes and header checksums of its files).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any

import numpy as np
import torch

from ffrecord import FileReader


def dataset_fingerprint(dataset: Any) -> dict[str, Any]:
    """What identifies ``dataset`` in a loader state: its length and

    - for a ``Mixture`` (or a dataset over one: ``StructuredDataset``): how it mixes (its
      ``MixtureMap.describe``) and each member's name, length and ``member_id``;
    - for a dataset opened from a manifest (a ``VersionedReader``, or a dataset over one):
      its name, version and digest (nothing opened, whatever its shard count);
    - else every ffrecord file it reads (``[parent/name, size, header checksum]``).

    The files are found by walking the dataset's attributes (readers, member datasets), so
    datasets that own their reader directly are covered too. A file or a dataset is named
    by its directory's name and its own (``train/PART_00000.ffr``: a dataset moved elsewhere
    still matches, ``train/`` and ``val/`` differ) and carries the CRC-32 its header stores
    of the sample tables (local files; ``None`` for URLs), so datasets of equal names and
    sizes but other samples differ too.

    >>> dataset_fingerprint([1, 2, 3])
    {'length': 3, 'files': []}
    """
    from ffrecord.dataset.mixture import Mixture
    from ffrecord.dataset.versioned import VersionedReader

    fingerprint: dict[str, Any] = {"length": len(dataset)}
    source = identified_source(dataset)
    if isinstance(source, Mixture):
        fingerprint["mixture"] = source.identity(member_id)
    elif isinstance(source, VersionedReader):
        fingerprint["dataset"] = versioned_identity(source)
    else:
        fingerprint["files"] = [_file_identity(path) for path in _reader_files(dataset, set())]
    return fingerprint


def identified_source(dataset: Any) -> Any:
    """The ``Mixture`` or ``VersionedReader`` that ``dataset`` is or reads (its ``source``),
    which states identify as a whole; else None."""
    from ffrecord.dataset.mixture import Mixture
    from ffrecord.dataset.versioned import VersionedReader

    return next((c for c in (dataset, getattr(dataset, "source", None))
                 if isinstance(c, (Mixture, VersionedReader))), None)


def versioned_identity(reader: Any) -> dict[str, Any]:
    """A dataset read from its manifest, as states record it: its name, version, digest
    and (a process's share of it) which shards."""
    from ffrecord.dataset.mixture import member_name, short_name

    identity = {"name": short_name(member_name(reader)), "version": reader.version, "digest": reader.digest()}
    if (reader.shardstart, reader.shardstep) != (0, 1):
        identity["shards"] = [reader.shardstart, reader.shardstep]
    return identity


def member_id(member: Any) -> str:
    """What identifies the data of a mixture's member, in 16 hex digits: a member read
    from a manifest, its digest (``VersionedReader.digest``; a ``Mixture.from_paths``
    member given its length: "", see ``PathMember.data_id``); else a digest of its files'
    identities; "" for a member that reads no files (a list)."""
    from ffrecord.dataset.versioned import VersionedReader

    if callable(getattr(member, "data_id", None)):
        return member.data_id()
    if isinstance(member, VersionedReader):
        return member.digest()
    files = member_files(member)
    return hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16] if files else ""


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
