"""One read for a batch spread over many datasets (a mixture's members, a dataset's shards).

Read member by member, a batch of a mixture of a thousand members costs a read per member
it touches: dozens of library calls and of passes through the members' Python layers for
64 datapoints. Here the batch is first resolved to its *leaves* (the ``DatasetReader`` of
each shard holding some of it, each kept open meanwhile: see ``Readable._leaves``); then
each plain field is read from all of them with one ``ffr_readers_read_batch`` call (pairs
of a field file and a sample index, ordered by file) and decoded once. Fields that cannot
be read so (a sequence's element ranges, a column's blocks, a field held in memory, leaves
that decode it differently) are read leaf by leaf, as before.

Remote leaves are not joined: their reads plan requests per file, which their own path does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _lib
from ..errors import E_SHORTBUF
from .errors import CodecError

# (leaf DatasetReader, its positions in the batch (an index array; a slice within a leaf's
# own answer, which its parent turns into an array), indices in the leaf)
Part = tuple[Any, Any, np.ndarray]


def read_joined(parts: list[Part], n: int, mask: Any, worker: bool, sizes: dict[str, int]) -> list[dict[str, Any]] | None:
    """The ``n`` datapoints held by ``parts`` as dicts in batch order, or ``None`` when the
    leaves are not all local ``DatasetReader``s of one spec (the caller reads member by
    member; so it does on a decoding failure, which it then reports with the leaf's own
    name and index). ``worker``: decoded as ``__getitems__`` decodes in a torch worker.
    ``sizes``: each field's bytes per sample in the last batch, kept by the caller (the
    next batch's buffer is sized from it, so that one call usually reads it)."""
    from .reader import DatasetReader, _torch_worker_decoders, parse_mask

    leaves = [leaf for leaf, _, _ in parts]
    first = leaves[0]
    if not all(type(leaf)._read is DatasetReader._read and not leaf._remote and leaf._fields == first._fields
               for leaf in leaves):
        return None
    decoders = [(_torch_worker_decoders(leaf._decoders) if worker else None) or leaf._decoders
                for leaf in leaves]
    selection = parse_mask(mask, first._fields)
    columns: list[list[Any]] = []
    try:
        for name, chosen in selection.items():
            field = first._fields[name]
            decode = decoders[0][name]
            if (field.sequence or field.block is not None or any(name in leaf._held for leaf in leaves)
                    or any(d[name] is not decode for d in decoders)):
                columns.append([value for (leaf, _, part), d in zip(parts, decoders)
                                for value in leaf._read_field(leaf._fields[name], chosen, part, None, d[name])])
                continue
            counts = [len(part) for _, _, part in parts]
            local = np.concatenate([part for _, _, part in parts])
            buf, starts, ends = _read_pairs([leaf._readers[name] for leaf in leaves], counts, local,
                                            sizes.get(name, 0))
            sizes[name] = -(-len(buf) // max(1, len(local)))
            columns.append(first._decode_values(field, buf, starts, ends, local, decode))
    except CodecError:
        return None
    out: list[Any] = [None] * n
    names = list(selection)
    positions = np.concatenate([where for _, where, _ in parts]).tolist()
    for pos, values in zip(positions, zip(*columns) if columns else [()] * len(positions)):
        out[pos] = dict(zip(names, values))
    return out


def _read_pairs(readers: list[Any], counts: list[int], local: np.ndarray,
                per_sample: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Samples ``local`` of the readers (``counts[j]`` of them from ``readers[j]``, in that
    order) in one call (two when ``per_sample`` bytes each, and a quarter more, are too
    few): the samples back to back and each one's start and end among them."""
    lives = [reader._live() for reader in readers]
    dll = lives[0][0]
    handles = np.repeat(np.array([handle for _, handle in lives], np.int64), counts)
    idx = np.ascontiguousarray(local, np.uint64)
    sizes = np.empty(len(idx), np.uint64)
    buf = np.empty(per_sample * len(idx) * 5 // 4, np.uint8)
    for _ in range(2):  # a short buffer fills every size: the second call has room
        status = dll.ffr_readers_read_batch(handles.ctypes.data, idx.ctypes.data, len(idx),
                                            buf.ctypes.data, buf.nbytes, sizes.ctypes.data)
        if status != E_SHORTBUF:
            break
        buf = np.empty(int(sizes.sum()), np.uint8)
    if status:
        _lib.raise_status(status)
    buf = buf[:int(sizes.sum())]
    ends = np.cumsum(sizes, dtype=np.int64)
    return buf, ends - sizes.astype(np.int64), ends

