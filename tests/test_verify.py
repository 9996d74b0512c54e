"""Verification and file descriptions come from the library: bad samples with their reasons,
page after page, ranges checked without wrapping, and what each file holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ffrecord._verification as verification
from ffrecord import BadSample, CorruptFileError, FileInfo, FileReader, FileWriter
from ffr_helpers import payload, write_dataset

HEADER = 12 + 12  # the header of a one-sample file; 12 more bytes per further sample


def damaged(path: Path, n: int, size: int, bad: list[int]) -> Path:
    """A file of ``n`` samples of ``size`` bytes whose samples ``bad`` each have a byte
    flipped."""
    write_dataset(path, [payload(i, size) for i in range(n)])
    raw = bytearray(path.read_bytes())
    for i in bad:
        raw[12 + 12 * n + i * size] ^= 0xFF
    path.write_bytes(bytes(raw))
    return path


def test_bad_samples_come_with_the_library_account(tmp_path: Path) -> None:
    first = damaged(tmp_path / "a.ffr", 5, 16, [3])
    second = damaged(tmp_path / "b.ffr", 4, 16, [0, 2])
    with FileReader([first, second], check_data=False) as reader:
        found = list(reader.bad_samples())
        assert [(b.index, b.reason) for b in found] == [(3, "checksum"), (5, "checksum"),
                                                        (7, "checksum")]
        assert all(isinstance(b, BadSample) for b in found)
        assert found[0].message.startswith(f"{first}: sample 3: checksum mismatch: stored 0x")
        assert found[1].message.startswith(f"{second}: sample 0: checksum mismatch")
        assert found[1].message.endswith("(sample 5 of the dataset)")
        assert reader.verify() == [3, 5, 7]
        assert reader.verify(4, 3) == [5] and [b.index for b in reader.bad_samples(-2)] == [7]
        with pytest.raises(CorruptFileError) as caught:
            reader.validate()
        assert str(caught.value) == found[0].message + " (3 bad samples in all)"


@pytest.mark.parametrize("page, text", [(256, 64 << 10), (3, 64 << 10), (1000, 200)])
def test_any_number_of_bad_samples_page_by_page(tmp_path: Path, monkeypatch, page: int,
                                                text: int) -> None:
    """More bad samples than a page holds (by count, or by the room for their messages) are
    all found, once each, in order."""
    monkeypatch.setattr(verification, "_VERIFY_PAGE", page)
    monkeypatch.setattr(verification, "_VERIFY_TEXT", text)
    bad = [i for i in range(1300) if i % 7 != 3]
    with FileReader(damaged(tmp_path / "x.ffr", 1300, 4, bad), check_data=False) as reader:
        assert reader.verify() == bad
        found = list(reader.bad_samples())
        assert [b.index for b in found] == bad
        assert all(f": sample {b.index}: " in b.message for b in found)


def test_damaged_metadata_is_raised_after_the_samples(golden: Path) -> None:
    with FileReader(golden / "corrupt_header.ffr", check_data=False) as reader:
        found = []
        with pytest.raises(CorruptFileError, match="metadata"):
            for bad in reader.bad_samples():
                found.append(bad.index)
        assert found == [0, 1]  # offsets[1] moved: the boundary of samples 0 and 1
        with pytest.raises(CorruptFileError, match="metadata"):
            reader.verify()


@pytest.mark.parametrize("start, count", [
    (0, 2**64), (0, 2**64 - 1), (1, 2**64 - 1), (2**64 - 1, 1), (2**64, 0), (0, 26), (25, 1),
    (26, 0), (-26, None), (2**63, 2**63),
])
def test_ranges_beyond_the_dataset_are_index_errors(golden: Path, start, count) -> None:
    with FileReader(golden / "corrupt_sample.ffr") as reader:
        with pytest.raises(IndexError):
            reader.verify(start, count)
        with pytest.raises(IndexError):
            list(reader.bad_samples(start, count))


@pytest.mark.parametrize("start, count, bad", [
    (0, None, [2]), (0, 25, [2]), (25, 0, []), (25, None, []), (2, 1, [2]), (3, 22, []),
    (-23, None, [2]), (-25, 3, [2]),
])
def test_ranges_inside_the_dataset(golden: Path, start, count, bad) -> None:
    with FileReader(golden / "corrupt_sample.ffr") as reader:
        assert reader.verify(start, count) == bad


def test_negative_count_is_a_value_error(golden: Path) -> None:
    with FileReader(golden / "basic.ffr") as reader, pytest.raises(ValueError):
        reader.verify(0, -1)


def test_file_info(tmp_path: Path, golden: Path) -> None:
    lz4 = tmp_path / "z.ffr"
    with FileWriter(lz4, 2, compression="lz4") as w:
        w.write_one(b"a" * 5000)
        w.write_one(b"b")
    with pytest.warns(UserWarning, match="legacy_zero_checksum"):
        reader = FileReader([golden / "basic.ffr", lz4, golden / "legacy_zero_checksum.ffr"])
    with reader:
        basic = reader.file_info()
        size = (golden / "basic.ffr").stat().st_size
        stored = int.from_bytes((golden / "basic.ffr").read_bytes()[:4], "little")
        assert basic == FileInfo(str(golden / "basic.ffr"), 25, 25, "none", HEADER + 12 * 24,
                                 size - HEADER - 12 * 24, size, "intact", "local")
        assert reader.file_stamp() == (size, 25, stored) and stored != 0
        compressed = reader.file_info(1)
        assert (compressed.samples, compressed.stored_samples, compressed.compression) == \
            (2, 3, "lz4")
        assert compressed.data_bytes < 5000 and compressed.file_bytes == lz4.stat().st_size
        assert reader.file_info(-1).metadata == "legacy" and reader.file_stamp(-1).header_checksum == 0
        for k in (3, -4):
            with pytest.raises(IndexError):
                reader.file_info(k)
    with FileReader(golden / "corrupt_header.ffr", check_data=False) as reader:
        assert reader.file_info().metadata == "damaged"
    with pytest.raises(ValueError, match="closed"):
        reader.file_info()


def test_validate_names_the_file_and_sample_of_a_dataset(tmp_path: Path) -> None:
    sound = write_dataset(tmp_path / "a.ffr", [b"x", b"y"])
    bad = damaged(tmp_path / "b.ffr", 3, 8, [1])
    with FileReader([sound, bad]) as reader:
        with pytest.raises(CorruptFileError,
                           match=re.escape(f"{bad}: sample 1: checksum mismatch") +
                           r".*\(sample 3 of the dataset\)$"):
            reader.validate()
