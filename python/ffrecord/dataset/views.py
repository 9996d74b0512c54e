"""The conveniences Hugging Face ``datasets`` users expect, on every structured dataset:
slices and index arrays (``ds[10:20]``, ``ds[[3, 1]]``: lists of datapoints), column access
(``ds["label"]``: one field of every datapoint, read one batch per call), and ``select`` /
``shard`` / ``train_test_split``, which return ``View``s: datasets of their own (``len``,
indexing, masked ``read``) mapping their indices to the parent's through a fixed index
array, so they pickle, and ``ffrecord.torch.DataLoader`` resumes them exactly.

>>> import os, tempfile
>>> from ffrecord.dataset import DatasetReader, DatasetWriter
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"label": "int"}) as writer:
...     for k in range(10):
...         _ = writer.append({"label": k})
>>> ds = DatasetReader(path)
>>> ds[2:4], ds[[7, 1]], ds["label"][:3].tolist()
([{'label': 2}, {'label': 3}], [{'label': 7}, {'label': 1}], [0, 1, 2])
>>> split = ds.train_test_split(test_size=0.2, seed=0)
>>> len(split["train"]), len(split["test"]), sorted([*split["train"]["label"], *split["test"]["label"]]) == list(range(10))
(8, 2, True)
>>> ds.shard(3, 1)["label"].tolist(), ds.select([9, 0])[1]
([4, 5, 6], {'label': 0})
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .reader import Readable
from .spec import parse_spec

COLUMN_BATCH = 4096  # datapoints per read when a whole column is read


def getitem(dataset: Readable, key: Any) -> Any:
    """``dataset[key]`` for a slice, a list / array / range of indices, or a field name."""
    if isinstance(key, str):
        return column(dataset, key)
    if isinstance(key, slice):
        key = range(len(dataset))[key]
    return dataset.read(np.asarray(key, np.int64).reshape(-1))


def column(dataset: Readable, name: str) -> Any:
    """Field ``name`` of every datapoint, in order: a numpy array for a fixed-size, ``int``
    or ``float`` field, read by one call (``read_columns``); a list for the others, read
    ``COLUMN_BATCH`` datapoints per ``read_columns`` call (a run: read as a span)."""
    if name not in dataset.spec:
        raise KeyError(f"no field {name!r} (fields: {', '.join(dataset.spec)})")
    field = parse_spec({name: dataset.spec[name]})[name]
    if not field.sequence and (field.fixed or field.type in ("int", "float")):
        return dataset.read_columns(range(len(dataset)), [name])[name]
    values: list[Any] = []
    for start in range(0, len(dataset), COLUMN_BATCH):
        values.extend(dataset.read_columns(range(start, min(start + COLUMN_BATCH, len(dataset))), [name])[name])
    return values


class View(Readable):
    """The datapoints ``indices`` of ``parent``, in that order, as a dataset of its own."""

    def __init__(self, parent: Readable, indices: Any) -> None:
        self.parent = parent
        self.indices = parent._indices(indices).copy()
        self.indices.flags.writeable = False

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def spec(self) -> dict[str, str]:
        return self.parent.spec

    @property
    def metadata(self) -> dict[str, Any]:
        return getattr(self.parent, "metadata", {})

    @property
    def files(self) -> list[str]:
        return self.parent.files

    def read(self, indices: Any, mask: Any = None) -> list[dict[str, Any]]:
        return self.parent.read(self.indices[self._indices(indices)], mask)

    def __getitems__(self, indices: Any) -> list[dict[str, Any]]:
        return self.parent.__getitems__(self.indices[self._indices(indices)])

    def read_columns(self, indices: Any, mask: Any = None) -> dict[str, Any]:
        return self.parent.read_columns(self.indices[self._indices(indices)], mask)

    def available(self, index: int) -> dict[str, int | bool]:
        return self.parent.available(int(self.indices[self._indices([index])[0]]))

    def close(self) -> None:
        """A view owns no files; closing the parent is its owner's business."""

    def __repr__(self) -> str:
        return f"View({self.parent!r}, n={len(self)})"


def shard(dataset: Readable, num_shards: int, index: int, contiguous: bool = True) -> View:
    """Part ``index`` of ``num_shards`` near-equal parts: contiguous blocks (the first ones
    one longer when the length does not divide), or every ``num_shards``-th datapoint."""
    if num_shards < 1 or not 0 <= index < num_shards:
        raise ValueError(f"need num_shards >= 1 and 0 <= index < num_shards, got {num_shards}, {index}")
    n = len(dataset)
    if not contiguous:
        return View(dataset, np.arange(index, n, num_shards))
    size, extra = divmod(n, num_shards)
    start = index * size + min(index, extra)
    return View(dataset, np.arange(start, start + size + (index < extra)))


def train_test_split(dataset: Readable, test_size: float | int, seed: int | None = None,
                     shuffle: bool = True) -> dict[str, View]:
    """``{"train": View, "test": View}``: ``test_size`` datapoints (a count, or a fraction of
    the dataset) for the test part, drawn with ``numpy.random.default_rng(seed)`` when
    ``shuffle`` (give a ``seed`` for the same split in every process and every run)."""
    n = len(dataset)
    count = int(np.ceil(test_size * n)) if isinstance(test_size, float) else int(test_size)
    if not 0 < count < n:
        raise ValueError(f"test_size {test_size!r} leaves an empty part of a dataset of {n}")
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    return {"train": View(dataset, order[:n - count]), "test": View(dataset, order[n - count:])}
