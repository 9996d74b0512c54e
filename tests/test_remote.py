"""Reading and writing over S3 and HTTP, on loopback only.

S3 is moto's server (a real S3 API endpoint on 127.0.0.1); plain HTTP, with injected latency
and faults, is the range server of ``tests/range_server.py``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import pickle
from pathlib import Path

import pytest

import ffrecord
from ffrecord import FileReader, FileWriter
from ffrecord.errors import CorruptFileError
from ffrecord.utils import dump

from range_server import RangeServer
from remote_fixtures import bucket, keys, s3_endpoint  # noqa: F401 - fixtures

def sha(b) -> str:
    return hashlib.sha256(bytes(b)).hexdigest()


def manifest_samples(golden: Path, name: str) -> list[str]:
    doc = json.loads((golden / "MANIFEST.json").read_text())
    return [s["sha256"] for s in doc["files"][name]["samples"]]


# -- S3 -----------------------------------------------------------------------------------


def test_golden_files_read_byte_exact_from_s3(golden, bucket):
    client, name, opts = bucket
    for part in sorted((golden / "multi").glob("*.ffr")):
        client.upload_file(str(part), name, f"multi/{part.name}")
    client.upload_file(str(golden / "basic.ffr"), name, "basic.ffr")
    with FileReader(f"s3://{name}/basic.ffr", storage_options=opts) as r:
        assert [sha(s) for s in r.read(range(r.n))] == manifest_samples(golden, "basic.ffr")
    local = FileReader(golden / "multi")
    with FileReader(f"s3://{name}/multi/", storage_options=opts) as r:
        assert r.fnames == [f"s3://{name}/multi/{p}" for p in ("PART_00000.ffr", "PART_00001.ffr",
                                                                 "PART_00002.ffr")]
        assert [sha(s) for s in r.read(range(r.n))] == [sha(s) for s in local.read(range(local.n))]
        assert list(r.bad_samples()) == []
    with FileReader(f"s3://{name}/multi", storage_options=opts) as r:  # a prefix without "/"
        assert r.n == local.n


def test_write_to_s3_appears_only_when_complete(bucket, tmp_path):
    client, name, opts = bucket
    samples = [os.urandom(n) for n in (0, 1, 1000, 70_000)]
    with FileWriter(f"s3://{name}/out/a.ffr", len(samples), storage_options=opts) as w:
        for s in samples:
            w.write_one(s)
        assert keys(client, name) == []  # staged locally until close
    with FileReader(f"s3://{name}/out/a.ffr", storage_options=opts) as r:
        assert [s.tobytes() for s in r.read(range(r.n))] == samples

    with pytest.raises(RuntimeError, match="boom"):
        with FileWriter(f"s3://{name}/out/b.ffr", 2, storage_options=opts) as w:
            w.write_one(b"x")
            raise RuntimeError("boom")
    with pytest.raises(ValueError):  # fewer samples than declared: nothing uploaded
        with FileWriter(f"s3://{name}/out/c.ffr", 3, storage_options=opts) as w:
            w.write_one(b"x")
    assert keys(client, name) == ["out/a.ffr"]
    with pytest.raises(FileNotFoundError):  # no such bucket: the upload fails, loudly
        with FileWriter(f"s3://no-such-bucket-{name}/x.ffr", 1, storage_options=opts) as w:
            w.write_one(b"x")


def test_multipart_upload_of_a_large_file(bucket):
    client, name, opts = bucket
    big = [os.urandom(1 << 20) for _ in range(17)]  # 17 MiB: three parts
    with FileWriter(f"s3://{name}/big.ffr", len(big), storage_options=opts) as w:
        w.write_many(big)
    with FileReader(f"s3://{name}/big.ffr", storage_options=opts) as r:
        got = r.read([16, 0, 8])
        assert [g.tobytes() for g in got] == [big[16], big[0], big[8]]
    assert client.list_multipart_uploads(Bucket=name).get("Uploads", []) == []


def test_file_urls_and_unwritable_urls(tmp_path):
    url = (tmp_path / "a b.ffr").as_uri()
    with FileWriter(url, 1) as w:
        w.write_one(b"local")
    assert (tmp_path / "a b.ffr").is_file()
    with FileReader(url) as r:
        assert r.read_one(0).tobytes() == b"local"
    dump([b"x", b"y"], (tmp_path / "parts").as_uri(), nfiles=2)
    assert FileReader(tmp_path / "parts").n == 2
    for bad in ("https://host/a.ffr", "s3://bucket/prefix/"):
        with pytest.raises(ValueError):
            FileWriter(bad, 1)


def test_missing_objects_and_bad_options(bucket):
    client, name, opts = bucket
    with pytest.raises(FileNotFoundError, match="nope.ffr"):
        FileReader(f"s3://{name}/nope.ffr", storage_options=opts)
    with pytest.raises(ValueError, match="no \\*.ffr"):
        FileReader(f"s3://{name}/empty/", storage_options=opts)
    with pytest.raises(ValueError, match="unknown storage options"):
        FileReader(f"s3://{name}/a.ffr", storage_options={"endpoint": "x"})
    with pytest.raises(ValueError):
        FileReader(f"s3://{name}/a.ffr", storage_options={"concurrency": -3})


def test_reader_pickles_with_its_storage_options(bucket, golden):
    client, name, opts = bucket
    client.upload_file(str(golden / "basic.ffr"), name, "basic.ffr")
    r = FileReader(f"s3://{name}/basic.ffr", storage_options={**opts, "concurrency": 8})
    clone = pickle.loads(pickle.dumps(r))
    assert clone.storage_options == {**opts, "concurrency": 8}
    assert clone.read_one(3).tobytes() == r.read_one(3).tobytes()


def _threads() -> int:
    return int(next(line for line in Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("Threads:")).split()[1])


# -- HTTP, with faults --------------------------------------------------------------------


@pytest.fixture
def http(golden):
    with RangeServer({"/basic.ffr": (golden / "basic.ffr").read_bytes()}) as srv:
        yield srv


def test_golden_file_over_http(http, golden):
    with FileReader(http.url + "/basic.ffr") as r:
        assert [sha(s) for s in r.read(range(r.n))] == manifest_samples(golden, "basic.ffr")
    with FileReader("file://" + str(golden / "basic.ffr")) as r:
        assert r.n == 25


def test_open_close_leaks_nothing(http):
    url = http.url + "/basic.ffr"

    def cycle(n: int) -> None:
        for i in range(n):
            with FileReader(url) as r:
                r.read([i % r.n])

    cycle(50)  # the connection pool and the Go runtime's threads warm up
    gc.collect()  # an earlier test's reader still in a cycle of garbage is not this test's
    fds, threads, handles = len(os.listdir("/proc/self/fd")), _threads(), ffrecord._lib.open_handles()
    cycle(1000)
    gc.collect()
    assert ffrecord._lib.open_handles() <= handles
    assert len(os.listdir("/proc/self/fd")) <= fds + 4
    assert _threads() <= threads + 4


@pytest.mark.parametrize("fault", [503, 500, 429, "reset", "truncate", "corrupt"])
def test_transient_faults_are_retried(http, golden, fault):
    r = FileReader(http.url + "/basic.ffr")
    want = [s.tobytes() for s in FileReader(golden / "basic.ffr").read(range(25))]
    http.inject(fault)
    assert [s.tobytes() for s in r.read(range(25))] == want


def test_persistent_faults_are_typed(http):
    url = http.url + "/basic.ffr"
    r = FileReader(url, storage_options={"retries": 2})
    http.always = "truncate"
    with pytest.raises(CorruptFileError, match=r"basic.ffr: sample 3: .*bytes \["):
        r.read([3])
    http.always = "corrupt"
    with pytest.raises(CorruptFileError, match="basic.ffr: sample 3: checksum mismatch"):
        r.read([3])
    http.always = 403
    with pytest.raises(PermissionError, match="403"):
        r.read([3])
    with pytest.raises(PermissionError):
        FileReader(url)
    http.always = 503
    with pytest.raises(OSError, match="503"):
        r.read([3])
    http.always = None
    with pytest.raises(FileNotFoundError):
        FileReader(http.url + "/missing.ffr")


def test_a_stalled_server_fails_at_the_deadline(http):
    r = FileReader(http.url + "/basic.ffr", storage_options={"timeout": 0.3, "retries": -1})
    http.always = "stall"
    with pytest.raises(OSError, match="deadline|timeout|Timeout"):
        r.read([3])


def test_requests_run_concurrently_within_the_bound(tmp_path):
    samples = [bytes([i]) * 100 for i in range(64)]
    with FileWriter(tmp_path / "s.ffr", len(samples)) as w:
        w.write_many(samples)
    with RangeServer({"/s.ffr": (tmp_path / "s.ffr").read_bytes()}, latency=0.05) as srv:
        url = srv.url + "/s.ffr"
        r = FileReader(url, storage_options={"concurrency": 8, "coalesce_gap": -1})
        before = srv.requests
        got = r.read(range(0, 64, 2))  # 32 samples, none adjacent: 32 requests
        assert [g.tobytes() for g in got] == samples[::2]
        assert srv.requests - before == 32
        assert 2 <= srv.peak <= 8
        before = srv.requests
        r.read(range(64))  # adjacent samples: one request
        assert srv.requests - before == 1

        bridged = FileReader(url, storage_options={"concurrency": 8, "merge_gap": -1})
        before, sent = srv.requests, srv.bytes_sent
        got = bridged.read(range(0, 64, 2))  # gaps read through: 200 of the 3,200 bytes (1/16)
        assert [g.tobytes() for g in got] == samples[::2]
        assert srv.requests - before == 30 and srv.bytes_sent - sent == 3200 + 200

        merged = FileReader(url, storage_options={"concurrency": 8})
        before = srv.requests
        got = merged.read(range(0, 64, 2))  # gaps under the waste bound: always one request
        assert [g.tobytes() for g in got] == samples[::2]
        assert srv.requests - before == 1


def test_header_cache_is_shared_by_readers(http, tmp_path):
    opts = {"cache_dir": str(tmp_path / "cache")}
    FileReader(http.url + "/basic.ffr", storage_options=opts).close()
    assert len(list((tmp_path / "cache").glob("*.ffrh"))) == 1
    before = http.requests
    with FileReader(http.url + "/basic.ffr", storage_options=opts) as r:
        assert http.requests - before == 1  # HEAD only: the header came from the cache
        assert r.read_one(3).nbytes == 4099
