"""Prefetching: FileReader.prefetch, and the loader's next batches prefetched by its dataset."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffrecord import FileReader
from ffr_helpers import payload, write_dataset

N = 37


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("prefetch") / "p.ffr",
                         [payload(i, 100 + i) for i in range(N)])


@pytest.mark.parametrize("direct", [False, True])
def test_prefetch_is_a_hint_that_checks_its_indices(path: Path, direct: bool) -> None:
    with FileReader(path, direct=direct) as r:
        assert r.prefetch([5, 3, 5, -1]) == 0  # just written: cached already
        assert r.prefetch([]) == 0
        assert [s.tobytes() for s in r.read([5, 3, 36])] == [payload(i, 100 + i) for i in (5, 3, 36)]
        with pytest.raises(IndexError):
            r.prefetch([0, N])
    with pytest.raises(ValueError, match="closed"):
        r.prefetch([0])


def test_sampler_batches_name_the_batch_lookahead_places_later() -> None:
    pytest.importorskip("torch")
    from ffrecord.torch.sampler import Batch, EpochBatchSampler

    sampler = EpochBatchSampler(N, 4, shuffle=True, seed=3)
    plain = list(sampler)
    sampler.lookahead = 3
    batches = list(sampler)
    assert batches == plain and all(isinstance(b, Batch) for b in batches)
    assert [b.ahead for b in batches] == plain[3:] + [None] * 3
    sampler.plan(epoch=0, start=2)
    assert [b.ahead for b in sampler] == plain[5:] + [None] * 3


class SpyReader(FileReader):
    """A FileReader that records what it is asked to prefetch, and says it queued ``queued``
    reads (the file is cached: the real answer would be 0)."""

    prefetched: list[list[int]]
    queued: int

    def prefetch(self, indices):  # noqa: ANN001 - the FileReader signature
        self.prefetched.append(list(indices))
        super().prefetch(indices)
        return self.queued


@pytest.mark.parametrize("queued", [1, 0])
def test_loader_prefetches_each_next_batch(path: Path, queued: int) -> None:
    pytest.importorskip("torch")
    from ffrecord.torch import DataLoader, Dataset

    dataset = Dataset(str(path))
    spy = SpyReader(str(path))
    spy.prefetched, spy.queued = [], queued
    dataset.reader = spy
    loader = DataLoader(dataset, batch_size=2, shuffle=True, seed=1, collate_fn=list)
    seen = []
    for batch in loader:
        seen.append([bytes(s) for s in batch])
    batches = _planned(loader, 0)  # the epoch's order again, as the sampler computes it
    assert seen == [[payload(i, 100 + i) for i in b] for b in batches]
    if queued:  # one process: each batch prefetches the next
        assert spy.prefetched == batches[1:]
    else:  # a prefetch that queued nothing pauses prefetching for a while
        from ffrecord.torch.sampler import PREFETCH_PAUSE as pause

        assert spy.prefetched == batches[1::pause + 1]


def _planned(loader, epoch: int) -> list[list[int]]:
    """The batches of an epoch of the loader's sampler, as plain lists."""
    planner = loader._planner
    planner.plan(epoch, 0)
    return [list(b) for b in planner]
