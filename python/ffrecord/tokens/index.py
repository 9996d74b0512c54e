"""The cumulative token index of a token dataset: where each document's tokens start in
the documents concatenated, so that "which document holds token t" is a binary search
and nothing is read per document when a dataset is opened.

The index of field ``F`` is the file ``F.index`` beside the field files: a base FFRecord
file of two samples, a JSON description (``{"field", "dtype", "documents", "tokens"}``)
and the ``documents + 1`` cumulative token counts as little-endian ``int64`` (the first 0,
the last the total). A ``TokenWriter`` writes it with the dataset; for a dataset written
otherwise (an ``array`` field of 1-D integer arrays) it is built once, from the samples'
sizes and headers, and saved beside the fields when the directory is local and writable.

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
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import _remote
from ..dataset.codecs import array_data_offsets
from ..dataset.reader import DatasetReader
from ..reader import FileReader
from ..writer import FileWriter
from .errors import TokenIndexError

SUFFIX = ".index"
TOKEN_DTYPES = (np.dtype("<u2"), np.dtype("<u4"))


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
    value (the ``array`` header's size)."""

    field: str
    dtype: np.dtype
    starts: np.ndarray

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

    def write(self, path: Any, durable: bool = True) -> None:
        """Writes the index file at ``path`` (complete only when this returns; fsynced
        unless ``durable=False``)."""
        header = {"field": self.field, "dtype": self.dtype.str, "documents": self.documents,
                  "tokens": self.tokens}
        with FileWriter(path, 2, durable=durable) as writer:
            writer.write_one(json.dumps(header).encode())
            writer.write_one(np.ascontiguousarray(self.starts, "<i8"))


def load_index(dataset: Any, field: str = "tokens", *,
               storage_options: dict[str, Any] | None = None) -> TokenIndex:
    """The token index of one dataset directory (not a sharded one: see each shard), read
    from its index file or else built from the field and cached."""
    reader = None if isinstance(dataset, (str, bytes, os.PathLike)) else dataset  # an open one
    directory = reader.directory if reader else _remote.as_path(dataset, storage_options)
    path = directory / index_name(field)
    if _index_exists(path):
        with FileReader(path, storage_options=storage_options) as file:
            header_bytes, starts_bytes = file.read([0, 1])
        header = json.loads(header_bytes.tobytes())
        index = TokenIndex(header["field"], np.dtype(header["dtype"]),
                           starts_bytes.view("<i8").astype(np.int64))
        if header["documents"] != index.documents or index.starts[-1] != header["tokens"]:
            raise TokenIndexError(f"{path}: the index disagrees with itself")
        if reader is not None and len(reader) != index.documents:
            raise TokenIndexError(f"{path}: indexes {index.documents} documents; the dataset holds "
                                  f"{len(reader)}")
        return index
    opened = reader or DatasetReader(directory, storage_options=storage_options)
    try:
        index = build_index(opened, field)
    finally:
        if reader is None:
            opened.close()
    if isinstance(directory, Path) and os.access(directory, os.W_OK):
        _save(index, path)
    return index


def _index_exists(path: Any) -> bool:
    if isinstance(path, Path):
        return path.is_file()
    parent, _, name = str(path).rpartition("/")
    return name in _remote.list_dir(parent + "/", path.storage_options)


def _save(index: TokenIndex, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    os.close(fd)
    try:
        index.write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def build_index(reader: DatasetReader, field: str = "tokens") -> TokenIndex:
    """The index of ``field`` of ``reader``'s dataset, from each document's stored size and
    the first 16 bytes of its value (one batched call for all documents): the field must be
    an uncompressed ``array`` field of 1-D ``uint16`` or ``uint32`` arrays."""
    spec = reader.fields.get(field)
    where = f"{reader.directory}: field {field!r}"
    if spec is None or spec.type != "array" or spec.sequence or spec.compression:
        raise TokenIndexError(f"{where}: tokens are an uncompressed 'array' field, not "
                              f"{spec.spec if spec else 'missing'}")
    file = reader.field_reader(field)
    n = len(reader)
    if n == 0:
        return TokenIndex(field, TOKEN_DTYPES[0], np.zeros(1, np.int64))
    sizes = file.sizes(np.arange(n, dtype=np.uint64)).astype(np.int64)
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
    return TokenIndex(field, dtype, starts)
