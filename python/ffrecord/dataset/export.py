"""Back out of ffrecord: a dataset as an Arrow table, a Hugging Face ``datasets.Dataset`` or
Parquet files (``reader.to_arrow()``, ``reader.to_hf()``, ``reader.to_parquet(path)``).

Fields map to Arrow columns by type: ``int`` → int64, ``float`` → float64, ``utf8`` →
string, ``bytes`` → binary, ``array`` → a list of its dtype (1-D) or nested lists, ``json`` /
``msgpack`` → the type Arrow infers from the values, a sequence ``T[]`` → a list of ``T``'s
column type; every other type (``jpg``, ``png``, ``npz``, types of your own) → binary holding
the stored bytes (an image file's bytes, not decoded pixels), read from the dataset's own
files when the dataset is a ``DatasetReader`` or ``ShardedDatasetReader``.

>>> import os, tempfile
>>> from ffrecord.dataset import DatasetReader, DatasetWriter
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"label": "int", "tokens": "int[]"}) as writer:
...     for k in range(3):
...         _ = writer.append({"label": k, "tokens": [k] * k})
>>> with DatasetReader(path) as reader:
...     reader.to_arrow().to_pydict()
{'label': [0, 1, 2], 'tokens': [[], [1], [2, 2]]}
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._extras import require
from .spec import parse_spec

_BATCH = 1024
_ARROW_VALUES = ("int", "float", "utf8", "bytes", "array", "json", "msgpack")  # else stored bytes


def _pyarrow() -> Any:
    return require("pyarrow", "convert", "exporting to Arrow")


def _column_type(pa: Any, kind: str) -> Any:
    """The Arrow type of a plain field of ``kind``; ``None`` when it is inferred from values."""
    return {"int": pa.int64(), "float": pa.float64(), "utf8": pa.string(),
            "bytes": pa.binary()}.get(kind, None if kind in _ARROW_VALUES else pa.binary())


def _with_stored_bytes(dataset: Any) -> Any:
    """``dataset`` reopened so that types without an Arrow mapping read as stored bytes."""
    from .reader import DatasetReader, ShardedDatasetReader

    raw = {field.type: bytes for field in parse_spec(dataset.spec).values()
           if field.type not in _ARROW_VALUES}
    if not raw or not isinstance(dataset, (DatasetReader, ShardedDatasetReader)):
        return None
    decoders = {**(dataset.decoders or {}), **raw}
    if isinstance(dataset, ShardedDatasetReader):
        return ShardedDatasetReader(dataset.directory, decoders, dataset.shardstart, dataset.shardstep,
                                    storage_options=dataset.storage_options)
    return DatasetReader(dataset.directory, decoders, storage_options=dataset.storage_options)


def record_batches(dataset: Any, mask: Any = None, batch_size: int = _BATCH) -> Iterator[Any]:
    """The dataset (the fields ``mask`` selects) as Arrow record batches of ``batch_size``."""
    pa = _pyarrow()
    from .reader import parse_mask

    raw = _with_stored_bytes(dataset)
    source = raw or dataset
    try:
        fields = parse_spec(dataset.spec)
        names = list(parse_mask(mask, fields))
        schema = None
        for start in range(0, len(dataset), batch_size):
            rows = source.read(np.arange(start, min(start + batch_size, len(dataset))), names)
            arrays = [_array(pa, fields[name], [row[name] for row in rows]) for name in names]
            batch = pa.RecordBatch.from_arrays(arrays, names)
            schema = schema or batch.schema
            yield batch if batch.schema == schema else batch.cast(schema)
    finally:
        if raw is not None:
            raw.close()


def _array(pa: Any, field: Any, values: list[Any]) -> Any:
    kind = _column_type(pa, field.type)
    if field.type == "array":
        values = [v if v.ndim == 1 else v.tolist() for v in values]
    if field.sequence:
        if field.type == "array":
            values = [[e if e.ndim == 1 else e.tolist() for e in v] for v in values]
        return pa.array(values, None if kind is None else pa.list_(kind))
    return pa.array(values, kind)


def to_arrow(dataset: Any, mask: Any = None) -> Any:
    """The whole dataset (the fields ``mask`` selects) as one ``pyarrow.Table``."""
    pa = _pyarrow()
    batches = list(record_batches(dataset, mask))
    if not batches:
        return pa.table({name: pa.array([], _column_type(pa, f.type) or pa.null())
                         for name, f in parse_spec(dataset.spec).items()})
    return pa.Table.from_batches(batches)


def to_hf(dataset: Any, mask: Any = None) -> Any:
    """A Hugging Face ``datasets.Dataset`` in memory, built from ``to_arrow``."""
    datasets = require("datasets", "convert", "to_hf")
    return datasets.Dataset(datasets.table.InMemoryTable(to_arrow(dataset, mask)))


def to_parquet(dataset: Any, path: Any, mask: Any = None) -> int:
    """Writes the dataset to one Parquet file at ``path``, a row group per 1024 datapoints,
    streaming (the file appears only complete); returns the number of rows written."""
    _pyarrow()
    import pyarrow.parquet as pq

    path = os.fsdecode(path)
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.tmp-{os.getpid()}")
    writer, rows = None, 0
    try:
        for batch in record_batches(dataset, mask):
            writer = writer or pq.ParquetWriter(tmp, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is None:
            pq.write_table(to_arrow(dataset, mask), tmp)
        else:
            writer.close()
        os.replace(tmp, path)
    except BaseException:
        if writer is not None:
            writer.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return rows

