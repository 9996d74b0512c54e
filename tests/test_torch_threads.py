"""``DataLoader(..., workers="threads")``: the loader's workers as threads of this process.

The batches, the states and the seeds are those of 0 workers; errors reach the loop with
their type and traceback; the threads stop with the epoch, a ``break``, or the loader's
collection; batches in flight never exceed ``num_workers × prefetch_factor``.
"""

from __future__ import annotations

import gc
import json
import threading
import time
import traceback

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ffrecord import FileReader  # noqa: E402
from ffrecord.dataset import DatasetReader, DatasetWriter, Mixture  # noqa: E402
from ffrecord.order import ChunkShuffle  # noqa: E402
from ffrecord.torch import DataLoader, Dataset, StructuredDataset, _threads  # noqa: E402
from ffrecord.tokens import TokenBlocks  # noqa: E402
from torch_scripts.common import PickleDataset, epoch_batches, indices_of, make_loader, write_samples  # noqa: E402

N = 60
THREADS = dict(num_workers=2, workers="threads")


def loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ffrecord-loader-")]


def wait_for_no_loader_threads() -> None:
    """Threads end as soon as their loader is gone; a thread that is finishing may still be
    listed for an instant after being told to stop."""
    deadline = time.monotonic() + 10
    while loader_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not loader_threads()


@pytest.fixture(autouse=True)
def no_threads_left():
    yield
    gc.collect()
    wait_for_no_loader_threads()


@pytest.fixture(scope="module")
def ffr(tmp_path_factory):
    return write_samples(tmp_path_factory.mktemp("threads") / "samples.ffr", N)


@pytest.fixture(scope="module")
def structured(tmp_path_factory):
    path = tmp_path_factory.mktemp("threads") / "structured"
    with DatasetWriter(path, {"image": "bytes", "label": "int", "pixels": "array"}) as writer:
        for k in range(N):
            writer.append({"image": bytes([k]) * (k + 1), "label": k, "pixels": np.full(3, k, np.float32)})
    return path


def plain(batch):
    """A batch with its bytes-like values as bytes and tensors as lists (worker threads
    hand bytes fields on as read-only views, as worker processes do)."""
    if isinstance(batch, dict):
        return {k: plain(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [plain(v) for v in batch]
    if isinstance(batch, memoryview):
        return bytes(batch)
    if isinstance(batch, torch.Tensor):
        return batch.tolist()
    return batch


def datasets(ffr, structured, tmp_path):
    """(name, dataset, loader options) of each kind of dataset the loader takes."""
    tokens = tmp_path / "tokens"
    from ffrecord.tokens import byte_tokenizer, convert_text

    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps({"text": "abcdefgh" * (k + 3)}) for k in range(30)))
    convert_text([str(tmp_path / "docs.jsonl")], tokens, byte_tokenizer, 256, progress=False)
    reader = DatasetReader(structured)
    return [
        ("Dataset", PickleDataset(ffr), {}),
        ("StructuredDataset", StructuredDataset(reader, mask=["image", "label"]), {}),
        ("StructuredDataset, every field", StructuredDataset(reader), {}),
        ("StructuredDataset, seeded transform", StructuredDataset(reader, transform=lambda d, seed: [d["label"], seed >> 2]), {}),
        ("Mixture", StructuredDataset(Mixture([reader, reader], weights=[1, 2], seed=1), mask=["label"]), {}),
        ("TokenBlocks", TokenBlocks(tokens, block_size=16), {"drop_last": True}),
        ("list", list(range(N)), {}),
        ("ChunkShuffle order", PickleDataset(ffr),
         {"order": ChunkShuffle.of(PickleDataset(ffr), chunk_size=200, seed=2, window=2), "shuffle": None}),
    ]


@pytest.mark.parametrize("persistent", [False, True])
def test_state_mid_epoch_resumes_exactly(ffr, persistent):
    options = dict(batch_size=4, shuffle=True, seed=8, persistent_workers=persistent, **THREADS)
    loader = make_loader(ffr, **options)
    epoch_batches(loader)
    iterator = iter(loader)
    for _ in range(3):
        indices_of(next(iterator))
    time.sleep(0.05)  # the threads have prefetched ahead of the loop meanwhile
    state = json.loads(json.dumps(loader.state_dict()))
    expected = [epoch_batches(iterator), epoch_batches(loader)]
    for workers in (0, 2):
        restored = make_loader(ffr, batch_size=4, shuffle=True, seed=8, num_workers=workers,
                               workers="threads", persistent_workers=persistent and workers > 0)
        restored.load_state_dict(state)
        assert [epoch_batches(restored) for _ in range(2)] == expected


def test_elastic_resume_delivers_every_sample_once(ffr):
    ranks = [make_loader(ffr, batch_size=4, shuffle=True, seed=3, rank=r, world_size=2, **THREADS) for r in range(2)]
    seen = []
    for loader in ranks:
        iterator = iter(loader)
        seen += [i for _ in range(3) for i in indices_of(next(iterator))]
    state = ranks[1].state_dict()
    for r in range(3):
        loader = make_loader(ffr, batch_size=5, shuffle=True, seed=3, rank=r, world_size=3, **THREADS)
        loader.load_state_dict(state)
        seen += [i for batch in loader for i in indices_of(batch)]
    assert sorted(set(seen)) == list(range(N)) and len(seen) - N <= 3 * 5  # the last segment's padding


def test_datapoint_seeds_survive_a_resume(structured):
    def make():
        return DataLoader(StructuredDataset(DatasetReader(structured), transform=lambda d, seed: seed >> 2),
                          batch_size=6, shuffle=True, seed=4, **THREADS)

    reference = DataLoader(StructuredDataset(DatasetReader(structured), transform=lambda d, seed: seed >> 2),
                           batch_size=6, shuffle=True, seed=4)
    expected = [b.tolist() for b in reference]
    loader = make()
    iterator = iter(loader)
    first = [next(iterator).tolist() for _ in range(4)]
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    assert first + [b.tolist() for b in resumed] == expected


class Failing(Dataset):
    def process(self, indices, data):
        if 13 in indices:
            explode(indices)
        return [len(d) for d in data]


def explode(indices):
    raise KeyError(f"no sample like {list(indices)}")


def test_an_exception_on_a_thread_reaches_the_loop_with_its_type_and_traceback(ffr):
    loader = DataLoader(Failing(ffr), batch_size=4, **THREADS)
    got = []
    with pytest.raises(KeyError, match=r"no sample like \[12, 13, 14, 15\]") as caught:
        for batch in loader:
            got.append(batch)
    assert len(got) == 3  # the batches before it arrived
    frames = [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert frames[-2:] == ["process", "explode"]
    # where it was raised: a thread, or the training thread when it made that batch (no thread had begun it)
    assert caught.value.__notes__ in (["in ffrecord DataLoader thread 0"], ["in ffrecord DataLoader thread 1"],
                                      ["in ffrecord DataLoader, fetched on the training thread"])


def test_breaking_out_of_an_epoch_stops_the_threads(ffr):
    loader = make_loader(ffr, **THREADS)
    for k, _ in enumerate(loader):
        assert len(loader_threads()) == 2
        if k == 2:
            break
    wait_for_no_loader_threads()
    assert len(epoch_batches(loader)) == N // 4  # the next epoch starts threads of its own
    wait_for_no_loader_threads()


def test_no_thread_outlives_a_loader_collected_mid_epoch(ffr):
    for persistent in (False, True):
        loader = make_loader(ffr, persistent_workers=persistent, **THREADS)
        iterator = iter(loader)
        next(iterator)
        loader.cycle = loader  # collected by the garbage collector, not by reference counts
        assert len(loader_threads()) == 2
        del loader, iterator
        gc.collect()
        wait_for_no_loader_threads()


class Counting(torch.utils.data.Dataset):
    """Counts the batches begun, to compare with those the loop has received."""

    def __init__(self, n: int) -> None:
        self.n, self.begun, self.lock = n, 0, threading.Lock()

    def __len__(self) -> int:
        return self.n

    def __getitems__(self, indices):
        with self.lock:
            self.begun += 1
        return [np.full(256, i, np.int64) for i in indices]


@pytest.mark.parametrize("workers, prefetch", [(1, 1), (2, 2), (3, 4)])
def test_batches_in_flight_never_exceed_the_prefetch_bound(workers, prefetch):
    dataset = Counting(4 * 1000)
    loader = DataLoader(dataset, batch_size=4, num_workers=workers, workers="threads", prefetch_factor=prefetch)
    bound = workers * prefetch
    received, most = 0, 0
    import tracemalloc

    tracemalloc.start()
    try:
        for batch in loader:
            received += 1
            most = max(most, dataset.begun - received)  # begun and not yet handed out
            assert int(batch[0, 0]) == 4 * (received - 1)
            if received == 100:
                settled = tracemalloc.get_traced_memory()[0]
        grown = tracemalloc.get_traced_memory()[0] - settled
    finally:
        tracemalloc.stop()
    assert received == 1000
    assert most <= bound
    assert grown < 256 << 10  # flat: nothing accumulates over 900 batches


def test_worker_init_fn_runs_once_on_each_thread(ffr):
    seen = []
    loader = make_loader(ffr, worker_init_fn=lambda k: seen.append((k, threading.current_thread().name)), num_workers=3,
                         workers="threads")
    epoch_batches(loader)
    assert sorted(seen) == [(k, f"ffrecord-loader-{k}") for k in range(3)]


def test_timeout_raises_when_a_batch_takes_too_long():
    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            time.sleep(0.5)
            return i

    with pytest.raises(RuntimeError, match="timed out after 0.05 seconds"):
        next(iter(DataLoader(Slow(), batch_size=4, timeout=0.05, **THREADS)))


def test_not_skippable_and_pinned_without_an_accelerator_are_as_with_0_workers(ffr):
    expected = epoch_batches(make_loader(ffr, skippable=False))
    assert epoch_batches(make_loader(ffr, skippable=False, **THREADS)) == expected
    if not torch.cuda.is_available():  # today's behaviour: torch's warning, unpinned batches
        with pytest.warns(UserWarning, match="pin_memory"):
            assert epoch_batches(make_loader(ffr, skippable=False, pin_memory=True, **THREADS)) == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs a CUDA device")
def test_pinned_batches_are_assembled_in_page_locked_memory(ffr, structured):
    class Rows(Dataset):
        def process_batch(self, indices, buffer, offsets):
            return buffer[: len(indices) * 8].view(np.int64).reshape(len(indices), 1)

    batch = next(iter(DataLoader(Rows(ffr), batch_size=4, pin_memory=True, **THREADS)))
    assert batch.is_pinned()
    index, value = next(iter(make_loader(ffr, pin_memory=True, **THREADS)))
    assert index.is_pinned() and value.is_pinned() and torch.equal(value, 3 * index)
    labels = next(iter(DataLoader(StructuredDataset(DatasetReader(structured)), batch_size=4, pin_memory=True,
                                  **THREADS)))["label"]
    assert labels.is_pinned() and labels.tolist() == [0, 1, 2, 3]


def test_remote_data_through_the_chunk_cache(tmp_path):
    from range_server import RangeServer

    from ffrecord import FileReader, FileWriter

    samples = [bytes([k % 251]) * 4000 for k in range(64)]
    with FileWriter(tmp_path / "d.ffr", len(samples)) as writer:
        writer.write_many(samples)

    class Remote(Dataset):
        def __init__(self, url, cache):
            self.reader = FileReader(url, cache_dir=cache, chunk_size=8 * 4000)

        def __len__(self):
            return self.reader.n

        def __getitem__(self, indices):
            return [s.tobytes() for s in self.reader.read(indices)]

    with RangeServer({"/d.ffr": (tmp_path / "d.ffr").read_bytes()}) as server:
        loader = DataLoader(Remote(server.url + "/d.ffr", tmp_path / "cache"), batch_size=8, shuffle=True, seed=1,
                            collate_fn=list, **THREADS)
        first = [b for batch in loader for b in batch]
        gets = server.gets["/d.ffr"]
        second = [b for batch in loader for b in batch]
        assert sorted(first) == sorted(second) == sorted(samples)
        assert server.gets["/d.ffr"] == gets  # the second epoch reads the node's cache only


def test_bad_workers_and_iterable_datasets_are_refused():
    with pytest.raises(ValueError, match="workers must be one of 'processes', 'threads', 'auto', not 'greenlets'"):
        DataLoader(list(range(4)), num_workers=2, workers="greenlets")

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(4))

    with pytest.raises(ValueError, match="workers='threads' needs a map-style dataset"):
        DataLoader(Stream(), skippable=False, **THREADS)
    assert not DataLoader(Stream(), skippable=False, num_workers=2, workers="auto")._on_threads


def test_auto_picks_threads_for_ffrecords_datasets(ffr):
    assert make_loader(ffr, num_workers=2, workers="auto")._on_threads
    assert not DataLoader(list(range(4)), num_workers=2, workers="auto")._on_threads


# -- batches too cheap for a hand-over: the training thread makes them (``_threads._Pace``) --

class Simulated:
    """A ``_Pace`` handing out batches that cost ``threads_s`` from the threads and
    ``inline_s`` from the training thread, on a clock of its own."""

    def __init__(self, threads_s: float, inline_s: float, bound: int = 4, enabled: bool = True) -> None:
        self.now, self.threads_s, self.inline_s, self.bound = 0.0, threads_s, inline_s, bound
        self.pace = _threads._Pace(bound, enabled, clock=lambda: self.now)
        self.ways: list[bool] = []  # inline or not, batch by batch

    def hand_out(self, batches: int) -> None:
        for _ in range(batches):
            self.now += self.inline_s if self.pace.inline else self.threads_s
            self.ways.append(self.pace.inline)
            self.pace.handed_out(pending=0 if self.pace.inline else self.bound)


def test_the_training_thread_takes_over_batches_cheaper_than_a_hand_over():
    run = Simulated(threads_s=150e-6, inline_s=40e-6)
    run.hand_out(1_000)
    assert run.pace.inline
    first = run.ways.index(True)
    assert first < 400  # timed for 25 ms: ~170 batches of the threads
    run.hand_out(200_000)  # 8 s: timed again now and then, and kept
    assert run.pace.inline and run.ways[first:].count(False) < 0.02 * len(run.ways[first:])


@pytest.mark.parametrize("threads_s", [2.5e-3, 0.05])
def test_batches_dearer_than_a_hand_over_stay_on_the_threads(threads_s):
    run = Simulated(threads_s=threads_s, inline_s=threads_s / 10)
    run.hand_out(int(120 / threads_s))  # two minutes
    assert not any(run.ways)  # never even tried


def test_the_threads_keep_batches_the_training_thread_is_not_clearly_faster_at():
    run = Simulated(threads_s=100e-6, inline_s=95e-6)
    run.hand_out(100_000)
    assert not run.pace.inline
    assert any(run.ways)  # tried, and given back
    assert run.ways[-10_000:].count(True) < 1_000


def test_a_change_of_pace_is_followed():
    run = Simulated(threads_s=150e-6, inline_s=40e-6)
    run.hand_out(50_000)
    assert run.pace.inline
    run.inline_s = 1e-3  # the loop's own work now overlaps with the threads' (a step on the GPU)
    start = run.now
    while run.pace.inline:
        run.hand_out(1)
    assert run.now - start <= _threads.HOLD_S[1] + 1  # within the longest hold and a timing


def test_pauses_are_no_batchs_time():
    run = Simulated(threads_s=150e-6, inline_s=40e-6)
    run.hand_out(60)  # the threads' timing under way
    run.now += 30.0  # a pause of the loop's (a checkpoint): left out as the longest gap
    run.hand_out(1_000)
    assert run.pace.inline
    run.inline_s = 1e-4  # still faster than the threads
    for _ in range(6):
        run.now += 60.0  # an evaluation between epochs: longer than any hold
        run.pace.restart()  # a new epoch: the time before its first batch is not timed
        run.hand_out(1_000)
        assert run.pace.inline and not all(run.ways[-1_000:])  # timed again, and kept
        assert all(t < 1e-3 for t in run.pace._times.values())


def test_a_disabled_pace_never_takes_over():
    run = Simulated(threads_s=150e-6, inline_s=1e-6, enabled=False)
    run.hand_out(10_000)
    assert not any(run.ways)


class Switching(_threads._Pace):
    """Hands the fetching over between the threads and the training thread every third
    batch, whatever the timing (where the loader allows it)."""

    def handed_out(self, pending):
        self.handed = getattr(self, "handed", 0) + 1
        if self.enabled and self.handed % 3 == 0:
            self._switch(not self.inline, pending)


class TrainingThread(_threads._Pace):
    """The training thread makes every batch (where the loader allows it)."""

    def __init__(self, bound, enabled, **kwargs):
        super().__init__(bound, enabled, **kwargs)
        self.inline = enabled

    def handed_out(self, pending):
        pass


@pytest.fixture(params=["timed", Switching, TrainingThread])
def any_maker(request, monkeypatch):
    """The loader's own choice of who makes the batches, or one of the tests' above."""
    if request.param != "timed":
        monkeypatch.setattr(_threads, "_Pace", request.param)
    return request.param


def test_threads_give_the_batches_of_0_workers_whoever_makes_them(ffr, structured, tmp_path, any_maker):
    for name, dataset, options in datasets(ffr, structured, tmp_path):
        options = {"batch_size": 7, "shuffle": True, "seed": 5, **options}
        if "order" in options:
            options.pop("seed"), options.pop("shuffle")
        reference = DataLoader(dataset, **options)
        expected = [[plain(b) for b in reference] for _ in range(2)]  # two epochs
        for prefetch, persistent in ((1, False), (3, True)):
            loader = DataLoader(dataset, prefetch_factor=prefetch, persistent_workers=persistent, **THREADS,
                                **options)
            assert [[plain(b) for b in loader] for _ in range(2)] == expected, name


def test_bytes_fields_are_views_whoever_makes_the_batch(structured, any_maker):
    loader = DataLoader(StructuredDataset(DatasetReader(structured), mask=["image", "label"]), batch_size=4,
                        **THREADS)
    batches = list(loader)
    assert all(type(v) is memoryview and v.readonly for batch in batches for v in batch["image"])
    assert [bytes(v) for batch in batches for v in batch["image"]] == [bytes([k]) * (k + 1) for k in range(N)]
    assert [label for batch in batches for label in batch["label"].tolist()] == list(range(N))


def test_a_state_taken_at_any_batch_resumes_exactly_whoever_makes_them(ffr, any_maker):
    options = dict(batch_size=4, shuffle=True, seed=8)
    expected = epoch_batches(make_loader(ffr, **options))
    for stop in range(1, 8):
        loader = make_loader(ffr, **options, **THREADS)
        iterator = iter(loader)
        got = [indices_of(next(iterator)) for _ in range(stop)]
        state = json.loads(json.dumps(loader.state_dict()))
        del iterator
        resumed = make_loader(ffr, **options, **THREADS)
        resumed.load_state_dict(state)
        assert got + epoch_batches(resumed) == expected, stop


def test_datapoint_seeds_are_the_same_whoever_makes_the_batch(structured, any_maker):
    def make(**options):
        return DataLoader(StructuredDataset(DatasetReader(structured), transform=lambda d, seed: seed >> 2),
                          batch_size=6, shuffle=True, seed=4, **options)

    assert [b.tolist() for b in make(**THREADS)] == [b.tolist() for b in make()]


def test_an_exception_on_the_training_thread_reaches_the_loop_with_its_type_and_traceback(ffr, monkeypatch):
    monkeypatch.setattr(_threads, "_Pace", TrainingThread)
    iterator = iter(DataLoader(Failing(ffr), batch_size=4, **THREADS))
    got = []
    with pytest.raises(KeyError, match=r"no sample like \[12, 13, 14, 15\]") as caught:
        while True:
            got.append(next(iterator))
    assert len(got) == 3
    assert [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)][-2:] == ["process", "explode"]
    assert caught.value.__notes__ == ["in ffrecord DataLoader, fetched on the training thread"]
    sizes = [len(sample) for sample in FileReader(ffr).read(list(range(16, 20)))]
    assert next(iterator).tolist() == sizes  # the loop may go on past it


class Where(Dataset):
    """Each sample's index, and the thread that fetched it."""

    def process(self, indices, data):
        return [(int(i), threading.current_thread().name) for i in indices]


def test_a_loader_with_a_worker_init_fn_fetches_on_its_threads_only(ffr, monkeypatch):
    monkeypatch.setattr(_threads, "_Pace", TrainingThread)
    loader = DataLoader(Where(ffr), batch_size=4, collate_fn=list, worker_init_fn=lambda k: None, **THREADS)
    names = {name for batch in loader for _, name in batch}
    assert names and all(name.startswith("ffrecord-loader-") for name in names)
    loader = DataLoader(Where(ffr), batch_size=4, collate_fn=list, **THREADS)
    assert {name for batch in loader for _, name in batch} == {threading.current_thread().name}


def test_batches_the_training_thread_makes_are_timed(ffr, monkeypatch):
    monkeypatch.setattr(_threads, "_Pace", TrainingThread)
    loader = make_loader(ffr, **THREADS)
    assert len(epoch_batches(loader)) == N // 4
    stats = loader.stats(epoch=0)
    assert (stats["batches"], stats["datapoints"]) == (N // 4, N)
    assert stats["read_s"] > 0 and stats["wait_s"] > 0
    assert "fetched by the training thread" in repr(iter(loader)._inner)


def test_breaking_out_stops_the_threads_whoever_makes_the_batches(ffr, any_maker):
    loader = make_loader(ffr, **THREADS)
    for k, _ in enumerate(loader):
        if k == 4:
            break
    wait_for_no_loader_threads()


def test_module_examples_run():
    import doctest

    assert doctest.testmod(_threads).failed == 0


@pytest.fixture
def gated_threads(monkeypatch):
    """The loader threads cannot begin a batch until the returned event is set."""
    gate = threading.Event()
    claim = _threads._Pipeline.claim

    def gated(self, task):
        if threading.current_thread().name.startswith("ffrecord-loader-"):
            assert gate.wait(30)
        return claim(self, task)

    monkeypatch.setattr(_threads._Pipeline, "claim", gated)
    yield gate
    gate.set()


@pytest.mark.parametrize("options", [{}, {"worker_init_fn": lambda k: None}, {"timeout": 30}])
def test_a_batch_no_thread_has_begun_is_made_by_the_training_thread_unless_threads_are_asked_to(
        ffr, gated_threads, options):
    expected = [[i for i, _ in batch] for batch in DataLoader(Where(ffr), batch_size=4, collate_fn=list)]
    iterator = iter(DataLoader(Where(ffr), batch_size=4, collate_fn=list, **THREADS, **options))
    if options:  # the first batch waits for a thread
        threading.Timer(0.2, gated_threads.set).start()
    first = next(iterator)
    gated_threads.set()
    batches = [first, *iterator]
    assert [[i for i, _ in batch] for batch in batches] == expected
    (maker,) = {name for _, name in first}
    assert maker.startswith("ffrecord-loader-") if options else maker == threading.current_thread().name


class FirstAlone(torch.utils.data.Dataset):
    """Notes how many batches had begun when the first one was done (after a pause in which
    any other thread would have begun one)."""

    def __init__(self) -> None:
        self.begun, self.lock, self.begun_by_first = 0, threading.Lock(), None

    def __len__(self) -> int:
        return 40

    def __getitems__(self, indices):
        with self.lock:
            self.begun += 1
        if indices[0] == 0:
            time.sleep(0.2)
            self.begun_by_first = self.begun
        return list(indices)


@pytest.mark.parametrize("options", [{}, {"worker_init_fn": lambda k: None}])
def test_the_first_batch_is_fetched_alone(options):
    dataset = FirstAlone()
    batches = [b.tolist() for b in DataLoader(dataset, batch_size=4, **THREADS, **options)]
    assert batches == [list(range(k, k + 4)) for k in range(0, 40, 4)]
    assert dataset.begun_by_first == 1
