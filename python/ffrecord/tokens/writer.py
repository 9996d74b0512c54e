"""``TokenWriter``: tokenized documents as a structured dataset with a token index.

A document is a 1-D sequence of token ids, stored as an ``array`` value (``uint16`` or
``uint32``, chosen by the vocabulary size) in the field ``tokens``; other fields (source,
language, ...) may ride along. ``write_many`` appends many documents by one write per
field. ``close()`` completes the dataset, then writes the
cumulative token index (``tokens.index``) bound to the token field's file as written (see
``ffrecord.tokens.binding``): a reader that finds no index, or one of another field file,
builds it again.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "docs")
>>> with TokenWriter(path, vocab_size=50257, spec={"source": "utf8"}) as writer:
...     writer.append([464, 2068, 7586], source="web")
...     writer.append(np.array([198, 50256]), source="code")
0
1
>>> from ffrecord.dataset import DatasetReader
>>> DatasetReader(path)[1]["tokens"].tolist()
[198, 50256]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..dataset.reader import DatasetReader
from ..dataset import bulk, codecs
from ..dataset.errors import DatapointError
from ..dataset.writer import DatasetWriter
from ..writer import ClosesOrAborts
from .errors import EmptyDocumentError, TokenizerError, TokenRangeError
from .index import bound_index, dtype_for_vocab, index_name


def as_tokens(value: Any, dtype: np.dtype, vocab_size: int, index: int) -> np.ndarray:
    """``value`` (a sequence of token ids) as a 1-D array of ``dtype``, checked: integers
    only (``TokenizerError``), at least one (``EmptyDocumentError``), each in
    ``[0, vocab_size)`` (``TokenRangeError``); ``index`` names the document in errors."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nesting
        raise TokenizerError(f"document {index}: tokens are not a flat sequence of integers: {exc}",
                             index=index) from None
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        what = f"{array.ndim}-D" if array.ndim != 1 else f"{array.dtype} values"
        raise TokenizerError(f"document {index}: tokens must be a flat sequence of integers, got "
                             f"{what} (e.g. {array.reshape(-1)[:3].tolist()!r:.60})", index=index)
    if not array.size:
        raise EmptyDocumentError(f"document {index} has no tokens (an empty document)", index=index)
    low, high = array.min(), array.max()
    if low < 0 or high >= vocab_size:
        bad = int(low if low < 0 else high)
        raise TokenRangeError(f"document {index}: token id {bad} at position "
                              f"{int(np.argmax(array == bad))} is outside [0, {vocab_size}) "
                              f"(vocabulary of {vocab_size}, stored as {dtype})", index=index)
    return array.astype(dtype, copy=False)


def _documents(docs: Any, tokens: Any, lengths: Any, first: int) -> tuple[np.ndarray, np.ndarray]:
    """The token ids of a ``write_many`` call back to back, and each document's count."""
    if docs is not None:
        if tokens is not None or lengths is not None:
            raise ValueError("give documents, or tokens with lengths, not both")
        arrays = []
        for k, doc in enumerate(docs):
            array = doc if isinstance(doc, np.ndarray) else np.asarray(doc)
            if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
                as_tokens(doc, np.dtype(np.int64), 1 << 63, first + k)  # raises, naming the document
            arrays.append(array)
        counts = np.fromiter(map(len, arrays), np.int64, len(arrays))
        return (np.concatenate(arrays) if arrays else np.empty(0, np.int64)), counts
    if tokens is None or lengths is None:
        raise ValueError("write_many takes documents, or tokens with lengths")
    flat, counts = np.asarray(tokens), np.asarray(lengths)
    if (flat.ndim != 1 or counts.ndim != 1 or (counts.size and counts.dtype.kind not in "iu")
            or (flat.size and flat.dtype.kind not in "iu")):
        raise TokenizerError(f"tokens and lengths must be 1-D arrays of integers, got {flat.dtype} "
                             f"{flat.shape} and {counts.dtype} {counts.shape}", index=first)
    if counts.size and (counts.min() < 0 or int(counts.sum()) != len(flat)):
        raise TokenizerError(f"lengths add up to {int(counts.sum())} (each >= 0); there are {len(flat)} tokens",
                             index=first)
    return flat, counts.astype(np.int64)


_CHECK_CHUNK = 1 << 18  # tokens checked and cast per step: the step's reads stay in cache


def _encoded_documents(flat: np.ndarray, counts: np.ndarray, dtype: np.dtype, vocab_size: int,
                       first: int) -> bulk.Encoded:
    """The documents as the token field's stored values (``array`` values of ``dtype``)
    back to back in one buffer, checked first as ``as_tokens`` checks each (the error of
    the first document at fault)."""
    empty = np.flatnonzero(counts == 0)
    if len(empty):
        as_tokens([], dtype, vocab_size, first + int(empty[0]))  # raises EmptyDocumentError
    narrow = np.empty(len(flat), dtype)
    for at in range(0, len(flat), _CHECK_CHUNK):
        chunk = flat[at:at + _CHECK_CHUNK]
        if chunk.min() < 0 or chunk.max() >= vocab_size:
            position = at + int(np.argmax((chunk < 0) | (chunk >= vocab_size)))
            doc = int(np.searchsorted(np.cumsum(counts), position, side="right"))
            start = int(counts[:doc].sum())
            as_tokens(flat[start:start + counts[doc]], dtype, vocab_size, first + doc)  # raises
        narrow[at:at + len(chunk)] = chunk
    raw = narrow.view(np.uint8)
    heads, rows = codecs.array_headers(dtype, counts)
    lengths = counts * dtype.itemsize
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(heads + lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    # Each document's header, then its ids: a copy of each into place (a join of a list
    # of both would copy the ids twice and make an object per document).
    at = 0
    for k, (start, head, length) in enumerate(zip(offsets.tolist(), heads.tolist(), lengths.tolist())):
        out[start:start + head] = rows[k, :head]
        out[start + head:start + head + length] = raw[at:at + length]
        at += length
    return bulk.Encoded(None, out, offsets)


class TokenWriter(ClosesOrAborts):
    """Writes tokenized documents to ``directory`` (a local directory or an ``s3://``
    prefix, as ``DatasetWriter``): ``append(tokens, **fields)`` per document.

    ``vocab_size`` bounds the token ids and picks the dtype (``uint16`` up to 65,536, else
    ``uint32``); ``field`` names the token field; ``spec`` gives any other fields
    (``{name: type string}``, see ``ffrecord.dataset``). ``length``, when known, lets the
    files be written in place; ``durable=False`` skips the fsyncs (see ``DatasetWriter``).
    Bad documents raise a ``TokenError`` naming them, having written nothing; the writer
    stays usable.
    """

    def __init__(self, directory: Any, vocab_size: int, *, field: str = "tokens",
                 spec: Mapping[str, str] | None = None, length: int | None = None,
                 storage_options: dict[str, Any] | None = None, durable: bool = True) -> None:
        self.dtype = dtype_for_vocab(vocab_size)
        self.vocab_size = int(vocab_size)
        self.field = field
        full_spec = {field: "array", **(spec or {})}
        if spec and field in spec:
            raise ValueError(f"spec names the token field {field!r} itself")
        self._lengths: list[int] = []
        self._durable = bool(durable)
        self._storage_options = storage_options
        self._writer = DatasetWriter(directory, full_spec, length=length,
                                     storage_options=storage_options, durable=durable)

    @property
    def directory(self) -> Any:
        return self._writer.directory

    @property
    def tokens(self) -> int:
        """Tokens appended so far."""
        return sum(self._lengths)

    def __len__(self) -> int:
        return len(self._writer)

    def append(self, tokens: Any, **fields: Any) -> int:
        """Appends one document; returns its index."""
        index = len(self._writer)
        array = as_tokens(tokens, self.dtype, self.vocab_size, index)
        self.append_checked(array, fields)
        return index

    def write_many(self, docs: Any = None, *, tokens: Any = None, lengths: Any = None,
                   **fields: Any) -> range:
        """Appends many documents by one write per field: ``docs`` (a list of token
        sequences), or ``tokens`` (all their ids back to back) with ``lengths`` (each
        document's count); ``fields`` gives each other field's values, one per document
        (see ``DatasetWriter.append_batch``). Returns the documents' indices. Every
        document is checked first (as ``append`` checks one): a bad one raises its
        ``TokenError`` naming it, and nothing is written.

        >>> writer.write_many([[1, 2], [3]], source=["a", "b"])               # doctest: +SKIP
        range(0, 2)
        >>> writer.write_many(tokens=np.arange(6), lengths=[4, 2], source=["c", "d"])  # doctest: +SKIP
        range(2, 4)
        """
        first = len(self._writer)
        flat, counts = _documents(docs, tokens, lengths, first)
        encoded = {self.field: _encoded_documents(flat, counts, self.dtype, self.vocab_size, first)}
        rest = {name: field for name, field in self._writer._fields.items() if name != self.field}
        if rest:
            given, n = bulk.batch_columns(fields, rest)
            if n != len(counts):
                raise DatapointError(f"{len(counts)} documents, but the other fields have {n} values each")
            encoded.update(bulk.encode(rest, self._writer._encoders, given, n, first))
        elif fields:
            raise DatapointError(f"field {next(iter(fields))!r} is not in the spec", field=next(iter(fields)))
        written = self._writer._append_encoded(encoded, len(counts))
        self._lengths.extend(counts.tolist())
        return written

    def append_checked(self, array: np.ndarray, fields: Mapping[str, Any]) -> None:
        """Appends a document already checked by ``as_tokens`` for this writer's dtype."""
        self._writer.append({self.field: array, **fields})
        self._lengths.append(len(array))

    def close(self) -> None:
        """Completes the dataset (see ``DatasetWriter.close``), then writes its token index.
        Should writing the index fail, the dataset stays complete and its readers build the
        index; the error is raised."""
        if self._writer.closed:
            return
        self._writer.close()
        starts = np.zeros(len(self._lengths) + 1, np.int64)
        np.cumsum(self._lengths, out=starts[1:])
        with DatasetReader(self._writer.url or self._writer.directory,
                           storage_options=self._storage_options) as reader:
            index = bound_index(reader, self.field, starts, self.dtype)
            index.write(str(reader.directory / index_name(self.field)), self._durable,
                        self._storage_options)

    def abort(self) -> None:
        """Discards everything written."""
        self._writer.abort()

    @property
    def closed(self) -> bool:
        return self._writer.closed

    def __repr__(self) -> str:
        return (f"TokenWriter({str(self.directory)!r}, vocab_size={self.vocab_size}, "
                f"dtype={self.dtype}) documents={len(self)}")
