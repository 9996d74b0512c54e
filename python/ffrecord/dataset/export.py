"""Back out of ffrecord: a dataset as an Arrow table, a Hugging Face ``datasets.Dataset`` or
Parquet files (``reader.to_arrow()``, ``reader.to_hf()``, ``reader.to_parquet(path)``).

Fields map to Arrow columns by type: ``int`` → int64, ``float`` → float64, a fixed-size type
→ its Arrow type (``float32[768]``: a fixed-size list of 768 float32), ``utf8`` →
string, ``bytes`` → binary, ``array`` → a list of its dtype (1-D) or nested lists, ``json`` /
``msgpack`` → the type Arrow infers from the values, a sequence ``T[]`` → a list of ``T``'s
column type; every other type (``jpg``, ``png``, ``npz``, types of your own) → binary holding
the stored bytes (an image file's bytes, not decoded pixels), read from the dataset's own
files when the dataset is a ``DatasetReader`` or ``ShardedDatasetReader``.

Columns are built without a Python object per value where the data allows: fixed-size,
``int`` and ``float`` fields from the arrays ``read_columns`` reads, ``bytes``, ``utf8`` and
stored-bytes fields of a ``DatasetReader`` (or of each shard) from the batch's read buffer
and offsets.

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
from .codecs import BUILTIN
from .spec import FIXED_TYPES, parse_spec

_BATCH = 1024  # rows of a Parquet row group
_TABLE_BATCH = 65536  # datapoints read per call for to_arrow: few calls, bounded buffers
_ARROW_VALUES = ("int", "float", "utf8", "bytes", "array", "json", "msgpack")  # else stored bytes


def _pyarrow() -> Any:
    return require("pyarrow", "convert", "exporting to Arrow")


def _column_type(pa: Any, field: Any) -> Any:
    """The Arrow type of a plain field; ``None`` when it is inferred from values."""
    kind = field.type
    if field.fixed:
        arrow = pa.from_numpy_dtype(np.dtype(FIXED_TYPES[kind]))
        for size in reversed(field.shape):
            arrow = pa.list_(arrow, size)
        return arrow
    return {"int": pa.int64(), "float": pa.float64(), "utf8": pa.string(),
            "bytes": pa.binary()}.get(kind, None if kind in _ARROW_VALUES else pa.binary())


def _with_stored_bytes(dataset: Any) -> Any:
    """``dataset`` reopened so that types without an Arrow mapping read as stored bytes."""
    from .reader import DatasetReader, ShardedDatasetReader

    raw = {field.type: bytes for field in parse_spec(dataset.spec).values()
           if field.type not in _ARROW_VALUES and not field.fixed}
    if not raw or not isinstance(dataset, (DatasetReader, ShardedDatasetReader)):
        return None
    decoders = {**(dataset.decoders or {}), **raw}
    if isinstance(dataset, ShardedDatasetReader):
        return ShardedDatasetReader(dataset.directory, decoders, dataset.shardstart, dataset.shardstep,
                                    storage_options=dataset.storage_options)
    return DatasetReader(dataset.directory, decoders, storage_options=dataset.storage_options)


def record_batches(dataset: Any, mask: Any = None, batch_size: int = _BATCH) -> Iterator[Any]:
    """The dataset (the fields ``mask`` selects) as Arrow record batches of ``batch_size``
    (cut at the ends of shards)."""
    pa = _pyarrow()
    from .reader import ShardedDatasetReader, parse_mask

    raw = _with_stored_bytes(dataset)
    source = raw or dataset
    try:
        fields = parse_spec(dataset.spec)
        names = list(parse_mask(mask, fields))
        parts = source.members if isinstance(source, ShardedDatasetReader) else [source]
        schema = None
        for part in parts:
            for start in range(0, len(part), batch_size):
                idx = range(start, min(start + batch_size, len(part)))
                batch = pa.RecordBatch.from_arrays(_arrays(pa, part, fields, names, idx), names)
                schema = schema or batch.schema
                yield batch if batch.schema == schema else batch.cast(schema)
    finally:
        if raw is not None:
            raw.close()


def _arrays(pa: Any, source: Any, fields: dict[str, Any], names: list[str], idx: range) -> list[Any]:
    """The Arrow arrays of fields ``names`` of datapoints ``idx`` of ``source``."""
    arrays = dict.fromkeys(names)
    for name in names:
        arrays[name] = _binary(pa, source, fields[name], idx)
    rest = [name for name in names if arrays[name] is None]
    if rest:
        for name, values in source.read_columns(idx, rest).items():
            arrays[name] = _array(pa, fields[name], values)
    return [arrays[name] for name in names]


def _binary(pa: Any, source: Any, field: Any, idx: range) -> Any:
    """A ``bytes`` or ``utf8`` field of a ``DatasetReader`` (or a field it reads as stored
    bytes) as an Arrow array over the batch's read buffer and offsets; None otherwise."""
    from .reader import DatasetReader

    if field.sequence or not isinstance(source, DatasetReader) or not len(idx):
        return None
    decode = source._decoders[field.name]
    text = decode is BUILTIN["utf8"].decode
    if not (text or decode is bytes) or field.block is not None:
        return None
    buf, starts, ends = source._whole(source.fields[field.name], idx)
    if int(ends[-1]) - int(starts[0]) >= 1 << 31 or not (starts[1:] == ends[:-1]).all():
        return None  # a held field's buffer (every datapoint), or over Arrow's 32-bit offsets
    offsets = np.empty(len(idx) + 1, np.int32)
    np.subtract(starts, starts[0], out=offsets[:-1], casting="unsafe")  # under 2**31: checked above
    offsets[-1] = int(ends[-1]) - int(starts[0])
    data = pa.py_buffer(buf[int(starts[0]):int(ends[-1])])
    array = pa.Array.from_buffers(pa.string() if text else pa.binary(), len(idx), [None, pa.py_buffer(offsets), data])
    if text:
        array.validate(full=True)  # UTF-8, as str() of each value would have checked
    return array


def _array(pa: Any, field: Any, values: Any) -> Any:
    kind = _column_type(pa, field)
    if isinstance(values, np.ndarray) and not field.sequence:
        flat = _primitive(pa, values.reshape(-1))
        for size in reversed(values.shape[1:]):
            flat = pa.FixedSizeListArray.from_arrays(flat, size)
        return flat
    if field.type == "array":
        values = [v if v.ndim == 1 else v.tolist() for v in values]
    if field.sequence:
        if field.type == "array":
            values = [[e if e.ndim == 1 else e.tolist() for e in v] for v in values]
        elif field.shape:
            values = [[e.tolist() for e in v] for v in values]
        return pa.array(values, None if kind is None else pa.list_(kind))
    return pa.array(values, kind)


def _primitive(pa: Any, values: np.ndarray) -> Any:
    """A 1-D numeric or bool array as an Arrow array over its memory (``pa.array`` would
    import pandas to look at it)."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, data])


def to_arrow(dataset: Any, mask: Any = None) -> Any:
    """The whole dataset (the fields ``mask`` selects) as one ``pyarrow.Table``."""
    pa = _pyarrow()
    batches = list(record_batches(dataset, mask, _TABLE_BATCH))
    if not batches:
        return pa.table({name: pa.array([], _column_type(pa, f) or pa.null())
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

