"""The error table: each misuse or bad input raises the documented exception type."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

import ffrecord
from ffrecord import CorruptFileError, FileReader, FileWriter
from ffr_helpers import payload, run_python, write_dataset


@pytest.fixture()
def small(tmp_path: Path) -> FileReader:
    with FileReader(write_dataset(tmp_path / "s.ffr", [payload(i, 8) for i in range(10)])) as r:
        yield r


def test_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing-here.ffr"):
        FileReader(tmp_path / "nothing-here.ffr")
    with pytest.raises(FileNotFoundError):
        FileReader([write_dataset(tmp_path / "ok.ffr", [b"1"]), tmp_path / "gone.ffr"])


def test_directory_without_ffr_files_is_value_error(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("hi")
    with pytest.raises(ValueError):
        FileReader(tmp_path)


def test_wrong_fname_types_are_type_errors() -> None:
    for wrong in (42, None, [1, 2], {"a": 1}):
        with pytest.raises(TypeError):
            FileReader(wrong)  # type: ignore[arg-type]


@pytest.mark.parametrize("indices", [[10], [0, 11], [-11], np.array([2**40]), [2**63],
                                     np.array([3, -11]), np.array([0, 10])])
def test_out_of_range_is_index_error(small: FileReader, indices) -> None:
    with pytest.raises(IndexError, match="out of range|of a dataset of 10"):
        small.read(indices)


@pytest.mark.parametrize("index", [10, -11, 2**64])
def test_read_one_out_of_range_is_index_error(small: FileReader, index: int) -> None:
    with pytest.raises(IndexError):
        small.read_one(index)


@pytest.mark.parametrize("indices", [
    [1.0], [0, 2.5], ["1"], "12", b"\x01", [True, False], np.array([True]),
    np.array([1.0]), 3, np.int64(3), None, [None], [[1, 2], [3]],
])
def test_wrong_index_types_are_type_errors(small: FileReader, indices) -> None:
    with pytest.raises(TypeError):
        small.read(indices)


@pytest.mark.parametrize("index", [1.0, "1", True, np.bool_(False), None, [1]])
def test_read_one_wrong_types_are_type_errors(small: FileReader, index) -> None:
    with pytest.raises(TypeError):
        small.read_one(index)


def test_two_dimensional_indices_are_value_errors(small: FileReader) -> None:
    with pytest.raises(ValueError):
        small.read(np.zeros((2, 2), np.int64))


def test_use_after_close_is_value_error(small: FileReader) -> None:
    small.close()
    with pytest.raises(ValueError):
        small.read([0])


def test_corrupt_file_error_is_a_value_error_with_the_go_message(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "c.ffr", [b"hello", b"world"])
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # last byte of the last sample
    path.write_bytes(bytes(raw))
    with FileReader(path, check_data=True) as reader:
        assert reader.read_one(0).tobytes() == b"hello"
        with pytest.raises(CorruptFileError, match=r"c\.ffr.*sample 1") as caught:
            reader.read([0, 1])
        assert isinstance(caught.value, ValueError)
        assert reader.verify() == [1]
        with pytest.raises(CorruptFileError, match=r"c\.ffr: sample 1"):
            reader.validate()
    with FileReader(path, check_data=False) as reader:  # unchecked reads return the bytes
        assert reader.read_one(1).tobytes() == b"worl" + bytes([ord("d") ^ 0xFF])
        assert reader.verify() == [1]


def test_exception_classes_are_exported() -> None:
    assert issubclass(ffrecord.CorruptFileError, ValueError)
    assert issubclass(ffrecord.FFRecordWarning, UserWarning)


def test_missing_file_carries_errno_and_filename(tmp_path: Path) -> None:
    missing = tmp_path / "gone.ffr"
    with pytest.raises(FileNotFoundError) as caught:
        FileReader(missing)
    assert caught.value.errno == errno.ENOENT and caught.value.filename == str(missing)


def test_a_file_used_as_a_directory_is_not_a_directory_error(tmp_path: Path) -> None:
    plain = write_dataset(tmp_path / "plain.ffr", [b"x"])
    inside = plain / "x.ffr"
    with pytest.raises(NotADirectoryError) as caught:
        FileReader(inside)
    assert caught.value.errno == errno.ENOTDIR and caught.value.filename == str(inside)
    assert "plain.ffr" in str(caught.value)
    with pytest.raises(NotADirectoryError):
        FileWriter(inside, 1)


def test_permission_denied_is_a_permission_error(tmp_path: Path) -> None:
    """A real EACCES: as root (which bypasses file modes) the child gives up root first."""
    with tempfile.TemporaryDirectory() as top:  # under /tmp: reachable by any user
        os.chmod(top, 0o755)
        locked = write_dataset(Path(top) / "locked.ffr", [b"secret"])
        os.chmod(locked, 0)
        read_only = Path(top) / "read-only"
        read_only.mkdir(mode=0o555)
        out = run_python(f"""
            import os
            from ffrecord import FileReader, FileWriter, _lib
            _lib.current()  # loaded while this process may still read the library's file
            if os.geteuid() == 0:
                os.setuid(65534)
            for attempt in (lambda: FileReader({str(locked)!r}),
                            lambda: FileWriter({str(read_only / "new.ffr")!r}, 1)):
                try:
                    attempt()
                except OSError as exc:
                    print(type(exc).__name__, exc.errno, exc.filename)
        """)
    lines = out.splitlines()
    assert lines[0] == f"PermissionError {errno.EACCES} {locked}"
    assert lines[1].startswith(f"PermissionError {errno.EACCES} {read_only}/"), lines
