"""FileWriter: what it accepts, round trips over sample sizes, and failure leaving no file."""

from __future__ import annotations

import array
import gc
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter
from ffr_helpers import payload, write_dataset

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
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
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


def test_lz4_compression_round_trip(tmp_path: Path) -> None:
    samples = [b"A" * 10000, payload(1, 5000), b"", b"xyz" * 999]
    path = tmp_path / "lz4.ffr"
    with FileWriter(path, len(samples), compression="lz4") as writer:
        for sample in samples:
            writer.write_one(sample)
    assert path.stat().st_size < sum(map(len, samples))  # the repetitive ones shrank
    with FileReader(path) as reader:
        assert [s.tobytes() for s in reader.read([3, 2, 1, 0])] == samples[::-1]
        assert reader.sizes([0, 1, 2, 3]).tolist() == [len(s) for s in samples]
        assert reader.verify() == []


def test_repr(tmp_path: Path) -> None:
    writer = FileWriter(tmp_path / "r.ffr", 1)
    assert "r.ffr" in repr(writer) and "count=0" in repr(writer)
    writer.write_one(b"1")
    writer.close()
    assert "closed" in repr(writer)
