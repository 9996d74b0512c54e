"""FileWriter: what it accepts, round trips over sample sizes, failure leaving no file, and
small ``bytes`` samples gathered into batches without changing a byte of the result."""

from __future__ import annotations

import array
import gc
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter, _lib
from ffrecord import writer as writer_module
from ffr_helpers import payload, random_sizes, run_python, run_threads, write_dataset

ROUND_TRIP_SIZES = [0, 1, 2, 7, 511, 512, 513, 4095, 4096, 4097, 65536, 1 << 20, (3 << 20) + 7]


@pytest.mark.parametrize("check_data", [True, False])
@pytest.mark.parametrize("direct", [False, True])
def test_round_trip_over_sizes(tmp_path: Path, check_data: bool, direct: bool) -> None:
    samples = [payload(i, size) for i, size in enumerate(ROUND_TRIP_SIZES)]
    path = write_dataset(tmp_path / "sizes.ffr", samples)
    order = list(range(len(samples)))[::-1] + [3, 3, 0]
    with FileReader(path, check_data, direct=direct) as reader:
        assert reader.n == len(samples)
        assert [s.tobytes() for s in reader.read(order)] == [samples[i] for i in order]
        assert [reader.read_one(i).tobytes() for i in order] == [samples[i] for i in order]
        assert reader.sizes(order).tolist() == [len(samples[i]) for i in order]


@pytest.mark.parametrize("make", [
    bytes, bytearray, memoryview,
    lambda b: np.frombuffer(b, np.uint8).copy(),
    lambda b: np.frombuffer(b, np.uint8),  # read-only array
    lambda b: array.array("B", b),
    lambda b: memoryview(bytearray(b"..." + b + b"..."))[3:-3],  # contiguous slice
], ids=["bytes", "bytearray", "memoryview", "ndarray", "readonly-ndarray", "array", "slice"])
def test_write_one_accepts_byte_buffers(tmp_path: Path, make) -> None:
    data = payload(1, 1000)
    path = write_dataset(tmp_path / "b.ffr", [make(data)])
    with FileReader(path) as reader:
        assert reader.read_one(0).tobytes() == data


def test_write_one_takes_raw_bytes_of_typed_arrays(tmp_path: Path) -> None:
    floats = np.arange(12, dtype=np.float32).reshape(3, 4)
    words = np.arange(5, dtype=">u8")
    path = write_dataset(tmp_path / "typed.ffr", [floats, words, np.float64(2.5)])
    with FileReader(path) as reader:
        a, b, c = reader.read([0, 1, 2])
        assert np.array_equal(np.frombuffer(a, np.float32).reshape(3, 4), floats)
        assert np.array_equal(np.frombuffer(b, ">u8"), words)
        assert np.frombuffer(c, np.float64)[0] == 2.5


def test_non_contiguous_buffers_are_refused(tmp_path: Path) -> None:
    with FileWriter(tmp_path / "x.ffr", None) as writer:
        with pytest.raises(ValueError, match="contiguous"):
            writer.write_one(np.arange(10, dtype=np.uint8)[::2])
        with pytest.raises(ValueError, match="contiguous"):
            writer.write_one(np.asfortranarray(np.ones((3, 4), np.uint8)))
        for wrong in ("text", 5, None, [1, 2]):
            with pytest.raises(TypeError):
                writer.write_one(wrong)
        assert writer.count == 0


def test_unknown_count_and_count_attribute(tmp_path: Path) -> None:
    path = tmp_path / "unknown.ffr"
    writer = FileWriter(path)
    assert writer.n is None
    for i in range(37):
        writer.write_one(payload(i, i * 3))
        assert writer.count == i + 1
    writer.close()
    with FileReader(path) as reader:
        assert reader.n == 37
        assert reader.read_one(36).tobytes() == payload(36, 108)


def test_writing_past_n_fails_and_close_still_works(tmp_path: Path) -> None:
    path = tmp_path / "two.ffr"
    writer = FileWriter(path, 2)
    writer.write_one(b"a")
    writer.write_one(b"b")
    with pytest.raises(ValueError):
        writer.write_one(b"c")
    assert writer.count == 2
    writer.close()
    with FileReader(path) as reader:
        assert [s.tobytes() for s in reader.read([0, 1])] == [b"a", b"b"]


def test_closing_short_fails_and_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "short.ffr"
    writer = FileWriter(path, 3)
    writer.write_one(b"only one")
    with pytest.raises(ValueError):
        writer.close()
    assert writer.closed
    assert list(tmp_path.iterdir()) == []


def test_exception_inside_with_aborts(tmp_path: Path) -> None:
    path = tmp_path / "aborted.ffr"
    with pytest.raises(KeyError):
        with FileWriter(path, 2) as writer:
            writer.write_one(b"x")
            raise KeyError("boom")
    assert list(tmp_path.iterdir()) == []


def test_abort_and_use_after_close(tmp_path: Path) -> None:
    writer = FileWriter(tmp_path / "a.ffr", None)
    writer.write_one(b"x")
    writer.abort()
    writer.abort()  # idempotent
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write_one(b"y")
    assert list(tmp_path.iterdir()) == []


def test_unclosed_writer_is_discarded_with_resource_warning(tmp_path: Path) -> None:
    writer = FileWriter(tmp_path / "leaked.ffr", 5)
    writer.write_one(b"x")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del writer
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) for w in caught)
    assert list(tmp_path.iterdir()) == []


def test_writer_left_open_at_exit_does_not_abort_interpreter(tmp_path: Path) -> None:
    script = (
        "import ffrecord, sys\n"
        f"w = ffrecord.FileWriter({str(tmp_path / 'exit.ffr')!r}, 10)\n"
        "w.write_one(b'abc')\n"
        "sys.modules['__main__'].keep = w\n"
        "print('done')\n"
    )
    assert run_python(script) == "done"
    assert not (tmp_path / "exit.ffr").exists()


def test_constructor_checks(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        FileWriter(tmp_path / "neg.ffr", -1)
    with pytest.raises(TypeError):
        FileWriter(tmp_path / "bool.ffr", True)
    with pytest.raises(TypeError):
        FileWriter(tmp_path / "float.ffr", 2.0)
    with pytest.raises(ValueError, match="compression"):
        FileWriter(tmp_path / "zip.ffr", 1, compression="zip")
    with pytest.raises(TypeError):
        FileWriter(123, 1)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        FileWriter(tmp_path / "no" / "such" / "dir.ffr", 1)


def test_zero_samples_and_pathlike(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "empty.ffr", [])
    with FileReader(os.fspath(path)) as reader:
        assert reader.n == 0 and len(reader) == 0
        assert reader.read([]) == []


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compression_round_trip(tmp_path: Path, compression: str) -> None:
    samples = [b"A" * 10000, payload(1, 5000), b"", b"xyz" * 999]
    path = tmp_path / f"{compression}.ffr"
    with FileWriter(path, len(samples), compression=compression) as writer:
        for sample in samples:
            writer.write_one(sample)
    assert path.stat().st_size < sum(map(len, samples))  # the repetitive ones shrank
    with FileReader(path) as reader:
        assert [s.tobytes() for s in reader.read([3, 2, 1, 0])] == samples[::-1]
        assert reader.sizes([0, 1, 2, 3]).tolist() == [len(s) for s in samples]
        assert reader.verify() == []
        assert reader.file_info().compression == compression


def test_repr(tmp_path: Path) -> None:
    writer = FileWriter(tmp_path / "r.ffr", 1)
    assert "r.ffr" in repr(writer) and "count=0" in repr(writer)
    writer.write_one(b"1")
    writer.close()
    assert "closed" in repr(writer)


# ---- gathering small bytes samples into batches -----------------------------------------

@pytest.fixture(params=["default", "tiny"])
def batch_bytes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The batch bound in force: the shipped one, or one so small that batches end every
    few samples, inside each file of the tests below."""
    if request.param == "tiny":
        monkeypatch.setattr(writer_module, "BATCH_BYTES", 3000)
        monkeypatch.setattr(writer_module, "SAMPLE_CHARGE", 300)
    return writer_module.BATCH_BYTES


def golden_files(golden: Path) -> dict[str, int]:
    """The valid files of the manifest with their sample counts."""
    files = json.loads((golden / "MANIFEST.json").read_text())["files"]
    return {name: entry["n"] for name, entry in files.items()}


def test_gathered_bytes_rewrite_reference_files_byte_for_byte(
        golden: Path, tmp_path: Path, batch_bytes: int) -> None:
    for name, n in golden_files(golden).items():
        with FileReader(golden / name) as reader:
            samples = [s.tobytes() for s in reader.read(range(n))] if n else []
        one_by_one, many = tmp_path / "one.ffr", tmp_path / "many.ffr"
        write_dataset(one_by_one, samples)
        with FileWriter(many, n) as writer:
            writer.write_many(iter(samples))
        original = (golden / name).read_bytes()
        assert one_by_one.read_bytes() == original, name
        assert many.read_bytes() == original, name


def mixed_samples(count: int) -> list[object]:
    """Samples of every kind the writer takes, small and large, in a fixed shuffle."""
    kinds = [bytes, bytearray, lambda b: np.frombuffer(b, np.uint8).copy(), memoryview,
             bytes, bytes]
    sizes = random_sizes(count, 0, 5000, seed=5)
    sizes[count // 3] = writer_module.BATCH_BYTES + 5  # a bytes sample too big to gather
    return [kinds[i % len(kinds)](payload(i, size)) for i, size in enumerate(sizes)]


def test_mixed_kinds_keep_their_order_and_bytes(tmp_path: Path, batch_bytes: int) -> None:
    samples = mixed_samples(200)
    raw = [bytes(s) for s in samples]
    path = tmp_path / "mixed.ffr"
    with FileWriter(path, len(samples)) as writer:
        for i, sample in enumerate(samples):
            writer.write_one(sample)
            assert writer.count == i + 1
    unbatched = write_dataset(tmp_path / "unbatched.ffr", [bytearray(s) for s in raw])
    assert path.read_bytes() == unbatched.read_bytes()  # bytearrays go one call each
    with FileReader(path) as reader:
        assert [s.tobytes() for s in reader.read(range(len(raw)))] == raw


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_write_many_round_trip(tmp_path: Path, batch_bytes: int, compression: str | None) -> None:
    samples = mixed_samples(120)
    raw = [bytes(s) for s in samples]
    path = tmp_path / "many.ffr"
    with FileWriter(path, compression=compression) as writer:
        writer.write_many(s for s in samples[:50])
        writer.write_many(samples[50:])
        writer.write_many([])
        assert writer.count == len(samples)
    with FileReader(path) as reader:
        assert reader.n == len(raw)
        assert [s.tobytes() for s in reader.read(range(len(raw)))] == raw


@pytest.mark.parametrize("last", [b"d", bytearray(b"d"), b"d" * ((1 << 20) + 1)],
                         ids=["bytes", "bytearray", "large-bytes"])
def test_writing_past_n_raises_at_the_extra_sample(tmp_path: Path, last: object) -> None:
    path = tmp_path / "three.ffr"
    writer = FileWriter(path, 3)
    writer.write_many([b"a", b"b", b"c"])  # all three still gathered
    with pytest.raises(ValueError, match=r"n=3 samples; sample 3 is one too many"):
        writer.write_one(last)
    with pytest.raises(ValueError, match="one too many"):
        writer.write_many([b"e"])
    assert writer.count == 3
    writer.close()
    with FileReader(path) as reader:
        assert [s.tobytes() for s in reader.read([0, 1, 2])] == [b"a", b"b", b"c"]


def test_write_many_stops_at_the_failing_sample(tmp_path: Path) -> None:
    path = tmp_path / "partial.ffr"
    with FileWriter(path, 2) as writer:
        with pytest.raises(TypeError):
            writer.write_many([b"kept", "not bytes", b"never"])
        assert writer.count == 1
        writer.write_one(b"second")
    with FileReader(path) as reader:
        assert [s.tobytes() for s in reader.read([0, 1])] == [b"kept", b"second"]


def test_abort_drops_gathered_samples(tmp_path: Path, batch_bytes: int) -> None:
    handles = _lib.open_handles()
    writer = FileWriter(tmp_path / "dropped.ffr", None)
    writer.write_many(payload(i, 700) for i in range(40))  # some batches sent, some gathered
    writer.abort()
    assert writer.closed and _lib.open_handles() == handles
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="closed"):
        writer.write_one(b"more")


def test_exception_inside_with_after_batches_leaves_nothing(
        tmp_path: Path, batch_bytes: int) -> None:
    with pytest.raises(RuntimeError):
        with FileWriter(tmp_path / "lost.ffr", 100) as writer:
            writer.write_many(payload(i, 900) for i in range(60))
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_closing_short_with_gathered_samples(tmp_path: Path) -> None:
    writer = FileWriter(tmp_path / "short.ffr", 5)
    writer.write_many([b"1", b"2"])
    with pytest.raises(ValueError, match="n=5 samples but 2 were written"):
        writer.close()
    assert list(tmp_path.iterdir()) == []


def test_threads_sharing_a_writer_lose_nothing(tmp_path: Path, batch_bytes: int) -> None:
    threads, each = 4, 300
    path = tmp_path / "shared.ffr"
    writer = FileWriter(path, threads * each)
    run_threads(lambda t: writer.write_many(payload(t * each + i, 100 + i) for i in range(each)),
                threads)
    assert writer.count == threads * each
    writer.close()
    want = sorted(payload(t * each + i, 100 + i) for t in range(threads) for i in range(each))
    with FileReader(path) as reader:
        assert sorted(s.tobytes() for s in reader.read(range(reader.n))) == want


def test_delayed_write_error_surfaces_at_a_later_call(tmp_path: Path) -> None:
    """A file-size limit makes the disk 'full' partway: the error comes at a later write or
    at close, and nothing is left at the path."""
    script = (
        "import os, resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, 3 << 20))\n"
        "import ffrecord\n"
        f"w = ffrecord.FileWriter({str(tmp_path / 'big.ffr')!r}, 10_000)\n"
        "try:\n"
        "    for i in range(10_000):\n"
        "        w.write_one(bytes(1024))\n"
        "except OSError as exc:\n"
        "    print('write', w.count, 'too large' in str(exc))\n"
        "try:\n"
        "    w.close()\n"
        "except OSError as exc:\n"
        "    print('close', 'too large' in str(exc))\n"
    )
    write_line, close_line = run_python(script).split("\n")[:2]
    word, count, named = write_line.split()
    assert word == "write" and named == "True"
    assert 3 * 1024 < int(count) < 10_000  # it came after the limit, not with the first write
    assert close_line == "close True"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_large_gathered_samples_are_written_in_place(tmp_path: Path, compression: str | None) -> None:
    # Sizes around the average from which a gathered batch is handed over without a join.
    sizes = [writer_module.VECTOR_BYTES - 1, writer_module.VECTOR_BYTES, 200 << 10, 0, 3,
             (64 << 10) + 7, 90 << 10, 70 << 10] * 3
    samples = [payload(i, size) for i, size in enumerate(sizes)]
    path = tmp_path / "large.ffr"
    with FileWriter(path, len(samples), compression=compression) as writer:
        writer.write_many(samples)
    with FileReader(path) as reader:
        assert [s.tobytes() for s in reader.read(range(len(samples)))] == samples
    if compression is None:
        assert path.read_bytes() == write_dataset(tmp_path / "one.ffr",
                                                  [bytearray(s) for s in samples]).read_bytes()
