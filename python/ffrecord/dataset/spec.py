"""Specs and ``spec.json``: what fields a dataset has, and the file that marks it complete.

A spec maps each field name to a type string ``TYPE[SHAPE][[]][:COMPRESSION]``:

- ``TYPE`` names a codec: a built-in one (``bytes``, ``utf8``, ``int``, ``float``, ``array``,
  ``npz``, ``json``, ``msgpack``, ``jpg``, ``png``), a fixed-size type (``bool``,
  ``int8`` … ``int64``, ``uint8`` … ``uint64``, ``float16``, ``float32``, ``float64``: see
  ``dataset.columns``) or one the user passes;
- ``[SHAPE]``, on a fixed-size type only, makes each value an array of that shape:
  ``float32[768]``, ``uint8[4,4]`` (dimensions of at least 1, separated by commas);
- ``[]`` (empty brackets, last) makes a sequence field: each value is a list of elements of
  ``TYPE``, stored so that any range of elements is read without the others;
- ``:lz4`` or ``:zstd`` compresses the field's samples in its file.

A fixed-size field that is not a sequence (and whose type no user codec overrides) is
stored as a *column*: many values to a sample, ``block`` of them (kept in ``spec.json``
under ``"blocks"``, which makes it format version 2).

>>> fields = parse_spec({"frames": "jpg[]", "text": "utf8:zstd", "label": "int", "emb": "float32[4]"})
>>> fields["frames"].sequence, fields["text"].compression, fields["label"].file, fields["emb"].shape
(True, 'zstd', 'label.ffr', (4,))
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import _paths
from .errors import CorruptDatasetError, IncompleteDatasetError, SpecError, UnsupportedVersionError

SPEC_FILE = "spec.json"
FORMAT = "ffrecord.dataset"
VERSION = 2  # the newest this library reads and writes
PLAIN_VERSION = 1  # written when no field is a column: readers before columns read it
COMPRESSIONS = ("lz4", "zstd")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}\Z")
_TYPE = re.compile(r"(?P<type>[A-Za-z_][A-Za-z0-9_.\-]*)(?:\[(?P<shape>[0-9]+(?:,[0-9]+)*)\])?"
                   r"(?P<sequence>\[\])?(?::(?P<compression>\w+))?\Z")
# The fixed-size types, by name: numpy's little-endian dtypes of their values.
FIXED_TYPES = {"bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
               "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
               "float16": "<f2", "float32": "<f4", "float64": "<f8"}
MAX_VALUE_BYTES = 1 << 30  # a fixed-size value over this is not one (the core's block bound)


@dataclass(frozen=True)
class Field:
    """One field of a spec."""

    name: str
    type: str  # the codec's name
    sequence: bool
    compression: str | None
    shape: tuple[int, ...] = ()  # of each value of a fixed-size type: () a scalar
    block: int | None = None  # values to a sample when stored as a column, else None

    @property
    def file(self) -> str:
        """The name of the field's FFRecord file inside the dataset directory."""
        return f"{self.name}.ffr"

    @property
    def spec(self) -> str:
        """The type string this field was parsed from (normalised)."""
        shape = f"[{','.join(map(str, self.shape))}]" if self.shape else ""
        return (self.type + shape + ("[]" if self.sequence else "")
                + (f":{self.compression}" if self.compression else ""))

    @property
    def fixed(self) -> bool:
        """Whether values are of a fixed-size type (``bool``, ``float32[768]``, ...)."""
        return self.type in FIXED_TYPES


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
                            "(TYPE, TYPE[] for a sequence, TYPE[d0,d1,...] for a fixed-size "
                            "array, optionally :lz4 or :zstd)")
        compression = match["compression"]
        if compression is not None and compression not in COMPRESSIONS:
            raise SpecError(f"field {name!r}: unknown compression {compression!r} "
                            f"(known: {', '.join(COMPRESSIONS)})")
        fields[name] = Field(name, match["type"], bool(match["sequence"]), compression,
                             _shape(name, match["type"], match["shape"]))
    return fields


def _shape(name: str, kind: str, text: str | None) -> tuple[int, ...]:
    """The dimensions of ``TYPE[d0,d1,...]``: of a fixed-size type, each at least 1."""
    if text is None:
        return ()
    if kind not in FIXED_TYPES:
        raise SpecError(f"field {name!r}: a shape [{text}] needs a fixed-size type "
                        f"({', '.join(FIXED_TYPES)}), not {kind!r} (TYPE[] is a sequence)")
    shape = tuple(int(d) for d in text.split(","))
    size = int(np.dtype(FIXED_TYPES[kind]).itemsize)
    for d in shape:
        size *= d
        if d < 1 or size > MAX_VALUE_BYTES:
            raise SpecError(f"field {name!r}: shape [{text}]: each dimension must be at least "
                            f"1, and a value at most {MAX_VALUE_BYTES >> 20} MiB")
    return shape


def with_blocks(fields: Mapping[str, Field], blocks: Mapping[str, int]) -> dict[str, Field]:
    """``fields`` with the column ones (``blocks``: field -> values to a sample) marked."""
    return {name: replace(field, block=blocks[name]) if name in blocks else field
            for name, field in fields.items()}


def write_spec(directory: Path, fields: Mapping[str, Field], length: int,
               metadata: Mapping[str, Any] | None = None) -> None:
    """Writes ``spec.json`` atomically (temporary file, fsync, link, directory fsync), never
    replacing one: it is the last thing a writer does, so a dataset without it never looks
    complete, and a complete one is never replaced. ``metadata`` (JSON-serialisable, e.g. a
    converter's class names) is kept under ``"metadata"``."""
    blocks = {name: field.block for name, field in fields.items() if field.block is not None}
    document = {"format": FORMAT, "version": VERSION if blocks else PLAIN_VERSION, "length": length,
                "fields": {name: field.spec for name, field in fields.items()}}
    if blocks:
        document["blocks"] = blocks
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
        _publish(tmp, directory / SPEC_FILE)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    sync_directory(directory)


def _publish(tmp: str, path: Path) -> None:
    """Gives ``tmp`` the name ``path`` unless something has it: ``FileExistsError`` then (a
    hard link fails rather than replace; where links are not supported, a check first)."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        pass
    except OSError:  # no hard links on this file system
        if not os.path.lexists(path):
            os.replace(tmp, path)
            return
    raise completed_meanwhile(path.parent)


def completed_meanwhile(directory: Any) -> FileExistsError:
    """The error of a writer that finds a dataset completed where it writes (its
    ``spec.json`` appeared), local or remote."""
    return FileExistsError(f"{directory}: a dataset was completed here by another writer ({SPEC_FILE} "
                           "appeared): not replacing it")


def sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# spec.json is a few hundred bytes; a bigger one is not a spec (a remote one is bounded the
# same by ffr_fetch_text).
MAX_SPEC_BYTES = 16 << 20


def read_spec(directory: Path) -> tuple[dict[str, Field], int]:
    """The fields and datapoint count of the dataset in ``directory``, from its ``spec.json``.

    A ``spec.json`` that is not a regular file (a FIFO, a link to ``/dev/zero``) is refused
    at once (``ValueError``); one that is too large, not UTF-8, not JSON (or nested too
    deep), has a key twice or holds a field of the wrong type raises ``CorruptDatasetError``
    naming it."""
    fields, length, _ = read_spec_and_metadata(directory)
    return fields, length


def read_spec_and_metadata(directory: Path) -> tuple[dict[str, Field], int, dict[str, Any]]:
    """``read_spec``, and the ``"metadata"`` the writer stored (``{}`` when none), from one
    read of ``spec.json``."""
    return parse_spec_document(*_read_raw(directory))


def parse_spec_document(path: Any, raw: bytes) -> tuple[dict[str, Field], int, dict[str, Any]]:
    """``read_spec_and_metadata`` of the bytes ``raw`` of ``spec.json`` at ``path``."""
    document = _parse_document(path, raw)
    length = document.get("length")
    if not _is_count(length):
        raise _damaged(path, f"bad datapoint count {length!r:.80}")
    metadata = document.get("metadata", {})
    if not isinstance(metadata, dict):
        raise _damaged(path, '"metadata" is not an object')
    try:
        fields = parse_spec(document.get("fields"))
    except SpecError as exc:
        raise _damaged(path, str(exc)) from None
    return with_blocks(fields, _blocks(path, document, fields)), length, metadata


def _blocks(path: Any, document: dict[str, Any], fields: dict[str, Field]) -> dict[str, int]:
    """The ``"blocks"`` of a version 2 spec: values to a sample of each column field."""
    blocks = document.get("blocks", {})
    if blocks and document["version"] < 2:
        raise _damaged(path, '"blocks" is not an object of a version 2 spec')
    return checked_blocks(path, blocks, fields)


def checked_blocks(path: Any, blocks: Any, fields: dict[str, Field]) -> dict[str, int]:
    """``blocks`` (field -> values to a sample, as ``spec.json`` or a manifest of the
    dataset at ``path`` stores them), checked against ``fields``: ``CorruptDatasetError``
    unless each names a fixed-size field and a count."""
    if not isinstance(blocks, dict):
        raise _damaged(path, '"blocks" is not an object')
    for name, block in blocks.items():
        field = fields.get(name)
        if field is None or not field.fixed or field.sequence:
            raise _damaged(path, f'"blocks" names {name!r}, which is not a fixed-size field')
        if not _is_count(block) or block < 1:
            raise _damaged(path, f"field {name!r}: bad values per block {block!r:.80}")
    return blocks


def _read_raw(directory: Path) -> tuple[Any, bytes]:
    """``spec.json``'s path and bytes."""
    path = directory / SPEC_FILE
    try:
        return path, _read_bounded(path)
    except FileNotFoundError:
        if not directory.is_dir():
            raise FileNotFoundError(f"{directory}: no such directory") from None
        raise IncompleteDatasetError(
            f"{directory}: no {SPEC_FILE}: not a dataset, or its writer never finished") from None


def _parse_document(path: Any, raw: bytes) -> dict[str, Any]:
    """The JSON object of ``spec.json`` at ``path``, of a known format and version."""
    try:
        document = json.loads(raw, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError as exc:
        raise _damaged(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise _damaged(path, "nested too deep to be a spec") from None
    except _DuplicateKey as exc:
        raise _damaged(path, str(exc)) from None
    except ValueError as exc:
        raise _damaged(path, f"not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        kind = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise _damaged(path, f"not a structured dataset spec (format {kind!r:.80})")
    version = document.get("version")
    if not _is_count(version) or version < 1:
        raise _damaged(path, f"bad format version {version!r:.80}")
    if version > VERSION:
        raise UnsupportedVersionError(
            f"{path}: format version {version} is newer than this library reads ({VERSION}): "
            "upgrade ffrecord")
    return document


def _read_bounded(path: Any) -> bytes:
    """The bytes of a small file: at most ``MAX_SPEC_BYTES``, opened without blocking and
    refused unless it is a regular file (``_paths.open_regular``, the core's rule)."""
    if not isinstance(path, Path):  # a RemotePath: the core bounds the fetch
        return path.read_bytes()
    with _paths.open_regular(path) as f:
        raw = f.read(MAX_SPEC_BYTES + 1)
    if len(raw) > MAX_SPEC_BYTES:
        raise _damaged(path, f"larger than {MAX_SPEC_BYTES >> 20} MiB: not a spec")
    return raw


class _DuplicateKey(ValueError):
    """A JSON object with a key twice: ``json`` would keep the last silently."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _DuplicateKey(f"key {twice!r:.80} appears twice")
    return document


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _damaged(path: Any, what: str) -> CorruptDatasetError:
    return CorruptDatasetError(f"{path}: {what}")
