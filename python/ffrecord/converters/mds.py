"""MosaicML Streaming (MDS) datasets: a directory with ``index.json`` and its shard files,
local or under an ``s3://bucket/prefix/`` (downloaded first, with boto3, to a temporary
directory removed when the conversion ends; endpoint and credentials from ``storage_options``
or the ``AWS_*`` environment).

Shards are read here (``u32 samples | (samples + 1) × u32 offsets | samples``, each sample
the variable columns' u32 sizes, then every column's bytes), checked against the index (its
byte count and sample count of each shard); values are decoded with the ``streaming``
package's own decoders (``pip install mosaicml-streaming``). Columns map to fields:

====================================================  =========================
MDS encoding                                          field type
====================================================  =========================
``int``, ``uint8`` … ``int64``, ``str_int``           ``int``
``float16/32/64``, ``str_float``                      ``float``
``str``, ``str_decimal``                              ``utf8``
``bytes``                                             ``bytes``
``jpeg`` / ``png``                                    ``jpg`` / ``png`` (bytes as stored)
``json``                                              ``json``
``ndarray…``, ``pil``                                 ``array``
``pkl`` and anything else                             ``bytes`` (stored bytes: never unpickled)
====================================================  =========================
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .. import _remote
from .._paths import PathArg
from ._base import Source, check_image, offset_table, raw, read_index, require, source_error
from ._files import inflate, read_file
from ._index import Entry, unique

_TYPES = {"int": "int", "str_int": "int", "str": "utf8", "str_decimal": "utf8", "bytes": "bytes",
          "jpeg": "jpg", "png": "png", "json": "json", "pil": "array", "str_float": "float",
          **{name: "int" for name in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")},
          **{name: "float" for name in ("float16", "float32", "float64")}}


def _field_type(encoding: str) -> str:
    return "array" if encoding.startswith("ndarray") else _TYPES.get(encoding, "bytes")


class MDSSource(Source):
    """``MDSSource("mds_dir/")``: the shards listed in ``mds_dir/index.json``."""

    kind = "mds"

    def __init__(self, path: PathArg, storage_options: dict[str, Any] | None = None) -> None:
        require("streaming", "mosaicml-streaming")
        self.url, self.objects = None, {}
        if _remote.is_url(os.fsdecode(path)):
            self.url = os.fsdecode(path)
            path, self.objects = _download(self.url, storage_options)
        self.path, index = read_index(path, "index.json", "not an MDS dataset")
        entries = index["shards"].items()
        shards = [_shard(entry) for entry in entries]
        unique([entry["raw_data"]["basename"] for entry in entries], [shard["basename"] for shard in shards], "shard")
        zipped = [(entry["zip_data"]["basename"], shard["zip"][0]) for entry, shard in zip(entries, shards) if shard["zip"]]
        unique([entry for entry, _ in zipped], [name for _, name in zipped], "compressed shard")
        self.shards = {shard["basename"]: shard for shard in shards if shard["samples"]}
        first = next(iter(self.shards.values()), None)
        self.columns = first["columns"] if first else []
        self.spec = {name: _field_type(encoding) for name, encoding in self.columns}
        self.encoders = {"jpg": raw, "png": raw}
        self.metadata = {"source": "mds", "encodings": dict(self.columns)}

    def units(self) -> list[str]:
        return [str(self.path / name) for name in self.shards]

    def _shard(self, unit: str) -> dict[str, Any]:
        return self.shards[os.path.relpath(unit, self.path)]

    def unit_files(self, unit: str) -> list[Path]:
        zipped = self._shard(unit)["zip"]
        shard = Path(unit) if zipped is None or Path(unit).exists() else self.path / zipped[0]
        return [self.path / "index.json", shard]

    def unit_identity(self, unit: str) -> str:
        if self.url is None:
            return super().unit_identity(unit)
        # the local copy is new each run: the objects' sizes and ETags say what they were
        names = [os.path.relpath(file, self.path) for file in self.unit_files(unit)]
        return hashlib.sha256(json.dumps([[name, self.objects.get(name)] for name in names]).encode()).hexdigest()

    def close(self) -> None:
        if self.url is not None:  # the downloaded copy
            shutil.rmtree(self.path, ignore_errors=True)

    def count(self, unit: str) -> int:
        return self._shard(unit)["samples"]

    def read(self, unit: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        shard = self._shard(unit)
        if shard["columns"] != self.columns:
            raise source_error(unit, None, "its columns differ from the first shard's")
        data = self._shard_bytes(unit, shard)
        n = shard["samples"]
        offsets = offset_table(data, n, unit, "samples", "shard", whole=True)
        for k in range(n):
            yield k, self._sample(unit, k, data[offsets[k]:offsets[k + 1]], shard["sizes"])

    def _shard_bytes(self, unit: str, shard: dict[str, Any]) -> bytes:
        if shard["zip"] and not Path(unit).exists():
            name, size = shard["zip"]
            data = inflate(shard["compression"], self._checked_bytes(self.path / name, size), shard["bytes"],
                           self.path / name)
        else:
            data = self._checked_bytes(Path(unit), None)
        if len(data) != shard["bytes"]:
            raise source_error(unit, None, f"index.json says the shard has {shard['bytes']:,} bytes; "
                                           f"it has {len(data):,}")
        return data

    @staticmethod
    def _checked_bytes(file: Path, size: int | None) -> bytes:
        data = read_file(file)
        if size is not None and len(data) != size:
            raise source_error(file, None, f"index.json says {size:,} bytes; the file has {len(data):,}")
        return data

    def _sample(self, unit: str, k: int, data: bytes, sizes: list[int | None]) -> dict[str, Any]:
        from streaming.base.format.mds.encodings import mds_decode

        at, lengths = 0, []
        for size in sizes:
            if size is None:
                lengths.append(int(np.frombuffer(data, "<u4", 1, at)[0]) if at + 4 <= len(data) else -1)
                at += 4
            else:
                lengths.append(size)
        if any(n < 0 for n in lengths) or at + sum(lengths) != len(data):
            raise source_error(unit, k, "column sizes do not add up to the sample's size")
        sample = {}
        for (name, encoding), length in zip(self.columns, lengths):
            value, at = data[at:at + length], at + length
            kind = self.spec[name]
            if kind in ("jpg", "png"):
                sample[name] = check_image(value, unit, k)
            elif kind == "bytes":
                sample[name] = value
            else:
                try:
                    decoded = mds_decode(encoding, value)
                except Exception as exc:
                    raise source_error(unit, k, f"column {name!r} ({encoding}) cannot be decoded: "
                                                f"{type(exc).__name__}: {exc}") from None
                sample[name] = _as_field(decoded, kind)
        return sample


def _download(url: str, storage_options: dict[str, Any] | None) -> tuple[Path, dict[str, list]]:
    """The objects under the prefix ``url`` (not below sub-prefixes) in a new local
    directory, and each one's ``[size, ETag]`` by name."""
    boto3 = require("boto3", "boto3")
    options = storage_options or {}
    client = boto3.client("s3", endpoint_url=options.get("endpoint_url"), region_name=options.get("region"))
    bucket, _, prefix = url[len("s3://"):].partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    local = Path(tempfile.mkdtemp(prefix="ffrecord-mds-"))
    objects = {}
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
            for entry in page.get("Contents", []):
                name = entry["Key"][len(prefix):]
                if name in ("", ".", ".."):  # a folder marker, or a name that leaves the copy
                    continue
                client.download_file(bucket, entry["Key"], str(local / name))
                objects[name] = [entry.get("Size"), entry.get("ETag")]
    except BaseException:
        shutil.rmtree(local, ignore_errors=True)
        raise
    return local, objects


def _shard(entry: Entry) -> dict[str, Any]:
    """What ``index.json`` says of one shard (``entry``), checked: an MDS shard (not JSON or
    CSV), its columns (names, encodings, fixed sizes alike in number, names unique), its
    sample count, and its file (and compressed file) inside the dataset's directory."""
    kind = entry.get("format")
    if kind is not None and kind.of(str) != "mds":
        raise kind.error(f"{kind.value!r:.40} shards cannot be converted (only mds)")
    names, encodings = entry["column_names"].texts(), entry["column_encodings"].texts()
    sizes = [None if size.value is None else size.count() for size in entry["column_sizes"].items()]
    if not len(names) == len(encodings) == len(sizes):
        raise entry.error(f"{len(names)} column_names, {len(encodings)} column_encodings and "
                          f"{len(sizes)} column_sizes")
    unique(entry["column_names"].items(), names, "column")
    raw_data, zip_data = entry["raw_data"], entry.get("zip_data")
    zipped = None if zip_data is None else (zip_data["basename"].relative_path(), zip_data["bytes"].count())
    return {"basename": raw_data["basename"].relative_path(), "bytes": raw_data["bytes"].count(),
            "samples": entry["samples"].count(), "columns": list(zip(names, encodings)), "sizes": sizes,
            "zip": zipped, "compression": None if zipped is None else entry["compression"].of(str)}


def _as_field(value: Any, kind: str) -> Any:
    if kind == "array":
        return np.asarray(value)
    if kind in ("int", "float"):
        return int(value) if kind == "int" else float(value)
    if kind == "utf8":
        return str(value)
    return value
