"""Structured datasets in a DataLoader: ``StructuredDataset`` wraps a ``DatasetReader``,
``ShardedDatasetReader`` or ``Mixture`` with a mask and a per-datapoint transform.

Each batch is one ``read(indices, mask)`` of the dataset (one native call per selected
field), then the transform per datapoint, then the DataLoader's ``collate_fn``. Readers pickle
by path and reopen themselves after ``fork()``, so any worker start method works, and
``ffrecord.torch.DataLoader``'s ``set_step`` / ``state_dict`` resume exactly: a dataset's
indices, a mixture's included, mean the same datapoints in every process and run.

>>> import tempfile, os
>>> from ffrecord.dataset import DatasetReader, DatasetWriter
>>> from ffrecord.torch import DataLoader
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"label": "int", "pixels": "array"}) as writer:
...     for k in range(6):
...         _ = writer.append({"label": k, "pixels": np.full(2, k, np.float32)})
>>> data = StructuredDataset(DatasetReader(path), mask=["label"], transform=lambda d: d["label"] * 10)
>>> [batch.tolist() for batch in DataLoader(data, batch_size=4)]
[[0, 10, 20, 30], [40, 50]]
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np
import torch.utils.data


class StructuredDataset(torch.utils.data.Dataset):
    """A structured dataset as a torch map-style dataset that reads a batch per call.

    ``mask`` is what ``read`` takes (fields and element ranges to read; all by default);
    ``transform``, when given, turns each datapoint dict into a sample (it must be picklable
    for workers started with ``spawn``/``forkserver``); a transform with a
    ``transform_batch(datapoints, indices)`` method gets the whole batch at once instead.
    """

    def __init__(self, source: Any, mask: Any = None,
                 transform: Callable[[dict], Any] | None = None) -> None:
        self.source = source
        self.mask = mask
        self.transform = transform
        source.read([], mask)  # a bad mask fails here, not in a worker

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, indices: Any) -> Any:
        """The samples at a list of indices; a single index gives a single sample."""
        try:
            single = operator.index(indices)
        except TypeError:
            return self.__getitems__(indices)
        return self.__getitems__([single])[0]

    def __getitems__(self, indices: Any) -> list:
        datapoints = self.source.read(np.asarray(indices, np.int64), self.mask)
        if self.transform is None:
            return datapoints
        transform_batch = getattr(self.transform, "transform_batch", None)
        if transform_batch is not None:  # e.g. ffrecord.vision's: a batch at a time, in threads
            return transform_batch(datapoints, indices)
        return [self.transform(d) for d in datapoints]

    def ffrecord_files(self) -> list[str]:
        """The FFRecord files behind the dataset (for the loader's state fingerprint)."""
        return self.source.files

    def __repr__(self) -> str:
        return f"StructuredDataset({self.source!r}, mask={self.mask!r})"
