"""A dataset's manifest: what writers publish, what opening it reads (one file, whatever the
shard count), shards opened when a read touches them, files held within a process-wide
bound, replaced or damaged files refused, and readers that keep their version."""

from __future__ import annotations

import errno
import gc
import json
import multiprocessing
import os
import pickle
import shutil
from pathlib import Path

import pytest

import ffrecord
from ffrecord import _remote
from ffrecord.dataset import (CorruptDatasetError, DatasetReader, DatasetWriter, NoManifestError,
                              ShardedDatasetWriter, UnsupportedVersionError, VersionedReader,
                              open_dataset, set_max_mapped_files, set_max_open_files, max_open_files, versions)
from ffrecord.dataset import manifest as manifests
from ffrecord.dataset.open_files import READERS
from ffrecord.errors import ObjectChangedError
from ffrecord.utils import dump

SPEC = {"image": "bytes", "label": "int"}


def point(k: int) -> dict:
    return {"image": bytes([k % 251]) * (10 + k % 7), "label": k}


def write_sharded(path: Path, n: int, shardlen: int) -> Path:
    with ShardedDatasetWriter(path, SPEC, shardlen=shardlen) as writer:
        for k in range(n):
            writer.append(point(k))
    return path


_LISTDIR = os.listdir  # not the one a test counts calls of


def open_fds(collect: bool = True) -> int:
    """The process's open descriptors, garbage collected first (a loader of an earlier test
    collected during a test would close its pipes then); ``collect=False`` in loops."""
    if collect:
        gc.collect()
    return len(_LISTDIR("/proc/self/fd"))


@pytest.fixture
def bound():
    """The process-wide bound on open files, restored after the test."""
    saved = max_open_files()
    yield
    set_max_open_files(saved)


# ---- what writers publish -----------------------------------------------------------------

def test_every_writer_publishes_version_1_describing_its_files(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    with DatasetWriter(plain, SPEC) as writer:
        for k in range(5):
            writer.append(point(k))
    sharded = write_sharded(tmp_path / "sharded", 7, 3)
    parts = tmp_path / "parts"
    dump([bytes([k]) for k in range(10)], parts, nfiles=3)
    for path, shards, lengths in ((plain, [""], [5]), (sharded, ["000000", "000001", "000002"], [3, 3, 1]),
                                  (parts, ["", "", ""], [4, 4, 2])):
        assert versions(path) == [1]
        m = manifests.load(_remote.as_path(path)).manifest
        assert (list(m.shards), m.lengths.tolist(), m.version) == (shards, lengths, 1)
        for k in range(len(m.shards)):
            for name in m.fields:
                file = path / m.path(k, name)
                data = file.read_bytes()
                recorded = m.entry(k).files[name]
                assert (recorded.size, recorded.stored, recorded.checksum) == (
                    len(data), int.from_bytes(data[4:12], "little"), int.from_bytes(data[:4], "little"))
    assert manifests.load(_remote.as_path(parts)).manifest.kind == "files"
    with open_dataset(parts) as reader:
        assert [d["bytes"] for d in reader.read(range(10))] == [bytes([k]) for k in range(10)]


def test_several_writers_publish_one_version_once_the_last_has_closed(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    writers = [ShardedDatasetWriter(path, SPEC, shardlen=2, shardstart=s, shardstep=3) for s in range(3)]
    for k in range(11):
        writers[(k // 2) % 3].append(point(k))
    writers[2].close()
    writers[0].close()
    assert versions(path) == []  # writer 1 still writes
    writers[1].close()
    assert versions(path) == [1] and os.listdir(path / "_manifest") == ["v000001.ffr"]
    with open_dataset(path) as reader:
        assert reader.read(range(11)) == [point(k) for k in range(11)]


def test_a_dataset_without_a_manifest_opens_as_before(tmp_path: Path) -> None:
    path = write_sharded(tmp_path / "ds", 5, 2)
    shutil.rmtree(path / "_manifest")
    with open_dataset(path) as reader:
        assert type(reader).__name__ == "ShardedDatasetReader" and reader[4] == point(4)
    with pytest.raises(NoManifestError, match="ffrecord index"):
        open_dataset(path, version=1)


# ---- opening reads one file --------------------------------------------------------------

def many_shards(root: Path, shards: int) -> Path:
    """A dataset of ``shards`` shards of 2 datapoints: one shard written, its files linked
    into the others, and a manifest listing them all (what 10,000 writes would make)."""
    first = root / "000000"
    with DatasetWriter(first, SPEC, manifest=False) as writer:
        for k in range(2):
            writer.append(point(k))
    for k in range(1, shards):
        shard = root / f"{k:06d}"
        shard.mkdir()
        for name in ("image.ffr", "label.ffr", "spec.json"):
            os.link(first / name, shard / name)
    entry = manifests.ShardEntry("000000", 2, {n: manifests.describe(first / f"{n}.ffr") for n in SPEC})
    fields = DatasetReader(first).fields
    manifests.publish(_remote.as_path(root), manifests.Manifest.build(
        1, fields, {}, [entry._replace(name=f"{k:06d}") for k in range(shards)]))
    return root


def test_a_local_open_of_10000_shards_reads_one_file(tmp_path: Path, monkeypatch) -> None:
    root = many_shards(tmp_path / "ds", 10_000)
    listed, opened = [], []
    real_listdir, real_scandir, real_init = os.listdir, os.scandir, ffrecord.FileReader._init
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(str(p)) or real_listdir(p))
    monkeypatch.setattr(os, "scandir", lambda p=".": listed.append(str(p)) or real_scandir(p))
    monkeypatch.setattr(ffrecord.FileReader, "_init",
                        lambda self, fname, *a, **k: opened.append(str(fname)) or real_init(self, fname, *a, **k))
    before = open_fds()
    reader = open_dataset(root)
    assert (reader.shards, len(reader), reader.version) == (10_000, 20_000, 1)
    assert listed == [str(root / "_manifest")]
    assert opened == [str(root / "_manifest" / "v000001.ffr")]
    assert open_fds() == before and reader.stats()["open_files"] == 0
    assert reader.read([19_999, 5, 12_345]) == [point(1), point(1), point(1)]
    assert reader.stats()["shards_opened"] == 3 and len(opened) == 1 + 3 * 2
    reader.close()
    assert open_fds() == before


def test_reads_open_only_the_shards_they_touch(tmp_path: Path) -> None:
    path = write_sharded(tmp_path / "ds", 40, 4)
    with open_dataset(path) as reader:
        assert reader.stats()["shards_opened"] == 0
        assert reader[13] == point(13) and reader.stats()["shards_opened"] == 1
        assert reader.read([0, 39, 14], mask=["label"]) == [{"label": 0}, {"label": 39}, {"label": 14}]
        assert reader.stats()["shards_opened"] == 3  # shard 3 was open already
        assert reader.available(5) == {"image": True, "label": True}
        assert reader.members[9].files == [str(path / "000009" / "image.ffr"), str(path / "000009" / "label.ffr")]
        assert reader.size == sum(os.path.getsize(f) for f in reader.files)
        assert reader.stats()["shards_opened"] == 4


# ---- bounded descriptors ----------------------------------------------------------------

def test_a_thousand_datasets_hold_a_bounded_number_of_files(tmp_path: Path, bound) -> None:
    one = tmp_path / "one"
    with DatasetWriter(one, SPEC) as writer:
        for k in range(3):
            writer.append(point(k))
    paths = [one]
    for k in range(999):
        paths.append(shutil.copytree(one, tmp_path / f"d{k}", copy_function=os.link))
    before = open_fds()
    readers = [open_dataset(p) for p in paths]
    most = 0
    for _ in range(2):  # the second pass reopens what the first closed
        for k, reader in enumerate(readers):
            assert reader[k % 3] == point(k % 3)
            most = max(most, open_fds(collect=False) - before)
    assert most <= 256 and most <= max_open_files() + 8
    set_max_open_files(10)
    assert open_fds() - before <= 10
    assert [r.read([2])[0] for r in readers[:30]] == [point(2)] * 30
    assert open_fds() - before <= 10
    for reader in readers:
        reader.close()
    assert open_fds() == before


def test_a_read_in_flight_keeps_its_files(tmp_path: Path, bound) -> None:
    path = write_sharded(tmp_path / "ds", 20, 2)
    set_max_open_files(2)  # one shard's two files
    reader = open_dataset(path)
    shard = reader.members[0]
    with READERS.leased((shard._source.owner, 0), lambda: shard._source.open(0)) as held:
        assert reader.read([19, 17, 15]) == [point(19), point(17), point(15)]
        assert held.read([1]) == [point(1)]  # never closed under its lease
    assert READERS.held_by(shard._source.owner) <= 2
    reader.close()


@pytest.mark.parametrize("setter, variable, attribute", [
    (set_max_open_files, "FFRECORD_MAX_OPEN_FILES", "limit"),
    (set_max_mapped_files, "FFRECORD_MAX_MAPPED_FILES", "mapped_limit"),
])
def test_the_bound_is_configurable_and_checked(monkeypatch, setter, variable, attribute) -> None:
    for bad in (0, -1, 1.5, "8", True):
        with pytest.raises(ValueError, match="positive integer"):
            setter(bad)
    monkeypatch.setenv(variable, "seven")
    from ffrecord.dataset.open_files import OpenReaders
    with pytest.raises(ValueError, match=f"{variable}='seven'"):
        OpenReaders()
    monkeypatch.setenv(variable, "33")
    assert getattr(OpenReaders(), attribute) == 33


def test_a_failed_open_is_not_kept(tmp_path: Path) -> None:
    path = write_sharded(tmp_path / "ds", 6, 2)
    (path / "000001" / "label.ffr").unlink()
    with open_dataset(path) as reader:
        for _ in range(2):
            with pytest.raises(FileNotFoundError, match="000001/label.ffr"):
                reader[3]
        assert reader[5] == point(5) and reader.stats()["open_files"] == 2


# ---- replaced and damaged files ----------------------------------------------------------

def test_a_field_file_replaced_since_publication_is_refused(tmp_path: Path, bound) -> None:
    path = write_sharded(tmp_path / "ds", 6, 2)
    other = tmp_path / "other.ffr"
    with ffrecord.FileWriter(other, 2) as writer:  # the same count, other labels
        writer.write_many([(k + 100).to_bytes(8, "little") for k in range(2)])
    other.replace(path / "000001" / "label.ffr")
    with open_dataset(path) as reader:
        with pytest.raises(ObjectChangedError, match="000001/label.ffr: field 'label' is not the file version 1") as caught:
            reader[2]
        assert caught.value.errno == errno.ESTALE and reader[0] == point(0)
    path = write_sharded(tmp_path / "again", 6, 2)
    set_max_open_files(2)
    with open_dataset(path) as reader:
        assert reader[0] == point(0)
        assert reader[2] == point(2)  # shard 0 closed: the table holds 2 files
        with ffrecord.FileWriter(path / "000000" / "label.ffr", 2) as writer:  # the same size
            writer.write_many([(k + 100).to_bytes(8, "little") for k in range(2)])
        with pytest.raises(ObjectChangedError, match="replaced since"):
            reader[0]


def flip(file: Path, at: int) -> None:
    data = bytearray(file.read_bytes())
    data[at] ^= 1
    file.write_bytes(bytes(data))


def test_damaged_or_foreign_manifests_are_refused_clearly(tmp_path: Path) -> None:
    path = write_sharded(tmp_path / "ds", 6, 2)
    manifest = path / "_manifest" / "v000001.ffr"
    good = manifest.read_bytes()
    flip(manifest, len(good) - 3)
    with pytest.raises(CorruptDatasetError, match="v000001.ffr: damaged manifest"):
        open_dataset(path)
    manifest.write_bytes(good)
    manifest.rename(path / "_manifest" / "v000002.ffr")
    with pytest.raises(CorruptDatasetError, match="holds version 1, not 2"):
        open_dataset(path)
    (path / "_manifest" / "v000002.ffr").unlink()
    os.mkfifo(manifest)
    with pytest.raises(ValueError, match="not a regular file but a FIFO"):
        open_dataset(path)
    manifest.unlink()
    manifest.symlink_to(tmp_path / "elsewhere.ffr")
    with pytest.raises(ValueError, match="not a regular file"):
        open_dataset(path)
    manifest.unlink()
    m = manifests.Manifest.parse(manifest, 1, _samples(good, tmp_path))
    for change, error, match in (
            ({"layout": 2}, UnsupportedVersionError, "layout 2 is newer"),
            ({"format": "other"}, CorruptDatasetError, "not a dataset manifest"),
            ({"shards": 4}, CorruptDatasetError, "names for 4 shards|bytes for 4 shards"),
            ({"length": 7}, CorruptDatasetError, "do not add up")):
        samples = m.samples()
        samples[0] = json.dumps({**json.loads(samples[0]), **change}).encode()
        with pytest.raises(error, match=match):
            manifests.Manifest.parse(manifest, 1, samples)
    samples = m.samples()
    samples[1] = b"000000\n../x\n000002"
    with pytest.raises(CorruptDatasetError, match="shard names: one is not allowed"):
        manifests.Manifest.parse(manifest, 1, samples)
    samples = m.samples()
    samples[3] = b"image.ffr\n/etc/passwd\nimage.ffr"
    with pytest.raises(CorruptDatasetError, match="file names: one is not allowed"):
        manifests.Manifest.parse(manifest, 1, samples)


def _samples(raw: bytes, folder: Path) -> list[bytes]:
    path = folder / "manifest-copy.ffr"
    path.write_bytes(raw)
    with ffrecord.FileReader(path) as reader:
        return [s.tobytes() for s in reader.read(range(reader.n))]


# ---- readers keep their version ----------------------------------------------------------

def _read_all(reader: VersionedReader) -> tuple[int, int, list]:
    return reader.version, len(reader), reader.read(range(len(reader)))


def test_a_pickled_reader_reads_its_version_in_a_spawned_process(tmp_path: Path) -> None:
    path = write_sharded(tmp_path / "ds", 5, 2)
    reader = open_dataset(path)
    with ShardedDatasetWriter(path, SPEC, shardlen=2, mode="append") as writer:
        for k in range(5, 9):
            writer.append(point(k))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_read_all, (reader,)) == (1, 5, [point(k) for k in range(5)])
        assert pool.apply(_read_all, (open_dataset(path),)) == (2, 9, [point(k) for k in range(9)])
    copy = pickle.loads(pickle.dumps(reader))
    assert (copy.version, len(copy), copy.shardstep) == (1, 5, 1)
    manifest = path / "_manifest" / "v000001.ffr"
    data = manifest.read_bytes()
    manifest.unlink()
    with pytest.raises(FileNotFoundError, match="v000001.ffr"):
        pickle.loads(pickle.dumps(reader))
    manifest.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises((ObjectChangedError, CorruptDatasetError)):
        pickle.loads(pickle.dumps(reader))


def test_a_process_share_of_shards_and_its_pickle(tmp_path: Path) -> None:
    path = write_sharded(tmp_path / "ds", 9, 2)
    with VersionedReader(path, shardstart=1, shardstep=2) as share:
        assert [d["label"] for d in share.read(range(len(share)))] == [2, 3, 6, 7]
        copy = pickle.loads(pickle.dumps(share))
        assert (copy.shardstart, copy.shardstep, copy[3]) == (1, 2, point(7))
    with pytest.raises(ValueError, match="positive integer"):
        VersionedReader(path, version=0)
    with pytest.raises(FileNotFoundError, match="no version 3 .versions: 1."):
        VersionedReader(path, version=3)


def test_one_shard_datasets_offer_what_a_dataset_reader_does(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    with DatasetWriter(path, {"label": "int", "frames": "bytes[]"}, metadata={"classes": ["a"]}) as writer:
        for k in range(4):
            writer.append({"label": k, "frames": [b"x"] * k})
    with open_dataset(path) as reader:
        assert reader.metadata == {"classes": ["a"]} and list(reader.fields) == ["label", "frames"]
        assert reader.element_counts("frames").tolist() == [0, 1, 2, 3]
        assert reader.field_reader("label").n == 4
        assert reader[3, {"frames": range(1, 3)}] == {"frames": [b"x", b"x"]}
    sharded = write_sharded(tmp_path / "sharded", 4, 2)
    with open_dataset(sharded) as reader, pytest.raises(TypeError, match="members\\[k\\].field_reader"):
        reader.field_reader("label")


def test_a_closed_reader_refuses_reads_and_a_pickled_shard_keeps_to_its_own(tmp_path: Path) -> None:
    first = write_sharded(tmp_path / "a", 4, 2)
    with ShardedDatasetWriter(tmp_path / "b", SPEC, shardlen=2) as writer:
        for k in range(4):
            writer.append(point(k + 50))
    reader = open_dataset(first)
    shard = pickle.loads(pickle.dumps(reader.members[1]))  # as a worker would get it
    other = open_dataset(tmp_path / "b")
    assert shard[0] == point(2) and other.members[1][0] == point(52) and shard[1] == point(3)
    assert shard._source.owner != reader.members[1]._source.owner
    reader.close()
    with pytest.raises(ValueError, match="closed"):
        reader[0]
    other.close()
