"""The ffrecord dataset of the DataLoader workload (imported only when ffrecord.torch works)."""

from __future__ import annotations

from collections.abc import Sequence

from ffrecord.torch import Dataset


class SamplesDataset(Dataset):
    """Returns the samples of a batch as read (one batch read per ``__getitem__``)."""

    def process(self, indices: Sequence[int], data: list) -> list:
        return data
