"""Columns of structured datasets: batches read as columns, scans, filters.

- ``read_columns(indices, mask)``: the selected fields of a batch as columns, a numpy array
  ``(n, *shape)`` for each fixed-size field (``float32``, ``uint8[32]``, ...) and each
  ``int`` and ``float`` field (``int64``, ``float64``), a list for the others. A
  ``DatasetReader`` gathers a column's values with one native call (a run of indices: the
  blocks read straight into the array), an ``int``/``float`` field's with one batch read;
  shards, mixtures and views route to their members.
- ``iter_batches(batch_size, columns)``: consecutive batches, as those dicts or (``arrow=True``)
  Arrow record batches built from the read buffers (``ffrecord.dataset.export``).
- ``where(condition)``: a ``View`` of the datapoints where a boolean column expression holds,
  given as an array or as a function of ``Columns``: whole columns by name, each read once.

>>> import os, tempfile
>>> import numpy as np
>>> from ffrecord.dataset import DatasetReader, DatasetWriter
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"label": "int8", "score": "float32", "text": "utf8"}) as writer:
...     _ = writer.append_batch({"label": np.arange(6) % 3, "score": np.linspace(0, 1, 6),
...                              "text": [f"t{k}" for k in range(6)]})
>>> reader = DatasetReader(path)
>>> reader.read_columns([4, 1], ["label", "text"])
{'label': array([1, 1], dtype=int8), 'text': ['t4', 't1']}
>>> view = reader.where(lambda c: (c["label"] == 1) & (c["score"] > 0.5))
>>> view.indices.tolist(), [d["text"] for d in view]
([4], ['t4'])
>>> [len(b["score"]) for b in reader.iter_batches(4, ["score"])]
[4, 2]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable

import numpy as np

from .spec import FIXED_TYPES, parse_spec

_NUMBER_TYPES = ("int", "float")


def columns_of_rows(dataset: Any, indices: Any, mask: Any) -> dict[str, Any]:
    """``read_columns`` of any dataset, from its ``read``: fixed-size and number fields
    stacked into arrays."""
    from .reader import parse_mask

    fields = parse_spec(dataset.spec)
    names = list(parse_mask(mask, fields))
    rows = dataset.read(indices, names)
    return {name: _stacked(fields[name], [row[name] for row in rows]) for name in names}


def _stacked(field: Any, values: list[Any]) -> Any:
    if field.sequence or not (field.fixed or field.type in _NUMBER_TYPES):
        return values
    if field.fixed:
        dtype = np.dtype(FIXED_TYPES[field.type])
    else:
        dtype = np.dtype(np.int64 if field.type == "int" else np.float64)
    if values and not isinstance(values[0], (int, float, bool, np.ndarray, np.generic)):
        return values  # a user decoder's values: as they are
    try:
        return np.array(values, dtype).reshape(len(values), *field.shape)
    except (TypeError, ValueError):
        return values


def scatter(parts: list[tuple[np.ndarray, dict[str, Any]]], n: int) -> dict[str, Any]:
    """Columns of ``n`` datapoints put together from ``(positions, columns)`` parts."""
    out: dict[str, Any] = {}
    for positions, columns in parts:
        for name, values in columns.items():
            if name not in out:
                out[name] = (np.empty((n, *values.shape[1:]), values.dtype) if isinstance(values, np.ndarray)
                             else [None] * n)
            target = out[name]
            if isinstance(target, np.ndarray) and isinstance(values, np.ndarray) and target.dtype == values.dtype:
                target[positions] = values
            else:
                if isinstance(target, np.ndarray):  # members disagree: fall back to a list
                    target = out[name] = list(target)
                for pos, value in zip(positions.tolist(), list(values)):
                    target[pos] = value
    return out


def iter_batches(dataset: Any, batch_size: int, columns: Any, arrow: bool) -> Iterator[Any]:
    """Batches of consecutive datapoints (see the module)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if arrow:
        from .export import record_batches

        yield from record_batches(dataset, columns, batch_size)
        return
    n = len(dataset)
    for start in range(0, n, batch_size):
        yield dataset.read_columns(range(start, min(start + batch_size, n)), columns)


class Columns:
    """Whole columns of a dataset by name, each read on first use (one native call for a
    fixed-size or number field): what a ``where`` function receives."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self._read: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._read:
            self._read[name] = self.dataset[name]
        return self._read[name]

    def __len__(self) -> int:
        return len(self.dataset)

    def __repr__(self) -> str:
        return f"Columns({self.dataset!r}, read={list(self._read)})"


def where(dataset: Any, condition: Any) -> Any:
    """A ``View`` of the datapoints where ``condition`` holds (see the module)."""
    from .views import View

    if callable(condition):
        condition = condition(Columns(dataset))
    mask = np.asarray(condition)
    if mask.dtype != np.bool_ or mask.shape != (len(dataset),):
        raise ValueError(f"a where() condition must be a boolean array of the dataset's length "
                         f"({len(dataset)}), got {mask.dtype} values of shape {mask.shape}")
    return View(dataset, np.flatnonzero(mask))


def run_of(idx: np.ndarray) -> tuple[int, int] | None:
    """``(start, stop)`` when ``idx`` is ``start, start + 1, ..., stop - 1``, else None."""
    if len(idx) and int(idx[-1]) - int(idx[0]) + 1 == len(idx) and (len(idx) == 1 or (np.diff(idx) == 1).all()):
        return int(idx[0]), int(idx[-1]) + 1
    return None


def number_dtype(decode: Callable) -> np.dtype | None:
    """The dtype of an ``int``/``float`` field's values when read by the built-in decoder."""
    from .codecs import FIXED_WIDTH

    width = FIXED_WIDTH.get(decode)
    return None if width is None else np.dtype(width)
