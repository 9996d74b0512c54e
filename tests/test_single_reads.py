"""One sample, one native call: ``FileReader.read_one`` and ``DatasetReader[i]`` give what
the batched reads give, for small and large samples, after a fork, and fail as they do."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter
from ffrecord.dataset import CodecError, DatasetReader, DatasetWriter


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("single") / "ds"
    rng = np.random.default_rng(5)
    with DatasetWriter(path, {"image": "bytes", "label": "int", "name": "utf8"}) as writer:
        for k in range(12):  # sizes around the first buffer guess and far past it
            writer.append({"image": rng.bytes([0, 1, 4095, 4096, 5000, 70_000][k % 6]),
                           "label": k - 6, "name": f"n{k}"})
    return path


def test_datapoints_match_batched_reads(dataset):
    reader = DatasetReader(dataset)
    expected = reader.read(list(range(12)))
    assert [reader[k] for k in range(12)] == expected
    assert [reader[k - 12] for k in range(12)] == expected
    assert {tuple(reader[k]) for k in range(12)} == {("image", "label", "name")}  # spec order
    assert reader[np.int64(3)] == expected[3]  # other integer types take the general path
    with pytest.raises(IndexError):
        reader[12]
    with pytest.raises(IndexError):
        reader[-13]


def test_read_one_matches_read(dataset):
    with FileReader(os.path.join(dataset, "image.ffr")) as reader:
        batch = [s.tobytes() for s in reader.read(range(12))]
        assert [reader.read_one(k).tobytes() for k in (11, 3, 0, 9, 4, 5)] == [batch[k] for k in (11, 3, 0, 9, 4, 5)]
        assert reader.read_one(-1).dtype == np.uint8
    with pytest.raises(Exception):
        reader.read_one(0)  # closed


def test_datapoint_reads_survive_fork(dataset):
    reader = DatasetReader(dataset)
    expected = reader[5]
    pid = os.fork()
    if pid == 0:
        os._exit(0 if reader[5] == expected and reader[4] == reader.read([4])[0] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_decoder_failure_names_the_datapoint(dataset):
    def broken(view):
        raise ValueError("no")

    reader = DatasetReader(dataset, decoders={"utf8": broken})
    with pytest.raises(CodecError, match="datapoint 2"):
        reader[2]


def test_zero_copy_decoder_values_are_not_overwritten(tmp_path):
    path = tmp_path / "f.ffr"
    with FileWriter(path, 3) as writer:
        for k in range(3):
            writer.write_one(bytes([k]) * 100)
    with FileReader(path) as reader:
        first, second = reader.read_one(0), reader.read_one(1)
        assert first.tobytes() == b"\x00" * 100 and second.tobytes() == b"\x01" * 100


@pytest.mark.parametrize("keep", [lambda view: view, lambda view: np.frombuffer(view, np.uint8)],
                         ids=["memoryview", "numpy"])
def test_values_that_keep_a_view_of_the_buffer_are_not_overwritten(dataset, keep):
    # the buffer of a datapoint is reused by the next one only when nothing refers to it
    copied = DatasetReader(dataset).read(list(range(12)))
    reader = DatasetReader(dataset, decoders={"bytes": keep})
    kept = [reader[k] for k in (4, 5, 2, 3, 4, 0)]
    more = [reader[k]["label"] for k in range(12)]
    assert more == [d["label"] for d in copied]
    assert [bytes(d["image"]) for d in kept] == [copied[k]["image"] for k in (4, 5, 2, 3, 4, 0)]


def test_reused_buffers_follow_growing_and_shrinking_datapoints(dataset):
    reader = DatasetReader(dataset)
    expected = reader.read(list(range(12)))
    order = [0, 1, 5, 0, 11, 2, 3, 5, 1, 4, 4, 0, 5, 5, 1]  # 70,000 bytes among the small
    assert [reader[k] for k in order] == [expected[k] for k in order]


def test_threads_sharing_a_reader_get_their_own_datapoints(dataset):
    reader = DatasetReader(dataset)
    expected = reader.read(list(range(12)))
    orders = [np.random.default_rng(seed).integers(0, 12, 300).tolist() for seed in range(4)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda order: [reader[k] for k in order], orders))
    for order, got in zip(orders, results):
        assert got == [expected[k] for k in order]


def test_a_buffer_is_made_for_one_guess_while_another_thread_raises_it():
    """A thread whose read was short raises the shared guess of the samples' size; a kit
    made meanwhile by another thread must have the room it says (else its sizes are read
    past its buffer)."""
    from ffrecord._single import SampleReads

    class RisingGuess(SampleReads):  # every look at the guess sees another thread's raise
        @property
        def _guess(self) -> int:
            self._looks = getattr(self, "_looks", 0) + 1
            return 4096 * self._looks

        @_guess.setter
        def _guess(self, value: int) -> None:
            pass

    reads = RisingGuess(3)
    buf, _, _, room = reads._kit()
    assert len(buf) == room + 8 * 3


def test_read_one_gives_each_sample_an_array_of_its_own(dataset):
    # read_one copies out of a buffer it reuses: every array is exactly its sample, writable,
    # and untouched by the reads after it, larger or smaller
    with FileReader(os.path.join(dataset, "image.ffr")) as reader:
        batch = [s.tobytes() for s in reader.read(range(12))]
        order = [5, 0, 2, 11, 3, 1, 5, 4]
        kept = [reader.read_one(k) for k in order]
        kept[0][:3] = 7  # writable, and no other array shares its bytes
        assert kept[6].tobytes() == batch[5] and kept[0].tobytes()[3:] == batch[5][3:]
        assert [a.tobytes() for a in kept[1:]] == [batch[k] for k in order[1:]]
        assert [a.size for a in kept] == [len(batch[k]) for k in order]


def test_numbers_unpacked_from_the_buffer_match_batched_reads(tmp_path):
    values = [0, -1, 2**63 - 1, -(2**63), 12345]
    floats = [0.0, -1.5, float("inf"), 1e-300, float("nan")]
    with DatasetWriter(tmp_path / "ds", {"n": "int", "x": "float", "b": "bytes"}) as writer:
        for n, x in zip(values, floats):
            writer.append({"n": n, "x": x, "b": b"v" * (n & 15)})
    reader = DatasetReader(tmp_path / "ds")
    got = [reader[k] for k in range(5)]
    assert [d["n"] for d in got] == values and [type(d["n"]) for d in got] == [int] * 5
    assert np.array_equal([d["x"] for d in got], floats, equal_nan=True)
    assert [d["b"] for d in got] == [d["b"] for d in reader.read(range(5))]


def test_a_number_of_the_wrong_size_fails_as_in_batched_reads(tmp_path):
    with DatasetWriter(tmp_path / "ds", {"n": "int"}, encoders={"int": lambda n: b"12345"}) as writer:
        writer.append({"n": 1})
    reader = DatasetReader(tmp_path / "ds")
    with pytest.raises(CodecError, match="datapoint 0"):
        reader.read([0])
    with pytest.raises(CodecError, match="datapoint 0"):
        reader[0]


def test_unpacked_datapoints_follow_changing_sizes(tmp_path):
    # bytes and numbers only: each datapoint's values come out of one struct unpack, whose
    # layout follows the sizes of the datapoint in hand, in any order and from any thread
    sizes = [0, 1, 16, 4096, 70_000, 16, 16]
    rng = np.random.default_rng(9)
    with DatasetWriter(tmp_path / "ds", {"image": "bytes", "label": "int", "x": "float"}) as writer:
        for k, size in enumerate(sizes):
            writer.append({"image": rng.bytes(size), "label": -k, "x": k / 3})
    reader = DatasetReader(tmp_path / "ds")
    expected = reader.read(range(len(sizes)))
    order = [5, 6, 4, 0, 5, 1, 1, 3, 2, 4, 6, 0]
    got = [reader[k] for k in order]
    assert got == [expected[k] for k in order]
    assert all(type(d["image"]) is bytes and type(d["label"]) is int and type(d["x"]) is float for d in got)
    assert {tuple(d) for d in got} == {("image", "label", "x")}
    orders = [np.random.default_rng(seed).integers(0, len(sizes), 200).tolist() for seed in range(4)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda order: [reader[k] for k in order], orders))
    for order, got in zip(orders, results):
        assert got == [expected[k] for k in order]
