"""A batch that fails (its read or collate raises) counts as handed out: a training loop that
catches the error and carries on has spent it, so a state taken afterwards resumes after it
and no batch comes twice, without workers, with workers, and when the failed batch is one of
a worker's task of several (``_transport.TaskGroup``) or the whole task fails."""

from __future__ import annotations

import os

import numpy.random  # noqa: F401 - imported before workers fork, not by a worker mid-fork
import pytest

torch = pytest.importorskip("torch")

from ffr_helpers import write_dataset  # noqa: E402
from ffrecord.torch import DataLoader, Dataset, _transport  # noqa: E402
from ffrecord.torch.dataloader import TASK_GROUP  # noqa: E402

N, BATCH = 40, 3  # 14 batches
SAMPLE = 8  # each sample: its index as 8 little-endian bytes
FAILING = 10  # the datapoint whose batch fails: batch 3 (with 2 workers, 2nd of a group)


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_dataset(tmp_path_factory.mktemp("failed") / "samples.ffr",
                             (k.to_bytes(SAMPLE, "little") for k in range(N))))


def collate_failing(samples: list) -> torch.Tensor:
    """The batch of ffrecord's ``Dataset`` samples as one tensor of their indices; raises for
    the batch holding ``FAILING`` (ffrecord's dataset keeps its batches grouped in workers)."""
    batch = torch.tensor([int.from_bytes(bytes(s), "little") for s in samples])
    if FAILING in batch.tolist():
        raise ValueError(f"datapoint {FAILING} is bad")
    return batch


class PlainFailsAt(torch.utils.data.Dataset):
    """A user's map-style dataset (one batch per worker task), failing at ``FAILING``."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == FAILING:
            raise ValueError(f"datapoint {FAILING} is bad")
        return torch.tensor(index)


@pytest.fixture
def whole_task_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker task of several batches fails as a whole (not batch by batch); patched on
    ``Dataset`` itself, so that its batches still count as only read (and are grouped), and
    before the workers fork."""
    getitems = Dataset.__getitems__

    def failing(self, indices):
        if type(indices) is _transport.TaskGroup and any(FAILING in batch for batch in indices):
            raise ValueError(f"the task holding datapoint {FAILING} failed")
        return getitems(self, indices)

    monkeypatch.setattr(Dataset, "__getitems__", failing)


def ids(batch: torch.Tensor) -> list[int]:
    if batch.dtype == torch.uint8:
        batch = batch.contiguous().view(torch.int64)
    return batch.flatten().tolist()


def make(dataset: torch.utils.data.Dataset, workers: int, **options) -> DataLoader:
    return DataLoader(dataset, batch_size=BATCH, num_workers=workers,
                      timeout=60 if workers else 0, **options)


def consume(loader: DataLoader, failures: list[str]) -> tuple[list[list[int]], dict]:
    """What a loop that skips failing batches receives until the batch after the first
    failure, and the loader's state then."""
    received: list[list[int]] = []
    iterator = iter(loader)
    while True:
        try:
            batch = next(iterator)
        except ValueError as exc:
            failures.append(str(exc))
            continue
        received.append(ids(batch))
        if failures:
            return received, loader.state_dict()


def failing_loader(path: str, kind: str, workers: int) -> DataLoader:
    if kind == "plain":
        return make(PlainFailsAt(), workers)
    return make(Dataset(path), workers, collate_fn=collate_failing)


CASES = [  # dataset, workers, grouped tasks
    ("plain", 0, False),
    ("plain", 2, False),
    ("ffrecord", 0, False),
    ("ffrecord", 2, True),
]


@pytest.mark.parametrize("kind, workers, grouped", CASES)
def test_a_caught_failed_batch_is_not_delivered_again(path, kind, workers, grouped):
    loader = failing_loader(path, kind, workers)
    failures: list[str] = []
    received, state = consume(loader, failures)
    assert len(failures) == 1 and "is bad" in failures[0]
    assert received == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [12, 13, 14]]  # batch 3 failed
    assert state["step"] == 5  # four delivered and the one that failed
    if workers:
        assert (loader._tasks.group == TASK_GROUP) is grouped
    resumed = failing_loader(path, kind, workers)
    resumed.load_state_dict(state)
    rest = [ids(b) for b in resumed]
    assert rest[0] == [15, 16, 17]
    assert received + rest == [list(range(k, min(k + BATCH, N))) for k in range(0, N, BATCH)
                               if FAILING not in range(k, k + BATCH)]


def test_a_whole_failed_task_counts_all_its_batches(path, whole_task_fails):
    """A task of TASK_GROUP batches that fails as one is TASK_GROUP batches spent: torch goes
    on with the next task."""
    loader = make(Dataset(path), 2)
    failures: list[str] = []
    received, state = consume(loader, failures)
    assert loader._tasks.group == TASK_GROUP and len(failures) == 1
    # tasks: [0], [1], then [2..5] (holding batch 3, datapoint 10) fails whole, then [6..9]
    assert received == [[0, 1, 2], [3, 4, 5], [18, 19, 20]]
    assert state["step"] == 2 + TASK_GROUP + 1
    resumed = make(Dataset(path), 2)
    resumed.load_state_dict(state)
    assert [ids(b) for b in resumed][0] == [21, 22, 23]


def test_an_uncaught_failure_then_a_state_resumes_after_it(path):
    """The state right after the failure (the loop stopped there) also says the failed batch
    was spent: it is not read again, the next one is."""
    loader = failing_loader(path, "ffrecord", 0)
    iterator = iter(loader)
    for _ in range(3):
        next(iterator)
    with pytest.raises(ValueError, match="is bad"):
        next(iterator)
    state = loader.state_dict()
    assert state["step"] == 4
    resumed = failing_loader(path, "ffrecord", 0)
    resumed.load_state_dict(state)
    assert ids(next(iter(resumed))) == [12, 13, 14]


class DiesAt(torch.utils.data.Dataset):
    """A worker that dies (killed, out of memory) at ``FAILING``'s batch."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == FAILING and torch.utils.data.get_worker_info() is not None:
            os._exit(3)
        return torch.tensor(index)


def test_a_task_that_never_came_is_not_counted():
    """A worker that died delivered nothing: a state taken after torch's error delivers the
    batches not received again (torch may notice the death a batch or two early)."""
    loader = make(DiesAt(), 2)
    iterator = iter(loader)
    received = []
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        while True:
            received.append(ids(next(iterator)))
    state = loader.state_dict()
    assert len(received) <= 3 and state["step"] == len(received)
    resumed = make(DiesAt(), 0)
    resumed.load_state_dict(state)
    assert ids(next(iter(resumed))) == [3 * len(received) + k for k in range(BATCH)]
