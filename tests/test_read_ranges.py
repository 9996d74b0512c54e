"""``FileReader.read_ranges``: byte ranges of samples, back to back, in one call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffrecord import CorruptFileError, FileReader, FileWriter
from ffr_helpers import payload, write_dataset


@pytest.fixture(params=[None, "lz4", "zstd"])
def two_files(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[list[Path], list[bytes]]:
    samples = [payload(i, size) for i, size in enumerate([0, 1, 7, 5000, 64])]
    samples[3] = b"compressible " * 400
    paths = [tmp_path / "a.ffr", tmp_path / "b.ffr"]
    for path, part in zip(paths, (samples[:3], samples[3:])):
        with FileWriter(path, len(part), compression=request.param) as writer:
            writer.write_many(part)
    return paths, samples


def test_ranges_across_files(two_files) -> None:
    paths, samples = two_files
    ranges = [(3, 5199, 1), (0, 0, 0), (2, 0, 7), (4, 10, 20), (-2, 0, 3), (1, 1, 0), (3, 0, 5200)]
    with FileReader(paths) as reader:
        buf, offsets = reader.read_ranges(ranges)
        assert offsets.tolist() == [0, 1, 1, 8, 28, 31, 31, 5231]
        got = [buf[a:b].tobytes() for a, b in zip(offsets[:-1], offsets[1:])]
        assert got == [samples[i][o:o + n] for i, o, n in ranges]
        # An (n, 3) uint64 array is used as it is; ``out`` receives the bytes.
        out = bytearray(64)
        view, offsets = reader.read_ranges(np.array([[4, 60, 4]], np.uint64), out=out)
        assert view.tobytes() == bytes(out[:4]) == samples[4][60:64]
        assert reader.read_ranges([])[0].size == 0


def test_range_past_the_end_names_sample_and_range(two_files) -> None:
    paths, _ = two_files
    with FileReader(paths) as reader:
        with pytest.raises(IndexError, match=r"sample 1.*bytes \[60, 65\).*64-byte sample"):
            reader.read_ranges([(4, 60, 5)])
        with pytest.raises(IndexError):
            reader.read_ranges([(5, 0, 0)])
        with pytest.raises(ValueError, match="triples"):
            reader.read_ranges([(1, 2)])
        with pytest.raises(ValueError, match=">= 0"):
            reader.read_ranges([(1, -1, 1)])
        with pytest.raises(TypeError):
            reader.read_ranges([(1.5, 0, 1)])
        with pytest.raises(ValueError, match="holds 1 bytes"):
            reader.read_ranges([(3, 0, 2)], out=bytearray(1))


def test_partial_ranges_skip_the_sample_crc(tmp_path: Path) -> None:
    """A whole-sample range is CRC-checked; a partial one cannot be and reads what is stored."""
    path = write_dataset(tmp_path / "c.ffr", [b"x" * 100])
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    with FileReader(path, check_data=True) as reader:
        with pytest.raises(CorruptFileError):
            reader.read_ranges([(0, 0, 100)])
        assert reader.read_ranges([(0, 0, 99)])[0].tobytes() == b"x" * 99
