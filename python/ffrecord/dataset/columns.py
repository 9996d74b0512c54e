"""Fixed-size fields: ``bool``, ``int8`` … ``int64``, ``uint8`` … ``uint64``, ``float16``,
``float32``, ``float64``, and fixed-shape arrays of them (``float32[768]``).

Such a field is stored as a *column*: its file's samples are blocks of ``block`` values back
to back (the last block holds the rest), the layout the core reads (``core/doc.go``,
"Column blocks"): a value costs its own size, one call gathers the values of any indices
(each block read once and CRC-checked whole), and a range, or the whole column, is read
straight into one numpy array. ``block`` is chosen at write time, about ``BLOCK_BYTES`` of
values to a block, and kept in ``spec.json``.

A value is written as anything numpy converts to the field's dtype and shape without
losing it (an integer out of the type's range is refused; a float64 rounds to a float32),
and read back as a Python ``bool``/``int``/``float`` (a scalar type) or a numpy array (a
shaped one); whole columns and batches read as numpy arrays of shape ``(n, *shape)``.

>>> from ffrecord.dataset.spec import parse_spec
>>> field = parse_spec({"e": "float16[2]"})["e"]
>>> layout = Layout.of(field, 10, BLOCK_BYTES)
>>> layout.dtype, layout.shape, layout.width, layout.block, layout.blocks
(dtype('float16'), (2,), 4, 512, 1)
>>> as_values(field, [[1, 2], [3, 4.5]]).tolist()
[[1.0, 2.0], [3.0, 4.5]]
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _lib
from ..errors import CorruptFileError
from .errors import CodecError, CorruptDatasetError
from .spec import FIXED_TYPES, Field, with_blocks

# Bytes of values to a block: a random read of one value reads and checks one block, a
# scan reads blocks back to back. Measured here (1M rows {int64, float32, uint8[32]}, one
# process, alternating, best of 7, a loaded 2-core machine): random batches of 64 rows
# 211k/131k/89k/48k rows/s with blocks of 1/2/4/16 KiB, scans 23/29/27/30M rows/s: past
# 2 KiB a scan gains nothing and random batches keep losing; below it scans begin to lose.
BLOCK_BYTES = 2048


def values_per_block(field: Field, block_bytes: int = BLOCK_BYTES) -> int:
    """How many values of ``field`` make a block of about ``block_bytes`` (at least one)."""
    return max(1, block_bytes // value_dtype(field).itemsize)


def value_dtype(field: Field) -> np.dtype:
    """The dtype of one value of a fixed-size field: a subarray dtype for a shaped one."""
    base = np.dtype(FIXED_TYPES[field.type])
    return np.dtype((base, field.shape)) if field.shape else base


@dataclass(frozen=True)
class Layout:
    """A column file's layout: ``values`` values of ``dtype`` and ``shape`` (``width`` bytes
    each), ``block`` to a sample."""

    dtype: np.dtype  # of one element
    shape: tuple[int, ...]
    width: int
    block: int
    values: int

    @classmethod
    def of(cls, field: Field, values: int, block_bytes: int | None = None) -> Layout:
        """The layout of ``values`` values of ``field``: its own ``block``, or blocks of
        about ``block_bytes`` when given."""
        per = field.block if block_bytes is None else values_per_block(field, block_bytes)
        return cls(np.dtype(FIXED_TYPES[field.type]), field.shape, value_dtype(field).itemsize, per, values)

    @property
    def blocks(self) -> int:
        """Samples of the file: ``values / block`` rounded up."""
        return -(-self.values // self.block)

    def empty(self, n: int) -> np.ndarray:
        return np.empty((n, *self.shape), self.dtype)


# ---- reading -------------------------------------------------------------------------------

def gather(reader: Any, layout: Layout, idx: np.ndarray, where: str) -> np.ndarray:
    """The values at ``idx`` (``int64``, in range) of the column file ``reader`` opened, as
    an array ``(len(idx), *shape)``: one native call, each block holding one read once.
    ``where`` (the dataset and field) starts the message of a ``CorruptDatasetError``."""
    out = layout.empty(len(idx))
    if len(idx):
        indices = np.ascontiguousarray(idx, np.uint64)
        _call(reader, layout, where, "ffr_reader_read_values", indices.ctypes.data, len(indices), out)
    return out


def value_range(reader: Any, layout: Layout, start: int, stop: int, where: str) -> np.ndarray:
    """Values ``[start, stop)`` as an array: the blocks covered whole are read straight into it."""
    out = layout.empty(stop - start)
    if stop > start:
        _call(reader, layout, where, "ffr_reader_read_value_range", start, stop - start, out)
    return out


def _call(reader: Any, layout: Layout, where: str, name: str, a: int, b: int, out: np.ndarray) -> None:
    dll, handle = reader._live()
    status = getattr(dll, name)(handle, layout.values, layout.width, layout.block, a, b,
                                out.ctypes.data, out.nbytes)
    if status:
        try:
            _lib.raise_status(status)
        except CorruptFileError as exc:
            raise CorruptDatasetError(f"{where}: {exc}") from None


def as_python(values: np.ndarray) -> list[Any]:
    """Values read as an array, one per datapoint: Python scalars, or arrays of the shape."""
    return values.tolist() if values.ndim == 1 else list(values)


# ---- writing -------------------------------------------------------------------------------

def as_values(field: Field, values: Any, count: int | None = None, first: int = 0) -> np.ndarray:
    """``values`` (a numpy array, an Arrow array, a torch tensor, a list) as a C-contiguous
    array ``(n, *shape)`` of the field's dtype; ``count``, when given, is the ``n`` it must
    have. Raises ``CodecError`` naming the field (and the datapoint at fault, counting the
    first value as datapoint ``first``) for values of another shape, an integer out of the
    type's range, a float or a non-number given to an integer type, a non-bool to ``bool``."""
    try:
        return _converted(field, values, count)
    except (TypeError, ValueError, OverflowError) as exc:
        row = getattr(exc, "row", None)
        where = f"datapoint {first + row}, " if row is not None else ""
        raise CodecError(f"{where}field {field.name!r} ({field.spec}): {exc}", field=field.name,
                         index=None if row is None else first + row) from exc


class _OutOfRange(OverflowError):
    def __init__(self, message: str, row: int) -> None:
        super().__init__(message)
        self.row = row


def _converted(field: Field, values: Any, count: int | None) -> np.ndarray:
    dtype = np.dtype(FIXED_TYPES[field.type])
    array = _numpy(values)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"values of dtype {array.dtype} are not numbers")
    if dtype.kind == "b" and array.dtype.kind != "b":
        raise TypeError(f"a bool field takes bools, not {array.dtype} values")
    if dtype.kind in "iu" and array.dtype.kind not in "iu":
        raise TypeError(f"an integer field takes integers, not {array.dtype} values")
    if dtype.kind in "iu" and array.size and not np.can_cast(array.dtype, dtype):
        info = np.iinfo(dtype)
        bad = (array < info.min) | (array > info.max)
        if bad.any():
            row = int(np.argmax(bad.reshape(len(array), -1).any(axis=1))) if array.ndim else 0
            raise _OutOfRange(f"a value does not fit in {field.type}", row)
    converted = np.ascontiguousarray(array, dtype)
    want = (len(converted) if count is None and converted.ndim else count, *field.shape)
    if converted.shape != want:
        raise ValueError(f"values of shape {converted.shape}, need {want}")
    return converted


def _numpy(values: Any) -> np.ndarray:
    """A numpy view or copy of an array-like: numpy, Arrow (chunks joined), torch (on CPU)."""
    if isinstance(values, np.ndarray):
        return values
    module = type(values).__module__
    if module.startswith("pyarrow"):
        if hasattr(values, "combine_chunks"):
            values = values.combine_chunks()
        if values.null_count:
            raise ValueError(f"{values.null_count} values are null")
        shape = [len(values)]
        while hasattr(values.type, "value_type"):  # lists: of a fixed size only
            if not hasattr(values.type, "list_size"):
                raise TypeError(f"Arrow {values.type} values: a fixed shape takes fixed-size lists")
            shape.append(values.type.list_size)
            values = values.flatten()
        return values.to_numpy(zero_copy_only=False).reshape(shape)
    if module.startswith("torch"):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def encoder(field: Field) -> Any:
    """The function ``value -> bytes`` of a fixed-size field (one value as stored)."""
    kind = np.dtype(FIXED_TYPES[field.type]).kind

    def encode(value: Any) -> bytes:
        if not field.shape:
            if (kind == "b") != isinstance(value, (bool, np.bool_)):
                raise TypeError(f"a {field.type!r} value must be "
                                f"{'a bool' if kind == 'b' else 'a number, not bool'}, not {value!r:.40}")
        return _converted(field, [value], 1).tobytes()

    return encode


@functools.lru_cache(maxsize=4096)
def decoder(field: Field) -> Any:
    """The function ``memoryview -> value`` of a fixed-size field's values (as sequence
    elements, or as values read one by one): a Python scalar, or an array of the shape.
    One function for equal fields, so that datasets of one spec decode alike by identity
    (a mixture reads its members' batches at once only then)."""
    one = value_dtype(field)
    base = np.dtype(FIXED_TYPES[field.type])
    if field.shape:
        shape = field.shape

        def decode(view: memoryview) -> np.ndarray:
            if len(view) != one.itemsize:
                raise ValueError(f"{len(view)} bytes, not a {field.type}{list(shape)} value ({one.itemsize})")
            return np.frombuffer(view, base).reshape(shape).copy()
    else:
        def decode(view: memoryview) -> Any:
            if len(view) != one.itemsize:
                raise ValueError(f"{len(view)} bytes, not a {field.type} value ({one.itemsize})")
            return np.frombuffer(view, base)[0].item()
    return decode


def as_columns(fields: Mapping[str, Field], encoders: Mapping[str, Any] | None,
               block_bytes: int = BLOCK_BYTES) -> dict[str, Field]:
    """``fields`` with those stored as columns given their values per block: the fixed-size
    fields that are not sequences and whose type no user encoder overrides."""
    if isinstance(block_bytes, bool) or not isinstance(block_bytes, int) or block_bytes < 1:
        raise ValueError(f"block_bytes must be a positive integer, got {block_bytes!r}")
    overridden = set(encoders or ())
    return with_blocks(fields, {name: values_per_block(field, block_bytes) for name, field in fields.items()
                                if field.fixed and not field.sequence and field.type not in overridden})


def field_writer(path: Any, field: Field, length: int | None, durable: bool) -> Any:
    """The writer of one field's file: a ``FileWriter``, in a ``ColumnWriter`` for a column."""
    from ..writer import FileWriter

    if field.block is None:
        return FileWriter(path, length, compression=field.compression, durable=durable)
    blocks = None if length is None else -(-length // field.block)
    return ColumnWriter(FileWriter(path, blocks, compression=field.compression, durable=durable),
                        field, field.block)


class ColumnWriter:
    """Writes a column field's file: values gathered into blocks of ``layout.block``, each
    full block written as a sample (many blocks by one native call), the last at ``close``.
    Offers what ``DatasetWriter`` asks of a field's writer: ``write_one`` (one value's
    bytes), ``close``, ``abort``; and ``write_values`` for a batch."""

    def __init__(self, file_writer: Any, field: Field, block: int) -> None:
        self.file = file_writer
        self.field = field
        self.width = value_dtype(field).itemsize
        self.block = block
        self._pending = bytearray()  # values of the block being filled

    def write_one(self, value: bytes) -> None:
        self._pending += value
        if len(self._pending) == self.block * self.width:
            self.file.write_one(bytes(self._pending))
            self._pending.clear()

    def write_values(self, values: np.ndarray) -> None:
        """Appends an array of values (``as_values``'s): the blocks it completes in one call."""
        data = memoryview(values.reshape(-1).view(np.uint8))
        size = self.block * self.width
        if self._pending:
            take = min(len(data), size - len(self._pending))
            self._pending += data[:take]
            data = data[take:]
            if len(self._pending) == size:
                self.file.write_one(bytes(self._pending))
                self._pending.clear()
        whole = len(data) // size
        if whole:
            self.file.write_batch(data[:whole * size], np.full(whole, size, np.uint64))
        self._pending += data[whole * size:]

    def close(self) -> None:
        if self._pending:
            self.file.write_one(bytes(self._pending))
            self._pending.clear()
        self.file.close()

    def abort(self) -> None:
        self._pending.clear()
        self.file.abort()

    @property
    def count(self) -> int:
        return self.file.count

