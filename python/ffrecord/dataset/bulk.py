"""Bulk writes: ``DatasetWriter.append_batch(columns)`` and ``ShardedDatasetWriter.append_batch``.

``columns`` is a dict with one array-like per field of the spec, all of the same length: numpy
arrays, Arrow arrays (or chunked arrays, or an Arrow table / record batch in place of the
dict), torch tensors, lists. Every field is encoded first (a bad value raises
``CodecError`` or ``DatapointError`` naming the field and the datapoint, with nothing
written), then written with one native call per field: a fixed-size field's values straight
from the array into blocks, ``int`` and ``float`` values as one buffer of 8-byte numbers,
``bytes`` and ``utf8`` from an Arrow array's own buffers (no per-value Python) or from one
join of a list, any other type through its encoder value by value, then one call.

>>> import os, tempfile
>>> import numpy as np
>>> from ffrecord.dataset import DatasetReader, DatasetWriter
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"i": "int64", "x": "float32[2]", "s": "bytes"}) as writer:
...     writer.append_batch({"i": np.arange(3), "x": np.ones((3, 2)), "s": [b"a", b"bb", b""]})
range(0, 3)
>>> DatasetReader(path)[2]
{'i': 2, 'x': array([1., 1.], dtype=float32), 's': b''}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from . import columns, sequence
from .codecs import BUILTIN
from .errors import DatapointError
from .spec import Field


class Encoded:
    """One field's values of a batch, ready to write: ``values`` (a fixed-size field's array)
    or ``data`` and ``offsets`` (samples back to back, sample k at ``offsets[k:k+2]``)."""

    def __init__(self, values: np.ndarray | None = None, data: Any = None, offsets: Any = None) -> None:
        self.values, self.data, self.offsets = values, data, offsets

    def __getitem__(self, part: slice) -> Encoded:
        if self.values is not None:
            return Encoded(self.values[part])
        a, b, _ = part.indices(len(self.offsets) - 1)
        return Encoded(None, self.data[self.offsets[a]:self.offsets[b]], self.offsets[a:b + 1] - self.offsets[a])

    @property
    def nbytes(self) -> int:
        return self.values.nbytes if self.values is not None else int(self.offsets[-1])

    def write(self, writer: Any) -> None:
        if self.values is not None:
            writer.write_values(self.values)
        else:
            writer.write_batch(self.data, np.diff(self.offsets).astype(np.uint64))


def batch_columns(columns: Any, fields: Mapping[str, Field]) -> tuple[dict[str, Any], int]:
    """``columns`` as ``{field: array-like}`` holding exactly the spec's fields, and their
    common length; ``DatapointError`` naming a field missing, extra, or of another length."""
    if hasattr(columns, "column_names") and hasattr(columns, "column"):  # an Arrow table or batch
        columns = {name: columns.column(name) for name in columns.column_names}
    if not isinstance(columns, Mapping):
        raise DatapointError(f"append_batch takes a dict of field -> values (or an Arrow table), "
                             f"not {type(columns).__name__}")
    missing = [name for name in fields if name not in columns]
    if missing:
        raise DatapointError(f"the batch lacks field {missing[0]!r}", field=missing[0])
    extra = [name for name in columns if name not in fields]
    if extra:
        raise DatapointError(f"the batch has field {extra[0]!r}, which is not in the spec "
                             f"({', '.join(fields)})", field=extra[0])
    lengths = {name: _length(name, columns[name]) for name in fields}
    n = next(iter(lengths.values()))
    for name, length in lengths.items():
        if length != n:
            first = next(iter(lengths))
            raise DatapointError(f"the batch's fields differ in length: {first!r} has {n} values, "
                                 f"{name!r} {length}", field=name)
    return dict(columns), n


def _length(name: str, values: Any) -> int:
    try:
        return len(values)
    except TypeError:
        raise DatapointError(f"field {name!r}: a batch takes an array or list of values, not "
                             f"{type(values).__name__}", field=name) from None


def encode(fields: Mapping[str, Field], encoders: Mapping[str, Callable], columns: Mapping[str, Any],
           n: int, first: int) -> dict[str, Encoded]:
    """Every field of a batch of ``n`` datapoints encoded, the first being datapoint ``first``."""
    return {name: _encode_field(field, encoders[name], columns[name], n, first)
            for name, field in fields.items()}


def _encode_field(field: Field, encode: Callable, values: Any, n: int, first: int) -> Encoded:
    if field.block is not None:
        return Encoded(columns.as_values(field, values, n, first))
    if not field.sequence and field.type in _NUMBERS and encode is _BUILTIN_ENCODERS[field.type]:
        return _numbers(field, values, n, first)
    if not field.sequence and field.type in ("bytes", "utf8") and encode is _BUILTIN_ENCODERS[field.type]:
        arrow = _arrow_binary(field, values, first)
        if arrow is not None:
            return arrow
    return _each(field, encode, values, first)


def _numbers(field: Field, values: Any, n: int, first: int) -> Encoded:
    """An ``int`` or ``float`` field's values as one buffer of 8-byte numbers."""
    as_column = Field(field.name, _NUMBERS[field.type], False, None)
    array = columns.as_values(as_column, values, n, first)
    return Encoded(None, array.view(np.uint8).reshape(-1), np.arange(n + 1, dtype=np.int64) * 8)


def _arrow_binary(field: Field, values: Any, first: int) -> Encoded | None:
    """The samples of an Arrow binary or string array, from its own buffers; None for values
    of another kind."""
    if not type(values).__module__.startswith("pyarrow") or not hasattr(values, "type"):
        return None
    import pyarrow as pa

    if hasattr(values, "combine_chunks"):
        values = values.combine_chunks()
    kind = values.type
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if not (text or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)) or (text != (field.type == "utf8")):
        return None
    if values.null_count:
        row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise DatapointError(f"datapoint {first + row}, field {field.name!r} ({field.spec}): null",
                             field=field.name, index=first + row)
    large = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64 if large else np.int32)[values.offset:values.offset + len(values) + 1]
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    start = int(offsets[0]) if len(offsets) else 0
    return Encoded(None, data[start:int(offsets[-1]) if len(offsets) else 0], offsets.astype(np.int64) - start)


def _each(field: Field, encode: Callable, values: Any, first: int) -> Encoded:
    """Values encoded one by one (any codec, sequences), then joined for one write."""
    from .writer import _checked

    if type(values).__module__.startswith("pyarrow"):
        values = values.to_pylist()
    elif isinstance(values, np.ndarray) and field.type not in ("array", *columns.FIXED_TYPES):
        values = values.tolist()
    if field.sequence:
        samples = [_sequence(field, encode, value, first + k) for k, value in enumerate(values)]
    else:
        samples = [_checked(encode, value, field, first + k, None) for k, value in enumerate(values)]
    offsets = np.zeros(len(samples) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, samples), np.int64, len(samples)), out=offsets[1:])
    return Encoded(None, np.frombuffer(b"".join(samples), np.uint8), offsets)


def _sequence(field: Field, encode: Callable, value: Any, index: int) -> bytes:
    from .writer import _checked

    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping)) or not hasattr(value, "__len__"):
        raise DatapointError(f"datapoint {index}, field {field.name!r} ({field.spec}): a sequence field "
                             f"takes a list of elements, not {type(value).__name__}", field=field.name,
                             index=index)
    return sequence.pack([_checked(encode, element, field, index, k) for k, element in enumerate(value)])


_NUMBERS = {"int": "int64", "float": "float64"}
# The built-in encoders that a batch bypasses (the values written from arrays or buffers).
_BUILTIN_ENCODERS = {name: BUILTIN[name].encode for name in ("int", "float", "bytes", "utf8")}
