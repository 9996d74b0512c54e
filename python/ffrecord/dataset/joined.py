"""One read for a batch spread over many datasets (a mixture's members, a dataset's shards).

Read member by member, a batch of a mixture of a thousand members costs a read per member
it touches: dozens of library calls and of passes through the members' Python layers for
64 datapoints. Here the batch is first resolved to its *leaves* (the ``DatasetReader`` of
each shard holding some of it, each kept open meanwhile: see ``Readable._leaves``); then
each plain field is read from all of them with one ``ffr_readers_read_batch`` call (pairs
of a field file and a sample index, ordered by file) and decoded once. Fields that cannot
be read so (a sequence's element ranges, a column's blocks, a field held in memory, leaves
that decode it differently) are read leaf by leaf, as before.

Where each member is a single leaf, even resolving the batch member by member costs too
much (a mixture of a thousand members: a batch of 64 touches 60 of them): ``LeafHandles``
keeps, per member, the native handle of each field's file, so that a batch's pairs come
from array lookups, with no Python per member or datapoint (``read_by_handles``). The
handles are taken from the member's open files and not held: the table of open files may
close them meanwhile, and a read that meets a closed one (the library refuses it, nothing
is read) drops what was kept and reads that batch through the leaves again.

Remote leaves are not joined: their reads plan requests per file, which their own path does.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any, Callable

import numpy as np

from .. import _lib
from .._buffers import address
from ..errors import E_CLOSED, E_SHORTBUF
from .errors import CodecError, CorruptDatasetError

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
    from .reader import _torch_worker_decoders, parse_mask

    leaves = [leaf for leaf, _, _ in parts]
    first = leaves[0]
    if not all(_local_leaf(leaf) and leaf._fields == first._fields for leaf in leaves):
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
            lives = [leaf._readers[name]._live() for leaf in leaves]
            handles = np.repeat(np.array([handle for _, handle in lives], np.int64), counts)
            read = _read_pairs(lives[0][0], handles, local, sizes, name)
            if read is None:  # closed meanwhile: read leaf by leaf
                return None
            buf, starts, ends = read
            columns.append(first._decode_values(field, buf, starts, ends, local, decode))
    except CodecError:
        return None
    out: list[Any] = [None] * n
    names = list(selection)
    positions = np.concatenate([where for _, where, _ in parts]).tolist()
    for pos, values in zip(positions, zip(*columns) if columns else [()] * len(positions)):
        out[pos] = dict(zip(names, values))
    return out


def _local_leaf(leaf: Any) -> bool:
    """True for a local ``DatasetReader`` that reads a batch the way this module reads its
    fields (a subclass with a read of its own is read by it)."""
    from .reader import DatasetReader

    return type(leaf)._read is DatasetReader._read and not leaf._remote


def _read_pairs(dll: Any, handles: np.ndarray, local: np.ndarray, sizes: dict[str, int],
                name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Sample ``local[k]`` of reader ``handles[k]`` for every k in one call (see
    ``_read_sized``): the samples back to back and each one's start and end among them;
    None when a reader was closed meanwhile."""
    read = _read_sized(dll, handles, local, sizes, name)
    if read is None:
        return None
    buf, sizes = read
    ends = np.cumsum(sizes, dtype=np.int64)
    return buf, ends - sizes.astype(np.int64), ends


def _read_sized(dll: Any, handles: np.ndarray, local: np.ndarray, per_sample: dict[str, int],
                name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Sample ``local[k]`` of reader ``handles[k]`` for every k, back to back into a new
    buffer, in one call (two when the bytes per sample of the last such read of ``name`` (a
    field, or several joined by NULs), which ``per_sample`` keeps, and a quarter more, are
    too few: the first then sizes them): the buffer, cut to the samples, and their sizes;
    None when a reader was closed meanwhile."""
    handles = np.ascontiguousarray(handles, np.int64)
    idx = np.ascontiguousarray(local, np.uint64)
    sizes = np.empty(len(idx), np.uint64)
    buf = np.empty(per_sample.get(name, 0) * len(idx) * 5 // 4, np.uint8)
    for _ in range(2):  # a short buffer fills every size: the second call has room
        status = dll.ffr_readers_read_batch(address(handles), address(idx), len(idx),
                                            address(buf), buf.nbytes, address(sizes))
        if status != E_SHORTBUF:
            break
        buf = np.empty(int(sizes.sum()), np.uint8)
    if status == E_CLOSED:
        return None
    if status:
        _lib.raise_status(status)
    total = int(sizes.sum())
    per_sample[name] = -(-total // max(1, len(idx)))
    return buf[:total], sizes


class LeafHandles:
    """Per member of a routed dataset (``Routed``) that is one local leaf decoding as the
    first such does: the handle of each plain field's file (see the module). Reset after a
    fork (the library and its handles are new) and when a kept handle was closed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: Any = None
        self.generation = 0  # counts resets: what a thread's last batch found is then stale
        self.last = threading.local()
        self._reset(0)

    def _reset(self, members: int) -> None:
        self.generation += 1
        self.reference: Any = None  # the first leaf: its fields and decoders decode every batch
        self.known = np.zeros(members, np.int8)  # 1: a leaf whose handles are kept, -1: not one
        self.handles: dict[str, np.ndarray] = {}

    def of(self, routed: Any, member: np.ndarray) -> tuple[Any, dict[str, np.ndarray]] | None:
        """``(reference leaf, {field: the handle for each datapoint})`` for a batch whose
        datapoints lie in members ``member``, or None when one of them is not a leaf."""
        lib = _lib.current()
        with self._lock:
            if lib is not self._lib or len(self.known) != len(routed.members):
                self._lib = lib
                self._reset(len(routed.members))
            known = self.known[member]
            if not known.all():
                for m in np.unique(member[known == 0]).tolist():
                    self._learn(routed.members[m], m)
                known = self.known[member]
            if (known != 1).any():
                return None
            return self.reference, {name: handles[member] for name, handles in self.handles.items()}

    def forget(self) -> None:
        """Drops every kept handle (one was closed): they are learnt again as read."""
        with self._lock:
            self._reset(len(self.known))

    def _learn(self, member: Any, m: int) -> None:
        single = getattr(member, "_single_leaf", None)
        with ExitStack() as held:
            leaf = None if single is None else single(held)
            if leaf is None or not self._fits(leaf):
                self.known[m] = -1
                return
            for name, handles in self.handles.items():
                handles[m] = leaf._readers[name]._live()[1]
        self.known[m] = 1

    def _fits(self, leaf: Any) -> bool:
        if not _local_leaf(leaf) or leaf._held:
            return False
        reference = self.reference
        if reference is None:
            self.reference = leaf
            self.handles = {name: np.zeros(len(self.known), np.int64)
                            for name, field in leaf._fields.items() if field.block is None}
            return True
        return leaf._fields == reference._fields and all(
            leaf._decoders[name] is reference._decoders[name] for name in self.handles)


def _handles_of(routed: Any, idx: np.ndarray) -> tuple[LeafHandles, Any, dict[str, np.ndarray], np.ndarray] | None:
    """``(table, reference leaf, {field: each datapoint's handle}, indices in the leaves)``
    for the datapoints ``idx`` of ``routed``, or None when a member is not a leaf."""
    table = routed.__dict__.get("_leaf_handles")
    if table is None:
        table = routed.__dict__.setdefault("_leaf_handles", LeafHandles())
    # a loader worker's columns ask for each field of the same indices in turn: routed once
    memo, key = getattr(table.last, "found", None), idx.tobytes()
    if memo is not None and memo[0] is idx and memo[1] == key and memo[2] == table.generation:
        return memo[3]
    member, local = routed._route(idx)
    found = table.of(routed, member)
    found = None if found is None else (table, *found, local)
    table.last.found = (idx, key, table.generation, found)
    return found


def fields_batch_by_handles(routed: Any, names: list[str], idx: np.ndarray,
                            allocate: Callable[[int], np.ndarray] | None,
                            sizes: dict[str, int]) -> dict[str, tuple[np.ndarray, np.ndarray, int]] | None:
    """The stored values of fields ``names`` at ``idx`` of ``routed``, all read by one call
    through the kept handles (the pairs of every field one after the other: a call's setup,
    the members' locks among it, is paid once): ``{name: (buffer, sizes, their one size or
    -1)}``, each as ``DatasetReader._field_batch`` gives it, or None when they cannot be read
    so. With ``allocate``, each field's values are copied into the buffer it gives for their
    size (a loader's slot, asked once a field: its room is not spent on a guess; a copy costs
    less than a second pass over the batch). ``sizes`` as for ``read_joined``."""
    found = _handles_of(routed, idx)
    if found is None or any(name not in found[2] for name in names):
        return None
    table, _, handles, local = found
    pairs = len(local)
    joined = handles[names[0]] if len(names) == 1 else np.concatenate([handles[name] for name in names])
    read = _read_sized(table._lib.dll, joined, np.tile(local, len(names)), sizes, "\0".join(names))
    if read is None:
        table.forget()
        return None
    buf, each = read
    each = each.reshape(len(names), pairs)  # a row of sizes per field
    ends = np.cumsum(each.sum(axis=1, dtype=np.int64)).tolist()
    out = {}
    for name, counts, start, end in zip(names, each, [0, *ends], ends):
        values = buf[start:end]
        if allocate is not None:
            into = allocate(len(values))[:len(values)]
            into[:] = values
            values = into
        common = int(counts[0]) if pairs and (counts == counts[0]).all() else -1
        out[name] = values, counts, common
    return out


def read_by_handles(routed: Any, idx: np.ndarray, mask: Any, worker: bool,
                    sizes: dict[str, int]) -> list[dict[str, Any]] | None:
    """The datapoints ``idx`` of ``routed`` read by one call per field through the handles
    ``LeafHandles`` keeps, or None when a member is not a leaf, the mask selects a column or
    a range of a sequence, a handle was closed, or a value fails to decode (the caller then
    reads through the leaves, which report a failure with the leaf's own name and index).
    ``worker`` and ``sizes`` as for ``read_joined``."""
    from .reader import WHOLE, _torch_worker_decoders, parse_mask

    found = _handles_of(routed, idx)
    if found is None:
        return None
    table, reference, handles, local = found
    decoders = (_torch_worker_decoders(reference._decoders) if worker else None) or reference._decoders
    selection = parse_mask(mask, reference._fields)
    if any(name not in handles or (chosen is not WHOLE) for name, chosen in selection.items()):
        return None
    dll = table._lib.dll
    columns: list[list[Any]] = []
    try:
        for name, chosen in selection.items():
            field = reference._fields[name]
            read = _read_pairs(dll, handles[name], local, sizes, name)
            if read is None:
                table.forget()
                return None
            buf, starts, ends = read
            columns.append(reference._sequences_from_samples(field, chosen, buf, starts, ends, local)
                           if field.sequence else reference._decode_values(field, buf, starts, ends, local, decoders[name]))
    except (CodecError, CorruptDatasetError):
        return None
    names = list(selection)
    return [dict(zip(names, values)) for values in zip(*columns)] if columns else [{} for _ in range(len(idx))]
