"""Readers of structured datasets: ``DatasetReader`` (one directory) and
``ShardedDatasetReader`` (the shards of a ``ShardedDatasetWriter``), plus what they share
with ``Mixture``: indexing, masks, batched reads."""

from __future__ import annotations

import os
import struct
import sys
import threading
import zlib
from collections.abc import Mapping
from contextlib import ExitStack
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from .. import _counters as counters
from .. import _remote
from .._buffers import allocator, output_view
from .._indices import index_array, one_index
from ..reader import FileReader
from . import codecs, columns, scans, sequence
from .datapoint import DatapointReads, FieldDecodeFailed
from .errors import (CodecError, CorruptDatasetError, DatasetChangedError, IncompleteDatasetError,
                     MaskError, SequenceRangeError, SpecError)
from .joined import Part, fields_batch_by_handles, read_by_handles, read_joined
from .spec import SPEC_FILE, Field, parse_spec_document, read_spec_and_metadata

# Remote field files opened at once by a DatasetReader (each open is a request).
_OPENS_AT_ONCE = 16

# What a mask asks of a field: WHOLE, or a (start, stop, step) range of a sequence's
# elements, stop None meaning "to the end".
WHOLE = None
Selection = Any


class Readable:
    """What every structured dataset offers (``DatasetReader``, ``ShardedDatasetReader``,
    ``Mixture``): ``len``, ``spec``, ``reader[i]``, ``reader[i, mask]``, ``read(indices,
    mask)``, ``available(i)``, iteration, and use as a context manager.

    A mask selects what is read: a dict ``{field: True | False | range | slice}`` (fields
    absent or False are not read; a range or slice, on a sequence field, reads only those
    elements) or a list of field names. Only the selected fields' files are touched.
    """

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def spec(self) -> dict[str, str]:
        """``{field: type string}``."""
        raise NotImplementedError

    def read(self, indices: Any, mask: Any = None) -> list[dict[str, Any]]:
        """The datapoints at ``indices`` (negative counts from the end), as dicts holding the
        fields ``mask`` selects (all by default), read with one call per field per batch."""
        raise NotImplementedError

    def _single_leaf(self, held: ExitStack) -> Any:
        """The ``DatasetReader`` that holds every datapoint of this dataset, as its own
        (index for index), kept open until ``held`` closes; None when there is no such one."""
        return None

    def _leaves(self, idx: np.ndarray, held: ExitStack) -> list[Part] | None:
        """The datasets with files of their own (``DatasetReader``s) that hold datapoints
        ``idx`` (in range), each kept open until ``held`` closes: ``(leaf, positions in idx,
        indices in leaf)``, or None when a batch of this dataset is not read from its
        leaves at once (see ``ffrecord.dataset.joined``)."""
        return None

    def available(self, index: int) -> dict[str, int | bool]:
        """What datapoint ``index`` holds: ``True`` for each plain field, the element count
        for each sequence field (reading only the counts)."""
        raise NotImplementedError

    @property
    def files(self) -> list[str]:
        """Every FFRecord file this dataset reads."""
        raise NotImplementedError

    @property
    def size(self) -> int:
        """Bytes on disk of the field files."""
        return sum(os.path.getsize(path) for path in self.files)

    def select(self, indices: Any) -> Any:
        """A ``View`` of the datapoints ``indices``, in that order (see ``dataset.views``)."""
        from .views import View

        return View(self, indices)

    def shard(self, num_shards: int, index: int, contiguous: bool = True) -> Any:
        """Part ``index`` of ``num_shards`` near-equal parts, as a ``View``."""
        from .views import shard

        return shard(self, num_shards, index, contiguous)

    def train_test_split(self, test_size: float | int, seed: int | None = None,
                         shuffle: bool = True) -> dict[str, Any]:
        """``{"train": View, "test": View}`` (see ``dataset.views.train_test_split``)."""
        from .views import train_test_split

        return train_test_split(self, test_size, seed, shuffle)

    def read_columns(self, indices: Any, mask: Any = None) -> dict[str, Any]:
        """The fields ``mask`` selects of the datapoints at ``indices``, as columns: a numpy
        array ``(n, *shape)`` for each fixed-size, ``int`` and ``float`` field, a list for
        the others (see ``ffrecord.dataset.scans``)."""
        from .scans import columns_of_rows

        return columns_of_rows(self, indices, mask)

    def iter_batches(self, batch_size: int = 65536, columns: Any = None, *, arrow: bool = False) -> Any:
        """Consecutive batches of ``batch_size`` datapoints as ``read_columns`` dicts (or
        Arrow record batches with ``arrow=True``) of the fields ``columns`` names."""
        from .scans import iter_batches

        return iter_batches(self, batch_size, columns, arrow)

    def where(self, condition: Any) -> Any:
        """A ``View`` of the datapoints where ``condition`` holds: a boolean array of
        ``len(self)``, or a function of a ``Columns`` (whole columns by name, read on first
        use) returning one, e.g. ``reader.where(lambda c: c["label"] == 3)``."""
        from .scans import where

        return where(self, condition)

    def to_arrow(self, mask: Any = None) -> Any:
        """The dataset as a ``pyarrow.Table`` (see ``ffrecord.dataset.export``)."""
        from .export import to_arrow

        return to_arrow(self, mask)

    def to_pandas(self, mask: Any = None) -> Any:
        """The dataset as a ``pandas.DataFrame``, by way of ``to_arrow``."""
        return self.to_arrow(mask).to_pandas()

    def to_hf(self, mask: Any = None) -> Any:
        """The dataset as a Hugging Face ``datasets.Dataset`` (see ``ffrecord.dataset.export``)."""
        from .export import to_hf

        return to_hf(self, mask)

    def to_parquet(self, path: Any, mask: Any = None) -> int:
        """Writes the dataset to a Parquet file (see ``ffrecord.dataset.export``)."""
        from .export import to_parquet

        return to_parquet(self, path, mask)

    def close(self) -> None:
        """Closes the files (a no-op for datasets that own none)."""

    def file_readers(self) -> list[FileReader]:
        """The readers of the files behind the dataset, as opened in this process (none for
        datasets that own none)."""
        return []

    def stats(self) -> dict[str, int | float]:
        """The I/O counters of the dataset's file readers added up (see
        ``FileReader.stats``): requests, ``bytes_fetched`` against ``bytes_delivered``, and
        their ratio ``fetched_per_delivered``.

        >>> reader.stats()["fetched_per_delivered"]     # doctest: +SKIP
        1.01
        """
        return counters.summed(r.stats() for r in self.file_readers())

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, _MANY):  # slices, index lists, a field name: see dataset.views
            from .views import getitem

            return getitem(self, key)
        index, mask = key if isinstance(key, tuple) and len(key) == 2 else (key, None)
        if isinstance(index, _MANY):
            return self.read(range(len(self))[index] if isinstance(index, slice) else index, mask)
        return self.read([one_index(index, len(self))], mask)[0]

    def __getitems__(self, indices: Any) -> list[dict[str, Any]]:
        """``read(indices)``: torch's ``DataLoader`` (2.0 and later) fetches a batch this
        way, one read per field instead of one per datapoint."""
        return self.read(indices)

    def __iter__(self):
        for start in range(0, len(self), _ITER_BATCH):
            yield from self.read(np.arange(start, min(start + _ITER_BATCH, len(self))))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _indices(self, indices: Any) -> np.ndarray:
        """``indices`` as ``int64`` in ``[0, len)``; ``IndexError`` for any outside."""
        n = len(self)
        idx = index_array(indices, n).view(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = int(idx.max()) if idx.min() >= 0 else int(idx.view(np.uint64).max())
            raise IndexError(f"datapoint {bad} out of range for a dataset of {n}")
        return idx


_ITER_BATCH = 256
_MANY = (str, slice, list, range, np.ndarray)  # keys that select more than one datapoint
_COUNT_CHUNK = 1 << 16  # element counts read per call
_MAX_STOP = 1 << 62  # above any element count a sample can hold (comparable with int64)
_HELD_BYTES = 16 << 20  # a remote field up to this size, of values up to
_HELD_VALUE_BYTES = 64  # this many bytes on average, is held in memory whole
# Runs from this many datapoints are read as spans: one pread for the run, where a batch
# copies each sample out of the mapping (faster for a few samples: no system call).
_SPAN_SAMPLES = 16


def parse_mask(mask: Any, fields: Mapping[str, Field]) -> dict[str, Selection]:
    """``{field: WHOLE or (start, stop, step)}`` for the fields a mask selects, in spec order."""
    if mask is None:
        return dict.fromkeys(fields, WHOLE)
    if isinstance(mask, str):
        mask = [mask]
    if not isinstance(mask, Mapping):
        try:
            mask = dict.fromkeys(mask, True)
        except TypeError:
            raise TypeError(f"a mask is a dict of field -> bool/range or a list of field "
                            f"names, not {type(mask).__name__}") from None
    for name in mask:
        if name not in fields:
            raise MaskError(f"the mask names field {name!r}, which the dataset does not have "
                            f"(fields: {', '.join(fields)})")
    chosen = {}
    for name, field in fields.items():
        want = mask.get(name, False)
        if want is True:
            chosen[name] = WHOLE
        elif isinstance(want, (range, slice)):
            chosen[name] = _element_range(field, want)
        elif want not in (False, None):
            raise MaskError(f"the mask gives field {name!r} {want!r}: True, False, a range or a slice")
    return chosen


def _element_range(field: Field, want: range | slice) -> tuple[int, int | None, int]:
    if not field.sequence:
        raise MaskError(f"the mask gives field {field.name!r} ({field.spec}) a range of elements, "
                        "but it is not a sequence field")
    start, stop, step = want.start or 0, want.stop, 1 if want.step is None else want.step
    if start < 0 or (stop is not None and stop < 0) or step < 1:
        raise MaskError(f"field {field.name!r}: element range {want!r} must have start, stop >= 0 "
                        "and step >= 1")
    # A step past any sequence's length selects its first element only: bounded, it stays an int64.
    return start, (None if stop is None else max(stop, start)), min(step, _MAX_STOP)


class DatasetReader(Readable):
    """Reads the dataset a ``DatasetWriter`` wrote to ``directory``.

    ``decoders`` maps type names to functions ``memoryview -> value`` (see
    ``ffrecord.dataset.codecs``; they override built-ins of the same name). ``cache_keys``
    names small fields to hold in memory (read whole on first use, then served from RAM).
    ``check_data`` verifies CRC-32s: of each whole sample, and of each sequence element read
    alone. The reader is safe to share between threads, survives ``fork()``, and pickles by
    directory and options (decoders must then be picklable: module-level functions) with
    what it was opened with: a copy that finds the dataset changed raises
    ``DatasetChangedError`` rather than read it with the old spec.
    ``directory`` may be a URL (``s3://bucket/ds/``, ``https://…/ds``) with
    ``storage_options`` as for ``FileReader``: the spec and fields are read from there (and
    ``cache_dir=``, ``cache_limit=``, ``chunk_size=`` as for ``FileReader``). Remote, small
    fixed-size fields (labels, ids) are held in memory after one whole read, and a batch's
    other fields are read by one call. ``descriptors=False`` opens the local field files
    without holding their descriptors (see ``FileReader``).

    >>> import tempfile, os
    >>> from ffrecord.dataset import DatasetWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "ds")
    >>> with DatasetWriter(path, {"label": "int", "frames": "bytes[]"}) as writer:
    ...     _ = writer.append({"label": 3, "frames": [b"a", b"b", b"c"]})
    >>> reader = DatasetReader(path)
    >>> reader[0]
    {'label': 3, 'frames': [b'a', b'b', b'c']}
    >>> reader[0, {"frames": range(1, 3)}], reader.available(0)
    ({'frames': [b'b', b'c']}, {'label': True, 'frames': 3})
    """

    def __init__(self, directory: Any, decoders: Mapping[str, Callable] | None = None,
                 cache_keys: Any = (), *, check_data: bool = True,
                 storage_options: dict[str, Any] | None = None, cache_dir: Any = None,
                 cache_limit: int | None = None, chunk_size: int | None = None,
                 descriptors: bool = True) -> None:
        storage_options = _remote.with_cache(storage_options, cache_dir, cache_limit, chunk_size)
        self.descriptors = bool(descriptors)
        self._readers: dict[str, FileReader] = {}
        self.storage_options, self._pins = _remote.unpinned(storage_options)  # pins: a copy's versions
        self.directory = _remote.as_path(directory, storage_options)
        self.decoders = decoders
        self.cache_keys = tuple(cache_keys)
        self.check_data = bool(check_data)
        self._cache: dict[str, Any] = {}  # held fields: (buffer, offsets), a column's array
        self._cache_lock = threading.Lock()
        self._joint: FileReader | None = None  # every field's file, for one call per batch
        early = self._open_remembered_fields()
        try:
            self._fields, self._length, self._metadata = self._read_spec()
            self._decoders = codecs.resolve(self._fields, decoders, "decode")
            for key in self.cache_keys:
                if key not in self._fields:
                    raise SpecError(f"cache_keys names field {key!r}, which {self.directory} does not "
                                    f"have (fields: {', '.join(self._fields)})")
            self._open_fields(early)
        except BaseException:
            self.close()
            raise
        finally:
            for opening in early.values():  # files the spec no longer names
                if opening.exception() is None:
                    opening.result().close()
        self._remote = isinstance(self.directory, _remote.RemotePath)
        # Held in memory: the fields named, and when remote the small fixed-size ones
        # (labels, ids), which would otherwise cost a request per batch.
        self._held = set(self.cache_keys) | (self._small_fields() if self._remote else set())
        # Datapoints of plain fields read one at a time: one native call for all fields.
        self._single: DatapointReads | None = None
        if not self._held and not any(field.sequence or field.block for field in self._fields.values()):
            self._single = DatapointReads(list(self._readers.values()), list(self._fields),
                                          [self._decoders[name] for name in self._fields])

    def _read_spec(self) -> tuple[dict[str, Field], int, dict[str, Any]]:
        """The fields, datapoint count and metadata: ``spec.json``'s (a reader of one
        version of a dataset takes them from its manifest instead)."""
        return _spec_json(self.directory)

    def _small_fields(self) -> set[str]:
        small = set()
        for name, field in self._fields.items():
            info = self._readers[name].file_info(0)
            if (not field.sequence and info.data_bytes <= _HELD_BYTES
                    and info.data_bytes <= _HELD_VALUE_BYTES * max(1, self._length)):
                small.add(name)
        return small

    def __getitem__(self, key: Any) -> Any:
        single = self._single
        if single is None or type(key) is not int:
            return super().__getitem__(key)
        # One datapoint of plain fields: everything per call that could be worked out at
        # open was, so the cost is one native call and the values' copies out of its buffer.
        index = key if 0 <= key < self._length else one_index(key, self._length)
        try:
            return single.read(index)
        except FieldDecodeFailed as failed:
            cause = failed.__cause__
            raise self._decode_error(self._fields[failed.field], index, None, cause) from cause

    def _open_remembered_fields(self) -> dict[str, Future]:
        """Starts opening the field files that the spec named when this cache directory last
        read it (remote only), while the spec is fetched again: a warm open then waits one
        round trip, not two. Returns the openings by file name; ``_open_fields`` takes
        those the spec still names (the same files, opened with the same options)."""
        if not isinstance(self.directory, _remote.RemotePath):
            return {}
        path = self.directory / SPEC_FILE
        raw = path.remembered_bytes()
        if raw is None:
            return {}
        try:
            fields = parse_spec_document(path, raw)[0]
        except (SpecError, ValueError):
            return {}
        options = _remote.pinned(self.storage_options, self._pins)
        pool = ThreadPoolExecutor(max_workers=min(len(fields), _OPENS_AT_ONCE))
        early = {field.file: pool.submit(FileReader, self.directory / field.file, self.check_data,
                                         storage_options=options) for field in fields.values()}
        pool.shutdown(wait=False)  # the openings run on; whoever takes one waits for it
        return early

    def _open_fields(self, early: dict[str, Future]) -> None:
        """Opens every field's file into ``_readers`` (in spec order); a remote dataset's all
        at once: each open waits a round trip to the store (the object's version), and
        every process of a job opens the dataset as it starts. ``early``: openings started
        already (``_open_remembered_fields``), by file name; those used are removed."""
        fields = list(self._fields.values())
        if not isinstance(self.directory, _remote.RemotePath) or len(fields) < 2:
            for field in fields:
                self._readers[field.name] = self._open_field(field, early)
            return
        with ThreadPoolExecutor(max_workers=min(len(fields), _OPENS_AT_ONCE)) as pool:
            opening = [(field.name, pool.submit(self._open_field, field, early)) for field in fields]
        failed = [f.exception() for _, f in opening if f.exception() is not None]
        for name, f in opening:
            if f.exception() is None:
                self._readers[name] = f.result()  # closed by the caller when one failed
        if failed:
            raise failed[0]

    def _open_field(self, field: Field, early: dict[str, Future]) -> FileReader:
        path = self.directory / field.file
        if not path.is_file():
            raise IncompleteDatasetError(f"{self.directory}: field {field.name!r}: {field.file} is missing")
        opening = early.pop(field.file, None)
        if opening is not None and opening.exception() is None:
            reader = opening.result()
        else:  # not started, or failed: opened now, to fail (or not) as it would have
            reader = FileReader(path, self.check_data, storage_options=_remote.pinned(self.storage_options, self._pins),
                                descriptors=self.descriptors)
        try:
            check_count(path, field, reader.n, self._length, SPEC_FILE)
        except BaseException:
            reader.close()
            raise
        return reader

    def __len__(self) -> int:
        return self._length

    @property
    def spec(self) -> dict[str, str]:
        return {name: field.spec for name, field in self._fields.items()}

    @property
    def fields(self) -> dict[str, Field]:
        return dict(self._fields)

    @property
    def metadata(self) -> dict[str, Any]:
        """What the writer stored beside the spec (``DatasetWriter(metadata=...)``), e.g. a
        converter's class names; ``{}`` when none."""
        return dict(self._metadata)

    @property
    def files(self) -> list[str]:
        return [str(self.directory / field.file) for field in self._fields.values()]

    @property
    def size(self) -> int:
        """Bytes of the field files, as their readers found them (local or remote)."""
        return sum(reader.file_info(0).file_bytes for reader in self._readers.values())

    def field_reader(self, name: str) -> FileReader:
        """The ``FileReader`` of one field's file (its samples are the stored values)."""
        return self._readers[name]

    # -- reading ----------------------------------------------------------------------

    def read(self, indices: Any, mask: Any = None) -> list[dict[str, Any]]:
        return self._read(indices, mask, self._decoders)

    def _leaves(self, idx: np.ndarray, held: ExitStack) -> list[Part] | None:
        return [(self, slice(None), idx)]  # all of idx: a slice costs no array

    def _single_leaf(self, held: ExitStack) -> Any:
        return self

    def __getitems__(self, indices: Any) -> list[dict[str, Any]]:
        """``read(indices)``: torch's ``DataLoader`` (2.0 and later) fetches a batch this
        way. In a worker of the stock loader, ``bytes`` values are read as
        ``ffrecord.torch._stock.SharedBytes``: they cross to the main process through shared
        memory instead of torch's pipe, and arrive there as plain ``bytes``."""
        decoders = _torch_worker_decoders(self._decoders)
        return self._read(indices, None, decoders) if decoders else self.read(indices)

    def _read(self, indices: Any, mask: Any, decoders: Mapping[str, Callable]) -> list[dict[str, Any]]:
        idx = self._indices(indices)
        selection = parse_mask(mask, self._fields)
        wholes = self._read_wholes(selection, idx)
        columns = {name: self._read_field(self._fields[name], chosen, idx, wholes.get(name), decoders[name])
                   for name, chosen in selection.items()}
        if not columns:
            return [{} for _ in range(len(idx))]
        names = list(columns)
        return [dict(zip(names, values)) for values in zip(*columns.values())]

    def read_columns(self, indices: Any, mask: Any = None) -> dict[str, Any]:
        """The selected fields of the datapoints at ``indices`` as columns (see
        ``ffrecord.dataset.scans``): a column field's values by one native call (a run of
        indices read straight into the array), an ``int``/``float`` field's by one batch
        read, the others as lists."""
        idx: np.ndarray | None = None  # made only for a field that reads by index (a whole column does not)
        if isinstance(indices, range) and indices.step == 1 and 0 <= indices.start <= indices.stop <= self._length:
            run = (indices.start, indices.stop)
        else:
            idx = self._indices(indices)
            run = scans.run_of(idx)
        selection = parse_mask(mask, self._fields)
        out: dict[str, Any] = {}
        for name, chosen in selection.items():
            field = self._fields[name]
            if field.block is not None and run is not None:
                out[name] = self.column_range(name, *run)
                continue
            if idx is None:
                idx = np.arange(*run)
            if field.block is not None:
                out[name] = self.column_values(name, idx)
                continue
            dtype = None if field.sequence else scans.number_dtype(self._decoders[name])
            if dtype is not None:
                buf, starts, ends = self._whole(field, idx)
                numbers = _numbers(buf, starts, ends, dtype)
                if numbers is not None:
                    out[name] = numbers
                    continue
            out[name] = self._read_field(field, chosen, idx, None, self._decoders[name])
        return out

    def prefetch(self, indices: Any, mask: Any = None) -> int:
        """Starts bringing the datapoints at ``indices`` (the fields ``mask`` selects) closer
        and returns at once, as ``FileReader.prefetch`` does for each field's file: into the
        page cache, or, remote, into the chunk cache (downloaded ahead). Fields held in
        memory need nothing. Returns the reads queued; a hint.

        >>> reader.prefetch([7, 3]); reader.read([7, 3])   # doctest: +SKIP
        """
        idx = self._indices(indices)
        return sum(self._readers[name].prefetch(self._samples_of(name, idx))
                   for name in parse_mask(mask, self._fields) if name not in self._held)

    def _samples_of(self, name: str, idx: np.ndarray) -> np.ndarray:
        """The samples of field ``name``'s file that hold datapoints ``idx``: a column's blocks."""
        block = self._fields[name].block
        return idx if block is None else np.unique(idx // block)

    def available(self, index: int) -> dict[str, int | bool]:
        idx = np.array([one_index(index, self._length)], np.int64)
        return {name: int(self._counts(field, idx)[0]) if field.sequence else True
                for name, field in self._fields.items()}

    def element_counts(self, name: str, indices: Any = None) -> np.ndarray:
        """The element count of sequence field ``name`` in each datapoint of ``indices``
        (all by default), reading only the counts."""
        field = self._fields.get(name)
        if field is None or not field.sequence:
            raise MaskError(f"{name!r} is not a sequence field of {self.directory}")
        idx = np.arange(self._length) if indices is None else self._indices(indices)
        return np.concatenate([self._counts(field, idx[at:at + _COUNT_CHUNK])
                               for at in range(0, len(idx), _COUNT_CHUNK)] or [np.empty(0, np.int64)])

    def _read_wholes(self, selection: dict[str, Selection], idx: np.ndarray) -> dict[str, Any]:
        """The whole samples of the remote fields that the selection reads whole (and that
        are not held in memory), read by one call for all of them: one request plan, the
        fields' requests in flight together. Empty when local or a single field."""
        names = [name for name, chosen in selection.items() if name not in self._held
                 and self._fields[name].block is None
                 and (chosen is WHOLE or not self._fields[name].sequence)]
        if not self._remote or len(names) < 2 or not len(idx):
            return {}
        if self._joint is None:
            with self._cache_lock:
                if self._joint is None:
                    self._joint = FileReader([self._readers[n].fnames[0] for n in self._fields],
                                             self.check_data, storage_options=self._pinned_options())
        position = {name: k for k, name in enumerate(self._fields)}
        joint = np.concatenate([idx + position[name] * self._length for name in names])
        buf, offsets = self._joint.read_batch(joint.view(np.uint64))
        m = len(idx)
        return {name: (buf, offsets[j * m:(j + 1) * m], offsets[j * m + 1:(j + 1) * m + 1])
                for j, name in enumerate(names)}

    def _read_field(self, field: Field, chosen: Selection, idx: np.ndarray, whole: Any,
                    decode: Callable) -> list[Any]:
        """``decode``: the plain field's decoder (sequences' elements take the reader's)."""
        if field.block is not None:
            return columns.as_python(self.column_values(field.name, idx))
        if not field.sequence:
            buf, starts, ends = whole or self._whole(field, idx)
            return self._decode_values(field, buf, starts, ends, idx, decode)
        if chosen is WHOLE or field.name in self._held:
            buf, starts, ends = whole or self._whole(field, idx)
            return self._sequences_from_samples(field, chosen, buf, starts, ends, idx)
        return self._sequence_ranges(field, chosen, idx)

    def column_values(self, name: str, idx: np.ndarray) -> np.ndarray:
        """The values of column field ``name`` at ``idx`` (``int64``, in range) as an array
        ``(len(idx), *shape)``: one native call (or none, held in memory)."""
        if name in self._held:
            return self._held_column(name)[idx]
        return columns.gather(self._readers[name], self._layout(name), idx, self._where(name))

    def column_range(self, name: str, start: int, stop: int) -> np.ndarray:
        """Values ``[start, stop)`` of column field ``name``, the blocks read straight into
        the array."""
        if name in self._held:
            return self._held_column(name)[start:stop]
        return columns.value_range(self._readers[name], self._layout(name), start, stop, self._where(name))

    def _layout(self, name: str) -> columns.Layout:
        return columns.Layout.of(self._fields[name], self._length)

    def _where(self, name: str) -> str:
        return f"{self.directory}: field {name!r} ({self._fields[name].spec})"

    def _held_column(self, name: str) -> np.ndarray:
        held = self._cache.get(name)
        if held is None:
            with self._cache_lock:
                held = self._cache.get(name)
                if held is None:
                    held = columns.value_range(self._readers[name], self._layout(name), 0, self._length,
                                               self._where(name))
                    held.flags.writeable = False
                    self._cache[name] = held
        return held

    def _whole(self, field: Field, idx: np.ndarray | range) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The whole samples of ``idx`` (in range; a ``range`` of step 1 or an array): a
        buffer and each sample's start and end in it. A run of consecutive datapoints is
        read as a span (one system call for the run, no work per sample but its check), any
        other batch as a batch."""
        run = (idx.start, idx.stop) if isinstance(idx, range) else scans.run_of(idx)
        if field.name not in self._held and run is not None and run[1] - run[0] >= _SPAN_SAMPLES:
            buf, offsets = self._readers[field.name].read_span(*run)
            return buf, offsets[:-1], offsets[1:]
        if isinstance(idx, range):
            idx = np.arange(idx.start, idx.stop)
        if field.name in self._held:
            buf, offsets = self._cached(field.name)
            return buf, offsets[idx], offsets[idx + 1]
        buf, offsets = self._readers[field.name].read_batch(idx.view(np.uint64))
        return buf, offsets[:-1], offsets[1:]

    def _field_batch(self, name: str, idx: np.ndarray, out: Any) -> tuple[np.ndarray, np.ndarray, int]:
        """Field ``name``'s values at ``idx`` in one buffer (``out`` as ``FileReader._read``
        takes it): ``(buffer, sizes, their one size or -1)``. A field held in memory is
        copied from there: reading it again would cost a request per batch, remote."""
        if name not in self._held:
            return self._readers[name]._read(idx.view(np.uint64), out)
        buf, offsets = self._cached(name)
        starts, ends = offsets[idx], offsets[idx + 1]
        sizes = (ends - starts).astype(np.uint64)
        common = int(sizes[0]) if len(sizes) and (sizes == sizes[0]).all() else -1
        total = int(sizes.sum())
        dst = out(total) if callable(out) else np.empty(total, np.uint8)
        if common >= 0:
            dst[:] = _gather(buf, starts.astype(np.int64), common)
        elif total:
            np.concatenate([buf[s:e] for s, e in zip(starts.tolist(), ends.tolist())], out=dst)
        return dst, sizes, common

    def _field_batches(self, names: list[str], idx: np.ndarray,
                       out: Callable[[int], Any] | None) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
        """``_field_batch`` of each of ``names`` (``out``: None, or a function giving each
        field's buffer for its byte count)."""
        return {name: self._field_batch(name, idx, out) for name in names}

    def _cached(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        cached = self._cache.get(name)
        if cached is None:
            with self._cache_lock:
                cached = self._cache.get(name)
                if cached is None:
                    buf, offsets = self._readers[name].read_batch(np.arange(self._length, dtype=np.uint64))
                    buf.flags.writeable = False  # decoded values may be views of it
                    cached = self._cache[name] = (buf, offsets)
        return cached

    def _decode_values(self, field: Field, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                       idx: np.ndarray, decode: Callable) -> list[Any]:
        dtype = scans.number_dtype(decode)
        numbers = None if dtype is None else _numbers(buf, starts, ends, dtype)
        if numbers is not None:
            return numbers.tolist()
        strings = _strings(buf, starts, ends, decode)
        if strings is not None:
            return strings
        view = memoryview(buf)
        values = []
        for k, (start, end) in enumerate(zip(starts.tolist(), ends.tolist())):
            try:
                values.append(decode(view[start:end]))
            except Exception as exc:
                raise self._decode_error(field, int(idx[k]), None, exc) from exc
        return values

    def _decode_error(self, field: Field, index: int, element: int | None, exc: Exception) -> CodecError:
        where = f"datapoint {index}, field {field.name!r} ({field.spec})"
        if element is not None:
            where += f", element {element}"
        return CodecError(f"{self.directory}: {where}: decoder failed: {type(exc).__name__}: {exc}",
                          field=field.name, index=index)

    # -- sequences --------------------------------------------------------------------

    def _sequences_from_samples(self, field: Field, chosen: Selection, buf: np.ndarray,
                                starts: np.ndarray, ends: np.ndarray, idx: np.ndarray) -> list[list]:
        """Sequences from whole samples, their elements checked against the table's bounds
        (the samples themselves were CRC-checked whole)."""
        view = memoryview(buf)
        samples, counts, offsets, lengths, picks = [], [], [], [], []
        for k, (start, end) in enumerate(zip(starts.tolist(), ends.tolist())):
            sample = view[start:end]
            index = int(idx[k])
            n = self._checked_count(field, index, sample)
            table = sequence.entries(sample, n)
            picked = np.arange(n) if chosen is WHOLE else self._picked(field, index, n, *chosen)
            samples.append(sample)
            counts.append(n)
            offsets.append(table["offset"] if chosen is WHOLE else table["offset"][picked])
            lengths.append(table["length"] if chosen is WHOLE else table["length"][picked])
            picks.append(picked)
        self._check_layout(field, idx, [len(p) for p in picks], _joined(offsets), _joined(lengths),
                           np.array(counts, np.uint64), (ends - starts).astype(np.uint64))
        return [self._decode_elements(field, int(idx[k]), sample, offs.tolist(), lens.tolist(), picked)
                for k, (sample, offs, lens, picked) in enumerate(zip(samples, offsets, lengths, picks))]

    def _checked_count(self, field: Field, index: int, sample: memoryview) -> int:
        n = sequence.fitting_count(sample)
        if n is None:
            raise self._corrupt(field, index, sequence.count_damage(len(sample)))
        return n

    def _check_counts(self, field: Field, idx: np.ndarray, sizes: np.ndarray,
                      counts: np.ndarray | None = None) -> None:
        """Each sample of ``sizes`` bytes must hold an element count (and, given ``counts``
        as stored, ``uint64``, that many table entries)."""
        room = sequence.capacity(sizes)
        bad = room < 0
        if counts is not None:
            bad |= counts > room.clip(0).astype(np.uint64)
        if bad.any():
            j = int(np.argmax(bad))
            raise self._corrupt(field, int(idx[j]), sequence.count_damage(int(sizes[j])))

    def _picked(self, field: Field, index: int, n: int, start: int, stop: int | None, step: int) -> np.ndarray:
        stop = n if stop is None else stop
        if stop > n:
            raise self._range_error(field, index, n, start, stop)
        return np.arange(min(start, stop), stop, step)  # an open range may start past the end

    def _range_error(self, field: Field, index: int, n: int, start: int, stop: int) -> SequenceRangeError:
        return SequenceRangeError(f"{self.directory}: datapoint {index}, field {field.name!r}: elements "
                                  f"[{start}, {stop}) are past the end of its {n} elements")

    def _check_layout(self, field: Field, idx: np.ndarray, per: Any, offsets: np.ndarray,
                      lengths: np.ndarray, counts: np.ndarray, sizes: np.ndarray) -> None:
        """The table entries read of each datapoint of ``idx`` (``per``: how many each, back
        to back in ``offsets`` and ``lengths``) must place their elements inside its sample
        of ``sizes`` bytes holding ``counts`` elements; all datapoints are checked at once."""
        owner = np.repeat(np.arange(len(idx)), per)
        firsts = np.ones(len(owner), bool)
        firsts[1:] = owner[1:] != owner[:-1]
        found = sequence.layout_damage(offsets, lengths, sequence.table_end(counts)[owner],
                                       sizes[owner], firsts)
        if found is not None:
            raise self._corrupt(field, int(idx[owner[found[0]]]), found[1])

    def _corrupt(self, field: Field, index: int, what: str) -> CorruptDatasetError:
        return CorruptDatasetError(f"{self.directory / field.file}: datapoint {index}, field "
                                   f"{field.name!r}: {what}")

    def _decode_elements(self, field: Field, index: int, source: memoryview, offs: list[int],
                         lens: list[int], numbers: Any) -> list[Any]:
        decode = self._decoders[field.name]
        values = []
        for k, (off, length) in enumerate(zip(offs, lens)):
            try:
                values.append(decode(source[off:off + length]))
            except Exception as exc:
                raise self._decode_error(field, index, int(numbers[k]), exc) from exc
        return values

    def _counts(self, field: Field, idx: np.ndarray) -> np.ndarray:
        """The element count of each sequence at ``idx``: one ranged read of 8 bytes each,
        checked against the sample's size (``CorruptDatasetError`` for one that cannot be)."""
        if field.name in self._held:
            buf, starts, ends = self._whole(field, idx)
            view = memoryview(buf)
            return np.array([self._checked_count(field, int(i), view[s:e]) for i, s, e
                             in zip(idx.tolist(), starts.tolist(), ends.tolist())], np.int64)
        reader = self._readers[field.name]
        sizes = reader.sizes(idx)
        self._check_counts(field, idx, sizes)
        triples = np.zeros((len(idx), 3), np.uint64)
        triples[:, 0], triples[:, 2] = idx, sequence.HEADER
        counts = reader.read_ranges(triples)[0].view("<u8")
        self._check_counts(field, idx, sizes, counts)
        return counts.astype(np.int64)

    def _sequence_ranges(self, field: Field, chosen: Selection, idx: np.ndarray) -> list[list]:
        """Elements ``range(start, stop, step)`` of each sequence at ``idx`` (``stop`` None:
        to each one's end), reading only counts, table entries and the elements picked:
        one ranged read for the counts and the entries of ``[start, stop)`` of every
        sequence (preceded by one for the counts when they decide where ranges stop), one
        for the elements."""
        start, stop, step = chosen
        reader = self._readers[field.name]
        k = len(idx)
        sizes = reader.sizes(idx)
        if stop is None:
            stops = self._counts(field, idx)
        elif (sequence.capacity(sizes) < min(stop, _MAX_STOP)).any():
            # Refused before anything is sized by it: a range past what a sample can hold
            # (range(0, 2**40)) is past its count.
            raise self._past_end(field, idx, self._counts(field, idx), start, stop)
        else:
            stops = np.full(k, stop, np.int64)
        firsts = np.minimum(min(start, _MAX_STOP), stops)  # an open range may start past the end
        table_at, table_len = sequence.table_bytes(firsts, stops)
        triples = np.zeros((2 * k, 3), np.uint64)
        triples[:, 0] = np.tile(idx, 2)
        triples[:k, 2] = sequence.HEADER
        triples[k:, 1], triples[k:, 2] = table_at, table_len
        buf, _ = reader.read_ranges(triples)  # the k counts, then the k tables back to back
        stored = buf[:sequence.HEADER * k].view("<u8")
        self._check_counts(field, idx, sizes, stored)
        if stop is not None and (stored < stop).any():
            raise self._past_end(field, idx, stored.astype(np.int64), start, stop)
        positions, owner, numbers, per = sequence.stepped_runs(firsts, stops, step)
        picked = buf[sequence.HEADER * k:].view(sequence.ENTRY)[positions]
        self._check_layout(field, idx, per, picked["offset"], picked["length"], stored, sizes)
        elements = np.empty((len(picked), 3), np.uint64)
        elements[:, 0], elements[:, 1], elements[:, 2] = idx[owner], picked["offset"], picked["length"]
        data, offsets = reader.read_ranges(elements)
        view = memoryview(data)
        if self.check_data:
            self._check_element_crcs(field, idx[owner], view, offsets, picked["crc"], numbers)
        bounds, lengths, numbers = offsets.tolist(), picked["length"].tolist(), numbers.tolist()
        ends = np.cumsum(per).tolist()
        return [self._decode_elements(field, int(idx[j]), view, bounds[end - n:end], lengths[end - n:end],
                                      numbers[end - n:end])
                for j, (n, end) in enumerate(zip(per.tolist(), ends))]

    def _past_end(self, field: Field, idx: np.ndarray, counts: np.ndarray, start: int,
                  stop: int) -> SequenceRangeError:
        """The range error of the first datapoint of ``idx`` holding fewer than ``stop``."""
        j = int(np.argmax(counts < stop))
        return self._range_error(field, int(idx[j]), int(counts[j]), start, stop)

    def _check_element_crcs(self, field: Field, owners: np.ndarray, view: memoryview,
                            offsets: np.ndarray, want: np.ndarray, numbers: np.ndarray) -> None:
        """Each element read (``owners``: its datapoint, ``numbers``: its place in the
        sequence) against the CRC-32 of its table entry."""
        bounds = offsets.tolist()
        for e, expected in enumerate(want.tolist()):
            if zlib.crc32(view[bounds[e]:bounds[e + 1]]) != expected:
                raise self._corrupt(field, int(owners[e]), f"element {int(numbers[e])}: CRC-32 mismatch")

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        for reader in self.file_readers():
            reader.close()

    def file_readers(self) -> list[FileReader]:
        return list(self._readers.values()) + ([self._joint] if self._joint is not None else [])

    @property
    def versions(self) -> dict[str, Any]:
        """The versions of the remote field files as opened (see ``FileReader.versions``)."""
        return {url: version for reader in self._readers.values() for url, version in reader.versions.items()}

    def _pinned_options(self) -> dict[str, Any] | None:
        """The storage options with the field files pinned to the versions opened here."""
        return _remote.pinned(self.storage_options, self.versions)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles by directory and options, with what the reader was opened with (spec,
        length, metadata, each field file's identity): the copy checks it reopened the same
        dataset, and raises ``DatasetChangedError`` rather than read another."""
        return _reopen, (type(self), str(self.directory), self.decoders, self.cache_keys,
                         self.check_data, self._pinned_options(), self._opened_as(), self.descriptors)

    def _opened_as(self) -> dict[str, Any]:
        """What this reader was opened with, as its pickled copies carry it."""
        return {"spec": list(self.spec.items()), "length": self._length, "metadata": self._metadata,
                "files": {field.file: field_identity(self._readers[name])
                          for name, field in self._fields.items()}}

    def _check_opened_as(self, opened: dict[str, Any]) -> None:
        """``DatasetChangedError`` unless this reader opened what ``opened`` describes."""
        now = self._opened_as()
        for key, what in (("spec", "fields"), ("length", "datapoints"), ("metadata", "metadata")):
            if now[key] != opened[key]:
                raise DatasetChangedError(
                    f"{self.directory}: {SPEC_FILE} changed since the reader was opened ({what} "
                    f"{_shown(opened[key])}, now {_shown(now[key])}): a copy reads only the "
                    "dataset its original read; reopen the dataset to read the new one")
        for name, was in opened["files"].items():
            if now["files"].get(name) != tuple(was):
                raise DatasetChangedError(
                    f"{self.directory / name}: replaced since the reader was opened ("
                    f"{_identity_text(was)}, now {_identity_text(now['files'].get(name))}): a copy "
                    "reads only the dataset its original read; reopen the dataset to read the new one")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r}, {self.spec}) n={self._length}"


def _spec_json(directory: Any) -> tuple[dict[str, Field], int, dict[str, Any]]:
    """``read_spec_and_metadata``, whose error for a directory without ``spec.json`` names
    the reader to use when the directory holds a sharded dataset."""
    try:
        return read_spec_and_metadata(directory)
    except IncompleteDatasetError:
        from . import dataset_kind

        if dataset_kind(directory, getattr(directory, "storage_options", None)) != "sharded":
            raise
    raise IncompleteDatasetError(
        f"{directory}: a sharded dataset (shards 000000, 000001, ...), not one dataset: open it "
        "with ffrecord.dataset.open_dataset or ShardedDatasetReader") from None


def check_count(path: Any, field: Field, samples: int, length: int, said_by: str) -> None:
    """``CorruptDatasetError`` unless a file of ``samples`` samples holds ``field`` for the
    ``length`` datapoints that ``said_by`` (``spec.json``, a manifest) gives: one sample a
    datapoint, or for a column one a block."""
    if field.block is not None:
        if samples != -(-length // field.block):
            raise CorruptDatasetError(f"{path}: field {field.name!r} holds {samples} blocks; {said_by} "
                                      f"says {length} datapoints, {field.block} to a block")
    elif samples != length:
        raise CorruptDatasetError(f"{path}: field {field.name!r} holds {samples} datapoints; "
                                  f"{said_by} says {length}")


def field_identity(reader: FileReader) -> tuple[int, int, int]:
    """The identity of a field file as ``reader`` opened it, what a copy of a dataset reader
    checks: its size, stored count and the CRC-32 its header stores of its sample tables
    (every sample's CRC-32), ``FileReader.file_stamp``: no read. A replaced file of other
    data differs."""
    return tuple(reader.file_stamp(0))


def _identity_text(identity: Any) -> str:
    if identity is None:
        return "no such field"
    size, stored, checksum = identity
    return f"{size} bytes, {stored} samples, header checksum 0x{checksum:08x}"


def _shown(value: Any) -> str:
    return f"{dict(value) if isinstance(value, list) else value!r:.200}"


def _reopen(cls: type, directory: str, decoders: Any, cache_keys: tuple, check_data: bool,
            storage_options: dict[str, Any] | None, opened: dict[str, Any], descriptors: bool = True) -> Any:
    reader = cls(directory, decoders, cache_keys, check_data=check_data,
                 storage_options=storage_options, descriptors=descriptors)
    try:
        reader._check_opened_as(opened)
    except BaseException:
        reader.close()
        raise
    return reader


def _torch_worker_decoders(decoders: Mapping[str, Callable]) -> dict[str, Callable] | None:
    """In a worker of torch's stock ``DataLoader``: the decoders that read ``bytes`` values
    into shared memory (``ffrecord.torch._stock``); None elsewhere. torch is looked at only
    when some code already imported it."""
    data = sys.modules.get("torch.utils.data")
    if data is None or data.get_worker_info() is None:
        return None
    from ..torch import _stock

    return _stock.worker_decoders(decoders)


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0, np.uint64)


def _numbers(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
    """The 8-byte numbers of samples ``[starts, ends)`` of ``buf`` as an array of ``dtype``;
    None unless every sample is 8 bytes (an empty batch: an empty array). The buffer is the
    values back to back for a batch read; a held field's holds every datapoint, in file order."""
    if not len(starts):
        return np.empty(0, dtype)
    if not ((ends - starts) == 8).all():
        return None
    in_order = len(buf) == 8 * len(starts) and (starts == np.arange(0, len(buf), 8)).all()
    return np.frombuffer(buf if in_order else _gather(buf, starts, 8), dtype)


def _strings(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, decode: Callable) -> list[Any] | None:
    """The values of a ``bytes`` or ``utf8`` field stored back to back in ``buf`` (a span, a
    batch), sliced out of one ``bytes`` copy of them: a memoryview per value costs about as
    much again. None for other decoders, values not back to back, or text that is not UTF-8
    (the caller's decoding then names the datapoint)."""
    text = decode is codecs.BUILTIN["utf8"].decode
    if not (text or decode is bytes) or not len(starts) or not (starts[1:] == ends[:-1]).all():
        return None
    lo = int(starts[0])
    data = buf[lo:int(ends[-1])].tobytes()
    pairs = zip((starts - lo).tolist(), (ends - lo).tolist())
    if not text:
        return [data[s:e] for s, e in pairs]
    try:
        return [str(data[s:e], "utf-8") for s, e in pairs]
    except UnicodeDecodeError:
        return None


def _gather(buf: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each of ``starts`` in ``buf``, back to back."""
    return buf[starts[:, None] + np.arange(width)].reshape(-1)


class Routed(Readable):
    """A dataset made of member datasets, each index of it mapped to (member, index in
    member): shards one after another, or a mixture. Reads are grouped by member."""

    members: list[Readable]
    _readable = True  # every member a structured dataset (a mixture's may be plain sequences)

    def _route(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def read(self, indices: Any, mask: Any = None) -> list[dict[str, Any]]:
        idx = self._indices(indices)
        joined = self._joined(idx, mask, worker=False)
        if joined is not None:
            return joined
        # a member asked for one datapoint reads it alone (its fast path: one native call)
        return self._gathered(idx, lambda member, local: member.read(local, mask),
                              _one_datapoint if mask is None else None)

    def _joined(self, idx: np.ndarray, mask: Any, worker: bool) -> list[dict[str, Any]] | None:
        """The batch read from its leaves at once (``ffrecord.dataset.joined``), or None when
        it lies in one member or its leaves cannot be read so."""
        if len(idx) < 2 or not self._readable:
            return None
        sizes = self._joined_sizes
        by_handles = read_by_handles(self, idx, mask, worker, sizes)
        if by_handles is not None:
            return by_handles
        with ExitStack() as held:
            parts = self._leaves(idx, held)
            if parts is None or len(parts) < 2:
                return None
            return read_joined(parts, len(idx), mask, worker, sizes)

    @property
    def _joined_sizes(self) -> dict[str, int]:
        """Each field's bytes per sample in the last batch read from the leaves at once: the
        next one's buffer size (see ``ffrecord.dataset.joined``)."""
        return self.__dict__.setdefault("_joined_sizes_memo", {})

    @property
    def fields(self) -> dict[str, Field]:
        """The fields of its members (its first member's: every member has the same)."""
        return self.members[0].fields

    def _field_batch(self, name: str, idx: np.ndarray, out: Any) -> tuple[np.ndarray, np.ndarray, int]:
        """Field ``name``'s stored values at ``idx`` in one buffer (see
        ``DatasetReader._field_batch``; for a loader worker's columns, which take only
        fields decoded by the built-in codecs: see ``builtin_decoding``): by one call through
        the members' kept handles, else read and packed again (``bytes`` values as they are,
        ``int`` and ``float`` as their 8 little-endian bytes)."""
        allocate = None if out is None else allocator(out) if callable(out) else \
            (lambda nbytes: output_view(out, nbytes))
        got = fields_batch_by_handles(self, [name], idx, allocate, self._joined_sizes)
        if got is not None:
            return got[name]
        values = [d[name] for d in self.read(idx, [name])]
        packed = [bytes(v) for v in values] if self.spec[name] == "bytes" else \
            [v.to_bytes(8, "little", signed=True) if isinstance(v, int) else struct.pack("<d", v) for v in values]
        sizes = np.array([len(v) for v in packed], np.uint64)
        buf = (allocate or _new_bytes)(int(sizes.sum()))[:int(sizes.sum())]
        buf[:] = np.frombuffer(b"".join(packed), np.uint8)
        common = int(sizes[0]) if len(sizes) and (sizes == sizes[0]).all() else -1
        return buf, sizes, common

    def _field_batches(self, names: list[str], idx: np.ndarray,
                       out: Callable[[int], Any] | None) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
        """``_field_batch`` of each of ``names`` (``out``: None, or a function giving each
        field's buffer for its byte count): all by one call through the members' kept
        handles when they can be, else field by field."""
        got = fields_batch_by_handles(self, names, idx, None if out is None else allocator(out),
                                      self._joined_sizes)
        return got if got is not None else {name: self._field_batch(name, idx, out) for name in names}

    def builtin_decoding(self) -> bool:
        """True when every member decodes with the built-in codecs alone (no ``decoders``
        given, all the way down)."""
        return all(isinstance(m, Readable) and not getattr(m, "decoders", None)
                   and (not isinstance(m, Routed) or m.builtin_decoding()) for m in self.members)

    def __getstate__(self) -> dict[str, Any]:
        # handles belong to this process's library: a copy learns its own
        return {k: v for k, v in self.__dict__.items() if k != "_leaf_handles"}

    def _leaves(self, idx: np.ndarray, held: ExitStack) -> list[Part] | None:
        member, local = self._route(idx)
        order = np.argsort(member, kind="stable")
        grouped = member[order]
        cuts = (np.flatnonzero(grouped[1:] != grouped[:-1]) + 1).tolist()
        parts: list[Part] = []
        for a, b in zip([0, *cuts], [*cuts, len(idx)]):
            where = order[a:b]
            leaves = getattr(self.members[int(grouped[a])], "_leaves", None)
            found = None if leaves is None else leaves(local[where], held)
            if found is None:
                return None
            parts += [(leaf, where[positions], inner) for leaf, positions, inner in found]
        return parts

    def read_columns(self, indices: Any, mask: Any = None) -> dict[str, Any]:
        """Each member's ``read_columns`` of its part of ``indices``, put together."""
        if not self._readable:
            return super().read_columns(indices, mask)
        idx = self._indices(indices)
        if not len(idx):  # still checks the mask
            return self.members[0].read_columns(idx, mask)
        member, local = self._route(idx)
        parts = []
        for m in np.unique(member).tolist():
            where = np.flatnonzero(member == m)
            parts.append((where, self.members[m].read_columns(local[where], mask)))
        return scans.scatter(parts, len(idx))

    def __getitems__(self, indices: Any) -> list[dict[str, Any]]:
        """Each member's ``__getitems__`` (see ``DatasetReader.__getitems__``)."""
        if not self._readable:
            return self.read(indices)
        idx = self._indices(indices)
        joined = self._joined(idx, None, worker=True)
        if joined is not None:
            return joined
        return self._gathered(idx, lambda member, local: member.__getitems__(local))

    def _gathered(self, indices: Any, fetch: Callable[[Readable, np.ndarray], list],
                  single: Callable[[Readable, int], Any] | None = None) -> list[Any]:
        """The datapoints of ``indices``, ``fetch(member, local indices)`` once per member
        (``single(member, index)`` for a member asked for one datapoint, when given)."""
        idx = self._indices(indices)
        if not len(idx):  # still checks the mask
            return fetch(self.members[0], idx)
        member, local = self._route(idx)
        out: list[Any] = [None] * len(idx)
        order = np.argsort(member, kind="stable")  # each member's datapoints together, in batch order
        grouped = member[order]
        cuts = (np.flatnonzero(grouped[1:] != grouped[:-1]) + 1).tolist()
        members, places, locals_ = self.members, order.tolist(), local.tolist()
        for a, b in zip([0, *cuts], [*cuts, len(idx)]):
            m = members[int(grouped[a])]
            if single is not None and b == a + 1:
                out[places[a]] = single(m, locals_[places[a]])
                continue
            where = order[a:b]
            for pos, value in zip(where.tolist(), fetch(m, local[where])):
                out[pos] = value
        return out

    def available(self, index: int) -> dict[str, int | bool]:
        member, local = self._route(np.array([one_index(index, len(self))], np.int64))
        return self.members[int(member[0])].available(int(local[0]))

    @property
    def spec(self) -> dict[str, str]:
        return self.members[0].spec

    @property
    def files(self) -> list[str]:
        # a mixture's members may be plain sequences, which read no files
        return [path for member in self.members for path in getattr(member, "files", [])]

    @property
    def size(self) -> int:
        return sum(member.size for member in self.members)

    def close(self) -> None:
        for member in self.members:
            member.close()

    def file_readers(self) -> list[FileReader]:
        # a mixture's members may be plain sequences, which read no files
        return [r for member in self.members for r in getattr(member, "file_readers", list)()]


def _new_bytes(nbytes: int) -> np.ndarray:
    return np.empty(nbytes, np.uint8)


def _one_datapoint(member: Readable, index: int) -> Any:
    return member[index]


class ShardedDatasetReader(Routed):
    """Reads the shards ``000000``, ``000001``, ... of ``directory`` as one dataset (see
    ``ShardedDatasetWriter``); with ``shardstart``/``shardstep``, only shards ``shardstart,
    shardstart + shardstep, ...`` (e.g. one process's share). Shard numbers must run from 0
    without a gap, and every shard must be complete and have the same spec.

    >>> import tempfile, os
    >>> from ffrecord.dataset import ShardedDatasetWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "sharded")
    >>> with ShardedDatasetWriter(path, {"n": "int"}, shardlen=2) as writer:
    ...     for k in range(5):
    ...         _ = writer.append({"n": k})
    >>> reader = ShardedDatasetReader(path)
    >>> len(reader), reader.shards, [d["n"] for d in reader.read([4, 0, 2])]
    (5, 3, [4, 0, 2])
    """

    def __init__(self, directory: Any, decoders: Mapping[str, Callable] | None = None,
                 shardstart: int = 0, shardstep: int = 1, cache_keys: Any = (), *,
                 check_data: bool = True, storage_options: dict[str, Any] | None = None,
                 cache_dir: Any = None, cache_limit: int | None = None,
                 chunk_size: int | None = None, descriptors: bool = True) -> None:
        storage_options = _remote.with_cache(storage_options, cache_dir, cache_limit, chunk_size)
        self.directory = _remote.as_path(directory, storage_options)
        self.storage_options = _remote.unpinned(storage_options)[0]  # members take the versions
        self.decoders, self.cache_keys, self.check_data = decoders, tuple(cache_keys), check_data
        self.descriptors = bool(descriptors)
        self.shardstart, self.shardstep = shardstart, shardstep
        if shardstart < 0 or shardstep < 1:
            raise ValueError(f"need shardstart >= 0 and shardstep >= 1, got {shardstart}, {shardstep}")
        shards = shard_directories(self.directory)
        chosen = shards[shardstart::shardstep]
        if not chosen:
            raise IncompleteDatasetError(f"{self.directory}: no shard {shardstart} among {len(shards)} "
                                         f"shard(s)")
        self.members = []
        try:
            for shard in chosen:
                member = DatasetReader(shard, decoders, cache_keys, check_data=check_data,
                                       storage_options=storage_options, descriptors=descriptors)
                self.members.append(member)
                if member.spec != self.members[0].spec:
                    raise SpecError(f"{shard}: spec {member.spec} differs from {chosen[0]}'s "
                                    f"{self.members[0].spec}")
        except BaseException:
            self.close()
            raise
        lengths = np.array([len(m) for m in self.members], np.int64)
        self._ends = np.cumsum(lengths)
        self._starts = self._ends - lengths

    @property
    def shards(self) -> int:
        return len(self.members)

    @property
    def metadata(self) -> dict[str, Any]:
        """The first shard's ``metadata`` (see ``DatasetReader.metadata``)."""
        return self.members[0].metadata

    def __len__(self) -> int:
        return int(self._ends[-1])

    def _route(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        member = np.searchsorted(self._ends, idx, side="right")
        return member, idx - self._starts[member]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles by directory and options, with what each shard was opened with (see
        ``DatasetReader.__reduce__``)."""
        versions = {url: v for member in self.members for url, v in member.versions.items()}
        return _reopen_sharded, (str(self.directory), self.decoders, self.shardstart, self.shardstep,
                                 self.cache_keys, self.check_data, _remote.pinned(self.storage_options, versions),
                                 [member._opened_as() for member in self.members], self.descriptors)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r}, shards={self.shards}) n={len(self)}"


def _reopen_sharded(directory: str, decoders: Any, shardstart: int, shardstep: int,
                    cache_keys: tuple, check_data: bool, storage_options: dict[str, Any] | None,
                    opened: list[dict[str, Any]], descriptors: bool = True) -> ShardedDatasetReader:
    reader = ShardedDatasetReader(directory, decoders, shardstart, shardstep, cache_keys,
                                  check_data=check_data, storage_options=storage_options, descriptors=descriptors)
    try:
        if len(opened) != reader.shards:
            raise DatasetChangedError(
                f"{reader.directory}: {len(opened)} shard(s) when the reader was opened, {reader.shards} "
                "now: a copy reads only the dataset its original read; reopen the dataset to read the new one")
        for member, was in zip(reader.members, opened):
            member._check_opened_as(was)
    except BaseException:
        reader.close()
        raise
    return reader


def shard_directories(directory: Any) -> list[Any]:
    """The shard directories of a sharded dataset (a ``Path``, or a ``RemotePath`` whose
    "sub-directories" the core lists), in order; ``IncompleteDatasetError`` when their
    numbers do not run 0, 1, 2, ... without a gap."""
    if isinstance(directory, _remote.RemotePath):
        entries = _remote.list_dir(directory.url, directory.storage_options)
        if not entries:
            raise FileNotFoundError(f"{directory}: no such prefix")
        found = [directory / name[:-1] for name in entries if name.endswith("/")]
    elif not directory.is_dir():
        raise FileNotFoundError(f"{directory}: no such directory")
    else:
        found = [p for p in directory.iterdir() if p.is_dir()]
    shards = sorted((p for p in found if p.name.isdigit()), key=lambda p: int(p.name))
    for number, shard in enumerate(shards):
        if int(shard.name) != number:
            raise IncompleteDatasetError(f"{directory}: shard {number} is missing (found {shard.name})")
    if not shards:
        raise IncompleteDatasetError(f"{directory}: no shard directories (000000, ...)")
    return shards
