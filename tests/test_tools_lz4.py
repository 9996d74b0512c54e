"""LZ4-compressed files and writers that do not know n, seen from Python.

A compressed file must stay a valid file of the base format (what the reference reader
checks): the plain parser in tools_support validates it with no knowledge of compression.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ffrecord import CorruptFileError, FileReader, FileWriter
from tools_support import parse_base_format, read_all

SIZES = [0, 1, 2, 15, 16, 17, 64, 100, 4095, 4096, 4097, 65536, 1 << 20, 3 * (1 << 20) + 7]


def compressible(size: int, seed: int) -> bytes:
    words = [b"alpha ", b"beta ", b"gamma ", b"delta ", b"%d " % seed]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(words), size // 4 + 1)
    return b"".join(words[k] for k in picks)[:size]


def incompressible(size: int, seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def write(path, samples, n="known", compression="lz4") -> None:
    with FileWriter(path, len(samples) if n == "known" else None,
                    compression=compression) as writer:
        for sample in samples:
            writer.write_one(sample)



@pytest.mark.parametrize("make", [compressible, incompressible])
@pytest.mark.parametrize("n", ["known", "unknown"])
def test_round_trip_over_sizes(tmp_path, make, n):
    samples = [make(size, seed) for seed, size in enumerate(SIZES)]
    path = tmp_path / "z.ffr"
    write(path, samples, n=n)
    assert read_all(path) == samples
    with FileReader(path) as reader:
        assert reader.sizes(range(len(SIZES))).tolist() == SIZES  # original sizes
        assert reader.read_one(-1).tobytes() == samples[-1]
        assert reader.verify() == []


def test_compressed_file_obeys_the_base_format(tmp_path):
    samples = [compressible(size, seed) for seed, size in enumerate(SIZES)]
    path = tmp_path / "z.ffr"
    write(path, samples)
    base = parse_base_format(path)  # header CRC, sample CRCs, offsets, ends at EOF
    assert base.n >= len(samples)  # the compression metadata lives in extra record(s)
    stored_total = sum(map(len, base.samples))
    assert stored_total < sum(SIZES) / 2  # compressible data really shrank
    assert path.stat().st_size == base.offsets[0] + stored_total


def test_incompressible_samples_cost_almost_nothing_extra(tmp_path):
    samples = [incompressible(size, seed) for seed, size in enumerate(SIZES)]
    plain, packed = tmp_path / "plain.ffr", tmp_path / "lz4.ffr"
    write(plain, samples, compression=None)
    write(packed, samples)
    overhead = packed.stat().st_size - plain.stat().st_size
    assert 0 < overhead <= 12 + 64 + 16 * len(samples)  # one small record, raw samples
    parse_base_format(packed)


def test_uncompressed_writer_output_is_the_plain_format(tmp_path):
    samples = [compressible(100, k) for k in range(5)]
    path = tmp_path / "plain.ffr"
    write(path, samples, compression=None)
    assert parse_base_format(path).samples == samples


def test_a_damaged_compressed_sample_is_detected(tmp_path):
    samples = [compressible(50_000, k) for k in range(3)]
    path = tmp_path / "z.ffr"
    write(path, samples)
    base = parse_base_format(path)
    raw = bytearray(path.read_bytes())
    raw[base.offsets[1] + 10] ^= 0x40
    path.write_bytes(bytes(raw))
    with FileReader(path) as reader:
        assert reader.read_one(0).tobytes() == samples[0]
        with pytest.raises(CorruptFileError, match="sample 1"):
            reader.read_one(1)
        assert reader.verify() == [1]


def test_unknown_n_round_trip_and_count(tmp_path):
    path = tmp_path / "u.ffr"
    with FileWriter(path) as writer:
        assert writer.n is None
        for k in range(1000):
            writer.write_one(b"%d" % k)
        assert writer.count == 1000
        assert not path.exists()  # appears only at close
    assert read_all(path) == [b"%d" % k for k in range(1000)]
    assert parse_base_format(path).n == 1000  # uncompressed: exactly the reference layout
    empty = tmp_path / "empty.ffr"
    FileWriter(empty).close()
    assert parse_base_format(empty).n == 0


def test_abort_leaves_nothing(tmp_path):
    for compression in (None, "lz4"):
        writer = FileWriter(tmp_path / "a.ffr", compression=compression)
        writer.write_one(b"data")
        writer.abort()
        assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError):
        with FileWriter(tmp_path / "b.ffr") as writer:
            writer.write_one(b"data")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_a_crash_while_writing_leaves_no_valid_file(tmp_path, how):
    path = tmp_path / "crash.ffr"
    script = textwrap.dedent(f"""
        import os, signal, sys
        from ffrecord import FileWriter
        w = FileWriter({str(path)!r}, compression="lz4")
        for k in range(5000):
            w.write_one(os.urandom(100) * 10)
        sys.stdout.write("written\\n"); sys.stdout.flush()
        if {how!r} == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          text=True, timeout=120)
    assert "written" in proc.stdout, proc.stderr
    assert proc.returncode == (-signal.SIGKILL if how == "kill" else 3)
    assert not path.exists()
    assert list(tmp_path.glob("*.ffr")) == []  # staging files never look like data files
    with pytest.raises(Exception):
        FileReader(tmp_path)
