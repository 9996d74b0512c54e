"""Every read path returns what was written, under every compression, and writes nothing
outside the caller's buffer (issue 17: a Zstandard decode wrote past its sample).

One file per compression holds samples of boundary sizes (around pages, codec blocks and
64 KiB), repetitive and random, then thousands of small compressible ones (the issue's
case); every read path reads it whole, so its batches are large enough to be split among
goroutines. Buffers handed to the reader are followed by a guard region checked untouched.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter

from range_server import RangeServer
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

BOUNDARY_SIZES = (0, 1, 255, 256, 4095, 4096, 4097, 65535, 65536, 65537)
COMPRESSIONS = (None, "lz4", "zstd")
GUARD = 4096
GUARD_BYTE = 0xA5


def _samples() -> list[bytes]:
    rng = np.random.default_rng(17)
    out = []
    for n in BOUNDARY_SIZES:
        unit = rng.bytes(100)
        out.append(rng.bytes(n))
        out.append((unit * (n // 100 + 1))[:n])
    # ~370-byte samples as a bytes[] sequence value is stored: a small table, then 100
    # random bytes three times. 4000 of them make a batch of 1.5 MB.
    unit = rng.bytes(100)
    small = bytes(range(70)) + unit * 3
    return out * 2 + [small] * 4000


SAMPLES = _samples()
EXPECTED = np.frombuffer(b"".join(SAMPLES), np.uint8)
OFFSETS = np.concatenate([[0], np.cumsum([len(s) for s in SAMPLES])])


@pytest.fixture(scope="module", params=COMPRESSIONS, ids=lambda c: c or "none")
def written(request, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("paths") / f"{request.param}.ffr")
    with FileWriter(path, len(SAMPLES), compression=request.param) as w:
        w.write_many(SAMPLES)
    return path


def guarded(nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """A buffer of ``nbytes`` and the whole allocation, a guard region after the buffer."""
    whole = np.full(nbytes + GUARD, GUARD_BYTE, np.uint8)
    return whole[:nbytes], whole


def assert_guard_intact(whole: np.ndarray, used: int) -> None:
    written_past = np.flatnonzero(whole[used:] != GUARD_BYTE)
    assert not len(written_past), f"{len(written_past)} bytes past the data were written"


def assert_batch(buf: np.ndarray, offsets: np.ndarray, indices: np.ndarray) -> None:
    want = np.concatenate([EXPECTED[OFFSETS[i]:OFFSETS[i + 1]] for i in indices])
    assert np.array_equal(np.asarray(offsets, np.int64)[-1], len(want))
    bad = np.flatnonzero(buf[: len(want)] != want)
    assert not len(bad), f"{len(bad)} bytes differ, the first at byte {bad[0]}"


def read_guarded_batch(r: FileReader) -> None:
    """Reads the whole dataset by read_batch into a guarded buffer and checks it."""
    everything = np.arange(len(SAMPLES))
    out, whole = guarded(int(OFFSETS[-1]))
    buf, offsets = r.read_batch(everything, out=out)
    assert_batch(buf, offsets, everything)
    assert_guard_intact(whole, len(out))


def read_every_way(r: FileReader) -> None:
    """Reads the whole dataset by read, read_one, read_batch into a guarded buffer (and one
    larger than the batch), and read_ranges; checks each against what was written."""
    everything = np.arange(len(SAMPLES))
    got = r.read(everything)
    bad = [i for i, s in enumerate(got) if s.tobytes() != SAMPLES[i]]
    assert not bad, f"samples {bad[:10]} differ"
    for i in range(0, 2 * 2 * len(BOUNDARY_SIZES) + 2):
        assert r.read_one(i).tobytes() == SAMPLES[i]
    read_guarded_batch(r)
    # A buffer larger than the batch: its bytes after the batch are the caller's too.
    roomy, whole = guarded(int(OFFSETS[-1]) + 64)
    buf, offsets = r.read_batch(everything[::-1], out=roomy)
    assert_batch(buf, offsets, everything[::-1])
    assert_guard_intact(whole, int(OFFSETS[-1]))

    # Whole samples, their first and last bytes, and a middle part.
    ranges = []
    for i in everything[:: max(1, len(SAMPLES) // 600)]:
        n = len(SAMPLES[i])
        ranges += [(i, 0, n), (i, 0, min(n, 1)), (i, max(0, n - 1), min(n, 1)), (i, n // 3, n // 3)]
    want = b"".join(SAMPLES[i][o:o + k] for i, o, k in ranges)
    out, whole = guarded(len(want))
    buf, _ = r.read_ranges(ranges, out=out)
    assert buf.tobytes() == want
    assert_guard_intact(whole, len(want))


@pytest.mark.parametrize("check_data", [True, False])
def test_local_reads(written, check_data):
    with FileReader(written, check_data=check_data) as r:
        read_every_way(r)


def test_direct_reads(written):
    with FileReader(written, direct=True) as r:
        read_every_way(r)


def test_cold_reads(written):
    """The file evicted from the page cache before each read: the batch engine's path."""
    fd = os.open(written, os.O_RDONLY)
    try:
        with FileReader(written) as r:
            for _ in range(3):
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                buf, offsets = r.read_batch(np.arange(len(SAMPLES)))
                assert_batch(buf, offsets, np.arange(len(SAMPLES)))
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            read_every_way(r)
    finally:
        os.close(fd)


@pytest.mark.parametrize("check_data", [True, False])
def test_http_reads(written, check_data):
    with open(written, "rb") as f:
        data = f.read()
    with RangeServer({"/f.ffr": data}) as srv, FileReader(srv.url + "/f.ffr", check_data) as r:
        read_every_way(r)


def test_s3_reads(written, bucket):
    """S3 differs from HTTP only in how requests are addressed and signed: one batch (moto
    answers slowly) is enough."""
    client, name, opts = bucket
    client.upload_file(written, name, "f.ffr")
    with FileReader(f"s3://{name}/f.ffr", storage_options=opts) as r:
        read_guarded_batch(r)
