"""Specs and ``spec.json``: what fields a dataset has, and the file that marks it complete.

A spec maps each field name to a type string ``TYPE[[]][:COMPRESSION]``:

- ``TYPE`` names a codec: a built-in one (``bytes``, ``utf8``, ``int``, ``float``, ``array``,
  ``npz``, ``json``, ``msgpack``, ``jpg``, ``png``) or one the user passes;
- ``[]`` makes a sequence field: each value is a list of elements of ``TYPE``, stored so
  that any range of elements is read without the others;
- ``:lz4`` or ``:zstd`` compresses the field's samples in its file.

>>> fields = parse_spec({"frames": "jpg[]", "text": "utf8:zstd", "label": "int"})
>>> fields["frames"].sequence, fields["text"].compression, fields["label"].file
(True, 'zstd', 'label.ffr')
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import IncompleteDatasetError, SpecError, UnsupportedVersionError

SPEC_FILE = "spec.json"
FORMAT = "ffrecord.dataset"
VERSION = 1
COMPRESSIONS = ("lz4", "zstd")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}\Z")
_TYPE = re.compile(r"(?P<type>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<sequence>\[\])?(?::(?P<compression>\w+))?\Z")


@dataclass(frozen=True)
class Field:
    """One field of a spec."""

    name: str
    type: str  # the codec's name
    sequence: bool
    compression: str | None

    @property
    def file(self) -> str:
        """The name of the field's FFRecord file inside the dataset directory."""
        return f"{self.name}.ffr"

    @property
    def spec(self) -> str:
        """The type string this field was parsed from (normalised)."""
        return self.type + ("[]" if self.sequence else "") + (f":{self.compression}" if self.compression else "")


def parse_spec(spec: Any) -> dict[str, Field]:
    """Validates a spec (``{name: type string}``) and returns its fields, in the given order."""
    if not isinstance(spec, Mapping) or not spec:
        raise SpecError(f"a spec must be a non-empty dict of field name -> type string, got {spec!r:.80}")
    fields = {}
    for name, text in spec.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise SpecError(f"field name {name!r} is not allowed: a letter or _ first, then letters, "
                            "digits, _ . - (at most 128 characters)")
        match = _TYPE.match(text) if isinstance(text, str) else None
        if match is None:
            raise SpecError(f"field {name!r}: {text!r} is not a type string "
                            "(TYPE, TYPE[] for a sequence, optionally :lz4 or :zstd)")
        compression = match["compression"]
        if compression is not None and compression not in COMPRESSIONS:
            raise SpecError(f"field {name!r}: unknown compression {compression!r} "
                            f"(known: {', '.join(COMPRESSIONS)})")
        fields[name] = Field(name, match["type"], bool(match["sequence"]), compression)
    return fields


def write_spec(directory: Path, fields: Mapping[str, Field], length: int,
               metadata: Mapping[str, Any] | None = None) -> None:
    """Writes ``spec.json`` atomically (temporary file, fsync, rename, directory fsync): it is
    the last thing a writer does, so a dataset without it never looks complete. ``metadata``
    (JSON-serialisable, e.g. a converter's class names) is kept under ``"metadata"``."""
    document = {"format": FORMAT, "version": VERSION, "length": length,
                "fields": {name: field.spec for name, field in fields.items()}}
    if metadata:
        document["metadata"] = dict(metadata)
    fd, tmp = tempfile.mkstemp(prefix=f".{SPEC_FILE}.tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, directory / SPEC_FILE)
    except BaseException:
        os.unlink(tmp)
        raise
    sync_directory(directory)


def sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_metadata(directory: Path) -> dict[str, Any]:
    """The ``"metadata"`` a writer stored in ``spec.json`` (``{}`` when none)."""
    read_spec(directory)  # the same checks, the same errors
    metadata = json.loads((directory / SPEC_FILE).read_text(encoding="utf-8")).get("metadata", {})
    if not isinstance(metadata, dict):
        raise SpecError(f"{directory / SPEC_FILE}: \"metadata\" is not an object")
    return metadata


def read_spec(directory: Path) -> tuple[dict[str, Field], int]:
    """The fields and datapoint count of the dataset in ``directory``, from its ``spec.json``."""
    path = directory / SPEC_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not directory.is_dir():
            raise FileNotFoundError(f"{directory}: no such directory") from None
        raise IncompleteDatasetError(
            f"{directory}: no {SPEC_FILE}: not a dataset, or its writer never finished") from None
    try:
        document = json.loads(text)
        kind, version = document["format"], document["version"]
    except (ValueError, TypeError, KeyError):
        raise SpecError(f"{path}: not a structured dataset spec") from None
    if kind != FORMAT or not isinstance(version, int):
        raise SpecError(f"{path}: not a structured dataset spec (format {kind!r})")
    if version > VERSION:
        raise UnsupportedVersionError(
            f"{path}: format version {version} is newer than this library reads ({VERSION}): "
            "upgrade ffrecord")
    length = document.get("length")
    if not isinstance(length, int) or length < 0:
        raise SpecError(f"{path}: bad datapoint count {length!r}")
    try:
        return parse_spec(document.get("fields")), length
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
