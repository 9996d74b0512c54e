"""The node-local cache as an attacker or an unlucky user leaves it (issue 32): a cache
directory others can write, chunk files swapped, damaged or left by the older layout, header
entries and remembered specs damaged, FIFOs and links to /dev/zero in place of cache files,
lock files piling up, and storage options out of range. Nothing planted, stale, damaged,
swapped or special is ever served, and nothing hangs."""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter
from ffrecord.dataset import DatasetReader, DatasetWriter

from range_server import RangeServer

SAMPLE = 40_000
CHUNK = 8 * SAMPLE  # 8 samples a chunk, all chunks the same size
SEAL = 44  # a cache file's seal: SHA-256 of its identity, CRC-32, magic (core/source/cachefile.go)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def write(path: Path, samples: list[bytes]) -> bytes:
    with FileWriter(path, len(samples)) as w:
        w.write_many(samples)
    return path.read_bytes()


def samples_of(n: int, seed: int = 0, sizes: list[int] | None = None) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, s, dtype=np.uint8).tobytes() for s in (sizes or [SAMPLE] * n)]


@pytest.fixture
def served(tmp_path):
    samples = samples_of(64)
    with RangeServer({"/d.ffr": write(tmp_path / "d.ffr", samples)}) as srv:
        yield srv, srv.url + "/d.ffr", samples


def cached(url: str, cache: Path, **kw) -> FileReader:
    return FileReader(url, cache_dir=cache, chunk_size=CHUNK, **kw)


@pytest.fixture
def warm(served, tmp_path):
    """``served`` and a cache directory holding its header and every chunk."""
    srv, url, samples = served
    cache = tmp_path / "cache"
    with cached(url, cache) as r:
        r.read(range(64))
    return url, samples, cache


def read_in_child(url: str, cache: Path, check_data: bool = True) -> tuple[str, int]:
    """The sha256 of every sample read by a fresh process, and its cache misses; a hang or an
    abort fails the test (the child is killed after 60 s)."""
    code = textwrap.dedent(f"""
        import hashlib
        from ffrecord import FileReader
        r = FileReader({url!r}, check_data={check_data}, cache_dir={str(cache)!r}, chunk_size={CHUNK})
        got = b"".join(s.tobytes() for s in r.read(range(r.n)))
        print(hashlib.sha256(got).hexdigest(), r.stats()["cache_misses"])
    """)
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    digest, misses = out.stdout.split()
    return digest, int(misses)


def digest(samples: list[bytes]) -> str:
    return hashlib.sha256(b"".join(samples)).hexdigest()


# ---- the cache directory belongs to the user alone ----------------------------------------------


def _give_away(path: Path) -> None:
    """Makes path another user's: root gives it away; anyone else gets a link to /, root's."""
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
    else:
        shutil.rmtree(path)
        path.symlink_to("/")


@pytest.mark.parametrize("make_unsafe, why", [
    (lambda c: os.chmod(c, 0o777), "writable by all users (mode 0777)"),
    (lambda c: os.chmod(c, 0o1777), "writable by all users (mode 1777)"),
    (lambda c: os.chmod(c, 0o770), "writable by its group (mode 0770)"),
    (lambda c: os.chmod(c / "chunks", 0o777), "writable by all users (mode 0777)"),
    (_give_away, "belongs to uid"),
], ids=["0777", "sticky 1777", "group 0770", "chunks 0777", "another user's"])
@pytest.mark.parametrize("check_data", [True, False])
def test_a_cache_directory_others_can_write_is_refused(warm, make_unsafe, why, check_data):
    url, samples, cache = warm  # headers and chunks of this very object: what a planter plants
    make_unsafe(cache)
    with pytest.raises(PermissionError, match=re.escape(why)) as info:
        cached(url, cache, check_data=check_data)
    assert str(cache) in str(info.value) and "another user could plant files there" in str(info.value)
    code = f"from ffrecord import FileReader; FileReader({url!r}, cache_dir={str(cache)!r}).read([0])"
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "PermissionError" in out.stderr and why in out.stderr  # a fresh process too


def test_new_cache_directories_are_private(served, tmp_path):
    srv, url, samples = served
    cache = tmp_path / "a" / "cache"
    old = os.umask(0)
    try:
        with cached(url, cache) as r:
            assert [s.tobytes() for s in r.read([0, 63])] == [samples[0], samples[63]]
    finally:
        os.umask(old)
    for d in (cache.parent, cache, cache / "chunks"):
        assert d.stat().st_mode & 0o7777 == 0o700, d


# ---- chunk files carry their identity ------------------------------------------------------------


@pytest.mark.parametrize("check_data", [True, False])
def test_a_chunk_replaced_by_another_chunks_copy_is_never_served(warm, check_data):
    url, samples, cache = warm
    files = sorted((cache / "chunks").glob("*.chunk"))
    assert len(files) == 8 and len({f.stat().st_size for f in files}) == 1
    for victim, source in zip(files[::2], files[1::2]):  # four chunks hold their neighbours' bytes
        shutil.copyfile(source, victim)
    assert read_in_child(url, cache, check_data) == (digest(samples), 4)
    with cached(url, cache, check_data=check_data) as r:  # in this process too
        assert [s.tobytes() for s in r.read(range(64))] == samples
        assert r.stats()["cache_misses"] == 0


@pytest.mark.parametrize("check_data", [True, False])
def test_chunks_of_the_older_layout_are_dropped_and_downloaded_again(warm, check_data):
    url, samples, cache = warm
    for f in (cache / "chunks").glob("*.chunk"):  # data, CRC-32, b"ffrchunk": the older trailer
        data = f.read_bytes()[:-SEAL]
        f.write_bytes(data + zlib.crc32(data).to_bytes(4, "little") + b"ffrchunk")
    assert read_in_child(url, cache, check_data) == (digest(samples), 8)
    assert {f.stat().st_size for f in (cache / "chunks").glob("*.chunk")} == {CHUNK + SEAL}


# ---- header entries and remembered documents are checked ----------------------------------------


@pytest.mark.parametrize("check_data", [True, False])
def test_a_damaged_header_entry_is_fetched_again_not_blamed_on_the_object(tmp_path, check_data):
    sizes = [1000, 1003, 997, 1000]
    samples = samples_of(4, sizes=sizes)
    with RangeServer({"/h.ffr": write(tmp_path / "h.ffr", samples)}) as srv:
        url, cache = srv.url + "/h.ffr", tmp_path / "cache"
        FileReader(url, cache_dir=cache).close()
        (entry,) = cache.glob("*.ffrh")
        raw = bytearray(entry.read_bytes())
        raw[12 + 4 * 4 + 8 * 2] ^= 0x10  # an offset of the table: sample 1 ends elsewhere
        entry.write_bytes(bytes(raw))
        gets = srv.gets["/h.ffr"]
        with FileReader(url, check_data=check_data, cache_dir=cache) as r:
            got = r.read(range(4))
            assert [len(s) for s in got] == sizes
            assert [s.tobytes() for s in got] == samples
        assert srv.gets["/h.ffr"] > gets  # fetched again, and kept again
        with FileReader(url, check_data=check_data, cache_dir=cache) as r:
            assert r.stats()["requests"] == 1  # the HEAD: the rewritten entry is used


def _plant(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("what", ["chunk", "header entry"])
@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_special_files_in_place_of_cache_files_never_hang_nor_abort(warm, what, kind):
    url, samples, cache = warm
    victims = sorted((cache / "chunks").glob("*.chunk"))[:3] if what == "chunk" else list(cache.glob("*.ffrh"))
    for v in victims:
        _plant(v, kind)
    assert read_in_child(url, cache, check_data=False) == (digest(samples), 3 if what == "chunk" else 0)
    assert all(v.is_file() and not v.is_symlink() for v in victims)  # cached again in their place


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_remembered_spec_that_is_not_the_one_kept_is_never_used(tmp_path, kind):
    root = tmp_path / "ds"
    with DatasetWriter(root, {"x": "int", "y": "float"}) as w:
        for i in range(8):
            w.append({"x": i, "y": i + 0.5})
    objects = {f"/ds/{p.relative_to(root)}": p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with RangeServer(objects) as srv:
        cache = tmp_path / "cache"
        DatasetReader(srv.url + "/ds/", cache_dir=cache).close()
        (kept,) = cache.glob("*.text")
        _plant(kept, kind)
        code = (f"from ffrecord.dataset import DatasetReader; r = DatasetReader({srv.url + '/ds/'!r}, "
                f"cache_dir={str(cache)!r}); print(r[3])")
        out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip() == "{'x': 3, 'y': 3.5}"
        assert kept.is_file() and not kept.is_symlink()  # the fetched spec kept again


# ---- the cache stays bounded ---------------------------------------------------------------------


def test_lock_files_and_entries_stay_within_bounds(tmp_path):
    objects = {f"/s{k}.ffr": write(tmp_path / f"s{k}.ffr", samples_of(4, seed=k)) for k in range(30)}
    cache = tmp_path / "cache"
    (cache / "chunks").mkdir(parents=True, mode=0o700)
    for i in range(600):  # what the older layout left: a lock file per chunk ever downloaded
        (cache / "chunks" / f"{i:032x}-0-{CHUNK}.chunk.lock").touch()
    limit = 3 * (CHUNK + SEAL)
    with RangeServer(objects) as srv:
        for k in range(30):
            with cached(srv.url + f"/s{k}.ffr", cache, cache_limit=limit) as r:
                assert [s.tobytes() for s in r.read(range(4))] == samples_of(4, seed=k)
    locks = [p.name for p in cache.rglob("*.lock")]
    assert locks == [".evict.lock"]
    kept = [p for p in (*cache.glob("*.ffrh"), *cache.glob("*.text"), *(cache / "chunks").glob("*.chunk"))]
    assert sum(p.stat().st_size for p in kept) <= limit
    assert len(list(cache.glob("*.ffrh"))) < 30  # headers are evicted with the chunks


# ---- storage options out of range ----------------------------------------------------------------


def test_a_very_long_timeout_is_no_timeout_not_an_overflow(served):
    srv, url, samples = served
    with FileReader(url, storage_options={"timeout": 1e10}) as r:
        assert [s.tobytes() for s in r.read([0, 63])] == [samples[0], samples[63]]


@pytest.mark.parametrize("options, match", [
    ({"timeout": math.nan}, "storage option timeout nan is not a finite number"),
    ({"timeout": math.inf}, "storage option timeout inf is not a finite number"),
    ({"timeout": -math.inf}, "storage option timeout -inf is not a finite number"),
    ({"timeout": -1.0}, "storage option timeout -1 is negative"),
    ({"retries": 10**6}, "storage option retries 1000000 is over 65536"),
    ({"concurrency": 10**9}, "storage option concurrency 1000000000 is over 65536"),
    ({"chunk_size": -5}, "storage option chunk_size -5 is not positive"),
    ({"cache_limit": -1}, "cache_limit"),
])
def test_storage_options_out_of_range_are_refused_by_name(served, options, match):
    srv, url, samples = served
    with pytest.raises(ValueError, match=match):
        FileReader(url, storage_options=options)
