"""``TokenStream``: the documents of a token dataset (plain or sharded), concatenated,
read by token ranges with one ranged-read call per file per batch.

>>> import tempfile, os
>>> from ffrecord.tokens import TokenWriter
>>> path = os.path.join(tempfile.mkdtemp(), "docs")
>>> with TokenWriter(path, vocab_size=100) as writer:
...     for doc in ([1, 2, 3], [4, 5], [6, 7, 8, 9]):
...         _ = writer.append(doc)
>>> stream = TokenStream(path)
>>> out = np.zeros(6, np.int64)
>>> stream.gather(np.array([2, 0]), np.array([1, 0]), np.array([3, 2]), np.array([0, 4]), out)
>>> out.tolist()
[7, 8, 9, 0, 1, 2]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset import ShardedDatasetReader, open_dataset
from .errors import TokenIndexError
from .index import load_index


class TokenStream:
    """The token field ``field`` of the dataset at ``path`` (a directory, a sharded
    dataset's directory, or an ``s3://`` prefix with ``storage_options``): ``starts``
    (where each document begins in the concatenation), ``lengths``, ``dtype``, and
    ``gather`` to read token ranges of documents into an array."""

    def __init__(self, path: Any, field: str = "tokens", *,
                 storage_options: dict[str, Any] | None = None) -> None:
        self.path, self.field, self.storage_options = str(path), field, storage_options
        self.dataset = open_dataset(path, storage_options=storage_options)
        try:
            members = (self.dataset.members if isinstance(self.dataset, ShardedDatasetReader)
                       else [self.dataset])
            indexes = [load_index(member, field, storage_options=storage_options) for member in members]
            dtypes = {index.dtype for index in indexes}
            if len(dtypes) > 1:
                raise TokenIndexError(f"{path}: shards store tokens as {' and '.join(map(str, dtypes))}")
        except BaseException:
            self.dataset.close()
            raise
        self.dtype = indexes[0].dtype
        self._files = [member.field_reader(field) for member in members]
        self.lengths = np.concatenate([index.lengths for index in indexes])
        self.starts = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(self.lengths, out=self.starts[1:])
        self._data_offsets = np.concatenate([index.data_offsets for index in indexes]).astype(np.uint64)
        counts = np.array([index.documents for index in indexes], np.int64)
        self._member_ends = np.cumsum(counts)
        self._member_starts = self._member_ends - counts

    @property
    def documents(self) -> int:
        return len(self.lengths)

    @property
    def tokens(self) -> int:
        return int(self.starts[-1])

    @property
    def files(self) -> list[str]:
        return self.dataset.files

    def gather(self, docs: np.ndarray, begins: np.ndarray, counts: np.ndarray, dest: np.ndarray,
               out: np.ndarray) -> None:
        """Reads tokens ``[begins[k], begins[k] + counts[k])`` of document ``docs[k]`` into
        ``out[dest[k]:dest[k] + counts[k]]`` for every ``k`` (``out`` 1-D; empty ranges
        allowed): one ranged-read call per file involved, no loop per token or range."""
        keep = counts > 0
        if not keep.all():
            docs, begins, counts, dest = docs[keep], begins[keep], counts[keep], dest[keep]
        if not len(docs):
            return
        itemsize = self.dtype.itemsize
        if len(self._files) == 1:
            groups = [(0, slice(None))]
        else:
            member = np.searchsorted(self._member_ends, docs, side="right")
            groups = [(int(m), member == m) for m in np.unique(member)]
        for m, chosen in groups:
            d, b, c, at = docs[chosen], begins[chosen], counts[chosen], dest[chosen]
            triples = np.empty((len(d), 3), np.uint64)
            triples[:, 0] = d - self._member_starts[m]
            triples[:, 1] = self._data_offsets[d] + (b * itemsize).astype(np.uint64)
            triples[:, 2] = c * itemsize
            tokens = self._files[m].read_ranges(triples)[0].view(self.dtype)
            if len(at) == 1 or (at[1:] == at[:-1] + c[:-1]).all():  # back to back: one copy
                out[at[0]:at[0] + len(tokens)] = tokens
            else:
                first = np.cumsum(c) - c
                out[np.repeat(at - first, c) + np.arange(len(tokens))] = tokens

    def close(self) -> None:
        self.dataset.close()

    def __repr__(self) -> str:
        return (f"TokenStream({self.path!r}, field={self.field!r}) documents={self.documents} "
                f"tokens={self.tokens} dtype={self.dtype}")
