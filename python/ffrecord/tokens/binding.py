"""What a token index is bound to, and the checks a stored index passes before it is used.

An index is derived from its token field's file: the documents' stored sizes and dtype.
Its header records that file's identity (``FieldSource.identity``: the file's name, bytes,
samples and a digest of its header tables, which hold every sample's offset and CRC-32),
so any rewrite of the field, in place or not, is seen at the next open. A stored index is
used only when it is a regular file of a plausible size, owned by the reader or the
field file's owner, intact (its samples' CRC-32s), of this format, for this field, bound
to the field file as it is now, and consistent with the documents' stored sizes; anything
else is a reason to build it again (``stored_index`` says which).

>>> import tempfile, os
>>> from ffrecord.tokens import TokenWriter
>>> from ffrecord.dataset import DatasetReader
>>> path = os.path.join(tempfile.mkdtemp(), "docs")
>>> with TokenWriter(path, vocab_size=100) as writer:
...     _ = writer.append([1, 2, 3])
>>> with DatasetReader(path) as reader:
...     source = field_source(reader.field_reader("tokens"))
>>> sorted(source.identity), source.sizes.tolist()
(['bytes', 'file', 'samples', 'tables'], [22])
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import _remote
from ..dataset.codecs import array_data_offsets
from ..reader import FileReader

FORMAT = 2  # of the index header; version 1 recorded no source
TOKEN_DTYPES = (np.dtype("<u2"), np.dtype("<u4"))
_HEADER_LIMIT = 64 << 10  # bytes an index's JSON header may take
_KEYS = {"format", "field", "dtype", "documents", "tokens", "source"}


@dataclass(frozen=True)
class FieldSource:
    """A token field's file as its reader sees it now: ``identity`` (JSON-able, what an
    index records), ``sizes`` (each document's stored bytes, ``int64``) and ``owner``."""

    identity: dict[str, Any]
    sizes: np.ndarray
    owner: int | None  #: the local file's owner (uid), None for an object


def field_source(file: FileReader) -> FieldSource:
    """The source of a field's ``FileReader`` (one file): its tables come from the
    header the reader holds, so nothing is read from the file."""
    if len(file.fnames) != 1:
        raise ValueError(f"a token field is one file, not {len(file.fnames)}")
    info = file.file_info(0)
    offsets, checksums = file.get_offsets(0), file.get_checksums(0)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(offsets.astype("<i8", copy=False))
    digest.update(checksums.astype("<u4", copy=False))
    name = info.path.rstrip("/").rsplit("/", 1)[-1]
    identity = {"file": name, "bytes": info.file_bytes, "samples": info.stored_samples,
                "tables": digest.hexdigest()}
    owner = None if _remote.is_url(info.path) else os.stat(info.path).st_uid
    return FieldSource(identity, np.diff(offsets)[:info.samples], owner)


def index_bytes_limit(documents: int) -> int:
    """The most bytes an index of ``documents`` documents takes (its file's header, a JSON
    header of at most 64 KiB, ``documents + 1`` ``int64`` starts)."""
    return 64 + _HEADER_LIMIT + 8 * (documents + 1)


def header_for(field: str, dtype: np.dtype, starts: np.ndarray, source: FieldSource) -> dict[str, Any]:
    """The JSON header of an index (see ``check_header``)."""
    return {"format": FORMAT, "field": field, "dtype": dtype.str, "documents": len(starts) - 1,
            "tokens": int(starts[-1]), "source": source.identity}


def consistency_error(dtype: np.dtype, starts: np.ndarray, source: FieldSource) -> str | None:
    """Why ``starts`` (of ``dtype`` tokens) cannot describe ``source``'s documents, or
    ``None``: each document's stored size must be its array header plus its tokens."""
    if len(starts) != len(source.sizes) + 1 or starts[0] != 0:
        return f"it indexes {len(starts) - 1} documents; the field holds {len(source.sizes)}"
    lengths = np.diff(starts)
    if (lengths < 0).any():
        return f"its token counts go down at document {int(np.argmax(lengths < 0))}"
    expected = array_data_offsets(dtype, lengths) + lengths * dtype.itemsize
    wrong = expected != source.sizes
    if wrong.any():
        k = int(np.argmax(wrong))
        return (f"document {k} holds {int(source.sizes[k])} bytes, not the {int(expected[k])} of "
                f"{int(lengths[k])} {dtype} tokens")
    return None


def stored_index(path: Any, field: str, source: FieldSource,
                 storage_options: dict[str, Any] | None) -> tuple[tuple[np.dtype, np.ndarray] | None, str | None]:
    """``((dtype, starts), None)`` of the index stored at ``path`` when it passes every
    check against ``source``; ``(None, None)`` when there is none; ``(None, reason)``
    when there is one that must not be used."""
    documents = len(source.sizes)
    if isinstance(path, Path):
        try:
            reason = _unsafe_file(path, source.owner, index_bytes_limit(documents))
        except FileNotFoundError:
            return None, None
        if reason is not None:
            return None, reason
    else:
        parent, _, name = str(path).rpartition("/")
        if name not in _remote.list_dir(parent + "/", storage_options):
            return None, None
    try:
        with FileReader(path, check_data=True, storage_options=storage_options) as file:
            if len(file) != 2:
                return None, f"it holds {len(file)} samples, not 2"
            header_size, starts_size = (int(s) for s in file.sizes([0, 1]))
            if header_size > _HEADER_LIMIT:
                return None, f"its header takes {header_size:,} bytes"
            if starts_size != 8 * (documents + 1):
                return None, (f"its token counts take {starts_size:,} bytes, not the {8 * (documents + 1):,} "
                              f"of the {documents:,} documents of {source.identity['file']}")
            header_bytes, starts_bytes = file.read([0, 1])
    except (OSError, ValueError) as exc:  # damaged (CRC-32, structure), unreadable, not a file
        return None, str(exc)
    try:
        header = json.loads(header_bytes.tobytes())
    except (UnicodeDecodeError, ValueError):
        return None, "its header is not JSON"
    starts = starts_bytes.view("<i8").astype(np.int64)
    reason = check_header(header, field, source, starts)
    if reason is not None:
        return None, reason
    dtype = np.dtype(header["dtype"])
    reason = consistency_error(dtype, starts, source)
    return (None, reason) if reason else ((dtype, starts), None)


def check_header(header: Any, field: str, source: FieldSource, starts: np.ndarray) -> str | None:
    """Why an index header does not describe this build of ``field`` from ``source``, or
    ``None``."""
    if not isinstance(header, dict) or set(header) != _KEYS or header["format"] != FORMAT:
        version = header.get("format", 1) if isinstance(header, dict) else "?"
        return f"it is of format {version!r}, not {FORMAT}"
    if header["field"] != field:
        return f"it indexes field {header['field']!r}, not {field!r}"
    if header["dtype"] not in [dtype.str for dtype in TOKEN_DTYPES]:
        return f"its dtype {header['dtype']!r} is not uint16 or uint32"
    if header["source"] != source.identity:
        return f"it was built from another {source.identity['file']} ({header['source']!r:.200})"
    if header["documents"] != len(starts) - 1 or header["tokens"] != int(starts[-1]):
        return "its header disagrees with its token counts"
    return None


def _unsafe_file(path: Path, owner: int | None, limit: int) -> str | None:
    """Why the local file at ``path`` is not opened as an index, or ``None`` when it may
    be (``FileNotFoundError`` when there is none). The core's open checks the descriptor
    again, so a file swapped in between is refused too."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file" + (" (a symbolic link)" if stat.S_ISLNK(info.st_mode) else "")
    if info.st_uid not in (os.geteuid(), owner):
        return f"it is owned by user {info.st_uid}, neither you nor the owner of the field file"
    if info.st_size > limit:
        return f"it is {info.st_size:,} bytes, more than an index of its dataset takes"
    return None
