"""ffrecord.convert: TFRecord, OFRecord, folders and iterables into FFRecord files."""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import pytest

from ffrecord import CorruptFileError, PackedFolder
from ffrecord import convert
from tools_support import crc32c_bitwise, masked, ofrecord_frame, parse_base_format, read_all, \
    tfrecord_frame



RECORDS = [b"", b"a", b"hello tfrecord", os.urandom(3000), bytes(70000)]


def test_crc32c_matches_the_known_vector_and_an_independent_implementation():
    assert crc32c_bitwise(b"123456789") == 0xE3069283  # the test's own reference is right
    assert convert.crc32c(b"123456789") == 0xE3069283
    for data in RECORDS[:4]:
        assert convert.crc32c(data) == crc32c_bitwise(data)
        assert convert.masked_crc32c(data) == masked(crc32c_bitwise(data))
    # the core's CRC-32C (hardware or table paths, by length and alignment), in pieces too
    for size in (0, 1, 7, 8, 9, 63, 64, 65, 511, 512, 513, 4099):
        data = os.urandom(size)
        assert convert.crc32c(data) == crc32c_bitwise(data), size
        assert convert.crc32c(data[size // 3:], convert.crc32c(data[:size // 3])) \
            == crc32c_bitwise(data), size
    assert convert.crc32c(bytearray(b"123456789")) == convert.crc32c(memoryview(b"123456789"))


def write_tfrecord(path: Path, records: list, opener=open) -> Path:
    with opener(path, "wb") as f:
        for record in records:
            f.write(tfrecord_frame(record))
    return path


def test_tfrecord_files_convert_in_order(tmp_path):
    a = write_tfrecord(tmp_path / "a.tfrecord", RECORDS)
    b = write_tfrecord(tmp_path / "b.tfrecord", [b"second file"])
    out = tmp_path / "out.ffr"
    assert convert.tfrecord_to_ffr([a, b], out) == len(RECORDS) + 1
    assert read_all(out) == RECORDS + [b"second file"]
    parse_base_format(out)


def test_tfrecord_directories_use_natural_order_and_skip_markers(tmp_path):
    src = tmp_path / "tf"
    src.mkdir()
    for k in (10, 2, 1):
        write_tfrecord(src / f"train-{k}", [f"file {k}".encode()])
    (src / "_SUCCESS").write_bytes(b"")
    (src / ".hidden").write_bytes(b"junk")
    assert convert.tfrecord_to_ffr(src, tmp_path / "o.ffr") == 3
    assert read_all(tmp_path / "o.ffr") == [b"file 1", b"file 2", b"file 10"]


def test_gzip_tfrecord(tmp_path):
    path = write_tfrecord(tmp_path / "z.tfrecord.gz", RECORDS, opener=gzip.open)
    assert list(convert.read_tfrecord(path)) == RECORDS


def corrupt(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x01
    path.write_bytes(bytes(raw))


def record_offset(records: list, index: int) -> int:
    return sum(16 + len(r) for r in records[:index])


def test_a_bad_data_checksum_names_file_and_record(tmp_path):
    path = write_tfrecord(tmp_path / "bad.tfrecord", RECORDS)
    corrupt(path, record_offset(RECORDS, 3) + 12 + 100)  # inside record 3's data
    out = tmp_path / "out.ffr"
    with pytest.raises(CorruptFileError, match=r"bad\.tfrecord: record 3 .*data checksum"):
        convert.tfrecord_to_ffr(path, out)
    assert not out.exists()
    # without verification the damaged bytes pass through unchanged
    assert convert.tfrecord_to_ffr(path, out, verify=False) == len(RECORDS)
    assert read_all(out)[3] != RECORDS[3]


def test_a_bad_length_checksum_names_the_record(tmp_path):
    path = write_tfrecord(tmp_path / "len.tfrecord", RECORDS)
    corrupt(path, record_offset(RECORDS, 2) + 8)  # record 2's length CRC
    with pytest.raises(CorruptFileError, match=r"record 2 \(byte 33\): length checksum"):
        list(convert.read_tfrecord(path))


@pytest.mark.parametrize("keep", [3, 14, 20])  # cut in record 2's header, data, trailer
def test_a_truncated_tfrecord_is_an_error(tmp_path, keep):
    path = tmp_path / "cut.tfrecord"
    data = tfrecord_frame(b"") + tfrecord_frame(b"x") + tfrecord_frame(b"third")
    path.write_bytes(data[:16 + 17 + keep])
    with pytest.raises(CorruptFileError, match=r"cut\.tfrecord: record 2 .*truncated"):
        list(convert.read_tfrecord(path))


def test_ofrecord_parts(tmp_path):
    src = tmp_path / "ofrecord"
    src.mkdir()
    parts = {0: [b"p0-a", b"p0-b"], 2: [b"p2"], 10: [b"p10-" + bytes(5000)]}
    for k, records in parts.items():
        (src / f"part-{k}").write_bytes(b"".join(map(ofrecord_frame, records)))
    (src / "README").write_bytes(b"not a part")
    out = tmp_path / "of.ffr"
    assert convert.ofrecord_to_ffr(src, out) == 4
    assert read_all(out) == parts[0] + parts[2] + parts[10]
    cut = src / "part-11"
    cut.write_bytes(ofrecord_frame(b"whole") + ofrecord_frame(b"cut short")[:-2])
    with pytest.raises(CorruptFileError, match=r"part-11: record 1 .*truncated"):
        convert.ofrecord_to_ffr(cut, out)
    negative = src / "part-12"
    negative.write_bytes(struct.pack("<q", -5))
    with pytest.raises(CorruptFileError, match="negative length"):
        list(convert.read_ofrecord(negative))


def test_iterables_with_and_without_a_length(tmp_path):
    gen = (str(i).encode() * (i % 5) for i in range(1000))
    assert convert.write_iterable(gen, tmp_path / "g.ffr") == 1000
    assert read_all(tmp_path / "g.ffr") == [str(i).encode() * (i % 5) for i in range(1000)]
    assert convert.write_iterable([b"x", b"y"], tmp_path / "l.ffr", compression="lz4") == 2
    assert read_all(tmp_path / "l.ffr") == [b"x", b"y"]


def test_an_iterable_that_fails_leaves_nothing(tmp_path):
    def broken():
        yield b"one"
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        convert.write_iterable(broken(), tmp_path / "b.ffr")
    assert list(tmp_path.iterdir()) == []


def test_declared_length_mismatch_is_an_error(tmp_path):
    with pytest.raises(ValueError):
        convert.write_iterable(iter([b"a"]), tmp_path / "short.ffr", n=2)
    assert not (tmp_path / "short.ffr").exists()


def test_folder_conversion_is_pack(tmp_path):
    (tmp_path / "src" / "d").mkdir(parents=True)
    (tmp_path / "src" / "d" / "f.txt").write_bytes(b"content")
    assert convert.folder_to_ffr(tmp_path / "src", tmp_path / "f.ffr") == 1
    with PackedFolder(tmp_path / "f.ffr") as packed:
        assert packed.read_one("d/f.txt").tobytes() == b"content"


def test_missing_inputs(tmp_path):
    with pytest.raises(FileNotFoundError):
        convert.tfrecord_to_ffr(tmp_path / "nope", tmp_path / "o.ffr")
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(FileNotFoundError, match="no input files"):
        convert.ofrecord_to_ffr(tmp_path / "emptydir", tmp_path / "o.ffr")


def test_damaged_gzip_stream_is_corruption(tmp_path):
    path = write_tfrecord(tmp_path / "z.gz", RECORDS, opener=gzip.open)
    path.write_bytes(path.read_bytes()[:-30])  # cut inside the deflate stream
    with pytest.raises(CorruptFileError, match=r"z\.gz: record \d+ .*gzip"):
        list(convert.read_tfrecord(path))


def test_a_huge_bogus_length_is_truncation_not_an_allocation(tmp_path):
    path = tmp_path / "part-0"
    path.write_bytes(struct.pack("<q", 1 << 60) + b"tiny")
    with pytest.raises(CorruptFileError, match="record 0 .*truncated"):
        list(convert.read_ofrecord(path))
    tf = tmp_path / "huge.tfrecord"
    length = struct.pack("<Q", 1 << 60)
    tf.write_bytes(length + struct.pack("<I", masked(crc32c_bitwise(length))) + b"tiny")
    with pytest.raises(CorruptFileError, match="record 0 .*truncated"):
        list(convert.read_tfrecord(tf))


def test_docstring_examples_run():
    import doctest

    import ffrecord.converters
    from ffrecord.converters import _base, _files, _index, _runner, arrow, litdata, records

    for module in (convert, records, _runner, _base, _files, _index, arrow, litdata, ffrecord.converters):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
