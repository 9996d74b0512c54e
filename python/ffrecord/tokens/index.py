"""The cumulative token index of a token dataset: where each document's tokens start in
the documents concatenated, so that "which document holds token t" is a binary search
and nothing is read per document when a dataset is opened.

The index of field ``F`` is the file ``F.index`` beside the field files: a base FFRecord
file of two samples, a JSON header (``{"format", "field", "dtype", "documents", "tokens",
"source"}``) and the ``documents + 1`` cumulative token counts as little-endian ``int64``
(the first 0, the last the total). ``source`` is the identity of the field file it was
built from (see ``ffrecord.tokens.binding``): every open checks it against the field file
as it is, and an index that does not match, or is damaged, is built again from the field
and saved in its place (when the directory is local and writable). A ``TokenWriter``
writes it with the dataset; for a dataset written otherwise (an ``array`` field of 1-D
integer arrays) it is built once, from the samples' sizes and headers.

>>> import tempfile, os
>>> from ffrecord.tokens import TokenWriter
>>> path = os.path.join(tempfile.mkdtemp(), "docs")
>>> with TokenWriter(path, vocab_size=1000) as writer:
...     for doc in ([5, 6, 7], [8], [9, 10]):
...         _ = writer.append(doc)
>>> index = load_index(path)
>>> index.starts.tolist(), index.dtype, index.document_of([0, 3, 5]).tolist()
([0, 3, 4, 6], dtype('uint16'), [0, 1, 2])
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset.codecs import array_data_offsets
from ..dataset.reader import DatasetReader
from ..errors import FFRecordWarning
from ..reader import FileReader
from ..writer import FileWriter
from .binding import TOKEN_DTYPES, FieldSource, consistency_error, field_source, header_for, stored_index
from .errors import TokenIndexError

SUFFIX = ".index"


def index_name(field: str) -> str:
    return f"{field}{SUFFIX}"


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    """The smallest token dtype that holds ids ``0 .. vocab_size - 1``.

    >>> dtype_for_vocab(50257), dtype_for_vocab(151936)
    (dtype('uint16'), dtype('uint32'))
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    for dtype in TOKEN_DTYPES:
        if vocab_size - 1 <= np.iinfo(dtype).max:
            return dtype
    raise ValueError(f"vocab_size {vocab_size} does not fit in 32-bit token ids")


@dataclass(frozen=True)
class TokenIndex:
    """One dataset's token index: ``starts`` (``int64``, ``documents + 1`` entries) and the
    token ``dtype``; ``data_offsets`` is where each document's tokens start in its stored
    value (the ``array`` header's size); ``source``, the field file it describes."""

    field: str
    dtype: np.dtype
    starts: np.ndarray
    source: FieldSource

    @property
    def documents(self) -> int:
        return len(self.starts) - 1

    @property
    def tokens(self) -> int:
        return int(self.starts[-1])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    @property
    def data_offsets(self) -> np.ndarray:
        return array_data_offsets(self.dtype, self.lengths)

    def document_of(self, tokens: Any) -> np.ndarray:
        """The document holding each of ``tokens`` (positions in the concatenation)."""
        return np.searchsorted(self.starts, np.asarray(tokens, np.int64), side="right") - 1

    def write(self, path: Any, durable: bool = True, storage_options: dict[str, Any] | None = None) -> None:
        """Writes the index file at ``path`` (a local path or a URL): it appears there
        complete (written aside, then renamed or uploaded), fsynced unless
        ``durable=False``."""
        header = header_for(self.field, self.dtype, self.starts, self.source)
        with FileWriter(path, 2, durable=durable, storage_options=storage_options) as writer:
            writer.write_one(json.dumps(header).encode())
            writer.write_one(np.ascontiguousarray(self.starts, "<i8"))


def bound_index(reader: DatasetReader, field: str, starts: np.ndarray, dtype: np.dtype) -> TokenIndex:
    """The index ``starts`` of ``dtype`` tokens bound to ``reader``'s ``field`` as it is;
    ``TokenIndexError`` when they do not describe its documents."""
    source = field_source(token_file(reader, field))
    reason = consistency_error(dtype, starts, source)
    if reason is not None:
        raise TokenIndexError(f"{reader.directory}: field {field!r}: {reason}")
    return TokenIndex(field, dtype, starts, source)


def load_index(dataset: Any, field: str = "tokens", *,
               storage_options: dict[str, Any] | None = None) -> TokenIndex:
    """The token index of one dataset directory (not a sharded one: see each shard): the
    stored one when it belongs to the field file as it is now, else one built from the
    field (and saved in place of the stored one when the directory is local and
    writable; a stored index that is dropped is named in an ``FFRecordWarning``)."""
    reader = None if isinstance(dataset, (str, bytes, os.PathLike)) else dataset  # an open one
    opened = reader or DatasetReader(dataset, storage_options=storage_options)
    try:
        source = field_source(token_file(opened, field))
        path = opened.directory / index_name(field)
        stored, reason = stored_index(path, field, source, opened.storage_options)
        if stored is not None:
            return TokenIndex(field, *stored, source)
        index = _build(opened, field, source)
    finally:
        if reader is None:
            opened.close()
    if reason is not None:
        warnings.warn(f"{path}: not used ({reason}); built again from the field", FFRecordWarning,
                      stacklevel=2)
    if isinstance(path, Path) and os.access(path.parent, os.W_OK):
        try:
            index.write(path)
        except (OSError, ValueError):  # e.g. a directory in its place: used, not kept
            pass
    return index


def token_file(reader: DatasetReader, field: str) -> FileReader:
    """The file of ``reader``'s token field; ``TokenIndexError`` when the field is not an
    uncompressed ``array`` field."""
    spec = reader.fields.get(field)
    if spec is None or spec.type != "array" or spec.sequence or spec.compression:
        raise TokenIndexError(f"{reader.directory}: field {field!r}: tokens are an uncompressed "
                              f"'array' field, not {spec.spec if spec else 'missing'}")
    return reader.field_reader(field)


def build_index(reader: DatasetReader, field: str = "tokens") -> TokenIndex:
    """The index of ``field`` of ``reader``'s dataset, from each document's stored size and
    the first 16 bytes of its value (one batched call for all documents): the field must be
    an uncompressed ``array`` field of 1-D ``uint16`` or ``uint32`` arrays."""
    return _build(reader, field, field_source(token_file(reader, field)))


def _build(reader: DatasetReader, field: str, source: FieldSource) -> TokenIndex:
    file = reader.field_reader(field)
    where = f"{reader.directory}: field {field!r}"
    sizes = source.sizes.astype(np.int64)
    n = len(sizes)
    if n == 0:
        return TokenIndex(field, TOKEN_DTYPES[0], np.zeros(1, np.int64), source)
    head = 16
    triples = np.zeros((n, 3), np.uint64)
    triples[:, 0], triples[:, 2] = np.arange(n), head
    if (sizes < head).any():
        raise TokenIndexError(f"{where}: document {int(np.argmax(sizes < head))} is not an array")
    heads = file.read_ranges(triples)[0].reshape(n, head)
    dtype_text = heads[0, 4:].tobytes().split(b" ")[0]
    try:
        dtype = np.dtype(dtype_text.decode("ascii"))
    except (TypeError, UnicodeDecodeError):
        dtype = None
    if dtype not in TOKEN_DTYPES:
        raise TokenIndexError(f"{where}: document 0 holds {dtype_text!r} values, not uint16 or uint32")
    prefix = np.frombuffer(dtype.str.encode() + b" ", np.uint8)
    differs = (heads[:, 4:4 + len(prefix)] != prefix).any(axis=1)
    # The header is 16 bytes up to 10**8 - 1 tokens, 32 beyond: the size decides which.
    counts = (sizes - 16) // dtype.itemsize
    long = array_data_offsets(dtype, counts) != 16
    counts[long] = (sizes[long] - 32) // dtype.itemsize
    bad = differs | (array_data_offsets(dtype, counts) + counts * dtype.itemsize != sizes)
    bad |= (heads[:, 4:] == ord(",")).any(axis=1)
    if bad.any():
        raise TokenIndexError(f"{where}: document {int(np.argmax(bad))} is not a 1-D array of {dtype}")
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    return TokenIndex(field, dtype, starts, source)
