"""Structured datasets in a DataLoader: ``StructuredDataset`` wraps a ``DatasetReader``,
``ShardedDatasetReader`` or ``Mixture`` with a mask and a per-datapoint transform.

Each batch is one ``read(indices, mask)`` of the dataset (one native call per selected
field), then the transform per datapoint, then the DataLoader's ``collate_fn``. In an
ffrecord DataLoader worker with the default collate and no transform, a ``DatasetReader``'s
``bytes`` fields are read straight into the shared memory the batch travels in, one column
per field: no per-datapoint object in the worker, no copy in either process; the main
process gets the list of read-only ``memoryview`` values the default collate always gave. Readers pickle
by path and reopen themselves after ``fork()``, so any worker start method works, and
``ffrecord.torch.DataLoader``'s ``set_step`` / ``state_dict`` resume exactly: a dataset's
indices, a mixture's included, mean the same datapoints in every process and run.

>>> import tempfile, os
>>> from ffrecord.dataset import DatasetReader, DatasetWriter
>>> from ffrecord.torch import DataLoader
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"label": "int", "pixels": "array"}) as writer:
...     for k in range(6):
...         _ = writer.append({"label": k, "pixels": np.full(2, k, np.float32)})
>>> data = StructuredDataset(DatasetReader(path), mask=["label"], transform=lambda d: d["label"] * 10)
>>> [batch.tolist() for batch in DataLoader(data, batch_size=4)]
[[0, 10, 20, 30], [40, 50]]
"""

from __future__ import annotations

import inspect
import itertools
import operator
from typing import Any, Callable

import numpy as np
import torch.utils.data

import ffrecord.order
from ffrecord._buffers import offsets
from ffrecord._timing import timed_read
from ffrecord.dataset import codecs
from ffrecord.dataset.reader import DatasetReader, Routed, parse_mask
from ffrecord.order import datapoint_seeds

from . import _stats, _transport
from .collate import Collated, default_collate
from .sampler import prefetch_ahead


class StructuredDataset(torch.utils.data.Dataset):
    """A structured dataset as a torch map-style dataset that reads a batch per call.

    ``mask`` is what ``read`` takes (fields and element ranges to read; all by default);
    ``transform``, when given, turns each datapoint dict into a sample (it must be picklable
    for workers started with ``spawn``/``forkserver``). A transform that takes two
    positional arguments, ``transform(datapoint, seed)``, (or any, with ``seeded=True``)
    receives the datapoint's seed (``ffrecord.order.datapoint_seed``: a function of the
    loader's seed, the epoch and the datapoint's position in the canonical order, the same
    on any topology and after any resume): use ``np.random.default_rng(seed)`` for random
    augmentation. A transform with a ``transform_batch(datapoints, indices)`` method (e.g.
    ``ffrecord.vision``'s) gets the whole batch at once instead, the seeds with the indices.
    Outside an ffrecord DataLoader, the seed is that of epoch 0, seed 0, at the
    position the index names.

    >>> from ffrecord.dataset import Mixture
    >>> data = StructuredDataset(Mixture([[{"x": 1}] * 3], weights=[1]), transform=lambda d, seed: seed)
    >>> data.seeded, data[[0, 1]] == batch_seeds([0, 1])
    (True, True)
    """

    def __init__(self, source: Any, mask: Any = None,
                 transform: Callable[..., Any] | None = None, *, seeded: bool | None = None) -> None:
        self.source = source
        self.mask = mask
        self.transform = transform
        self.seeded = _takes_seed(transform) if seeded is None else bool(seeded)
        source.read([], mask)  # a bad mask fails here, not in a worker
        self._columns = _column_plan(source, mask) if transform is None else None

    @property
    def reads_in_columns(self) -> bool:
        """True when a loader whose collate is the default reads batches of it field by
        field (``bytes`` fields into one buffer each) rather than datapoint by datapoint."""
        return self._columns is not None

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, indices: Any) -> Any:
        """The samples at a list of indices; a single index gives a single sample."""
        try:
            single = operator.index(indices)
        except TypeError:
            return self.__getitems__(indices)
        return self.__getitems__([single])[0]

    def __getitems__(self, indices: Any) -> list | Collated:
        if type(indices) is _transport.TaskGroup:  # a loader worker's task of several batches
            if self._task_in_columns():
                return self._read_task_columns(indices)
            return _transport.each_batch(self.__getitems__, indices)
        self._prefetch_ahead(indices)
        if self._columns is not None and _transport.columns_welcome(self):
            return self._read_columns(indices)
        datapoints = self._read(indices)
        _stats.publish()
        if self.transform is None:
            return datapoints
        transform_batch = getattr(self.transform, "transform_batch", None)
        if transform_batch is not None:  # e.g. ffrecord.vision's: a batch at a time, in threads
            return transform_batch(datapoints, indices)
        if self.seeded:
            return [self.transform(d, seed) for d, seed in zip(datapoints, batch_seeds(indices))]
        return [self.transform(d) for d in datapoints]

    @timed_read
    def _read(self, indices: Any) -> list:
        """The datapoints at ``indices``, as the source reads and decodes them."""
        return self.source.read(np.asarray(indices, np.int64), self.mask)

    @timed_read
    def _read_columns(self, indices: Any) -> Collated:
        """The batch collated field by field, in a loader worker: each ``bytes`` field read
        by one call into the slot the batch travels in, handed on as a ``BytesColumn`` (no
        per-datapoint object, no copy); the other fields read and collated as usual."""
        names, raw, numbers, rest = self._columns
        idx = self.source._indices(indices)  # the reader's IndexError for a bad index
        others = self.source.read(idx, rest) if rest else []
        # each column's values read into the slot (a field the source holds in memory is
        # copied from there), all fields by one call where the source can
        read = self.source._field_batches([name for name in names if name in raw or name in numbers], idx,
                                          _transport.slot_bytes)
        batch = Collated()
        for name in names:
            if name in raw:
                buffer, sizes, common = read[name]
                batch[name] = (_transport.BytesColumn(buffer, offsets(sizes)) if common < 0
                               else _transport.BytesColumn.equal_sized(buffer, len(idx), common))
            elif name in numbers:
                batch[name] = self._number_column(name, numbers[name], idx, read[name])
            else:
                batch[name] = default_collate([d[name] for d in others])
        _stats.publish()
        return batch

    def _prefetch_ahead(self, indices: Any) -> None:
        """The hint of the batch the loader reads after the next ones, to a source that
        prefetches."""
        if hasattr(self.source, "prefetch"):
            prefetch_ahead(self, indices, self.source.prefetch, self.mask)

    def _task_in_columns(self) -> bool:
        """True in a loader worker that reads batches into slots when every selected field
        is a column (``bytes``, ``int``, ``float``): a task is then read all at once."""
        if self._columns is None or not _transport.columns_welcome(self):
            return False
        _, _, _, rest = self._columns
        return not rest

    @timed_read
    def _read_task_columns(self, task: _transport.TaskGroup) -> _transport.TaskGroup:
        """A task's batches, every field a column (``bytes``, ``int``, ``float``), read by
        one call per field for all of them (a call's cost is the task's, as its messages
        are), then cut into the batches; read batch by batch instead when that fails, so
        that a bad index or a damaged sample is raised at its own batch."""
        for batch in task:
            self._prefetch_ahead(batch)
        try:
            whole = self._read_columns(list(itertools.chain.from_iterable(task)))
        except Exception:
            return _transport.each_batch(self._read_columns, task)
        bounds = np.cumsum([0] + [len(batch) for batch in task]).tolist()
        return _transport.TaskGroup(Collated((name, _rows(value, a, b)) for name, value in whole.items())
                                    for a, b in zip(bounds, bounds[1:]))

    def _number_column(self, name: str, dtype: np.dtype, idx: np.ndarray,
                       read: tuple[np.ndarray, np.ndarray, int]) -> torch.Tensor:
        """The tensor ``default_collate`` makes of an ``int`` or ``float`` field's values
        (int64 or float64): their 8 bytes each as ``read`` into the slot, used as they lie;
        a value of another size goes the reader's way (its decode error)."""
        buffer, _, common = read
        if len(idx) and common == 8:
            return torch.from_numpy(buffer.view(dtype))
        return default_collate([d[name] for d in self.source.read(idx, [name])])

    def _batches_are_reads(self) -> bool:
        """True when a batch is only read (no transform), by this class's ``__getitems__``:
        a loader worker then fetches several per task (``_transport.TaskGroup``)."""
        return self.transform is None and type(self).__getitems__ is StructuredDataset.__getitems__

    def ffrecord_files(self) -> list[str]:
        """The FFRecord files behind the dataset (for the loader's state fingerprint)."""
        return self.source.files

    def __repr__(self) -> str:
        return f"StructuredDataset({self.source!r}, mask={self.mask!r})"


def _rows(column: _transport.BytesColumn | torch.Tensor, a: int, b: int) -> _transport.BytesColumn | torch.Tensor:
    """Rows ``[a, b)`` of a column ``_read_columns`` made, sharing its memory."""
    if type(column) is not _transport.BytesColumn:
        return column[a:b]
    if column.offsets is None:
        size = column.size
        return _transport.BytesColumn.equal_sized(column.buffer[a * size:b * size], b - a, size)
    start = column.offsets[a]
    return _transport.BytesColumn(column.buffer[start:column.offsets[b]], column.offsets[a:b + 1] - start)


def batch_seeds(indices: Any) -> list[int]:
    """The seed of each datapoint of a batch of indices an ffrecord DataLoader handed to a
    dataset (e.g. in ``Dataset.process(indices, data)``); for indices of another origin, the
    seeds of epoch 0 under seed 0 with each index as its position.

    >>> batch_seeds([3]) == [ffrecord.order.datapoint_seed(0, 0, 3)]
    True
    """
    seeds = getattr(indices, "seeds", None)
    return seeds if seeds is not None else datapoint_seeds(0, 0, np.asarray(indices, np.int64)).tolist()


def _column_plan(source: Any, mask: Any) -> tuple[list[str], set[str], dict[str, np.dtype], list[str]] | None:
    """``(fields in batch order, bytes fields read as columns, int and float fields read as
    columns (with their values' dtype), the others)`` when a loader worker may read batches
    of ``source`` column by column (a ``DatasetReader``, or a sharded dataset or mixture
    whose members all decode with the built-in codecs, whose mask takes whole fields, some
    of them plain ``bytes`` decoded by the built-in codec); else None."""
    if mask is not None and not isinstance(mask, (list, tuple, str)):
        return None
    if type(source) is not DatasetReader and not (isinstance(source, Routed) and source._readable
                                                  and source.builtin_decoding()):
        return None
    if getattr(source, "decoders", None) and "bytes" in source.decoders:
        return None
    names = list(parse_mask(mask, source.fields))
    raw = {name for name in names if source.fields[name].spec == "bytes"}
    numbers = {name: dtype for name in names if (dtype := _fixed_width(source, source.fields[name])) is not None}
    return (names, raw, numbers, [name for name in names if name not in raw and name not in numbers]) if raw else None


def _fixed_width(source: DatasetReader | Routed, field: Any) -> np.dtype | None:
    """The dtype of a field's values when the built-in codec decodes them as one fixed-width
    number (``int``, ``float``: what default_collate makes int64 and float64 tensors of)."""
    if field.spec not in codecs.BUILTIN or (getattr(source, "decoders", None) and field.spec in source.decoders):
        return None
    width = codecs.FIXED_WIDTH.get(codecs.BUILTIN[field.spec].decode)
    return None if width is None or not np.dtype(width).isnative else np.dtype(width)


def _takes_seed(transform: Callable[..., Any] | None) -> bool:
    """True when ``transform`` takes a second positional argument (the datapoint's seed)."""
    if transform is None:
        return False
    try:
        parameters = inspect.signature(transform).parameters.values()
    except (TypeError, ValueError):  # some builtins have no signature: one argument, as before
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 and all(p.default is p.empty for p in positional[:2])
