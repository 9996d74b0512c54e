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

An extension that is not a field name gets a ``_`` in front (``0`` → ``_0``). Two
extensions that would become one field (``0`` and ``_0``), or a member ``.__key__`` (which
would replace the key), are an error naming both: WebDataset itself refuses the latter.

The tar files are read with the standard library (the ``webdataset`` package is not needed).
Every sample must have the first sample's extensions; a truncated or damaged tar, a member
claiming more bytes than the archive holds, or an image that is not one, is an error naming
the tar file and the sample's key.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import PathArg, open_regular
from ._base import Source, SourceError, check_image, raw, source_error
from ._files import PIECE, files_of

_IMAGES = {"jpg": "jpg", "jpeg": "jpg", "png": "png"}
_INTEGERS = ("cls", "cls2", "index", "id")
_TEXT = ("txt", "text")
_KEY_EXT = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_KEY = "__key__"


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
        first = next(((tar, sample) for tar in self.tars for sample in self._samples(tar)), None)
        if first is None:
            self.spec, self.fields = {}, {}
            self.tars = []
            return
        tar, (key, members) = first
        self.fields = _fields(members, tar, key)
        self.spec = {_KEY: "utf8",
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
            datapoint = {_KEY: key}
            for ext, data in members.items():
                field = self.fields[ext]
                try:
                    datapoint[field] = _value(self.spec[field], data, unit, key)
                except SourceError:  # an image that is not one: named already
                    raise
                except (ValueError, EOFError, RecursionError) as exc:  # npy cut short, JSON nested deep
                    raise source_error(unit, key, f".{ext}: not a {self.spec[field]} value: {exc}") from None
            yield key, datapoint

    def _samples(self, tar_path: Path) -> Iterator[tuple[str, dict[str, bytes]]]:
        key, members = None, {}
        try:
            with open_regular(tar_path) as f, tarfile.open(fileobj=_Clamped(f), mode="r:*") as tar:
                plain = isinstance(tar.fileobj, _Clamped)  # not compressed: sizes are the file's
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
                    if plain and member.offset_data + member.size > tar.fileobj.size:
                        raise source_error(tar_path, name, f"member {member.name!r} claims "
                                           f"{member.size:,} bytes; the archive holds "
                                           f"{max(0, tar.fileobj.size - member.offset_data):,} past its header")
                    members[ext] = _member_bytes(tar, member)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise source_error(tar_path, key, f"damaged or truncated tar: {type(exc).__name__}: {exc}") from None
        if key is not None:
            yield key, members


def _fields(members: dict[str, bytes], tar: Path, key: str) -> dict[str, str]:
    """The field of each extension of the first sample, each its own: an error naming the
    members that would share one (their values would replace each other)."""
    fields: dict[str, str] = {}
    owner = {_KEY: "its key"}
    for ext in members:
        field = ext if _FIELD.match(ext) else f"_{ext}"
        if field in owner:
            raise source_error(tar, key, f"member .{ext} and {owner[field]} would both become field "
                                         f"{field!r}: rename one")
        owner[field], fields[ext] = f"member .{ext}", field
    return fields


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """The member's bytes, read in pieces: a size field claiming more than there is fails at
    the end of the data (truncated), never by asking for that much memory at once."""
    f = tar.extractfile(member)
    pieces, left = [], member.size
    try:
        while left:
            piece = f.read(min(left, PIECE))
            if not piece:
                raise EOFError("end of data")
            pieces.append(piece)
            left -= len(piece)
    except (tarfile.TarError, EOFError) as exc:
        raise tarfile.ReadError(f"member {member.name!r} ends after {member.size - left:,} of its "
                                f"{member.size:,} bytes ({exc})") from None
    return b"".join(pieces)


class _Clamped(io.RawIOBase):
    """A file whose reads never ask for more than the file has left: ``tarfile`` reads a
    header's claimed size (a long name, a pax record) in one call, which for a forged size
    of 40 GiB would be a 40 GiB allocation."""

    def __init__(self, f: Any) -> None:
        super().__init__()
        self.f, self.size = f, os.fstat(f.fileno()).st_size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.f.seek(offset, whence)

    def tell(self) -> int:
        return self.f.tell()

    def read(self, size: int = -1) -> bytes:
        left = max(0, self.size - self.f.tell())
        return self.f.read(left if size is None or size < 0 else min(size, left))

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)
