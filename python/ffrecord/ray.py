"""Ray Data integration: write a ``ray.data.Dataset`` to FFRecord files, read FFRecord files
(or a structured dataset) as a ``ray.data.Dataset``.

``import ffrecord`` never imports Ray; ``import ffrecord.ray`` does (install ``ffrecord[ray]``).
Both directions use Ray Data's public extension points, ``Datasink`` and ``Datasource``.

>>> import ray, ffrecord                                         # doctest: +SKIP
>>> from ffrecord.ray import read_ffrecord, write_ffrecord      # doctest: +SKIP
>>> ds = ray.data.from_items([{"bytes": b"%d" % k} for k in range(10)])  # doctest: +SKIP
>>> write_ffrecord(ds, "out", samples_per_file=4)               # doctest: +SKIP
>>> sorted(os.listdir("out"))                                    # doctest: +SKIP
['PART_00000.ffr', 'PART_00001.ffr', 'PART_00002.ffr']
>>> read_ffrecord("out").take(1)                                 # doctest: +SKIP
[{'bytes': b'0'}]

Writing is all or nothing: write tasks put their files in a hidden staging directory beside
the destination, and the job renames it into place only when every task has succeeded; a
failed job removes it. The destination therefore needs a file system that every write task
and the driver see (one machine, or a shared mount).
"""

from __future__ import annotations

import math
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from ._extras import require

require("pyarrow", "ray", "ffrecord.ray")
require("ray.data", "ray", "ffrecord.ray")
import pyarrow as pa  # noqa: E402 (after the checks that name the extra)
import ray.data
from ray.data import Datasink, Datasource, ReadTask
from ray.data.block import Block, BlockAccessor, BlockMetadata

from . import _paths
from .dataset import DatasetWriter, dataset_kind, grow, open_dataset
from .dataset.reader import parse_mask
from .converters._runner import Staging, refuse_taken
from .dataset.spec import parse_spec
from .dataset.writer import shard_name
from .order import Order
from .reader import FileReader
from .writer import FileWriter

__all__ = ["FFRecordDatasink", "FFRecordDatasource", "read_ffrecord", "write_ffrecord"]

#: The Ray version these classes are written and tested against (``Datasink.write`` with a
#: ``TaskContext``, ``on_write_complete`` given a ``WriteResult``, ``get_read_tasks`` with
#: ``per_task_row_limit``); the ``ray`` extra asks for at least this.
MIN_RAY_VERSION = "2.60"

#: The column of the rows ``read_ffrecord`` yields for plain FFRecord files.
BYTES_COLUMN = "bytes"
# A read task yields blocks of about this many bytes, so that a large range does not become
# one block that has to sit whole in a worker's memory.
_BLOCK_BYTES = 64 << 20
_STAGING_PREFIX = ".ffrecord-staging-"


# -- writing -------------------------------------------------------------------------------


class FFRecordDatasink(Datasink):
    """A Ray ``Datasink`` writing FFRecord files (or, with ``spec``, a sharded structured
    dataset) to the directory ``path``; see ``write_ffrecord``."""

    def __init__(self, path: Any, samples_per_file: int, *, column: str | None = None,
                 spec: Mapping[str, str] | None = None, encoders: Mapping[str, Callable] | None = None,
                 compression: str | None = None, durable: bool = True) -> None:
        if isinstance(samples_per_file, bool) or not isinstance(samples_per_file, int) \
                or samples_per_file < 1:
            raise ValueError(f"samples_per_file must be a positive integer, got {samples_per_file!r}")
        if spec is not None and column is not None:
            raise ValueError("column= names the bytes column of plain files; spec= writes every "
                             "field of the spec: give one or the other")
        if spec is None and encoders is not None:
            raise ValueError("encoders= needs spec=")
        if spec is not None and compression is not None:
            raise ValueError("with spec=, compress fields in the spec (e.g. 'utf8:zstd'), "
                             "not with compression=")
        text = _paths.fspath(path)
        if "://" in text:
            raise ValueError(f"{text}: write_ffrecord writes to a file system path (local or a "
                             "shared mount), not to a URL")
        self.path = Path(text).absolute()
        refuse_taken(self.path)
        if not self.path.parent.is_dir():
            raise FileNotFoundError(f"{self.path.parent}: no such directory")
        self.samples_per_file = samples_per_file
        self.column = column
        fields = {} if spec is None else parse_spec(spec)
        self.spec = {n: f.spec for n, f in fields.items()} or None
        self._array_fields = {n: f.sequence for n, f in fields.items() if f.type == "array"}
        self.encoders = encoders
        self.compression = compression
        self.durable = bool(durable)  # False: no fsync of files or directories
        # Hidden, beside the destination: same file system, so the commit is one rename.
        self.staging = self.path.parent / f"{_STAGING_PREFIX}{self.path.name}-{uuid.uuid4().hex[:12]}"

    @property
    def min_rows_per_write(self) -> int:
        """Ray gathers at least a file's worth of rows per write task, so files come out full
        rather than one small file per upstream block."""
        return self.samples_per_file

    def on_write_start(self, schema: Optional[pa.Schema] = None) -> None:
        self.staging.mkdir()

    def write(self, blocks: Iterable[Block], ctx: Any) -> list[tuple[int, int, int]]:
        """Writes this task's rows to files ``<task>-<k>`` in the staging directory; returns
        ``(task, k, rows)`` for each."""
        # The task's blocks (one bundle of about min_rows_per_write rows) are listed first:
        # every file then gets its exact count, so FileWriter writes in place, with no
        # staging copy at close.
        accessors = [BlockAccessor.for_block(block) for block in blocks]
        total = sum(acc.num_rows() for acc in accessors)
        rows = self._rows(accessors)
        written = []
        for k, start in enumerate(range(0, total, self.samples_per_file)):
            count = min(self.samples_per_file, total - start)
            target = self.staging / f"{ctx.task_idx}-{k}"
            if self.spec is None:
                with FileWriter(target, count, compression=self.compression,
                                durable=self.durable) as writer:
                    for _ in range(count):
                        writer.write_one(next(rows))
            else:
                shutil.rmtree(target, ignore_errors=True)  # an earlier attempt of this task
                with DatasetWriter(target, self.spec, self.encoders, length=count,
                                   durable=self.durable, manifest=False) as writer:
                    for _ in range(count):
                        writer.append(next(rows))
            written.append((ctx.task_idx, k, count))
        return written

    def _rows(self, accessors: list[BlockAccessor]) -> Iterable[Any]:
        for acc in accessors:
            if self.spec is not None:
                for row in acc.iter_rows(public_row_format=True):
                    yield _datapoint(row, self._array_fields)
                continue
            yield from acc.to_numpy(self._column_of(acc))

    def _column_of(self, acc: BlockAccessor) -> str:
        names = acc.column_names()
        if self.column is None:
            if len(names) != 1:
                raise ValueError(f"the dataset has columns {names}: name the one holding the "
                                 "samples with column=, or give spec= to write them all")
            return names[0]
        if self.column not in names:
            raise ValueError(f"column {self.column!r} is not in the dataset (columns: {names})")
        return self.column

    def on_write_complete(self, write_result: Any) -> None:
        """Names the staged files in order (task, then file within the task), removes
        whatever else an interrupted attempt left, and renames the staging directory to
        the destination."""
        parts = sorted(part for returned in write_result.write_returns for part in returned)
        self.staging.mkdir(exist_ok=True)  # an empty dataset may start no write task at all
        if not parts:
            self._write_empty(self.staging / "0-0")
            parts = [(0, 0, 0)]
        final = []
        for number, (task, k, _) in enumerate(parts):
            name = shard_name(number) if self.spec is not None else _paths.part_name(number, len(parts))
            os.rename(self.staging / f"{task}-{k}", self.staging / f".{name}")
            final.append(name)
        staging = Staging(self.staging)
        staging.keep_only(f".{name}" for name in final)  # what an interrupted attempt left
        for name in final:
            os.rename(self.staging / f".{name}", self.staging / name)
        grow.index(self.staging, durable=self.durable)  # its manifest, moved with it
        staging.publish(self.path, durable=self.durable)

    def _write_empty(self, target: Path) -> None:
        if self.spec is None:
            FileWriter(target, 0, compression=self.compression, durable=self.durable).close()
        else:
            DatasetWriter(target, self.spec, self.encoders, length=0, durable=self.durable,
                          manifest=False).close()

    def on_write_failed(self, error: Exception) -> None:
        Staging(self.staging).discard()

    def __repr__(self) -> str:
        what = f"spec={self.spec}" if self.spec is not None else f"column={self.column!r}"
        return (f"{type(self).__name__}({str(self.path)!r}, "
                f"samples_per_file={self.samples_per_file}, {what})")


def _datapoint(row: Mapping[str, Any], array_fields: Mapping[str, bool]) -> dict[str, Any]:
    """A row as a datapoint: Ray hands a list of arrays (a sequence of ``array``) back as
    nested lists, which become arrays again."""
    datapoint = dict(row)
    for name, sequence in array_fields.items():
        value = datapoint.get(name)
        if sequence and isinstance(value, (list, tuple)):
            datapoint[name] = [e if isinstance(e, np.ndarray) else np.asarray(e) for e in value]
        elif not sequence and isinstance(value, (list, tuple)):
            datapoint[name] = np.asarray(value)
    return datapoint


def write_ffrecord(ds: ray.data.Dataset, path: Any, samples_per_file: int = 100_000, *,
                   column: str | None = None, spec: Mapping[str, str] | None = None,
                   encoders: Mapping[str, Callable] | None = None,
                   compression: str | None = None, concurrency: int | None = None,
                   durable: bool = True) -> None:
    """Writes ``ds`` to the directory ``path`` (which must not exist, or be empty).

    Without ``spec``, each row's ``column`` (by default the dataset's only column) is one
    sample: bytes, or a numpy array whose raw bytes are stored. The result is
    ``PART_00000.ffr``, ``PART_00001.ffr``, ... of at most ``samples_per_file`` samples each,
    named in the order of Ray's write tasks and, within a task, of its rows; ``FileReader(path)``
    reads them as one dataset. ``compression`` is as for ``FileWriter``.

    With ``spec`` (``{field: type string}``, see ``ffrecord.dataset``), each row is a
    datapoint and ``path`` becomes a sharded structured dataset of shards of at most
    ``samples_per_file`` datapoints (``ffrecord.dataset.open_dataset(path)`` reads it).

    Each write task writes its own files, each crash-safe as ``FileWriter`` writes them, into
    a hidden staging directory beside ``path``; ``path`` appears, complete, only when every
    task has succeeded, and a failed job leaves neither ``path`` nor the staging directory.
    ``concurrency`` caps the write tasks running at once. ``durable=False`` skips every
    fsync (of the files and of the directories), for scratch output a crash may lose.

    >>> write_ffrecord(ray.data.range(10).map(lambda r: {"bytes": b"%d" % r["id"]}),
    ...                "out", samples_per_file=4)                # doctest: +SKIP
    """
    sink = FFRecordDatasink(path, samples_per_file, column=column, spec=spec, encoders=encoders,
                            compression=compression, durable=durable)
    ds.write_datasink(sink, concurrency=concurrency)


# -- reading -------------------------------------------------------------------------------


class FFRecordDatasource(Datasource):
    """A Ray ``Datasource`` over FFRecord files or a structured dataset; see
    ``read_ffrecord``."""

    def __init__(self, paths: Any, *, check_data: bool = True, mask: Any = None,
                 decoders: Mapping[str, Callable] | None = None,
                 storage_options: dict[str, Any] | None = None,
                 order: Order | None = None, epoch: int = 0) -> None:
        self.check_data = bool(check_data)
        self.mask = mask
        self.decoders = decoders
        self.storage_options = storage_options
        self.order, self.epoch = order, int(epoch)
        self.structured = _structured_path(paths, storage_options)
        if self.structured is not None:
            with open_dataset(self.structured, decoders, check_data=self.check_data,
                              storage_options=storage_options) as reader:
                self._pieces = [(self.structured, len(reader), reader.size)]
                self.fields = list(_selected_fields(reader, mask))
        else:
            if mask is not None or decoders is not None:
                raise ValueError("mask= and decoders= apply to structured datasets; "
                                 f"{paths!r} is not one")
            with FileReader(paths, check_data=False, storage_options=storage_options) as reader:
                infos = [reader.file_info(k) for k in range(len(reader.fnames))]
            self._pieces = [(info.path, info.samples, info.data_bytes) for info in infos]
            self.fields = [BYTES_COLUMN]
        if order is not None:  # one sequence of positions over every file, read in the order
            total = sum(count for _, count, _ in self._pieces)
            if order.n != total:
                raise ValueError(f"the order is over {order.n} samples; {paths!r} holds {total}")
            names = [path for path, _, _ in self._pieces]
            self._pieces = [(self.structured or names, total, self.estimate_inmemory_data_size())]

    def estimate_inmemory_data_size(self) -> int:
        return sum(nbytes for _, _, nbytes in self._pieces)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        """About ``parallelism`` tasks, each a range of samples of one file (or of the
        structured dataset): many tasks per file when there are fewer files than tasks."""
        total = sum(count for _, count, _ in self._pieces)
        chunk = max(1, math.ceil(total / max(1, parallelism)))
        tasks = []
        for path, count, nbytes in self._pieces:
            average = nbytes / count if count else 0
            for start in range(0, count, chunk):
                stop = min(count, start + chunk)
                metadata = BlockMetadata(num_rows=stop - start,
                                         size_bytes=int(average * (stop - start)),
                                         exec_stats=None, input_files=_paths_list(path))
                read = _read_structured if self.structured is not None else _read_bytes
                task_args = (path, start, stop, average, self.check_data, self.mask, self.decoders,
                             self.storage_options, self.order, self.epoch)
                tasks.append(ReadTask(_bind(read, task_args), metadata,
                                      per_task_row_limit=per_task_row_limit))
        return tasks

    def get_name(self) -> str:
        return "FFRecord"

    def __repr__(self) -> str:
        where = self.structured or [path for path, _, _ in self._pieces]
        return f"{type(self).__name__}({where!r}, fields={self.fields})"


def _bind(read: Callable, args: tuple) -> Callable[[], Iterable[Block]]:
    return lambda: read(*args)


def _structured_path(paths: Any, storage_options: dict[str, Any] | None) -> str | None:
    """The path, when ``paths`` is one directory (or prefix) holding a structured dataset."""
    if isinstance(paths, (list, tuple)):
        if len(paths) != 1:
            return None
        paths = paths[0]
    if not isinstance(paths, (str, os.PathLike)):
        return None
    text = _paths.fspath(paths)
    if "://" in text and not text[:5].lower() == "s3://":  # only s3:// prefixes can be listed
        return None
    return text if dataset_kind(text, storage_options) is not None else None


def _selected_fields(reader: Any, mask: Any) -> Iterable[str]:
    return parse_mask(mask, parse_spec(reader.spec)).keys()


def _paths_list(path: Any) -> list[str]:
    return list(path) if isinstance(path, list) else [path]


def _batches(start: int, stop: int, average: float, order: Order | None,
             epoch: int) -> Iterable[tuple[int, np.ndarray]]:
    """Batches of a task's positions [start, stop): their count and sample indices (the
    order's at those positions, else the positions themselves)."""
    step = max(1, int(_BLOCK_BYTES // max(average, 1)))
    for first in range(start, stop, step):
        positions = np.arange(first, min(stop, first + step), dtype=np.int64)
        yield len(positions), positions if order is None else order.indices(epoch, positions)


def _read_bytes(path: Any, start: int, stop: int, average: float, check_data: bool,
                mask: Any = None, decoders: Any = None,
                storage_options: dict[str, Any] | None = None, order: Order | None = None,
                epoch: int = 0) -> Iterable[Block]:
    with FileReader(path, check_data=check_data, storage_options=storage_options) as reader:
        for count, indices in _batches(start, stop, average, order, epoch):
            buf, offsets = reader.read_batch(indices.astype(np.uint64))
            # The read buffer and offsets become the Arrow column as they are: no copy.
            column = pa.LargeBinaryArray.from_buffers(
                pa.large_binary(), count,
                [None, pa.py_buffer(offsets.view(np.int64)), pa.py_buffer(buf)])
            yield pa.table({BYTES_COLUMN: column})


def _read_structured(path: str, start: int, stop: int, average: float, check_data: bool,
                     mask: Any, decoders: Any, storage_options: dict[str, Any] | None,
                     order: Order | None = None, epoch: int = 0) -> Iterable[Block]:
    with open_dataset(path, decoders, check_data=check_data,
                      storage_options=storage_options) as reader:
        for _, indices in _batches(start, stop, average, order, epoch):
            datapoints = reader.read(indices, mask)
            names = datapoints[0].keys()
            yield BlockAccessor.batch_to_block(
                {name: _column([d[name] for d in datapoints]) for name in names})


def _column(values: list[Any]) -> np.ndarray:
    """One field's values as a numpy column Ray stores well: arrays of one shape and dtype
    stacked (a tensor column), plain scalars as they are, anything else one object each."""
    first = values[0]
    if isinstance(first, np.ndarray):
        if all(isinstance(v, np.ndarray) and v.shape == first.shape and v.dtype == first.dtype
               for v in values):
            return np.stack(values)
    elif isinstance(first, (int, float)) and not isinstance(first, bool):
        if all(type(v) is type(first) for v in values):
            return np.array(values)
    column = np.empty(len(values), object)
    for k, value in enumerate(values):  # element by element: numpy would nest lists
        column[k] = value
    return column


def read_ffrecord(paths: Any, *, check_data: bool = True, mask: Any = None,
                  decoders: Mapping[str, Callable] | None = None,
                  override_num_blocks: int | None = None,
                  concurrency: int | None = None,
                  storage_options: dict[str, Any] | None = None,
                  order: Order | None = None, epoch: int = 0) -> ray.data.Dataset:
    """Reads FFRecord files as a ``ray.data.Dataset``.

    ``paths`` is what ``FileReader`` takes (a file, a list of files, a directory of
    ``*.ffr``; URLs too, with ``storage_options`` as for ``FileReader``): rows are
    ``{"bytes": sample}``, in file order. A directory (or ``s3://`` prefix) holding a
    structured dataset (``ffrecord.dataset``, sharded or not) gives rows with its fields
    instead (``mask`` selects fields, ``decoders`` as for ``DatasetReader``).

    Read tasks are ranges of samples of one file, so a few large files still read in
    parallel; ``override_num_blocks`` sets how many (Ray decides by default). Each range is
    read in batches of one native call into one buffer that becomes the Arrow column as is.

    ``order`` (an ``ffrecord.order`` order over every sample of ``paths``, such as the
    chunk-aware ``ChunkShuffle``, the DataLoader's own) reads epoch ``epoch`` in that order
    instead: tasks are ranges of its positions, so with ``ChunkShuffle`` each task reads a
    few chunks (remote: a few GETs, see the chunk cache) and its rows come in the order's
    sequence (tasks too, when Ray preserves order: ``DataContext.execution_options.preserve_order``).

    >>> read_ffrecord("train_ffr/").count()                    # doctest: +SKIP
    100000
    >>> shuffled = read_ffrecord("train_ffr/", order=ChunkShuffle.of(FileReader("train_ffr/"),
    ...                          16 << 20, seed=0, window=4), epoch=1)  # doctest: +SKIP
    """
    source = FFRecordDatasource(paths, check_data=check_data, mask=mask, decoders=decoders,
                                storage_options=storage_options, order=order, epoch=epoch)
    return ray.data.read_datasource(source, override_num_blocks=override_num_blocks,
                                    concurrency=concurrency)
