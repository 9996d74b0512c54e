"""ArrayRecord files (``array-record``): each record becomes a datapoint ``{record: bytes}``,
unchanged (ArrayRecord stores opaque records, often serialized protos: decode them with a
codec of your own, or re-convert with ``ffrecord.dataset.DatasetWriter``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._paths import PathArg
from ._base import Source, require, source_error
from ._files import files_of, regular_file

_BATCH = 256


def _open(file: Any) -> Any:
    module = require("array_record.python.array_record_module", "array-record")
    try:
        reader = module.ArrayRecordReader(str(regular_file(file)))
    except (RuntimeError, ValueError, OSError) as exc:
        raise source_error(file, None, f"not a readable ArrayRecord file: {exc}") from None
    if not reader.ok():
        raise source_error(file, None, "not a readable ArrayRecord file")
    return reader


class ArrayRecordSource(Source):
    """``ArrayRecordSource("data/")``: an ArrayRecord file, or a directory's
    ``*.array_record*`` files in name order."""

    kind = "arrayrecord"
    spec = {"record": "bytes"}
    metadata = {"source": "arrayrecord"}

    def __init__(self, path: PathArg) -> None:
        self.path, self.files = files_of(path, "*.array_record*")
        self.counts = {}
        for file in self.files:
            reader = _open(file)
            self.counts[str(file)] = reader.num_records()
            reader.close()

    def units(self) -> list[str]:
        return [str(file) for file in self.files]

    def count(self, unit: str) -> int:
        return self.counts[unit]

    def read(self, unit: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        reader = _open(unit)
        try:
            for start in range(0, self.counts[unit], _BATCH):
                stop = min(start + _BATCH, self.counts[unit])
                try:
                    records = reader.read(start, stop)
                except (RuntimeError, ValueError, OSError) as exc:
                    raise source_error(unit, start, f"records {start}..{stop - 1} cannot be read: {exc}") from None
                for k, record in enumerate(records):
                    yield start + k, {"record": record}
        finally:
            reader.close()
