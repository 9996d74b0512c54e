"""Helpers shared by the tools tests, written independently of the package under test.

Everything here but ``read_all`` re-derives the formats from their specifications (a bitwise
CRC-32C, a plain reader of the base FFRecord layout) so the tests check the package against
the spec, not against itself.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List


def read_all(path, check_data: bool = True) -> List[bytes]:
    """Every sample of a file or directory, read back with ``ffrecord.FileReader``."""
    from ffrecord import FileReader

    with FileReader(path, check_data=check_data) as reader:
        return [s.tobytes() for s in reader.read(range(reader.n))]


def manifest(golden: Path) -> Dict:
    """MANIFEST.json of the golden folder (the ``golden`` fixture of conftest.py)."""
    return json.loads((golden / "MANIFEST.json").read_text())


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C one bit at a time, straight from the definition (reflected 0x1EDC6F41)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_frame(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked(crc32c_bitwise(length))) + data
            + struct.pack("<I", masked(crc32c_bitwise(data))))


def ofrecord_frame(data: bytes) -> bytes:
    return struct.pack("<q", len(data)) + data


@dataclass
class BaseFile:
    """A file parsed with the base format's rules only (no knowledge of extensions)."""

    n: int
    checksums: List[int]
    offsets: List[int]
    samples: List[bytes]


def sample_offsets(raw: bytes) -> List[int]:
    """The sample offsets a file's header stores, unchecked (also for damaged files)."""
    n = struct.unpack_from("<Q", raw, 4)[0]
    return list(struct.unpack_from(f"<{n}Q", raw, 12 + 4 * n))


def parse_base_format(path: Path) -> BaseFile:
    """Parses and validates a file as the reference reader would; asserts on any violation."""
    raw = Path(path).read_bytes()
    assert len(raw) >= 12, "header cut short"
    meta_crc, n = struct.unpack_from("<IQ", raw, 0)
    header = 12 + 12 * n
    assert len(raw) >= header, "sample tables cut short"
    assert meta_crc == zlib.crc32(raw[4:header]), "metadata checksum mismatch"
    checksums = list(struct.unpack_from(f"<{n}I", raw, 12))
    offsets = sample_offsets(raw)
    if n:
        assert offsets[0] == header, "first sample does not start right after the header"
    assert all(a <= b for a, b in zip(offsets, offsets[1:])), "offsets decrease"
    ends = offsets[1:] + [len(raw)]
    samples = [raw[a:b] for a, b in zip(offsets, ends)]
    for i, (sample, crc) in enumerate(zip(samples, checksums)):
        assert zlib.crc32(sample) == crc, f"sample {i}: checksum mismatch"
    return BaseFile(n, checksums, offsets, samples)
