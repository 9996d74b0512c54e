"""Granular datasets (the ``granular`` package's on-disk format), plain or sharded, into a
dataset sharded the same way.

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

import mmap
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import PathArg, check_regular, open_regular
from ..dataset.errors import IncompleteDatasetError
from ._base import Source, require, source_error
from ._files import read_file, read_json
from ._index import Entry

_AS_INT = {"int": True, "i64": True, "u64": False}  # type -> stored signed
_SPEC = "spec.json"


class GranularSource(Source):
    """``GranularSource("granular_ds/")``: a Granular dataset, each shard of a sharded one a
    unit (the result is sharded when the source is)."""

    kind = "granular"

    def __init__(self, path: PathArg) -> None:
        self.path = Path(os.fsdecode(path))
        self.sharded = not (self.path / _SPEC).is_file()
        self.shards = sorted((p for p in self.path.iterdir() if p.is_dir() and p.name.isdigit()),
                             key=lambda p: int(p.name)) if self.sharded and self.path.is_dir() else []
        if self.sharded and not self.shards:
            raise IncompleteDatasetError(f"{self.path}: neither a Granular dataset (spec.json) nor a "
                                         "sharded one (000000/spec.json, ...)")
        gap = next((k for k, shard in enumerate(self.shards) if int(shard.name) != k), None)
        if gap is not None:  # Granular's own reader refuses it too
            raise source_error(self.path, None, f"shard folders are not numbered 0, 1, 2, ...: "
                                                f"{self.shards[gap].name} where {gap:06d} should be")
        self.granular_spec = _read_spec(self.shards[0] if self.sharded else self.path)
        self.spec, self.encoders = {}, {}
        for name, kind in self.granular_spec.items():
            self.spec[name] = "int" if kind in _AS_INT else kind
            if kind not in _AS_INT and kind != "array":
                self.encoders[kind] = bytes  # stored as it is, under its own type name

    def units(self) -> list[str]:
        return [str(shard) for shard in self.shards] if self.sharded else [str(self.path)]

    def plain(self, units: list[Any]) -> bool:
        return not self.sharded

    def unit_files(self, unit: str) -> list[Path]:
        directory = Path(unit)
        return [directory / _SPEC] + [file for name in self.granular_spec
                                      for file in (directory / f"{name}.bag", directory / f"{name}.idx")]

    def count(self, unit: str) -> int:
        lengths = {name: _Column(Path(unit), name).length() for name in self.granular_spec}
        if len(set(lengths.values())) > 1:
            raise source_error(unit, None, f"the fields hold different numbers of records: {lengths}")
        return next(iter(lengths.values()), 0)

    def read(self, unit: str) -> Iterator[tuple[int, dict[str, Any]]]:
        directory = Path(unit)
        if _read_spec(directory) != self.granular_spec:
            raise source_error(directory / _SPEC, None, f"not the spec of the first shard "
                                                        f"({self.granular_spec})")
        columns = {name: _Column(directory, name).open() for name in self.granular_spec}
        convert = {name: _CONVERTERS.get(kind) for name, kind in self.granular_spec.items()}
        for index in range(self.count(unit)):
            datapoint = {}
            for name, column in columns.items():
                record = column[index]
                try:
                    datapoint[name] = record if convert[name] is None else convert[name](record)
                except Exception as exc:
                    raise source_error(unit, index, f"field {name!r} cannot be converted: "
                                                    f"{type(exc).__name__}: {exc}") from exc
            yield index, datapoint


def _read_spec(directory: Path) -> dict[str, str]:
    """The shard's ``spec.json``: an object of field names and type names."""
    spec = Entry(directory / _SPEC, read_json(directory / _SPEC, "not a Granular dataset"))
    return {name: spec[name].of(str) for name in spec.of(dict)}


class _Column:
    """One Granular field: its records, read from the bag through the index of end offsets."""

    def __init__(self, directory: Path, name: str) -> None:
        self.bag, self.idx = directory / f"{name}.bag", directory / f"{name}.idx"
        if not self.bag.exists() or not self.idx.exists():
            raise IncompleteDatasetError(f"{directory}: field {name!r}: {self.bag.name} or "
                                         f"{self.idx.name} is missing")

    def length(self) -> int:
        st = os.stat(self.idx)
        check_regular(st.st_mode, self.idx)
        if st.st_size % 8:
            raise source_error(self.idx, None, f"{st.st_size:,} bytes: not a whole number of 8-byte offsets")
        return st.st_size // 8

    def open(self) -> "_Column":
        self._ends = np.frombuffer(read_file(self.idx), "<u8")
        if len(self._ends) != self.length():
            raise source_error(self.idx, None, "changed while it was being read")
        with open_regular(self.bag) as f:  # mapped, not read: a bag may be larger than memory
            size = os.fstat(f.fileno()).st_size
            self._bag = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        ends = self._ends.astype(np.int64)
        if len(ends) and (int(self._ends[-1]) > len(self._bag) or (np.diff(ends) < 0).any()):
            raise source_error(self.idx, None, f"record offsets run past {self.bag.name} or backwards")
        return self

    def __getitem__(self, index: int) -> bytes:
        start = int(self._ends[index - 1]) if index else 0
        return self._bag[start:int(self._ends[index])]


def _int_converter(signed: bool) -> Callable[[bytes], int]:
    def convert(record: bytes) -> int:
        value = int.from_bytes(record, "little", signed=signed)
        if value >= 2**63:
            raise OverflowError(f"{value} does not fit our 64-bit signed int")
        return value

    return convert


def _decode_array(record: bytes) -> np.ndarray:
    msgpack = require("msgpack", "msgpack")
    dtype, shape, data = msgpack.unpackb(record)
    return np.frombuffer(data, dtype).reshape(shape)


_CONVERTERS = {**{kind: _int_converter(signed) for kind, signed in _AS_INT.items()},
               "array": _decode_array}
