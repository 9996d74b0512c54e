"""Map-style datasets of fixed-length token blocks: ``TokenBlocks`` (the documents
concatenated, then split) and ``PackedBlocks`` (whole documents packed into blocks).

Both read a batch with one ranged-read call per file (only the tokens the batch needs),
take a *list* of indices as ``ffrecord.torch.Dataset`` does (and ``__getitems__`` for
torch's DataLoader), and pickle by path and options, so they go into
``ffrecord.torch.DataLoader`` with any worker start method, shuffled and resumed like any
dataset.
"""

from __future__ import annotations

import array
import bisect
import operator
import sys
import threading
from typing import Any, Callable

import numpy as np

from .._indices import index_array
from .._buffers import BufferPool
from .._timing import timed_read
from .arguments import block_size as checked_block_size
from .arguments import token_id
from .packing import PackPlan, checked_packing, pack
from .stream import TokenStream

IGNORE_INDEX = -100  # the label of positions that predict nothing (torch's ignore_index)


def _int64s(count: int, allocate: Callable[[int], np.ndarray] | None) -> np.ndarray:
    """``count`` uninitialised ``int64`` values, in the buffer ``allocate`` gives, else in
    one this thread recycles once nothing refers to it (a fresh buffer each batch pays a
    page fault per 4 KiB when the allocator has given the last one back to the system)."""
    if allocate is None:
        pool = getattr(_pools, "pool", None)
        if pool is None:
            pool = _pools.pool = BufferPool()
        allocate = pool.take
    return allocate(count * 8)[:count * 8].view(np.int64)


_pools = threading.local()


LM_FIELDS = ("input_ids", "labels", "segment_ids", "positions")


def _lm_columns(rows: int, width: int, allocate: Callable[[int], np.ndarray] | None) -> dict[str, np.ndarray]:
    """The four ``(rows, width)`` ``int64`` arrays of a language-model batch, back to back
    in one buffer (one shared-memory tensor to send from a DataLoader worker)."""
    flat = _int64s(len(LM_FIELDS) * rows * width, allocate).reshape(len(LM_FIELDS), rows, width)
    return dict(zip(LM_FIELDS, flat))


class _Blocks:
    """What both block datasets share: indexing, batches as lists, pickling, files."""

    stream: TokenStream
    as_dict: bool

    def __len__(self) -> int:
        raise NotImplementedError

    def read(self, indices: Any, out: Callable[[int], np.ndarray] | None = None) -> np.ndarray:
        raise NotImplementedError

    def read_dict(self, indices: Any, out: Callable[[int], np.ndarray] | None = None) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _indices(self, indices: Any) -> np.ndarray:
        n = len(self)
        idx = index_array(indices, n).view(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"block {int(idx.view(np.uint64).max())} out of range for {n} blocks")
        return idx

    @timed_read
    def batch(self, indices: Any, out: Callable[[int], np.ndarray] | None = None) -> Any:
        """The blocks at ``indices`` as one value: ``read_dict`` with ``as_dict``, else
        ``read``; ``out`` gives the buffer (``uint8``, of a byte count) the tokens go to."""
        return self.read_dict(indices, out) if self.as_dict else self.read(indices, out)

    def __getitem__(self, indices: Any) -> Any:
        """A list of blocks for a list of indices (as ``ffrecord.torch.Dataset``); one
        block for one index."""
        try:
            single = operator.index(indices)
        except TypeError:
            return self._rows(self.batch(indices))
        return self._rows(self.batch([single]))[0]

    def __getitems__(self, indices: Any) -> Any:
        """The batch as one value (see ``batch``), for a DataLoader's ``collate_fn``: under
        ``ffrecord.torch`` read into the buffer its ``default_collate`` hands on as the
        batch tensor, uncopied (torch's own collate stacks the rows)."""
        collate = sys.modules.get("ffrecord.torch.collate")
        return self.batch(indices, collate.batch_buffer if collate else None)

    def _rows(self, values: Any) -> list:
        if not self.as_dict:
            return list(values)
        names = list(values)
        return [dict(zip(names, row)) for row in zip(*values.values())]

    def ffrecord_files(self) -> list[str]:
        """The FFRecord files behind the blocks (for a loader state's fingerprint)."""
        return self.stream.files

    @property
    def tokens(self) -> int:
        """Tokens in the documents (separators not counted)."""
        return self.stream.tokens

    def close(self) -> None:
        self.stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class TokenBlocks(_Blocks):
    """Block ``i`` = tokens ``[i * L, i * L + L + 1)`` of the documents concatenated (with
    ``separator``, when given, after each document), as an ``int64`` array of ``L + 1``:
    inputs ``[:-1]`` and next-token labels ``[1:]``; ``len`` = number of whole blocks.

    ``as_dict=True`` gives ``{"input_ids", "labels", "segment_ids", "positions"}`` arrays
    of ``L`` instead: segments number the documents within the block from 1 (a separator
    belongs to the document it ends), positions count from 0 at each segment's first
    token in the block, and labels are the next tokens (across document boundaries, as
    concatenation trains). ``path`` is a token dataset (see ``TokenWriter``,
    ``convert_text``): a directory, a sharded one, or an ``s3://`` prefix with
    ``storage_options``. ``separator`` is a token id the dataset's dtype holds
    (``TokenRangeError`` otherwise: 0 to 65,535 for ``uint16`` tokens).

    >>> import tempfile, os
    >>> from ffrecord.tokens import TokenWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "docs")
    >>> with TokenWriter(path, vocab_size=100) as writer:
    ...     for doc in ([1, 2, 3], [4, 5], [6, 7, 8, 9]):
    ...         _ = writer.append(doc)
    >>> blocks = TokenBlocks(path, block_size=4, separator=0)
    >>> len(blocks), blocks.read([1, 0]).tolist()
    (2, [[4, 5, 0, 6, 7], [1, 2, 3, 0, 4]])
    >>> {k: v.tolist() for k, v in blocks.read_dict([0]).items()}
    {'input_ids': [[1, 2, 3, 0]], 'labels': [[2, 3, 0, 4]], 'segment_ids': [[1, 1, 1, 1]], 'positions': [[0, 1, 2, 3]]}
    """

    def __init__(self, path: Any, block_size: int, field: str = "tokens", separator: int | None = None,
                 *, as_dict: bool = False, storage_options: dict[str, Any] | None = None) -> None:
        self.as_dict = as_dict
        self.stream = TokenStream(path, field, storage_options=storage_options)
        try:
            stream = self.stream
            self.separator = None if separator is None else token_id(separator, "separator", stream.dtype)
            self._windows = stream.windows(self.separator)
            starts = self._windows.starts
            self._starts = array.array("q", starts.tobytes())  # where each document starts in the stream
            total = int(starts[-1])
            self.block_size = checked_block_size(block_size, total - 1, f"{total} tokens make no block "
                                                 f"of {block_size} + 1 (the last label)")
            self._count = (total - 1) // self.block_size
        except BaseException:
            self.stream.close()
            raise

    def __len__(self) -> int:
        return self._count

    def _segments(self, idx: np.ndarray) -> list[tuple[int, int]]:
        """Per (block, document) piece, in block order then stream order: ``(where it
        lands in the output, stream positions it spans)`` (a separator belongs to the
        document it ends). Plain Python over ``array`` values: a batch has a few pieces per
        block, and a numpy call costs more than a loop step here."""
        width = self.block_size + 1
        starts = self._starts
        pieces = []
        for row, block in enumerate(idx.tolist()):
            start = block * self.block_size
            stop = start + width
            doc = bisect.bisect_right(starts, start) - 1
            while True:
                low, high = starts[doc], starts[doc + 1]
                begin = start if start > low else low
                end = stop if stop < high else high
                pieces.append((row * width + begin - start, end - begin))
                if high >= stop:
                    break
                doc += 1
        return pieces

    def read(self, indices: Any, out: Callable[[int], np.ndarray] | None = None) -> np.ndarray:
        """The blocks at ``indices``: an ``int64`` array of shape ``(len(indices), L + 1)``
        (in the buffer ``out(nbytes)`` returns, when given)."""
        idx = index_array(indices, self._count)  # one core call: it rejects a block past the end
        width = self.block_size + 1
        block = _int64s(len(idx) * width, out).reshape(len(idx), width)
        self._windows.read(idx, self.block_size, width, block)
        return block

    def read_dict(self, indices: Any, out: Callable[[int], np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The blocks at ``indices`` as ``input_ids``, ``labels``, ``segment_ids`` and
        ``positions``: ``int64`` arrays of shape ``(len(indices), L)``."""
        idx = self._indices(indices)
        block = self.read(idx)
        width = self.block_size + 1
        columns = _lm_columns(len(idx), self.block_size, out)
        columns["input_ids"][:] = block[:, :-1]
        columns["labels"][:] = block[:, 1:]
        dest, size = np.array(self._segments(idx), np.int64).reshape(-1, 2).T
        row = dest // width
        first_in_row = np.r_[True, row[1:] != row[:-1]] if len(row) else np.empty(0, bool)
        segment = np.cumsum(~first_in_row)
        segment -= np.repeat(segment[first_in_row], np.bincount(row, minlength=len(idx)))
        columns["segment_ids"][:] = np.repeat(segment + 1, size).reshape(len(idx), width)[:, :-1]
        positions = np.arange(len(idx) * width) - np.repeat(dest, size)
        columns["positions"][:] = positions.reshape(len(idx), width)[:, :-1]
        return columns

    def __reduce__(self) -> tuple[Any, ...]:
        return _reopen_blocks, (self.stream.path, self.block_size, self.stream.field, self.separator,
                                self.as_dict, self.stream.storage_options)

    def __repr__(self) -> str:
        return (f"TokenBlocks({self.stream.path!r}, block_size={self.block_size}, "
                f"field={self.stream.field!r}, separator={self.separator}) blocks={len(self)}")


def _reopen_blocks(path: str, block_size: int, field: str, separator: int | None, as_dict: bool,
                   storage_options: dict[str, Any] | None) -> TokenBlocks:
    return TokenBlocks(path, block_size, field, separator, as_dict=as_dict,
                       storage_options=storage_options)


class PackedBlocks(_Blocks):
    """Whole documents packed into blocks of ``L`` tokens (see ``ffrecord.tokens.packing``):
    documents longer than ``L`` are split into full blocks and a remainder, remainders are
    placed by ``method`` (``"best_fit"`` or ``"first_fit"`` decreasing) over ``window``
    documents at a time (``None``: all), deterministically for a ``seed``. A block is a
    dict of ``int64`` arrays of ``L``: ``input_ids`` (``pad_id`` after the last document),
    ``labels`` (the next token within the same document, ``-100`` at each document's end
    and on padding), ``segment_ids`` (1, 2, ... per document, 0 on padding) and
    ``positions`` (from 0 in each document piece). ``padding_fraction`` says how much of
    the blocks is padding. ``pad_id`` is a token id the dataset's dtype holds
    (``TokenRangeError`` otherwise); ``window`` is ``None`` or an integer ``>= 1``,
    ``seed`` an integer ``>= 0``.

    >>> import tempfile, os
    >>> from ffrecord.tokens import TokenWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "docs")
    >>> with TokenWriter(path, vocab_size=100) as writer:
    ...     for doc in ([1, 2, 3], [4, 5], [6, 7, 8, 9, 10]):
    ...         _ = writer.append(doc)
    >>> packed = PackedBlocks(path, block_size=4, method="first_fit")
    >>> len(packed), round(packed.padding_fraction, 3)
    (3, 0.167)
    >>> {k: v.tolist() for k, v in packed.read_dict([1]).items()}
    {'input_ids': [[1, 2, 3, 10]], 'labels': [[2, 3, -100, -100]], 'segment_ids': [[1, 1, 1, 2]], 'positions': [[0, 1, 2, 0]]}
    """

    def __init__(self, path: Any, block_size: int, field: str = "tokens", *, method: str = "best_fit",
                 window: int | None = None, seed: int = 0, pad_id: int = 0,
                 storage_options: dict[str, Any] | None = None, plan: PackPlan | None = None) -> None:
        self.method, self.window, self.seed = checked_packing(method, window, seed)
        self.as_dict = True
        self.stream = TokenStream(path, field, storage_options=storage_options)
        try:
            self.pad_id = token_id(pad_id, "pad_id", self.stream.dtype)
            self.block_size = checked_block_size(block_size, self.stream.tokens,
                                                 f"{self.stream.tokens} tokens in all")
            self.plan = plan or pack(self.stream.lengths, self.block_size, self.method, self.window,
                                     self.seed)
        except BaseException:
            self.stream.close()
            raise

    def __len__(self) -> int:
        return self.plan.blocks

    @property
    def padding_fraction(self) -> float:
        return self.plan.padding_fraction

    def read(self, indices: Any, out: Callable[[int], np.ndarray] | None = None) -> np.ndarray:
        """The ``input_ids`` of the blocks at ``indices``, ``(len(indices), L)``."""
        return self.read_dict(indices, out)["input_ids"]

    def read_dict(self, indices: Any, out: Callable[[int], np.ndarray] | None = None) -> dict[str, np.ndarray]:
        idx = self._indices(indices)
        plan, width = self.plan, self.block_size
        per = plan.ptr[idx + 1] - plan.ptr[idx]
        row = np.repeat(np.arange(len(idx)), per)
        run_start = np.cumsum(per) - per
        piece = np.repeat(plan.ptr[idx] - run_start, per) + np.arange(len(row))
        count = plan.count[piece]
        dest = row * width + plan.offset[piece]
        columns = _lm_columns(len(idx), width, out)
        flat, labels, segment, positions = (columns[name].reshape(-1) for name in LM_FIELDS)
        flat.fill(self.pad_id)
        self.stream.gather(zip(plan.doc[piece].tolist(), plan.begin[piece].tolist(), count.tolist(),
                               dest.tolist()), flat)
        segment.fill(0)
        positions.fill(0)
        filled = np.repeat(dest, count) + (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count))
        rank = piece - np.repeat(plan.ptr[idx], per)
        segment[filled] = np.repeat(rank + 1, count)
        positions[filled] = filled - np.repeat(dest, count)
        labels.fill(IGNORE_INDEX)
        same = np.zeros(len(flat), bool)
        same[:-1] = (segment[1:] == segment[:-1]) & (segment[:-1] > 0) & (positions[1:] > 0)
        same[width - 1::width] = False
        labels[same] = flat[1:][same[:-1]]
        return columns

    def __reduce__(self) -> tuple[Any, ...]:
        return _reopen_packed, (self.stream.path, self.block_size, self.stream.field, self.method,
                                self.window, self.seed, self.pad_id, self.stream.storage_options,
                                self.plan)

    def __repr__(self) -> str:
        return (f"PackedBlocks({self.stream.path!r}, block_size={self.block_size}, method={self.method!r}, "
                f"window={self.window}, seed={self.seed}) blocks={len(self)} "
                f"padding={self.padding_fraction:.2%}")


def _reopen_packed(path: str, block_size: int, field: str, method: str, window: int | None, seed: int,
                   pad_id: int, storage_options: dict[str, Any] | None, plan: PackPlan) -> PackedBlocks:
    return PackedBlocks(path, block_size, field, method=method, window=window, seed=seed, pad_id=pad_id,
                        storage_options=storage_options, plan=plan)
