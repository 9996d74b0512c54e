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
anything else (bool, struct, nested lists, …)    ``json`` (its Python value)
===============================================  ==========================================

A null in a column of a type other than ``json`` is an error naming the file, column and
row. Units are Parquet row groups and HF data files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import PathArg
from ._base import Source, files_of, read_index, require, source_error


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
        if inner in ("int", "float") and not t.is_boolean(arrow_type.value_type):
            return "array"
        if inner in ("utf8", "bytes"):
            return f"{inner}[]"
    if _is_hf_image(arrow_type):
        return "bytes"
    return "json"


def _is_hf_image(arrow_type: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_struct(arrow_type) and {f.name for f in arrow_type} == {"bytes", "path"}


def column_values(column: Any, kind: str, file: Any, name: str, first_row: int) -> list[Any]:
    """The Python values of one column (a ``pyarrow`` array) for a field of type ``kind``."""
    if kind != "json" and column.null_count:
        row = first_row + int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise source_error(file, row, f"column {name!r} is null, which a {kind!r} field cannot hold")
    if kind == "array":
        dtype = column.type.value_type.to_pandas_dtype()
        return [np.asarray(row, dtype) for row in column.to_pylist()]
    if kind == "bytes" and _is_hf_image(column.type):
        return [row["bytes"] for row in column.to_pylist()]
    return column.to_pylist()


def column_batch(column: Any, kind: str, file: Any, name: str, first_row: int) -> Any:
    """One column of a batch as ``append_batch`` takes it: the Arrow array itself for an
    ``int``, ``float``, ``utf8`` or ``bytes`` field (written from its buffers), else the
    Python values of ``column_values``."""
    if kind in ("int", "float", "utf8", "bytes") and not _is_hf_image(column.type) and not column.null_count:
        return column
    return column_values(column, kind, file, name, first_row)


class _ArrowSource(Source):
    """A source whose units yield Arrow record batches."""

    def _set_schema(self, schema: Any) -> None:
        self.spec = {name: field_type(schema.field(name).type) for name in schema.names}
        self.schema_text = str(schema)

    def _batches(self, unit: str) -> Iterator[Any]:
        raise NotImplementedError

    def read_columns(self, unit: str) -> Iterator[dict[str, Any]]:
        """Each record batch of the unit as columns (see ``column_batch``)."""
        row = 0
        try:
            for batch in self._batches(unit):
                if str(batch.schema) != self.schema_text:
                    raise source_error(unit, row, f"the columns differ from the first file's:\n{batch.schema}")
                yield {name: column_batch(batch.column(name), kind, unit, name, row) for name, kind in self.spec.items()}
                row += batch.num_rows
        except _ARROW_ERRORS as exc:
            raise source_error(unit, row, f"cannot be read: {type(exc).__name__}: {exc}") from None

    def read(self, unit: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        row = 0
        try:
            for batch in self._batches(unit):
                if str(batch.schema) != self.schema_text:
                    raise source_error(unit, row, f"the columns differ from the first file's:\n{batch.schema}")
                columns = [column_values(batch.column(name), kind, unit, name, row)
                           for name, kind in self.spec.items()]
                for values in zip(*columns):
                    yield row, dict(zip(self.spec, values))
                    row += 1
        except _ARROW_ERRORS as exc:
            raise source_error(unit, row, f"cannot be read: {type(exc).__name__}: {exc}") from None


class ParquetSource(_ArrowSource):
    """``ParquetSource("train/")``: a Parquet file, or a directory's ``*.parquet`` files."""

    kind = "parquet"

    def __init__(self, path: PathArg) -> None:
        pq = require("pyarrow.parquet", "pyarrow")
        self.path, self.files = files_of(path, "**/*.parquet")
        self.row_groups = [(file, group, _metadata(pq, file).row_group(group).num_rows)
                           for file in self.files for group in range(_metadata(pq, file).num_row_groups)]
        if self.files:
            self._set_schema(_metadata(pq, self.files[0]).schema.to_arrow_schema())

    def units(self) -> list[str]:
        return [f"{file}#row-group-{group}" for file, group, _ in self.row_groups]

    def count(self, unit: str) -> int:
        return self.row_groups[self.units().index(unit)][2]

    def _batches(self, unit: str) -> Iterator[Any]:
        import pyarrow.parquet as pq

        file, group, _ = self.row_groups[self.units().index(unit)]
        yield from pq.ParquetFile(file).iter_batches(row_groups=[group], batch_size=1024)


def _metadata(pq: Any, file: Path) -> Any:
    try:
        return pq.read_metadata(file)
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
        self.files = [self.path / entry["filename"] for entry in state["_data_files"]]
        if self.files:
            self._set_schema(next(self._batches(str(self.files[0])), None).schema)

    def units(self) -> list[str]:
        return [str(file) for file in self.files]

    def _batches(self, unit: str) -> Iterator[Any]:
        import pyarrow as pa

        try:
            with pa.memory_map(unit) as source:
                yield from pa.ipc.open_stream(source)
        except _ARROW_ERRORS as exc:
            raise source_error(unit, None, f"not a readable Arrow file: {type(exc).__name__}: {exc}") from None
