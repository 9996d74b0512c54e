"""Arrow tables: Parquet files (``parquet``) and Hugging Face datasets saved with
``save_to_disk`` (``hf``, Arrow IPC stream files). Columns become fields:

===============================================  ==========================================
Arrow type                                       field type
===============================================  ==========================================
integers (a ``uint64`` of 2**63 or more fails)   ``int``
floating point                                   ``float``
string, large_string                             ``utf8``
binary, large_binary, fixed_size_binary          ``bytes``
a list of numbers (any list type)                ``array`` (1-D, the list's number type)
a list of strings / of binaries                  ``utf8[]`` / ``bytes[]``
HF ``Image`` (struct of ``bytes`` and ``path``)  ``bytes`` (the image file's bytes)
dictionary-encoded                               as its values' type
anything else (bool, struct, nested lists, …)    ``json`` (its Python value)
===============================================  ==========================================

In a ``json`` value, at any depth, a timestamp becomes its text as Arrow casts it, with as
many fraction digits as its unit has (``"2023-11-14 22:13:20.123456789"``; the local time and
offset for a time zone: ``"2023-11-14 23:13:20.123+0100"``), a date ``"2024-01-02"``, a time of
day ``"01:02:03.500000"``, a decimal its exact text (``"12.340"``) and a duration its ISO 8601
text (``"PT1.5S"``, ``"-PT0.000003S"``): exact, and read back by a cast to the type (a parse
of the text for times and durations). A
``json`` column holding binary data (other than an HF ``Image``) is an error naming it.

A null in a column of a type other than ``json``, or inside the list of an ``array``,
``utf8[]`` or ``bytes[]`` field, is an error naming the file, column and row. Two columns of
one name (Arrow allows it, at any depth) are an error naming it. Units are Parquet row
groups and HF data files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import PathArg
from ._base import Source, read_index, require, source_error
from ._files import files_of, regular_file
from ._index import unique


class _NoArrow(Exception):
    """Stands for pyarrow's errors when pyarrow is missing (no source reads then)."""


try:
    from pyarrow import ArrowException as _ArrowException
except ImportError:
    _ArrowException = _NoArrow
# pyarrow's errors for damaged files: ArrowInvalid (a ValueError), ArrowIOError (an OSError)...
_ARROW_ERRORS = (OSError, _ArrowException)


def field_type(arrow_type: Any) -> str:
    """Our field type for a column of ``arrow_type``."""
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(arrow_type):
        return field_type(arrow_type.value_type)
    if t.is_integer(arrow_type):
        return "int"
    if t.is_floating(arrow_type):
        return "float"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return "utf8"
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type):
        return "bytes"
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        inner = field_type(arrow_type.value_type)
        if inner in ("int", "float") and not t.is_dictionary(arrow_type.value_type):
            return "array"
        if inner in ("utf8", "bytes"):
            return f"{inner}[]"
    if _is_hf_image(arrow_type):
        return "bytes"
    return "json"


def _is_hf_image(arrow_type: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_struct(arrow_type) and {f.name for f in arrow_type} == {"bytes", "path"}


def _children(arrow_type: Any) -> list[tuple[str, Any]]:
    """The named child types of a nested type (a list's values are ``[]``, a map's ``{key}``
    and ``{value}``)."""
    import pyarrow as pa

    t = pa.types
    if t.is_struct(arrow_type):
        return [(f".{f.name}", f.type) for f in arrow_type]
    if t.is_map(arrow_type):
        return [("{key}", arrow_type.key_type), ("{value}", arrow_type.item_type)]
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return [("[]", arrow_type.value_type)]
    if t.is_dictionary(arrow_type):
        return [("", arrow_type.value_type)]
    return []


def check_schema(schema: Any, file: Any) -> None:
    """An error naming the column when two columns, or two fields of a struct at any depth,
    share a name (one would replace the other), or when a ``json`` column holds binary data."""
    import pyarrow as pa

    def walk(name: str, arrow_type: Any) -> None:
        children = _children(arrow_type)
        if pa.types.is_struct(arrow_type):
            _refuse_twice([child for child, _ in children], file, f"{name} field")
        if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) or \
                pa.types.is_fixed_size_binary(arrow_type):
            raise source_error(file, None, f"column {name!r} holds binary data inside a value that "
                                           "becomes json, which cannot hold bytes")
        for child, child_type in children:
            walk(name + child, child_type)

    _refuse_twice(schema.names, file, "column")
    for field in schema:
        if field_type(field.type) == "json":
            walk(field.name, field.type)


def _refuse_twice(names: list[str], file: Any, what: str) -> None:
    twice = next((name for k, name in enumerate(names) if name in names[:k]), None)
    if twice is not None:
        raise source_error(file, None, f"{what} {twice!r} appears twice: one would replace the other")


def column_values(column: Any, kind: str, file: Any, name: str, first_row: int) -> list[Any]:
    """The Python values of one column (a ``pyarrow`` array) for a field of type ``kind``."""
    if kind != "json" and column.null_count:
        row = first_row + _first_null(column)
        raise source_error(file, row, f"column {name!r} is null, which a {kind!r} field cannot hold")
    if kind in ("array", "utf8[]", "bytes[]"):
        inner = column.flatten()
        if inner.null_count:
            import pyarrow.compute as pc

            row = first_row + pc.list_parent_indices(column)[_first_null(inner)].as_py()
            raise source_error(file, row, f"column {name!r} holds a null inside its list, which a "
                                          f"{kind!r} field cannot hold")
    if kind == "array":
        dtype = column.type.value_type.to_pandas_dtype()
        return [np.asarray(row, dtype) for row in column.to_pylist()]
    if kind == "bytes" and _is_hf_image(column.type):
        return [row["bytes"] for row in column.to_pylist()]
    if kind == "json":
        return json_values(column)
    return column.to_pylist()


def _first_null(column: Any) -> int:
    return int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])


def json_values(column: Any) -> list[Any]:
    """The values of a ``json`` column as JSON holds them: temporal and decimal values as
    text (see the module), at any depth.

    >>> import datetime, pyarrow as pa
    >>> json_values(pa.array([{"at": datetime.datetime(2024, 1, 2, 3, 4, 5), "took": datetime.timedelta(0, 1, 500000)}]))
    [{'at': '2024-01-02 03:04:05.000000', 'took': 'PT1.5S'}]
    """
    text = _as_text(column.type)
    values = (column if text.equals(column.type) else column.cast(text)).to_pylist()
    if _has_duration(column.type):
        values = [_durations(value, column.type) for value in values]
    return values


def _as_text(arrow_type: Any) -> Any:
    """``arrow_type`` with its temporal and decimal types (at any depth) as strings, its
    durations as their integer counts."""
    import pyarrow as pa

    t = pa.types
    if t.is_duration(arrow_type):
        return pa.int64()
    if t.is_temporal(arrow_type) or t.is_decimal(arrow_type):
        return pa.string()
    if t.is_dictionary(arrow_type):
        return _as_text(arrow_type.value_type)
    if t.is_struct(arrow_type):
        return pa.struct([f.with_type(_as_text(f.type)) for f in arrow_type])
    if t.is_map(arrow_type):
        return pa.map_(_as_text(arrow_type.key_type), _as_text(arrow_type.item_type))
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        item = arrow_type.value_field.with_type(_as_text(arrow_type.value_type))
        if t.is_fixed_size_list(arrow_type):
            return pa.list_(item, arrow_type.list_size)
        return pa.large_list(item) if t.is_large_list(arrow_type) else pa.list_(item)
    return arrow_type


def _has_duration(arrow_type: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_duration(arrow_type) or any(_has_duration(child) for _, child in _children(arrow_type))


def _durations(value: Any, arrow_type: Any) -> Any:
    """``value`` (of ``_as_text(arrow_type)``) with its durations' counts as ISO 8601 text."""
    import pyarrow as pa

    t = pa.types
    if value is None or not _has_duration(arrow_type):
        return value
    if t.is_duration(arrow_type):
        return iso_duration(value, {"s": 0, "ms": 3, "us": 6, "ns": 9}[arrow_type.unit])
    if t.is_dictionary(arrow_type):
        return _durations(value, arrow_type.value_type)
    if t.is_struct(arrow_type):
        return {f.name: _durations(value[f.name], f.type) for f in arrow_type}
    if t.is_map(arrow_type):
        return [(_durations(k, arrow_type.key_type), _durations(v, arrow_type.item_type)) for k, v in value]
    return [_durations(item, arrow_type.value_type) for item in value]


def iso_duration(count: int, digits: int) -> str:
    """``count`` units of ``10**-digits`` seconds as ISO 8601 text, exactly.

    >>> iso_duration(1500, 3), iso_duration(-3, 6), iso_duration(90, 0), iso_duration(0, 9)
    ('PT1.5S', '-PT0.000003S', 'PT90S', 'PT0S')
    """
    seconds, fraction = divmod(abs(count), 10**digits)
    text = f"{seconds}.{fraction:0{digits}d}".rstrip("0").rstrip(".") if digits else str(seconds)
    return f"{'-' if count < 0 else ''}PT{text}S"


def column_batch(column: Any, kind: str, file: Any, name: str, first_row: int) -> Any:
    """One column of a batch as ``append_batch`` takes it: the Arrow array itself for an
    ``int``, ``float``, ``utf8`` or ``bytes`` field (written from its buffers), else the
    Python values of ``column_values``."""
    if kind in ("int", "float", "utf8", "bytes") and not _is_hf_image(column.type) and not column.null_count:
        return column
    return column_values(column, kind, file, name, first_row)


class _ArrowSource(Source):
    """A source whose units yield Arrow record batches."""

    def _set_schema(self, schema: Any, file: Any) -> None:
        check_schema(schema, file)
        self.spec = {name: field_type(schema.field(name).type) for name in schema.names}
        self.columns = _columns(schema)

    def _batches(self, unit: str) -> Iterator[Any]:
        raise NotImplementedError

    def read_columns(self, unit: str) -> Iterator[dict[str, Any]]:
        """Each record batch of the unit as columns (see ``column_batch``)."""
        row = 0
        try:
            for batch in self._batches(unit):
                self._check_columns(batch, unit, row)
                yield {name: column_batch(batch.column(name), kind, unit, name, row) for name, kind in self.spec.items()}
                row += batch.num_rows
        except _ARROW_ERRORS as exc:
            raise source_error(unit, row, f"cannot be read: {type(exc).__name__}: {exc}") from None

    def _check_columns(self, batch: Any, unit: str, row: int) -> None:
        if _columns(batch.schema) != self.columns:
            raise source_error(unit, row, f"the columns ({_columns(batch.schema)}) differ from "
                                          f"the first file's ({self.columns})")

    def read(self, unit: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        row = 0
        try:
            for batch in self._batches(unit):
                self._check_columns(batch, unit, row)
                columns = [column_values(batch.column(k), kind, unit, name, row)
                           for k, (name, kind) in enumerate(self.spec.items())]
                for values in zip(*columns):
                    yield row, dict(zip(self.spec, values))
                    row += 1
        except _ARROW_ERRORS as exc:
            raise source_error(unit, row, f"cannot be read: {type(exc).__name__}: {exc}") from None


def _columns(schema: Any) -> str:
    return ", ".join(f"{field.name}: {field.type}" for field in schema)


class ParquetSource(_ArrowSource):
    """``ParquetSource("train/")``: a Parquet file, or a directory's ``*.parquet`` files."""

    kind = "parquet"

    def __init__(self, path: PathArg) -> None:
        pq = require("pyarrow.parquet", "pyarrow")
        self.path, self.files = files_of(path, "**/*.parquet")
        metadata = {file: _metadata(pq, file) for file in self.files}
        self.row_groups = {f"{file}#row-group-{group}": (file, group, metadata[file].row_group(group).num_rows)
                           for file in self.files for group in range(metadata[file].num_row_groups)}
        if self.files:
            self._set_schema(metadata[self.files[0]].schema.to_arrow_schema(), self.files[0])

    def units(self) -> list[str]:
        return list(self.row_groups)

    def count(self, unit: str) -> int:
        return self.row_groups[unit][2]

    def unit_files(self, unit: str) -> list[Path]:
        return [self.row_groups[unit][0]]

    def _batches(self, unit: str) -> Iterator[Any]:
        import pyarrow.parquet as pq

        file, group, _ = self.row_groups[unit]
        yield from pq.ParquetFile(regular_file(file)).iter_batches(row_groups=[group], batch_size=1024)


def _metadata(pq: Any, file: Path) -> Any:
    try:
        return pq.read_metadata(regular_file(file))
    except _ARROW_ERRORS as exc:
        raise source_error(file, None, f"not a readable Parquet file: {type(exc).__name__}: {exc}") from None


class HuggingFaceSource(_ArrowSource):
    """``HuggingFaceSource("saved/")``: a ``datasets.Dataset`` saved with ``save_to_disk``
    (its ``state.json`` and Arrow files; the ``datasets`` package is not needed). For a
    ``DatasetDict``, convert each split's directory."""

    kind = "hf"

    def __init__(self, path: PathArg) -> None:
        require("pyarrow", "pyarrow")
        splits = Path(os.fsdecode(path), "dataset_dict.json").is_file()
        self.path, state = read_index(path, "state.json", "a DatasetDict: convert one split's directory"
                                      if splits else "not a dataset saved with save_to_disk")
        entries = state["_data_files"].items()
        names = [entry["filename"].relative_path() for entry in entries]
        unique([entry["filename"] for entry in entries], names, "data file")
        self.files = [self.path / name for name in names]
        if self.files:
            with self._stream(self.files[0]) as stream:
                self._set_schema(stream.schema, self.files[0])

    def units(self) -> list[str]:
        return [str(file) for file in self.files]

    def unit_files(self, unit: str) -> list[Path]:
        return [self.path / "state.json", Path(unit)]

    def _batches(self, unit: str) -> Iterator[Any]:
        with self._stream(unit) as stream:
            yield from stream

    @contextlib.contextmanager
    def _stream(self, file: Any) -> Iterator[Any]:
        """The Arrow IPC stream of the data file ``file``, mapped while it is used."""
        import pyarrow as pa

        try:
            with pa.memory_map(str(regular_file(file))) as source:
                yield pa.ipc.open_stream(source)
        except _ARROW_ERRORS as exc:
            raise source_error(file, None, f"not a readable Arrow file: {type(exc).__name__}: {exc}") from None
