"""Converting a Granular dataset (the ``granular`` package's on-disk format) to ours.

Granular stores a dataset as a directory with ``spec.json`` (``{field: type}``) and, per
field, ``<field>.bag`` (the records back to back) and ``<field>.idx`` (the end offset of each
record, u64 little-endian); a sharded one as sub-directories ``000000``, ``000001``, ...
Those files are read here directly: the ``granular`` package is not needed.

Types are carried over as follows: ``int`` (Granular stores it in as few bytes as the value
needs), ``i64`` and ``u64`` become our ``int`` (8 bytes, signed; a ``u64`` of 2**63 or more
is an error); ``array`` (msgpack in Granular) becomes our ``array``; every other type keeps
its name and its bytes as stored (``bytes``, ``utf8``, ``msgpack``, ``jpg``, ``png`` read with
our built-in codecs; ``tree``, ``mp4`` or a type of your own need ``decoders`` when read).
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import ProgressBar
from .errors import CorruptDatasetError, IncompleteDatasetError
from .spec import COMPRESSIONS
from .writer import DatasetWriter, shard_name

_AS_INT = {"int": True, "i64": True, "u64": False}  # type -> stored signed


def from_granular(source: Any, destination: Any, *, compression: str | None = None,
                  verbose: bool = False) -> int:
    """Converts the Granular dataset (plain or sharded) at ``source`` into a new dataset at
    ``destination`` (sharded the same way); ``compression`` (``"lz4"`` or ``"zstd"``)
    applies to every field but the integers. Returns the number of datapoints.

    >>> from_granular("granular_ds", "ffrecord_ds")      # doctest: +SKIP
    1000
    """
    if compression is not None and compression not in COMPRESSIONS:
        raise ValueError(f"compression must be None or one of {COMPRESSIONS}, got {compression!r}")
    source, destination = Path(os.fsdecode(source)), Path(os.fsdecode(destination))
    if (source / "spec.json").is_file():
        return _convert_one(source, destination, compression, verbose)
    shards = sorted((p for p in source.iterdir() if p.is_dir() and p.name.isdigit()),
                    key=lambda p: int(p.name)) if source.is_dir() else []
    if not shards:
        raise IncompleteDatasetError(f"{source}: neither a Granular dataset (spec.json) nor a "
                                     "sharded one (000000/spec.json, ...)")
    destination.mkdir(parents=True, exist_ok=True)
    return sum(_convert_one(shard, destination / shard_name(int(shard.name)), compression, verbose)
               for shard in shards)


def _convert_one(source: Path, destination: Path, compression: str | None, verbose: bool) -> int:
    granular_spec = json.loads((source / "spec.json").read_text())
    columns = {name: _Column(source, name) for name in granular_spec}
    lengths = {name: len(column) for name, column in columns.items()}
    if len(set(lengths.values())) > 1:
        raise CorruptDatasetError(f"{source}: the fields hold different numbers of records: {lengths}")
    length = next(iter(lengths.values()), 0)
    spec, encoders, converters = {}, {}, {}
    for name, kind in granular_spec.items():
        if kind in _AS_INT:
            spec[name], converters[name] = "int", _int_converter(_AS_INT[kind])
        elif kind == "array":
            spec[name], converters[name] = "array", _decode_granular_array
        else:  # stored as it is, under its own type name
            spec[name], encoders[kind] = kind, bytes
        if compression and kind not in _AS_INT:
            spec[name] += f":{compression}"
    with DatasetWriter(destination, spec, encoders) as writer, \
            ProgressBar(length, verbose, f"convert {source.name}") as bar:
        for index in range(length):
            datapoint = {}
            for name, column in columns.items():
                record = column[index]
                convert = converters.get(name)
                datapoint[name] = record if convert is None else _converted(convert, record, source, name, index)
            writer.append(datapoint)
            bar.update(1)
    return length


class _Column:
    """One Granular field: its records, read from the bag through the index of end offsets."""

    def __init__(self, directory: Path, name: str) -> None:
        bag, idx = directory / f"{name}.bag", directory / f"{name}.idx"
        if not bag.is_file() or not idx.is_file():
            raise IncompleteDatasetError(f"{directory}: field {name!r}: {bag.name} or {idx.name} is missing")
        self.name = name
        self._ends = np.fromfile(idx, "<u8")
        with bag.open("rb") as f:  # mapped, not read: a bag may be larger than memory
            self._bag = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if bag.stat().st_size else b""
        if len(self._ends) and (int(self._ends[-1]) > len(self._bag) or (np.diff(self._ends.astype(np.int64)) < 0).any()):
            raise CorruptDatasetError(f"{idx}: record offsets run past {bag.name} or backwards")

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, index: int) -> bytes:
        start = int(self._ends[index - 1]) if index else 0
        return self._bag[start:int(self._ends[index])]


def _converted(convert: Callable[[bytes], Any], record: bytes, source: Path, name: str, index: int) -> Any:
    try:
        return convert(record)
    except Exception as exc:
        raise CorruptDatasetError(f"{source}: record {index} of field {name!r} cannot be converted: "
                                  f"{type(exc).__name__}: {exc}") from exc


def _int_converter(signed: bool) -> Callable[[bytes], int]:
    def convert(record: bytes) -> int:
        value = int.from_bytes(record, "little", signed=signed)
        if value >= 2**63:
            raise OverflowError(f"{value} does not fit our 64-bit signed int")
        return value

    return convert


def _decode_granular_array(record: bytes) -> np.ndarray:
    import msgpack

    dtype, shape, data = msgpack.unpackb(record)
    return np.frombuffer(data, dtype).reshape(shape)
