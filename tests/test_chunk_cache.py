"""The chunk rule and the node-local chunk cache of remote data (core/source): requests
and bytes counted, restarts, replaced objects, killed downloads, damaged chunk files,
servers that ignore Range, limits too small, and readers sharing one cache directory."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter

from range_server import RangeServer
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

SAMPLE = 40_000
CHUNK = 8 * SAMPLE  # 8 samples a chunk
# Opening a file with a cache reads its header with its first 1 MiB + CHUNK bytes
# (FirstRequestBytes in core/remote_source.go), and caches the chunks wholly inside them:
# of the 64-sample file (780 header bytes, then 8 chunks of CHUNK), chunks 0-3.
SEEDED = 4


def chunk_starts(sizes: list[int], chunk_size: int) -> list[int]:
    """The chunk rule, re-derived from its definition (the core owns it)."""
    starts, used = [], 0
    for i, size in enumerate(sizes):
        if i == 0 or used + size > chunk_size:
            starts.append(i)
            used = size
        else:
            used += size
    return starts


def write(path: Path, samples: list[bytes]) -> bytes:
    with FileWriter(path, len(samples)) as w:
        w.write_many(samples)
    return path.read_bytes()


def samples_of(n: int, seed: int = 0, size: int = SAMPLE) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_chunk_bounds_follow_the_rule(tmp_path, seed):
    rng = np.random.default_rng(seed)
    files, sizes = [], []
    for k in range(3):
        s = [int(x) for x in rng.integers(0, 3000, int(rng.integers(0, 40)))]
        write(tmp_path / f"{k}.ffr", [b"x" * n for n in s])
        files.append(tmp_path / f"{k}.ffr")
        sizes.append(s)
    r = FileReader(files)
    for chunk_size in (1, 999, 2500, 4096, 10**9):
        want, base = [], 0
        for s in sizes:  # chunks never cross files
            want += [base + i for i in chunk_starts(s, chunk_size)]
            base += len(s)
        got = r.chunk_bounds(chunk_size)
        assert got.dtype == np.int64
        assert got.tolist() == want + [r.n]
    with pytest.raises(ValueError):
        r.chunk_bounds(0)


@pytest.fixture
def served(tmp_path):
    samples = samples_of(64)
    data = write(tmp_path / "d.ffr", samples)
    with RangeServer({"/d.ffr": data}) as srv:
        yield srv, srv.url + "/d.ffr", samples


def cached(url: str, cache: Path, **kw) -> FileReader:
    return FileReader(url, cache_dir=cache, chunk_size=CHUNK, **kw)


def test_each_chunk_is_fetched_once_per_node_and_survives_restart(served, tmp_path):
    srv, url, samples = served
    cache = tmp_path / "cache"
    order = np.random.default_rng(1).permutation(64)
    with cached(url, cache) as r:
        assert len(r.chunk_bounds(CHUNK)) - 1 == 8
        gets = srv.gets["/d.ffr"]
        assert [s.tobytes() for s in r.read(order)] == [samples[i] for i in order]
        assert srv.gets["/d.ffr"] - gets == 8 - SEEDED  # one GET per chunk not seeded at open
        st = r.stats()
        # Every chunk was downloaded into the cache once; the seeded ones were then read from it.
        assert st["cache_misses"] == 8 and st["cache_hits"] == SEEDED
        assert st["bytes_fetched"] >= 64 * SAMPLE
    # A restarted job (or another process of the node) reads from the cache alone.
    gets = srv.gets["/d.ffr"]
    with cached(url, cache) as r:
        assert [s.tobytes() for s in r.read(order)] == [samples[i] for i in order]
        assert srv.gets["/d.ffr"] == gets  # 0 data GETs
        st = r.stats()
        assert st["cache_hits"] == 8 and st["cache_misses"] == 0
        assert st["requests"] == 1  # the HEAD that finds the ETag


def test_cache_settings_come_from_the_environment_in_a_child(served, tmp_path):
    srv, url, samples = served
    env = {**os.environ, "FFRECORD_CACHE_DIR": str(tmp_path / "envcache"),
           "FFRECORD_CACHE_LIMIT": str(10**9)}
    env.pop("PYTHONPATH", None)
    code = f"from ffrecord import FileReader; r = FileReader({url!r}); r.read(range(64)); print(r.stats()['cache_misses'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() != "0", out.stderr
    assert len(list((tmp_path / "envcache" / "chunks").glob("*.chunk"))) >= 1


def test_a_replaced_object_never_serves_stale_bytes(served, tmp_path):
    srv, url, samples = served
    cache = tmp_path / "cache"
    with cached(url, cache) as r:
        r.read(range(64))
    newer = samples_of(64, seed=9)  # same sizes, so the same offsets and object size
    srv.objects["/d.ffr"] = write(tmp_path / "new.ffr", newer)
    with cached(url, cache) as r:
        assert [s.tobytes() for s in r.read(range(64))] == newer
        assert r.stats()["cache_misses"] == 8  # every chunk of the new version downloaded


def test_a_chunk_damaged_on_disk_is_detected_and_fetched_again(served, tmp_path):
    srv, url, samples = served
    cache = tmp_path / "cache"
    r = cached(url, cache)
    r.read(range(64))
    for f in (cache / "chunks").glob("*.chunk"):  # damaged in place, after it was checked
        with open(f, "r+b") as fh:
            fh.seek(5)
            fh.write(b"\xff\x00\xff")
    assert [s.tobytes() for s in r.read(range(64))] == samples
    assert r.stats()["cache_misses"] == 16
    # A new process checks each chunk file's own CRC before serving it.
    for f in (cache / "chunks").glob("*.chunk"):
        with open(f, "r+b") as fh:
            fh.seek(7)
            fh.write(b"\x01\x02")
    code = textwrap.dedent(f"""
        import hashlib
        from ffrecord import FileReader
        r = FileReader({url!r}, check_data=False, cache_dir={str(cache)!r}, chunk_size={CHUNK})
        got = b"".join(s.tobytes() for s in r.read(range(64)))
        print(hashlib.sha256(got).hexdigest(), r.stats()["cache_misses"])
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [hashlib.sha256(b"".join(samples)).hexdigest(), "8"]


def test_a_process_killed_while_downloading_leaves_nothing_served(tmp_path):
    samples = samples_of(16, size=64 << 10)
    data = write(tmp_path / "big.ffr", samples)
    cache = tmp_path / "cache"
    with RangeServer({"/big.ffr": data}, latency=0.0) as srv:
        url = srv.url + "/big.ffr"
        FileReader(url, cache_dir=cache).close()  # the header is cached; data is not
        srv.always_get = "stall"  # every data GET now hangs: the child is mid-download
        code = f"from ffrecord import FileReader; FileReader({url!r}, cache_dir={str(cache)!r}, chunk_size={256 << 10}).read(range(16))"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        child = subprocess.Popen([sys.executable, "-c", code], env=env)
        deadline = time.monotonic() + 30
        while not list((cache / "chunks").glob(".tmp-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list((cache / "chunks").glob(".tmp-*")), "the child never started a download"
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        srv.always_get = None
        with FileReader(url, cache_dir=cache, chunk_size=256 << 10, cache_limit=1 << 20) as r:
            assert [s.tobytes() for s in r.read(range(16))] == samples
        assert not list((cache / "chunks").glob(".tmp-*"))  # the dead download was swept


def test_a_process_forked_during_a_download_does_not_keep_its_locks(tmp_path):
    """A DataLoader worker forked while a download runs shares the download's locks without
    knowing: they must still be dropped when the download ends, or every reader of that
    chunk waits for the worker to exit."""
    samples = samples_of(64, size=64 << 10)  # 4 MiB: most of it is past what the open caches
    data = write(tmp_path / "big.ffr", samples)
    cache = tmp_path / "cache"
    with RangeServer({"/big.ffr": data}) as srv:
        url = srv.url + "/big.ffr"
        reader = FileReader(url, cache_dir=cache, chunk_size=256 << 10)
        srv.latency = 1.0  # every data GET now takes a second: fork during one
        reading = threading.Thread(target=reader.read, args=(range(64),))
        reading.start()
        deadline = time.monotonic() + 30
        while not list((cache / "chunks").glob(".tmp-*")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert list((cache / "chunks").glob(".tmp-*")), "no download started"
        child = os.fork()
        if child == 0:  # holds every descriptor of the parent, and lives on
            time.sleep(60)
            os._exit(0)
        try:
            reading.join(30)
            srv.latency = 0.0
            code = (f"import hashlib; from ffrecord import FileReader; r = FileReader({url!r}, "
                    f"cache_dir={str(cache)!r}, chunk_size={256 << 10}); "
                    "print(hashlib.sha256(b''.join(s.tobytes() for s in r.read(range(64)))).hexdigest())")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=20)
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == hashlib.sha256(b"".join(samples)).hexdigest()
        finally:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            reader.close()


def test_a_server_that_ignores_range_still_serves_right_bytes(served, tmp_path):
    srv, url, samples = served
    srv.ignore_range = True
    with cached(url, tmp_path / "cache") as r:
        order = [63, 0, 17, 40, 8]
        assert [s.tobytes() for s in r.read(order)] == [samples[i] for i in order]
    with FileReader(url) as r:  # without a cache too
        assert [s.tobytes() for s in r.read(order)] == [samples[i] for i in order]


def test_a_limit_too_small_is_refused_up_front(served, tmp_path):
    srv, url, _ = served
    with pytest.raises(ValueError, match=r"cache_limit 1000 bytes is below the 640088 bytes .* raise cache_limit or lower chunk_size"):
        cached(url, tmp_path / "cache", cache_limit=1000)
    with pytest.raises(ValueError, match="cache_limit"):
        FileReader(url, cache_dir=tmp_path / "c", cache_limit=-1)


def test_a_small_limit_evicts_and_stays_under_it(served, tmp_path):
    srv, url, samples = served
    cache = tmp_path / "cache"
    limit = 3 * (CHUNK + 44)
    with cached(url, cache, cache_limit=limit) as r:
        for _ in range(2):
            order = np.random.default_rng(2).permutation(64)
            assert [s.tobytes() for s in r.read(order)] == [samples[i] for i in order]
        assert r.stats()["evictions"] > 0
    assert sum(f.stat().st_size for f in (cache / "chunks").glob("*.chunk")) <= limit


def test_a_full_cache_disk_is_a_clear_error_and_keeps_what_is_cached(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        samples = samples_of(8, size=40 << 10)
        data = write(tmp_path / "d.ffr", samples)
        with RangeServer({"/d.ffr": data}) as srv:
            # closed before the unmount: its open (and mapped) chunk files keep the mount busy
            with FileReader(srv.url + "/d.ffr", cache_dir=mnt, chunk_size=40 << 10) as r:
                assert r.read_one(0).tobytes() == samples[0]
                kept = sorted((mnt / "chunks").glob("*.chunk"))
                with pytest.raises(OSError, match="disk is full") as info:
                    r.read([1])
                assert info.value.errno == 28  # ENOSPC
                assert sorted((mnt / "chunks").glob("*.chunk")) == kept
                assert r.read_one(0).tobytes() == samples[0]
    finally:
        assert subprocess.run(["umount", str(mnt)]).returncode == 0, "the mount is still busy"


def test_cache_over_s3_and_a_new_etag(bucket, tmp_path):
    client, name, opts = bucket
    samples = samples_of(32)
    client.put_object(Bucket=name, Key="d.ffr", Body=write(tmp_path / "d.ffr", samples))
    url = f"s3://{name}/d.ffr"
    cache = tmp_path / "cache"
    with FileReader(url, storage_options=opts, cache_dir=cache, chunk_size=CHUNK) as r:
        assert [s.tobytes() for s in r.read(range(32))] == samples
        st = r.stats()
        # The file (1.28 MB) is read whole by the GET of its header: its 4 chunks with it.
        assert st["cache_misses"] == 4 and st["requests"] == 2  # the HEAD, that GET
    newer = samples_of(32, seed=5)
    client.put_object(Bucket=name, Key="d.ffr", Body=write(tmp_path / "n.ffr", newer))
    with FileReader(url, storage_options=opts, cache_dir=cache, chunk_size=CHUNK) as r:
        assert [s.tobytes() for s in r.read(range(32))] == newer
        assert r.stats()["cache_misses"] == 4  # the new version, all 4 chunks with its header


def test_processes_reading_the_same_chunks_download_each_once(tmp_path):
    samples = samples_of(256, size=4096)
    data = write(tmp_path / "d.ffr", samples)
    cache = tmp_path / "cache"
    with RangeServer({"/d.ffr": data}, latency=0.005) as srv:
        url = srv.url + "/d.ffr"
        with FileReader(url, cache_dir=cache) as r:
            header = r.file_info(0).header_bytes
            chunks = len(r.chunk_bounds(32 << 10)) - 1
        code = textwrap.dedent(f"""
            import numpy as np, sys
            from ffrecord import FileReader
            r = FileReader({url!r}, cache_dir={str(cache)!r}, chunk_size={32 << 10})
            for batch in np.array_split(np.random.default_rng(int(sys.argv[1])).permutation(256), 16):
                r.read(batch)
        """)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        start = len(srv.log)
        procs = [subprocess.Popen([sys.executable, "-c", code, str(k)], env=env) for k in range(4)]
        assert all(p.wait(120) == 0 for p in procs)
        data_gets = [s for _, s, _ in srv.log[start:] if s >= header]
        assert sorted(data_gets) == sorted(set(data_gets)) and len(data_gets) == chunks


def test_prefetch_downloads_chunks_ahead_and_counters_see_retries(served, tmp_path):
    srv, url, samples = served
    with cached(url, tmp_path / "cache", cache_limit=10 * (CHUNK + 44)) as r:
        # 8 chunks hinted: the SEEDED cached at open are read ahead from disk, the others
        # downloaded (room for 8 chunks beside the 2 being read).
        assert r.prefetch(range(0, 64, 4)) == 8
        deadline = time.monotonic() + 30
        while r.stats()["prefetched"] < 8 - SEEDED and time.monotonic() < deadline:
            time.sleep(0.01)
        assert r.stats()["prefetched"] == 8 - SEEDED
        gets = srv.gets["/d.ffr"]
        assert [s.tobytes() for s in r.read(range(64))] == samples
        assert srv.gets["/d.ffr"] == gets  # every chunk was there already
        assert r.prefetch(range(64)) == 0  # nothing left to fetch
    with FileReader(url) as r:
        srv.inject(503)
        r.read([5])
        st = r.stats()
        assert st["retries"] == 1 and st["requests"] >= 3  # HEAD, the failed GET, its retry


def test_a_copy_of_a_reader_reads_the_version_its_original_opened(served, tmp_path):
    """A reader unpickled (or reopened after fork) asks nothing at open: it takes the size and
    ETag its original found. A replaced object is then never read as the new one: what the
    cache holds of the old version is served, the rest fails with ObjectChangedError."""
    import pickle

    from ffrecord import ObjectChangedError

    srv, url, samples = served
    cache = tmp_path / "cache"
    r = cached(url, cache)
    assert r.versions == {url: {"size": len(srv.objects["/d.ffr"]), "etag": srv.etag(srv.objects["/d.ffr"]).strip('"')}}
    r.read(range(16))  # the first SEEDED chunks are cached (at open), and no other
    before = srv.requests
    copy = pickle.loads(pickle.dumps(r))
    assert srv.requests == before  # no HEAD, no header GET: the header is cached too
    assert copy.versions == r.versions
    newer = samples_of(64, seed=9)
    srv.objects["/d.ffr"] = write(tmp_path / "new.ffr", newer)
    assert [s.tobytes() for s in copy.read(range(16))] == samples[:16]
    with pytest.raises(ObjectChangedError):
        copy.read([40])
    # Without a cache, the copy's first request (its header) is conditional on the old ETag.
    plain = pickle.dumps(FileReader(url))
    srv.objects["/d.ffr"] = write(tmp_path / "d.ffr", samples)
    with pytest.raises(ObjectChangedError):
        pickle.loads(plain)


def test_datasets_pin_their_remote_files_through_pickling(tmp_path):
    """A structured dataset and a torch Dataset hand their files' versions to their copies:
    a copy made after the objects were replaced refuses them (no cache: the header it reads
    at open is asked for in the old version)."""
    import pickle

    from ffrecord import ObjectChangedError
    from ffrecord.dataset import DatasetReader, DatasetWriter
    from ffrecord.torch import Dataset

    root = tmp_path / "ds"
    with DatasetWriter(root, {"image": "bytes", "label": "int"}) as w:
        for i in range(32):
            w.append({"image": bytes([i]) * 100, "label": i})
    objects = {f"/ds/{p.name}": p.read_bytes() for p in root.iterdir() if p.is_file()}
    objects["/d.ffr"] = write(tmp_path / "d.ffr", samples_of(8))
    with RangeServer(objects) as srv:
        copies = [pickle.dumps(DatasetReader(srv.url + "/ds/")), pickle.dumps(Dataset(srv.url + "/d.ffr"))]
        assert all(pickle.loads(c) is not None for c in copies)  # unchanged: they open
        for path, data in objects.items():
            if path.endswith(".ffr"):
                srv.objects[path] = data[:-1] + bytes([data[-1] ^ 1])  # replaced
        for c in copies:
            with pytest.raises(ObjectChangedError):
                copy = pickle.loads(c)
                copy.read([5]) if hasattr(copy, "read") else copy[[1]]
