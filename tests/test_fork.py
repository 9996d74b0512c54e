"""Fork safety: a Go runtime does not survive fork(), so every child must load a fresh private
copy of the library and reopen readers by path. Every child is bounded by a timeout: a hang
fails the test, it never stalls the run."""

from __future__ import annotations

import errno
import gc
import multiprocessing
import os
import pickle
import random
import shutil
import threading
from pathlib import Path

import pytest

from ffrecord import FileReader, FileWriter, ObjectChangedError, _lib
from ffrecord.reader import reopen
from ffr_helpers import payload, random_sizes, run_in_child, run_python, run_threads, write_dataset

POOL_TIMEOUT = 120
_inherited: FileReader | None = None  # set before forking pools: workers use it unpickled


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    samples = [payload(i, size) for i, size in enumerate(random_sizes(300, 0, 20000, seed=3))]
    return write_dataset(tmp_path_factory.mktemp("fork") / "data.ffr", samples), samples


@pytest.fixture()
def used_reader(dataset) -> FileReader:
    """A reader that has already read in this (the parent) process."""
    path, samples = dataset
    with FileReader(path) as reader:
        assert reader.read_one(0).tobytes() == samples[0]
        yield reader


def check_reads(reader: FileReader, samples: list[bytes], seed: int, rounds: int = 5) -> None:
    rng = random.Random(seed)
    for _ in range(rounds):
        order = [rng.randrange(len(samples)) for _ in range(rng.randrange(1, 100))]
        got = [s.tobytes() for s in reader.read(order)]
        assert got == [samples[i] for i in order], f"wrong bytes for {order}"


def test_forked_child_reads_through_a_fresh_library(dataset, used_reader: FileReader) -> None:
    _, samples = dataset
    parent = _lib.current()

    def child() -> None:
        check_reads(used_reader, samples, seed=1)
        mine = _lib.current()
        assert mine.generation != parent.generation and mine.pid == os.getpid()
        assert mine.dll._handle != parent.dll._handle and mine.path != parent.path

    run_in_child(child)
    check_reads(used_reader, samples, seed=2)  # the parent's copy is untouched
    assert _lib.current() is parent


def test_threads_racing_to_the_first_call_in_a_child(dataset, used_reader: FileReader) -> None:
    """Several threads make the child's first calls at once: one reload, one reopen, no leak."""
    _, samples = dataset

    def child() -> None:
        start = threading.Barrier(4)

        def first_calls(seed: int) -> None:
            start.wait(10)
            check_reads(used_reader, samples, seed=seed, rounds=3)

        run_threads(first_calls, 4, timeout=30)
        assert _lib.open_handles() == 1  # the reader was reopened exactly once

    run_in_child(child)


def test_child_falls_back_to_a_temporary_file_without_memfd(dataset, used_reader) -> None:
    _, samples = dataset

    def no_memfd(*_args: object) -> int:
        raise OSError("memfd_create refused (as under a strict seccomp policy)")

    def child() -> None:
        os.memfd_create = no_memfd  # only in this child, which exits after
        check_reads(used_reader, samples, seed=5)
        assert not _lib.current().path.startswith("/proc/")

    run_in_child(child)


def test_nested_forks(dataset, used_reader: FileReader) -> None:
    _, samples = dataset

    def grandchild() -> None:
        check_reads(used_reader, samples, seed=30)
        run_in_child(lambda: check_reads(used_reader, samples, seed=31), timeout=60)
        check_reads(used_reader, samples, seed=32)

    def child() -> None:
        check_reads(used_reader, samples, seed=20)
        run_in_child(grandchild, timeout=90)
        check_reads(used_reader, samples, seed=21)

    run_in_child(child, timeout=120)


def test_gc_heavy_work_in_the_child(dataset, used_reader: FileReader, tmp_path: Path) -> None:
    _, samples = dataset

    def child() -> None:
        out = tmp_path / "child.ffr"
        with FileWriter(out) as writer:  # unknown count: the Go side stages every sample
            for i in range(3000):
                writer.write_one(payload(i, 2000))

        def churn(seed: int) -> None:
            with FileReader(out) as mine:
                for _ in range(8):  # Python's collections beside the Go runtime's
                    junk = [bytearray(4096) for _ in range(200)]  # Python-side garbage
                    check_reads(used_reader, samples, seed=seed, rounds=2)
                    batch = mine.read(range(0, 3000, 7))
                    assert batch[5].tobytes() == payload(35, 2000)
                    del junk
                    gc.collect()

        run_threads(churn, 3, timeout=60)
        assert FileReader(out).verify() == []

    run_in_child(child, timeout=120)


def test_fork_stress_while_the_parent_keeps_reading(dataset, used_reader: FileReader) -> None:
    _, samples = dataset
    stop = threading.Event()
    parent_errors: list[BaseException] = []

    def parent_reads() -> None:
        seed = 0
        while not stop.is_set():
            try:
                check_reads(used_reader, samples, seed=seed, rounds=1)
            except BaseException as exc:  # noqa: BLE001 - reported below
                parent_errors.append(exc)
                return
            seed += 1

    background = threading.Thread(target=parent_reads)
    background.start()
    try:
        for trial in range(50):
            run_in_child(lambda: check_reads(used_reader, samples, seed=trial, rounds=2),
                         timeout=30)
    finally:
        stop.set()
        background.join(60)
    assert parent_errors == []


def test_writer_from_the_parent_refuses_in_the_child(tmp_path: Path) -> None:
    path = tmp_path / "parent.ffr"
    writer = FileWriter(path, 2)
    writer.write_one(b"parent")

    def child() -> None:
        with pytest.raises(RuntimeError, match="another process"):
            writer.write_one(b"child")
        del writer_ref[:]  # dropping it in the child must not touch the parent's file
        gc.collect()

    writer_ref = [writer]
    run_in_child(child)
    writer.write_one(b"parent again")
    writer.close()
    with FileReader(path) as reader:
        assert [s.tobytes() for s in reader.read([0, 1])] == [b"parent", b"parent again"]


def test_reader_closed_in_the_parent_stays_closed_in_the_child(dataset) -> None:
    reader = FileReader(dataset[0])
    reader.close()

    def child() -> None:
        with pytest.raises(ValueError, match="closed"):
            reader.read([0])

    run_in_child(child)


def _read_inherited(order: list[int]) -> list[bytes]:
    assert _inherited is not None
    return [s.tobytes() for s in _inherited.read(order)]


def _read_pickled(reader: FileReader, order: list[int]) -> list[bytes]:
    return [s.tobytes() for s in reader.read(order)]


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_pools(method: str, dataset, used_reader: FileReader) -> None:
    global _inherited
    _, samples = dataset
    rng = random.Random(method)
    orders = [[rng.randrange(len(samples)) for _ in range(20)] for _ in range(8)]
    want = [[samples[i] for i in order] for order in orders]
    _inherited = used_reader
    pool = multiprocessing.get_context(method).Pool(2)
    try:
        pickled = pool.starmap_async(_read_pickled, [(used_reader, o) for o in orders])
        assert pickled.get(POOL_TIMEOUT) == want
        if method == "fork":
            assert pool.map_async(_read_inherited, orders).get(POOL_TIMEOUT) == want
    finally:
        pool.terminate()
        pool.join()
        _inherited = None


def test_child_copies_the_loaded_library_even_after_the_file_is_gone(dataset, tmp_path) -> None:
    copy = tmp_path / "libffrecord-copy.so"
    shutil.copy(_lib.library_path(), copy)
    out = run_python(f"""
        import os
        from ffrecord import FileReader
        from ffr_helpers import run_in_child
        reader = FileReader({str(dataset[0])!r})
        reader.read([0])
        os.unlink({str(copy)!r})   # as a `pip install` replacing the package mid-training would

        def child():
            assert len(reader.read([1, 2])) == 2

        run_in_child(child, timeout=30)
        print("ok")
    """, tmp_path, FFRECORD_LIBRARY=str(copy))
    assert out == "ok"


def test_reload_impossible_raises_runtime_error_at_once(dataset, tmp_path: Path) -> None:
    out = run_python(f"""
        from ffrecord import FileReader, _lib
        from ffr_helpers import run_in_child
        reader = FileReader({str(dataset[0])!r})
        reader.read([0])

        def refuse(path):
            raise OSError("refused by the test")

        _lib._memfd_copy = _lib._tempfile_copy = refuse   # no fresh copy can be made

        def child():
            try:
                reader.read([1])
            except RuntimeError as exc:
                assert "forked" in str(exc) and "refused by the test" in str(exc), exc
            else:
                raise AssertionError("read in the child did not fail")

        run_in_child(child, timeout=30)
        print("ok")
    """, tmp_path)
    assert out == "ok"


def test_child_of_a_process_that_never_loaded_uses_the_library_itself(dataset, tmp_path) -> None:
    out = run_python(f"""
        import ffrecord
        from ffrecord import _lib
        from ffr_helpers import run_in_child
        assert _lib.loaded() is None      # importing loads nothing

        def child():
            with ffrecord.FileReader({str(dataset[0])!r}) as reader:
                reader.read([0, 1])
            assert not _lib.current().path.startswith("/proc/")

        run_in_child(child, timeout=30)
        print("ok")
    """, tmp_path)
    assert out == "ok"


@pytest.mark.parametrize("check_data", [True, False])
def test_a_file_replaced_before_the_fork_is_refused_in_the_child(tmp_path: Path, check_data: bool) -> None:
    """The child reopens by path: a file of other samples found there is an error, never
    read as the parent's file (whose sample count the child's copy still shows)."""
    path = write_dataset(tmp_path / "d.ffr", [b"one", b"two"])
    reader = FileReader(path, check_data)
    stamp = reader.file_stamp(0)
    write_dataset(tmp_path / "other.ffr", [b"ONE", b"TWO"])
    os.replace(tmp_path / "other.ffr", path)  # same size, other samples
    assert reader.file_stamp(0) == stamp  # the parent's file, still open

    def child() -> None:
        with pytest.raises(ObjectChangedError, match="d.ffr: replaced since the reader opened it"):
            reader.read([0])

    run_in_child(child)
    assert [s.tobytes() for s in reader.read([0, 1])] == [b"one", b"two"]
    reader.close()


def test_a_pickled_reader_refuses_a_file_replaced_since(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "d.ffr", [b"one", b"two"])
    with FileReader(tmp_path) as reader:
        pickled = pickle.dumps(reader)
        with pickle.loads(pickled) as copy:  # unchanged: reads as the original
            assert [s.tobytes() for s in copy.read([1])] == [b"two"]
        write_dataset(tmp_path / "other.ffr", [b"three"])  # one more file in the directory
        with pytest.raises(ObjectChangedError, match="2 files now, 1 when the reader opened them"):
            reopen(tmp_path, True, (), stamps=reader.file_stamps)
        os.replace(tmp_path / "other.ffr", path)
        with pytest.raises(ObjectChangedError, match="d.ffr: replaced since the reader opened it") as info:
            pickle.loads(pickled)
        assert info.value.errno == errno.ESTALE
