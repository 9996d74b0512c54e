"""Map-style datasets that read a whole batch of ffrecord samples with one reader call.

Unlike ``torch.utils.data.Dataset``, whose ``__getitem__`` takes one index, these take a
*list* of indices and return a list of samples. They also implement torch's batched-fetch
protocol (``__getitems__``), so even the stock ``torch.utils.data.DataLoader`` fetches a
batch with a single read.

Three ways to subclass ``Dataset`` (the first and last from the original FFRecord README):

1. override ``process(indices, data)``, which turns the raw samples of a batch into samples::

       class Pickled(Dataset):
           def process(self, indices, data):
               return [pickle.loads(b) for b in data]

2. override ``process_batch(indices, buffer, offsets)`` to decode the whole batch at once
   from the one buffer it was read into; an array returned from it (first axis: the batch)
   becomes the batch tensor without a copy::

       class Images(Dataset):
           def process_batch(self, indices, buffer, offsets):
               return buffer.view(np.float32).reshape(len(indices), 3, 32, 32)

3. own the reader and define ``__len__`` and ``__getitem__(indices)`` yourself::

       class Pickled(Dataset):
           def __init__(self, fnames):
               self.reader = FileReader(fnames)
           def __len__(self):
               return self.reader.n
           def __getitem__(self, indices):
               return [pickle.loads(b) for b in self.reader.read(indices)]
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch.utils.data

from ffrecord import FileReader
from ffrecord._remote import pinned
from ffrecord.reader import reopen, split_batch

from . import _stats, _transport, collate
from .sampler import prefetch_ahead


def _scalar_index(index: Any) -> int | None:
    """The int an index object stands for, or None when it is a batch of indices."""
    try:
        return operator.index(index)
    except TypeError:
        return None


def _index_array(indices: Any) -> np.ndarray:
    """A batch of indices as a 1-D int64 array; floats, bools and nested lists are refused."""
    arr = np.asarray(indices)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"indices must be a 1-D sequence of integers, got {indices!r:.80}")
    return arr.astype(np.int64, copy=False)


def fetch_batch(dataset: Any, indices: list[int]) -> list:
    """Samples ``indices`` of any map-style dataset: one batched call when it supports one.

    >>> fetch_batch(["a", "b", "c"], [2, 0])
    ['c', 'a']
    """
    getitems = getattr(dataset, "__getitems__", None)
    if getitems is not None:
        return getitems(indices)
    return [dataset[i] for i in indices]


class ReaderRegistry:
    """Finds every ``FileReader`` an object holds: ``ffreaders()``, as in the reference.

    Readers are found in the object's attributes, in attributes that are themselves
    registries or torch datasets (walked in turn), in lists, tuples and dicts of those, and
    in what structured datasets list (``DatasetReader.file_readers()``); each reader once.
    Attributes behave as plain attributes: nothing is registered when set.

    >>> import os, tempfile
    >>> from ffrecord import FileWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "r.ffr")
    >>> with FileWriter(path, 1) as w:
    ...     w.write_one(b"x")
    >>> class Pair(ReaderRegistry):
    ...     def __init__(self):
    ...         self.images = FileReader(path)
    ...         self.parts = [FileReader(path)]
    >>> [r.n for r in Pair().ffreaders()]
    [1, 1]
    """

    def ffreaders(self) -> list[FileReader]:
        """Every ``FileReader`` held by this object and the objects it holds."""
        return readers_of(self)


def readers_of(obj: Any) -> list[FileReader]:
    """Every ``FileReader`` that ``obj`` (a reader, a dataset, anything) holds, as
    ``ReaderRegistry.ffreaders`` finds them.

    >>> readers_of([1, 2, 3])
    []
    """
    found: dict[int, FileReader] = {}
    _collect_readers(obj, found, set())
    return list(found.values())


_PLAIN = (int, float, str, bytes, np.generic)


def _collect_readers(obj: Any, found: dict[int, FileReader], seen: set[int]) -> None:
    if isinstance(obj, FileReader):
        found.setdefault(id(obj), obj)
        return
    if isinstance(obj, (list, tuple, dict)):
        members: Sequence[Any] = list(obj.values()) if isinstance(obj, dict) else obj
        if members and isinstance(members[0], _PLAIN):  # indices, names: not walked one by one
            return
    elif isinstance(obj, (ReaderRegistry, torch.utils.data.Dataset)) and id(obj) not in seen:
        seen.add(id(obj))
        if isinstance(obj, Dataset) and "_reader_args" in getattr(obj, "__dict__", {}):
            _ = obj.reader  # a reader this class opens lazily (after a pickle): open it now
        members = list(getattr(obj, "__dict__", {}).values())
    elif callable(getattr(obj, "file_readers", None)):  # a structured dataset's
        members = obj.file_readers()
    else:
        return
    for member in members:
        _collect_readers(member, found, seen)


class Dataset(torch.utils.data.Dataset, ReaderRegistry):
    """An ffrecord dataset: ``dataset[indices]`` reads the batch in one call, then ``process``-es it.

    ``fnames`` is what ``ffrecord.FileReader`` takes: a file, a list of files, a directory
    of ``*.ffr`` files, or URLs (``s3://``, ``http(s)://``, with ``storage_options``). The
    reader pickles by path, so worker processes reopen the files themselves.

    >>> import tempfile, os
    >>> from ffrecord import FileWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "demo.ffr")
    >>> with FileWriter(path, 3) as writer:
    ...     for word in (b"zero", b"one", b"two"):
    ...         writer.write_one(word)
    >>> class Words(Dataset):
    ...     def process(self, indices, data):
    ...         return [bytes(d).decode() for d in data]
    >>> words = Words(path)
    >>> len(words), words[[2, 0]], words[1]
    (3, ['two', 'zero'], 'one')
    """

    def __init__(self, fnames: str | Sequence[str], check_data: bool = True, *,
                 storage_options: dict[str, Any] | None = None) -> None:
        self.fnames = fnames
        self.check_data = check_data
        self._reader_args = (fnames, check_data)
        self._reader_options = {"storage_options": storage_options}
        self.reader = FileReader(fnames, check_data, storage_options=storage_options)

    @property
    def reader(self) -> FileReader:
        """The reader of this process: a copy of the dataset in another process opens its own."""
        if self._reader is None:
            fnames, check_data = self._reader_args
            self._reader = reopen(fnames, check_data, getattr(self, "_reader_vouched", ()),
                                  stamps=getattr(self, "_reader_stamps", None), **self._reader_options)
        return self._reader

    @reader.setter
    def reader(self, reader: FileReader) -> None:
        self._reader = reader

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if "_reader_args" in state:  # a reader this class opened: reopen it lazily, by path
            reader = state["_reader"]
            if isinstance(reader, FileReader):  # its checks need not be done again, nor its
                state["_reader_vouched"] = reader.vouched_files  # remote files' versions asked;
                state["_reader_stamps"] = reader.file_stamps  # the copy reads the files it read
                state["_reader_options"] = {**self._reader_options, "storage_options": pinned(
                    self._reader_options.get("storage_options"), reader.versions)}
            state["_reader"] = None
        return state

    def __len__(self) -> int:
        return self.reader.n

    def __getitem__(self, indices: Sequence[int] | int) -> Any:
        """The processed samples at ``indices`` (a list); a single int gives a single sample."""
        single = _scalar_index(indices)
        if single is not None:
            return self[[single]][0]
        reader = self.reader
        if not isinstance(reader, FileReader):  # a reader of the user's own: read() is its API
            return self.process(indices, reader.read(indices))
        prefetch_ahead(self, indices, reader.prefetch)
        buffer, offsets = collate.read_batch(reader, indices)
        _stats.publish()
        return self.process_batch(indices, buffer, offsets)

    def __getitems__(self, indices: list[int]) -> list:
        """torch's batched-fetch protocol: the DataLoader hands over the whole batch at once
        (or, in a worker of ffrecord's DataLoader, a ``TaskGroup`` of batches: each read by
        ``self[batch]``)."""
        if type(indices) is _transport.TaskGroup:
            return _transport.each_batch(self.__getitem__, indices)
        return self[indices]

    def _batches_are_reads(self) -> bool:
        """True when a batch is only read (none of ``__getitem__``, ``__getitems__``,
        ``process`` and ``process_batch`` replaced): a loader worker then fetches several per
        task (``_transport.TaskGroup``)."""
        kind = type(self)
        return all(getattr(kind, name) is getattr(Dataset, name)
                   for name in ("__getitem__", "__getitems__", "process", "process_batch"))

    def process_batch(self, indices: Sequence[int], buffer: np.ndarray, offsets: np.ndarray) -> Any:
        """Turns a batch as read into the samples the DataLoader's ``collate_fn`` receives.

        ``buffer`` (uint8) holds the samples back to back: sample ``indices[i]`` is
        ``buffer[offsets[i]:offsets[i + 1]]``. By default the samples are split out and
        handed to ``process``. Override it to decode a whole batch at once, returning a
        list of samples or an array whose first axis is the batch (with ffrecord's
        DataLoader and its default collate, an array that is a view of ``buffer`` becomes
        the batch tensor without a copy).
        """
        samples = split_batch(buffer, offsets)
        collate.hand_on(samples)
        return self.process(indices, samples)

    def process(self, indices: Sequence[int], data: list[np.ndarray]) -> list:
        """Turns the raw samples of a batch into samples; by default returns them unchanged.

        ``data[i]`` is sample ``indices[i]`` as a uint8 numpy array (a buffer: use
        ``pickle.loads(b)``, ``b.tobytes()``, ``np.frombuffer(b, ...)``). The list returned
        goes to the DataLoader's ``collate_fn``.
        """
        return data

    def __add__(self, other: torch.utils.data.Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])

    def __repr__(self) -> str:
        fnames = getattr(self, "fnames", None)
        return f"{type(self).__name__}({fnames!r}, n={len(self)})"


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order, read a batch at a time.

    >>> sub = Subset(["a", "b", "c", "d"], [3, 1])
    >>> len(sub), sub[[0, 1]], sub[-1]
    (2, ['d', 'b'], 'b')
    """

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices
        self._positions = _index_array(indices)

    def __len__(self) -> int:
        return len(self._positions)

    def __getitem__(self, indices: Sequence[int] | int) -> Any:
        single = _scalar_index(indices)
        if single is not None:
            return self[[single]][0]
        return fetch_batch(self.dataset, self._positions[_index_array(indices)].tolist())

    def __repr__(self) -> str:
        return f"Subset({self.dataset!r}, n={len(self)})"


class ConcatDataset(Dataset):
    """Datasets one after another; a batch is split per member, read once each, and re-ordered.

    >>> both = ConcatDataset([["a", "b"], ["c", "d", "e"]])
    >>> len(both), both[[4, 0, 2, 1]], both[-1]
    (5, ['e', 'a', 'c', 'b'], 'e')
    """

    @staticmethod
    def cumsum(sequence: Iterable[Any]) -> list[int]:
        """The running total of the members' lengths, as ``cumulative_sizes`` holds it.

        >>> ConcatDataset.cumsum([[1, 2], [3], [4, 5, 6]])
        [2, 3, 6]
        """
        return np.cumsum([len(d) for d in sequence], dtype=np.int64).tolist()

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one dataset")
        self.cumulative_sizes = self.cumsum(self.datasets)
        ends = self._ends = np.array(self.cumulative_sizes, dtype=np.int64)
        self._starts = ends - [len(d) for d in self.datasets]

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, indices: Sequence[int] | int) -> Any:
        single = _scalar_index(indices)
        if single is not None:
            return self[[single]][0]
        wanted = _index_array(indices)
        n = len(self)
        wanted = np.where(wanted < 0, wanted + n, wanted)
        if wanted.size and (wanted.min() < 0 or wanted.max() >= n):
            raise IndexError(f"index out of range for a dataset of {n} samples")
        member = np.searchsorted(self._ends, wanted, side="right")
        local = wanted - self._starts[member]
        samples: list[Any] = [None] * len(wanted)
        for m in np.unique(member).tolist():
            where = np.flatnonzero(member == m)
            for pos, sample in zip(where.tolist(), fetch_batch(self.datasets[m], local[where].tolist())):
                samples[pos] = sample
        return samples

    def __repr__(self) -> str:
        return f"ConcatDataset({self.datasets!r})"
