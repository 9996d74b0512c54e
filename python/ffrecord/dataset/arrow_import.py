"""``from_arrow(data, path)``: an Arrow table (or record batches) written as a dataset, each
record batch by one ``append_batch`` (one native call per field).

The spec follows the schema unless given: ``bool``, integers and floats of each width → the
fixed-size type of that name (``int32``, ``float16``, ...), a fixed-size list (of fixed-size
lists) of numbers → a fixed-shape type (``float32[768]``), ``string`` → ``utf8``, binaries →
``bytes``, a list of numbers → ``array``, a list of strings or binaries → ``utf8[]`` /
``bytes[]``, anything else → ``json``. A null in a column of a type other than ``json`` is an
error naming the field and the row.

>>> import os, tempfile
>>> import pyarrow as pa
>>> from ffrecord.dataset import DatasetReader
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> table = pa.table({"id": pa.array([1, 2], pa.int32()), "emb": pa.array([[0.5, 1], [2, 3]], pa.list_(pa.float32(), 2)),
...                   "text": ["a", "b"]})
>>> from_arrow(table, path)
2
>>> DatasetReader(path).spec
{'id': 'int32', 'emb': 'float32[2]', 'text': 'utf8'}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .._extras import require
from .spec import FIXED_TYPES, parse_spec
from .writer import DatasetWriter


def field_type(arrow_type: Any) -> str:
    """The type string of a column of ``arrow_type`` (see the module)."""
    import pyarrow as pa

    t = pa.types
    if t.is_boolean(arrow_type) or t.is_integer(arrow_type) or t.is_floating(arrow_type):
        return _fixed_name(arrow_type)
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return "utf8"
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return "bytes"
    if t.is_fixed_size_list(arrow_type):
        shape, inner = [], arrow_type
        while t.is_fixed_size_list(inner):
            shape.append(inner.list_size)
            inner = inner.value_type
        if t.is_boolean(inner) or t.is_integer(inner) or t.is_floating(inner):
            return f"{_fixed_name(inner)}[{','.join(map(str, shape))}]"
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        inner = arrow_type.value_type
        if t.is_integer(inner) or t.is_floating(inner):
            return "array"
        if t.is_string(inner) or t.is_large_string(inner):
            return "utf8[]"
        if t.is_binary(inner) or t.is_large_binary(inner):
            return "bytes[]"
    return "json"


def _fixed_name(arrow_type: Any) -> str:
    dtype = np.dtype(arrow_type.to_pandas_dtype())
    return next(name for name, text in FIXED_TYPES.items() if np.dtype(text) == dtype)


def from_arrow(data: Any, path: Any, spec: Mapping[str, str] | None = None, **writer_options: Any) -> int:
    """Writes ``data`` (a ``pyarrow.Table``, a ``RecordBatch``, a ``RecordBatchReader`` or
    an iterable of record batches of one schema) as a dataset at ``path``; returns the
    number of datapoints. ``spec`` overrides the types the schema gives (see the module);
    ``writer_options`` go to ``DatasetWriter`` (``metadata``, ``durable``, ``storage_options``,
    ...; ``length`` is the table's when it has one)."""
    pa = require("pyarrow", "convert", "from_arrow")
    batches: Iterable[Any]
    if isinstance(data, pa.Table):
        batches = data.to_batches()
        writer_options.setdefault("length", data.num_rows)
        schema = data.schema
    elif isinstance(data, pa.RecordBatch):
        batches, schema = [data], data.schema
        writer_options.setdefault("length", data.num_rows)
    else:
        batches = iter(data)
        first = next(batches, None)
        if first is None:
            raise ValueError("from_arrow: no record batches, so no schema to make a dataset of")
        schema = first.schema
        batches = _chain(first, batches)
    types = {name: field_type(schema.field(name).type) for name in schema.names}
    types.update(spec or {})
    fields = parse_spec(types)
    with DatasetWriter(path, types, **writer_options) as writer:
        for batch in batches:
            if batch.schema != schema:
                raise ValueError(f"from_arrow: a record batch of another schema:\n{batch.schema}")
            writer.append_batch({name: _column(batch.column(name), fields[name]) for name in fields})
        return len(writer)


def _chain(first: Any, rest: Any) -> Any:
    yield first
    yield from rest


def _column(column: Any, field: Any) -> Any:
    """A column as ``append_batch`` takes it: Arrow arrays for the types written from their
    buffers, Python values (numpy arrays for ``array``) for the others."""
    if field.sequence or not (field.fixed or field.type in ("int", "float", "utf8", "bytes")):
        values = column.to_pylist()
        if field.type == "array" and not field.sequence:
            return [None if v is None else np.asarray(v, column.type.value_type.to_pandas_dtype()) for v in values]
        return values
    import pyarrow as pa

    if pa.types.is_fixed_size_binary(column.type):
        return column.to_pylist()
    return column
