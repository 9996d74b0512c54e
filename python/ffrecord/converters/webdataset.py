"""WebDataset tar shards. A sample is the run of consecutive members sharing a key (the
member's path up to the first dot of its name); each extension becomes a field, and the key
a ``__key__`` field (``utf8``). Field types follow the extensions of the first sample, as
WebDataset's default decoders read them:

========================================  ==================================
extension                                 field type
========================================  ==================================
``jpg``, ``jpeg``, ``png``                ``jpg`` / ``png`` (bytes as stored)
``cls``, ``cls2``, ``index``, ``id``      ``int`` (when the text is one), else ``utf8``
``txt``, ``text``                         ``utf8``
``json``                                  ``json``
``npy``                                   ``array``
anything else                             ``bytes``
========================================  ==================================

The tar files are read with the standard library (the ``webdataset`` package is not needed).
Every sample must have the first sample's extensions; a truncated or damaged tar, or an
image that is not one, is an error naming the tar file and the sample's key.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import PathArg
from ._base import Source, check_image, files_of, raw, source_error

_IMAGES = {"jpg": "jpg", "jpeg": "jpg", "png": "png"}
_INTEGERS = ("cls", "cls2", "index", "id")
_TEXT = ("txt", "text")
_KEY_EXT = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


def _field_type(extension: str, data: bytes) -> str:
    ext = extension.lower()
    if ext in _IMAGES:
        return _IMAGES[ext]
    if ext in _INTEGERS:
        try:
            int(data)
            return "int"
        except ValueError:
            return "utf8"
    if ext in _TEXT:
        return "utf8"
    return {"json": "json", "npy": "array"}.get(ext, "bytes")


def _value(kind: str, data: bytes, tar: Any, key: str) -> Any:
    if kind in ("jpg", "png"):
        return check_image(data, tar, key)
    if kind == "int":
        return int(data)
    if kind == "utf8":
        return data.decode("utf-8")
    if kind == "json":
        return json.loads(data)
    if kind == "array":
        return np.load(io.BytesIO(data), allow_pickle=False)
    return data


class WebDatasetSource(Source):
    """``WebDatasetSource("shards/")``: a ``.tar`` file, or a directory's ``*.tar`` files in
    name order."""

    kind = "webdataset"

    def __init__(self, path: PathArg) -> None:
        self.path, self.tars = files_of(path, "*.tar")
        first = next(self._samples(self.tars[0]), None) if self.tars else None
        if first is None:
            self.spec, self.fields = {}, {}
            self.tars = []
            return
        key, members = first
        self.fields = {ext: (ext if _FIELD.match(ext) else f"_{ext}") for ext in members}
        self.spec = {"__key__": "utf8",
                     **{self.fields[ext]: _field_type(ext, data) for ext, data in members.items()}}
        self.encoders = {"jpg": raw, "png": raw}
        self.metadata = {"source": "webdataset"}

    def units(self) -> list[str]:
        return [str(tar) for tar in self.tars]

    def read(self, unit: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        for key, members in self._samples(Path(unit)):
            if members.keys() != self.fields.keys():
                raise source_error(unit, key, f"has extensions {sorted(members)}; the first sample "
                                              f"has {sorted(self.fields)}")
            datapoint = {"__key__": key}
            for ext, data in members.items():
                field = self.fields[ext]
                try:
                    datapoint[field] = _value(self.spec[field], data, unit, key)
                except ValueError as exc:
                    raise source_error(unit, key, f".{ext}: not a {self.spec[field]} value: {exc}") from None
            yield key, datapoint

    def _samples(self, tar_path: Path) -> Iterator[tuple[str, dict[str, bytes]]]:
        key, members = None, {}
        try:
            with tarfile.open(tar_path, "r:*") as tar:
                for member in tar:
                    if not member.isfile():
                        continue
                    match = _KEY_EXT.match(member.name)
                    if match is None:
                        continue  # no extension: WebDataset skips it too
                    name, ext = match.groups()
                    if name != key:
                        if key is not None:
                            yield key, members
                        key, members = name, {}
                    if ext in members:
                        raise source_error(tar_path, name, f"holds .{ext} twice")
                    members[ext] = tar.extractfile(member).read()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise source_error(tar_path, key, f"damaged or truncated tar: {type(exc).__name__}: {exc}") from None
        if key is not None:
            yield key, members
