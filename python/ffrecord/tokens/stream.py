"""``TokenStream``: the documents of a token dataset (plain or sharded), concatenated,
read by token ranges with one ranged-read call per file per batch.

>>> import tempfile, os
>>> from ffrecord.tokens import TokenWriter
>>> path = os.path.join(tempfile.mkdtemp(), "docs")
>>> with TokenWriter(path, vocab_size=100) as writer:  # documents 1 2 3 | 4 5 | 6 7 8 9
...     _ = [writer.append(np.arange(a, b)) for a, b in ((1, 4), (4, 6), (6, 10))]
>>> stream = TokenStream(path)
>>> out = np.zeros(6, np.int64)
>>> stream.gather([(2, 1, 3, 0), (0, 0, 2, 4)], out)  # (document, begin, count, dest)
>>> out.tolist()
[7, 8, 9, 0, 1, 2]
"""

from __future__ import annotations

import array
import bisect
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import _lib
from ..dataset import ShardedDatasetReader, open_dataset
from ..reader import FileReader
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
        offsets = np.concatenate([index.data_offsets for index in indexes]).astype(np.uint64)
        self._data_offsets = array.array("q", offsets.tobytes())
        self._offsets_array = offsets  # for the core's window reads
        self._windows_reader: FileReader | None = None
        counts = [index.documents for index in indexes]
        self._member_starts = [sum(counts[:m]) for m in range(len(counts))]
        self._member_ends = [start + count for start, count in zip(self._member_starts, counts)]

    @property
    def documents(self) -> int:
        return len(self.lengths)

    @property
    def tokens(self) -> int:
        return int(self.starts[-1])

    @property
    def files(self) -> list[str]:
        return self.dataset.files

    def gather(self, pieces: Iterable[tuple[int, int, int, int]], out: np.ndarray) -> None:
        """Reads each piece ``(document, begin, count, dest)``: tokens ``[begin, begin +
        count)`` of the document into ``out[dest:dest + count]`` (``out`` 1-D; pieces with
        ``count <= 0`` are skipped) with one ranged-read call per file involved. The loop
        is per piece, never per token: a batch's pieces are few, and numpy calls on a
        handful of values cost more than this loop."""
        itemsize = self.dtype.itemsize
        single = len(self._files) == 1
        groups: dict[int, tuple[list, list, list]] = {}
        for doc, begin, count, dest in pieces:
            if count <= 0:
                continue
            m = 0 if single else bisect.bisect_right(self._member_ends, doc)
            rows, dests, counts = groups.get(m) or groups.setdefault(m, ([], [], []))
            rows.append((doc - self._member_starts[m], self._data_offsets[doc] + begin * itemsize,
                         count * itemsize))
            dests.append(dest)
            counts.append(count)
        for m, (rows, dests, counts) in groups.items():
            tokens = self._files[m].read_ranges(np.array(rows, np.uint64))[0].view(self.dtype)
            if all(a + c == b for a, c, b in zip(dests, counts, dests[1:])):  # back to back: one copy
                out[dests[0]:dests[0] + len(tokens)] = tokens
            else:
                c = np.array(counts)
                out[np.repeat(np.array(dests) - (np.cumsum(c) - c), c) + np.arange(len(tokens))] = tokens

    def windows(self, separator: int | None = None) -> WindowReader:
        """A ``WindowReader`` of the documents concatenated, ``separator`` (when given)
        after each."""
        return WindowReader(self, separator)

    def _one_reader(self) -> FileReader:
        """One reader of the token field of every shard (document numbers global), for
        calls that take one reader."""
        if len(self._files) == 1:
            return self._files[0]
        if self._windows_reader is None:
            first = self._files[0]
            self._windows_reader = FileReader([name for file in self._files for name in file.fnames],
                                              first.check_data, storage_options=first.storage_options)
        return self._windows_reader

    def close(self) -> None:
        if self._windows_reader is not None:
            self._windows_reader.close()
        self.dataset.close()

    def __repr__(self) -> str:
        return (f"TokenStream({self.path!r}, field={self.field!r}) documents={self.documents} "
                f"tokens={self.tokens} dtype={self.dtype}")


class WindowReader:
    """Windows of a ``TokenStream`` (its documents concatenated, ``separator`` after each
    when given) as ``int64`` rows, a batch of them in one call to the core (which finds
    the documents, reads only their bytes and widens the ids into the caller's array).
    ``starts`` is where each document begins, separators counted.

    >>> import tempfile, os
    >>> from ffrecord.tokens import TokenWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "docs")
    >>> with TokenWriter(path, vocab_size=100) as writer:  # documents 1 2 3 | 4 5
    ...     _ = [writer.append(doc) for doc in ([1, 2, 3], [4, 5])]
    >>> windows = TokenStream(path).windows(separator=0)
    >>> out = np.empty((2, 3), np.int64)
    >>> windows.read(np.array([2, 0], np.uint64), stride=2, width=3, out=out)
    >>> out.tolist()  # stream 1 2 3 0 4 5 0: positions [4, 7) and [0, 3)
    [[4, 5, 0], [1, 2, 3]]
    """

    def __init__(self, stream: TokenStream, separator: int | None) -> None:
        self.stream, self.separator = stream, separator
        self._reader = stream._one_reader()
        gap = np.arange(stream.documents + 1) if separator is not None else 0
        self.starts = np.ascontiguousarray(stream.starts + gap, np.int64)
        # each .ctypes.data costs about a microsecond: the stream's addresses are taken once
        self._stream_args = (self.starts.ctypes.data, stream._offsets_array.ctypes.data, stream.documents,
                             stream.dtype.itemsize, -1 if separator is None else separator)

    @property
    def length(self) -> int:
        """Positions in the stream."""
        return int(self.starts[-1])

    def read(self, blocks: np.ndarray, stride: int, width: int, out: np.ndarray) -> None:
        """Window ``j`` = positions ``[blocks[j] * stride, blocks[j] * stride + width)`` into
        ``out``'s row ``j`` (``out``: C-contiguous ``int64``, ``len(blocks) * width`` values;
        ``blocks``: contiguous ``uint64``). ``IndexError`` names a block not wholly in the
        stream; nothing is written then."""
        if out.dtype != np.int64 or not out.flags.c_contiguous or out.size < len(blocks) * width:
            raise ValueError(f"out must be a C-contiguous int64 array of {len(blocks) * width} values")
        if blocks.dtype != np.uint64 or not blocks.flags.c_contiguous:
            raise ValueError("blocks must be a contiguous uint64 array")
        dll, handle = self._reader._live()
        status = dll.ffr_reader_read_windows(handle, *self._stream_args, blocks.ctypes.data, len(blocks),
                                             stride, width, out.ctypes.data, out.nbytes)
        if status:
            _lib.raise_status(status)
