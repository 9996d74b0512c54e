"""A loader worker fetches several batches per task when a batch of ffrecord's dataset is only
read (``_transport.TaskGroup``): the batches still come out one at a time, exactly those of a
loader without workers and in their order, and resuming, a failed batch and pinned memory
work batch by batch."""

from __future__ import annotations

import gc

import pytest

torch = pytest.importorskip("torch")

from torch._utils import ExceptionWrapper  # noqa: E402

from ffr_helpers import write_dataset  # noqa: E402
from ffrecord import CorruptFileError  # noqa: E402
from ffrecord.dataset import DatasetReader, DatasetWriter  # noqa: E402
from ffrecord.torch import DataLoader, Dataset, _transport  # noqa: E402
from ffrecord.torch.dataloader import TASK_GROUP  # noqa: E402
from ffrecord.torch.structured import StructuredDataset  # noqa: E402

N, BATCH = 40, 3  # 14 batches: tasks of TASK_GROUP batches, the last one short
SAMPLE = 8  # each sample: its index as 8 little-endian bytes


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_dataset(tmp_path_factory.mktemp("groups") / "samples.ffr",
                             (k.to_bytes(SAMPLE, "little") for k in range(N))))


def ids(batch: torch.Tensor) -> list[int]:
    return batch.contiguous().view(torch.int64).flatten().tolist()


def loader(path: str, **options) -> DataLoader:
    options = {"batch_size": BATCH, "shuffle": True, "seed": 5, **options}
    if options.get("num_workers"):
        options.setdefault("timeout", 60)
    return DataLoader(Dataset(path), **options)


@pytest.fixture
def tasks_seen(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """The type of each task the main process receives from the workers."""
    seen: list[type] = []
    receive = _transport.receive

    def recording(task):
        batch = receive(task)
        seen.append(type(batch))
        return batch

    monkeypatch.setattr(_transport, "receive", recording)
    return seen


def test_batches_of_a_task_come_one_by_one_in_order(path, tasks_seen):
    reference = loader(path)
    expected = [[ids(b) for b in reference] for _ in range(2)]  # two epochs
    tasks_seen.clear()
    grouped = loader(path, num_workers=2)
    assert [[ids(b) for b in grouped] for _ in range(2)] == expected
    assert all(type(b) is not _transport.TaskGroup for b in grouped.batch_sampler)  # its own batches
    # each worker's first task is a lone batch, so that it delivers at once
    epoch_tasks = [torch.Tensor] * 2 + [_transport.TaskGroup] * -(-(len(expected[0]) - 2) // TASK_GROUP)
    assert tasks_seen == epoch_tasks * 2


def test_a_task_pinned_and_its_slot_released(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a: self.clone(), raising=False)
    sender = _transport._Sender()
    try:
        raise ValueError("batch 1 failed")
    except ValueError:
        failed = ExceptionWrapper(where="in a test")
    packed = sender.pack(_transport.TaskGroup([{"x": torch.arange(3)}, failed, {"x": torch.arange(4)}]))
    pinned = torch.utils.data._utils.pin_memory.pin_memory(packed)
    gc.collect()
    assert type(pinned) is _transport.TaskGroup and pinned[1] is not None
    assert [pinned[0]["x"].tolist(), pinned[2]["x"].tolist()] == [[0, 1, 2], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="batch 1 failed"):
        pinned[1].reraise()
    assert sender.arenas[0].states[packed.slot] == _transport.FREE


@pytest.mark.parametrize("sizes, image", [("varying", "bytes"), ("equal", "bytes"),
                                           ("varying", "bytes:lz4"), ("equal", "bytes:zstd")])
def test_structured_batches_read_into_slots_in_groups(tmp_path, tasks_seen, sizes, image):
    """Raw values as columns read a task at once; compressed ones batch by batch."""
    path = str(tmp_path / "ds")
    with DatasetWriter(path, {"image": image, "label": "int"}) as writer:
        for k in range(N):
            writer.append({"image": bytes([k]) * (1 + k % 5 if sizes == "varying" else 3), "label": k})
    data = StructuredDataset(DatasetReader(path))

    def plain(batches):
        return [(b["label"].tolist(), [bytes(v) for v in b["image"]]) for b in batches]

    expected = plain(DataLoader(data, batch_size=BATCH, shuffle=True, seed=2))
    tasks_seen.clear()
    assert plain(DataLoader(data, batch_size=BATCH, shuffle=True, seed=2, num_workers=2, timeout=60)) == expected
    assert tasks_seen[:2] == [dict, dict] and set(tasks_seen[2:]) == {_transport.TaskGroup}


def test_resume_inside_a_task(path):
    expected = [ids(b) for b in loader(path)]
    first = loader(path, num_workers=2)
    iterator = iter(first)
    for _ in range(4):  # into the first group of batches, after each worker's lone first one
        next(iterator)
    state = first.state_dict()
    assert state["step"] == 4
    restored = loader(path, num_workers=2)
    restored.load_state_dict(state)
    assert [ids(b) for b in restored] == expected[4:]
    stepped = loader(path, num_workers=2)
    stepped.set_step(TASK_GROUP - 1)  # a task that starts mid-way through the batches of one
    assert [ids(b) for b in stepped] == expected[TASK_GROUP - 1:]


def test_a_failed_batch_raises_at_its_turn(tmp_path):
    path = tmp_path / "damaged.ffr"
    write_dataset(path, (k.to_bytes(SAMPLE, "little") for k in range(N)))
    raw = bytearray(path.read_bytes())
    raw[12 + 12 * N + SAMPLE * (3 * BATCH + 1)] ^= 0xFF  # a sample of batch 3, 2nd of a group
    path.write_bytes(bytes(raw))
    damaged = DataLoader(Dataset(str(path)), batch_size=BATCH, num_workers=2, timeout=60)
    iterator = iter(damaged)
    assert [ids(next(iterator)) for _ in range(3)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]  # those before it
    with pytest.raises(CorruptFileError, match="checksum"):
        next(iterator)
    assert damaged.state_dict()["step"] == 4  # the failed batch counts as spent
    assert ids(next(iterator)) == [12, 13, 14]  # the rest of its group, as torch goes on after a failure


def test_a_damaged_datapoint_raises_at_its_batch_in_a_structured_task(tmp_path):
    """A task's columns are read by one call per field for all its batches; when that call
    fails, the batches are read one by one, so that the failure is raised at its own."""
    path = tmp_path / "ds"
    with DatasetWriter(str(path), {"image": "bytes", "label": "int"}) as writer:
        for k in range(N):
            writer.append({"image": k.to_bytes(SAMPLE, "little"), "label": k})
    image = path / "image.ffr"
    raw = bytearray(image.read_bytes())
    raw[12 + 12 * N + SAMPLE * (3 * BATCH + 1)] ^= 0xFF  # datapoint 10: batch 3, 2nd of a group
    image.write_bytes(bytes(raw))
    loader = DataLoader(StructuredDataset(DatasetReader(str(path))), batch_size=BATCH, num_workers=2, timeout=60)
    iterator = iter(loader)
    assert [next(iterator)["label"].tolist() for _ in range(3)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    with pytest.raises(CorruptFileError, match="checksum"):
        next(iterator)
    assert loader.state_dict()["step"] == 4  # the failed batch counts as spent
    assert next(iterator)["label"].tolist() == [12, 13, 14]


def test_only_batches_that_are_only_read_are_grouped(path, tmp_path):
    class Processed(Dataset):
        def process(self, indices, data):
            return data

    def group(made: DataLoader) -> int:
        iter(made)
        return made._tasks.group

    assert group(loader(path, num_workers=2)) == TASK_GROUP
    assert group(loader(path)) == 1  # no workers
    assert group(loader(path, num_workers=2, shared_memory=False)) == 1  # torch's pipe
    assert group(DataLoader(Processed(path), batch_size=BATCH, num_workers=2)) == 1
    assert group(DataLoader(Dataset(path), batch_size=BATCH, num_workers=2, shuffle=True,
                            generator=torch.Generator().manual_seed(1))) == 1  # the stock order
    ds = str(tmp_path / "ds")
    with DatasetWriter(ds, {"x": "int"}) as writer:
        writer.append({"x": 1})
    transformed = StructuredDataset(DatasetReader(ds), transform=lambda d: d["x"])
    assert group(DataLoader(transformed, batch_size=1, num_workers=2)) == 1
    assert group(DataLoader(StructuredDataset(DatasetReader(ds)), batch_size=1, num_workers=2)) == TASK_GROUP


@pytest.mark.parametrize("source, workers", [("mixture", "processes"), ("mixture", "threads"),
                                             ("sharded", "processes"), ("mixture with a decoder", "processes")])
def test_mixtures_and_shards_read_into_slots_as_columns(tmp_path, source, workers):
    """A mixture's or a sharded dataset's batches cross as columns (one read per field for
    a task, through the members' handles), equal to those of a loader without workers; a
    member with decoders of its own keeps the datapoints' way."""
    from ffrecord.dataset import Mixture, ShardedDatasetWriter, open_dataset
    from ffrecord.torch import structured

    paths = []
    for j in range(3):
        paths.append(str(tmp_path / f"m{j}"))
        writer = ShardedDatasetWriter(paths[-1], {"image": "bytes", "label": "int"}, shardlen=7) \
            if source == "sharded" else DatasetWriter(paths[-1], {"image": "bytes", "label": "int"})
        with writer:
            for k in range(N):
                writer.append({"image": bytes([j, k]) * (1 + k % 4), "label": 1000 * j + k})
    if source == "sharded":
        data = open_dataset(paths[0])
    elif source == "mixture":
        data = Mixture.from_paths(paths, [1, 2, 1])
    else:
        data = Mixture([DatasetReader(paths[0], decoders={"bytes": lambda v: bytes(v)}), DatasetReader(paths[1])],
                       [1, 1])
    dataset = StructuredDataset(data)
    assert (structured._column_plan(data, None) is None) == (source == "mixture with a decoder")

    def plain(batches):
        return [(b["label"].tolist(), [bytes(v) for v in b["image"]]) for b in batches]

    expected = plain(DataLoader(dataset, batch_size=BATCH, shuffle=True, seed=2))
    assert sorted(label for labels, _ in expected for label in labels) == sorted(
        d["label"] for d in data.read(range(len(data))))
    assert plain(DataLoader(dataset, batch_size=BATCH, shuffle=True, seed=2, num_workers=2, workers=workers,
                            timeout=60)) == expected
