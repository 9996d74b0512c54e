"""FileReader: reading API, index forms, multi-file datasets, pickling and threads."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileReader
from ffr_helpers import payload, random_sizes, run_threads, write_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    sizes = random_sizes(200, 0, 3000, seed=7)
    samples = [payload(i, size) for i, size in enumerate(sizes)]
    path = write_dataset(tmp_path_factory.mktemp("reader") / "data.ffr", samples)
    return path, samples


@pytest.fixture()
def reader(dataset: tuple[Path, list[bytes]]) -> FileReader:
    with FileReader(dataset[0]) as r:
        yield r


def test_attributes(dataset, reader: FileReader) -> None:
    path, samples = dataset
    assert reader.n == len(reader) == len(samples)
    assert reader.fnames == [str(path)]
    assert reader.check_data is True and reader.direct is False
    assert repr(reader) == f"FileReader({str(path)!r}, check_data=True) n={len(samples)}"


def test_read_returns_zero_copy_uint8_views(dataset, reader: FileReader) -> None:
    _, samples = dataset
    batch = reader.read([5, 9, 5, 199])
    assert all(isinstance(s, np.ndarray) and s.dtype == np.uint8 and s.ndim == 1 for s in batch)
    assert [s.tobytes() for s in batch] == [samples[i] for i in (5, 9, 5, 199)]
    base = batch[0].base
    assert all(np.shares_memory(s, base) for s in batch if s.size)


def test_fixed_size_samples_come_back_as_separate_views(tmp_path: Path) -> None:
    samples = [payload(i, 64) for i in range(10)]
    with FileReader(write_dataset(tmp_path / "fixed.ffr", samples)) as reader:
        batch = reader.read(list(range(10)))
        assert [s.shape for s in batch] == [(64,)] * 10
        assert [s.tobytes() for s in batch] == samples


def test_mostly_fixed_size_data_with_odd_samples(tmp_path: Path) -> None:
    """Batches of one size teach the reader to skip the sizes call; odd samples later (bigger,
    smaller, empty) must still come back exact."""
    sizes = [64] * 40 + [100, 0, 63] + [64] * 10
    samples = [payload(i, size) for i, size in enumerate(sizes)]
    with FileReader(write_dataset(tmp_path / "mostly.ffr", samples)) as reader:
        for order in ([*range(10)], [*range(10, 30)], [40, 1, 2], [41, 3], [42, 4, 5],
                      [*range(43, 53)], [0], [*range(0, 53, 3)]):
            got = reader.read(order)
            assert [s.tobytes() for s in got] == [samples[i] for i in order], order
            buf, offsets = reader.read_batch(order)
            assert buf.size == offsets[-1] == sum(sizes[i] for i in order)


def test_samples_work_like_the_reference_ones(tmp_path: Path) -> None:
    obj = {"label": 3, "values": list(range(10))}
    arr = np.arange(6, dtype=np.int16)
    path = write_dataset(tmp_path / "objs.ffr", [pickle.dumps(obj), arr.tobytes()])
    with FileReader(path) as reader:
        pickled, raw = reader.read([0, 1])
        assert pickle.loads(pickled) == obj
        assert np.array_equal(np.frombuffer(raw, np.int16), arr)
        assert bytes(raw) == arr.tobytes() and memoryview(raw).nbytes == 12


def test_read_batch_and_out_buffer(dataset, reader: FileReader) -> None:
    _, samples = dataset
    order = [3, 1, 4, 1, 5]
    buf, offsets = reader.read_batch(order)
    assert offsets.dtype == np.int64 and offsets[0] == 0 and len(offsets) == 6
    assert [buf[a:b].tobytes() for a, b in zip(offsets[:-1], offsets[1:])] == \
        [samples[i] for i in order]
    out = bytearray(int(offsets[-1]) + 10)
    view, same = reader.read_batch(order, out=out)
    assert np.array_equal(same, offsets) and bytes(out[: offsets[-1]]) == buf.tobytes()
    assert np.shares_memory(view, np.frombuffer(out, np.uint8))
    with pytest.raises(ValueError, match="bytes"):
        reader.read_batch(order, out=bytearray(int(offsets[-1]) - 1))
    with pytest.raises(ValueError, match="writable"):
        reader.read_batch(order, out=bytes(int(offsets[-1])))


def test_read_batch_into_allocated_buffers(tmp_path: Path) -> None:
    """``out`` as a function: asked for the batch's byte count (twice when the size the
    reader learnt from fixed-size batches turns out wrong)."""
    sizes = [32] * 20 + [40]
    samples = [payload(i, size) for i, size in enumerate(sizes)]
    asked = []

    def allocate(nbytes: int) -> bytearray:
        asked.append(nbytes)
        return bytearray(nbytes)

    with FileReader(write_dataset(tmp_path / "alloc.ffr", samples)) as reader:
        for order in ([*range(10)], [*range(10, 20)], [20, 0]):
            buf, offsets = reader.read_batch(order, out=allocate)
            assert buf.tobytes() == b"".join(samples[i] for i in order)
        assert asked == [320, 320, 64, 72]
        with pytest.raises(ValueError, match="returned a buffer of 1 bytes"):
            reader.read_batch([0], out=lambda n: bytearray(1))


INDEX_FORMS = {
    "list": lambda ix: list(ix),
    "tuple": lambda ix: tuple(ix),
    "numpy-int64": lambda ix: np.array(ix, np.int64),
    "numpy-int32": lambda ix: np.array(ix, np.int32),
    "numpy-uint16": lambda ix: np.array(ix, np.uint16),
    "numpy-uint64-strided": lambda ix: np.repeat(np.array(ix, np.uint64), 2)[::2],
    "numpy-int64-strided": lambda ix: np.repeat(np.array(ix, np.int64), 2)[::2],
    "numpy-scalars": lambda ix: [np.int64(i) for i in ix],
    "range": lambda ix: range(ix[0], ix[0] + 1),
}


@pytest.mark.parametrize("form", INDEX_FORMS)
def test_index_forms(form: str, dataset, reader: FileReader) -> None:
    _, samples = dataset
    indices = [7, 0, 150, 7] if form != "range" else [42]
    got = reader.read(INDEX_FORMS[form](indices))
    assert [s.tobytes() for s in got] == [samples[i] for i in indices]


def test_torch_tensors_as_indices(dataset, reader: FileReader) -> None:
    torch = pytest.importorskip("torch")
    _, samples = dataset
    got = reader.read(torch.tensor([2, -1, 8]))
    assert [s.tobytes() for s in got] == [samples[2], samples[-1], samples[8]]
    assert reader.read_one(torch.tensor(4)).tobytes() == samples[4]


def test_negative_and_empty_indices(dataset, reader: FileReader) -> None:
    _, samples = dataset
    assert [s.tobytes() for s in reader.read([-1, -200])] == [samples[-1], samples[0]]
    # an int64 array goes to the library unchecked, then again through the checks
    for indices in (np.array([5, -1, -200]), np.array([5, 0, -1, 0, -200])[::2]):
        assert [s.tobytes() for s in reader.read(indices)] == [samples[5], samples[-1], samples[0]]
    assert reader.read_one(-3).tobytes() == samples[-3]
    assert reader.read([]) == [] and reader.read(np.array([], np.int64)) == []
    buf, offsets = reader.read_batch([])
    assert buf.size == 0 and offsets.tolist() == [0]


def test_multiple_files_as_one_dataset(tmp_path: Path) -> None:
    parts = [[payload(f * 100 + i, 10 + i) for i in range(count)]
             for f, count in enumerate([3, 0, 5, 1])]
    paths = [write_dataset(tmp_path / f"PART_{f:05d}.ffr", part) for f, part in enumerate(parts)]
    everything = [s for part in parts for s in part]
    (tmp_path / "notes.txt").write_text("not a dataset file")
    for source in ([str(p) for p in paths], tuple(paths), tmp_path):
        with FileReader(source) as reader:
            assert reader.fnames == [str(p) for p in paths]
            assert reader.n == len(everything)
            order = list(range(reader.n))
            random.Random(1).shuffle(order)
            assert [s.tobytes() for s in reader.read(order)] == [everything[i] for i in order]


def test_pickling_reopens_with_the_same_options(dataset) -> None:
    path, samples = dataset
    original = FileReader(path, check_data=False, direct=True)
    clone = pickle.loads(pickle.dumps(original))
    assert (clone.fnames, clone.check_data, clone.direct, clone.n) == \
        (original.fnames, False, True, original.n)
    original.close()  # the clone has its own handle
    assert clone.read_one(11).tobytes() == samples[11]
    clone.close()


def test_close_is_idempotent_and_reads_after_close_fail(dataset) -> None:
    reader = FileReader(dataset[0])
    reader.close()
    reader.close()
    assert reader.closed and "closed" in repr(reader)
    for call in (lambda: reader.read([0]), lambda: reader.read_one(0),
                 lambda: reader.read_batch([0]), lambda: reader.sizes([0]), reader.verify,
                 reader.file_info, lambda: list(reader.bad_samples())):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_verify_and_validate_on_a_sound_file(reader: FileReader) -> None:
    assert reader.verify() == []
    assert reader.verify(10, 5) == []
    reader.validate()


def test_eight_threads_share_one_reader_byte_exact(dataset, reader: FileReader) -> None:
    _, samples = dataset

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(150):
            order = [rng.randrange(len(samples)) for _ in range(rng.randrange(1, 64))]
            got = [s.tobytes() for s in reader.read(order)]
            assert got == [samples[i] for i in order], f"thread {seed}: mismatch for {order}"

    run_threads(work, 8, timeout=120)


def kept_forms(sample: np.ndarray) -> list:
    """Objects a user may keep from a sample, each still reading the sample's memory."""
    import ctypes

    forms = [sample, sample[1:], memoryview(sample), np.frombuffer(sample, np.uint8),
             sample.view(np.int8), np.asarray(memoryview(sample)[::2])]
    if sample.size:
        forms.append((ctypes.c_char * sample.size).from_buffer(sample))
    return forms


def test_recycled_buffers_never_change_a_kept_sample(dataset, reader: FileReader) -> None:
    """Batch buffers are reused, but only once nothing refers to them: whatever a user keeps
    of a sample (the array, a slice, a memoryview, a ctypes view...) keeps its bytes."""
    _, samples = dataset
    rng = random.Random(3)
    kept = []
    for step in range(300):
        order = [rng.randrange(len(samples)) for _ in range(rng.randrange(1, 40))]
        if step % 3 == 0:
            order = order[:1]
            batch = [reader.read_one(order[0])]
        elif step % 3 == 1:
            batch = reader.read(order)
        else:
            buf, offsets = reader.read_batch(order)
            batch = [buf[offsets[k]:offsets[k + 1]] for k in range(len(order))]
            del buf
        position = rng.randrange(len(batch))
        assert batch[position].tobytes() == samples[order[position]]
        forms = kept_forms(batch[position])
        obj = forms[step % len(forms)]
        kept.append((obj, np.asarray(obj).tobytes()))
        del batch, forms, obj
        if len(kept) > 12:  # dropping old ones lets their buffers be recycled
            kept.pop(rng.randrange(len(kept)))
        for obj, snapshot in kept:
            assert np.asarray(obj).tobytes() == snapshot, step


def test_recycled_buffers_are_reused_once_free(tmp_path: Path) -> None:
    samples = [payload(i, 4096) for i in range(64)]
    with FileReader(write_dataset(tmp_path / "pool.ffr", samples)) as reader:
        first = reader.read(list(range(32)))
        address = first[0].ctypes.data
        del first
        second = reader.read(list(range(32, 64)))
        assert second[0].ctypes.data == address  # the freed buffer came back
        third = reader.read(list(range(32)))
        assert third[0].ctypes.data != address  # in use by ``second``: another buffer
        assert [s.tobytes() for s in second] == samples[32:]
        assert [s.tobytes() for s in third] == samples[:32]
