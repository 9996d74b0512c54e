"""Growing a dataset: appended shards and added fields publish the next version, local and
on S3; readers keep theirs; one grower at a time; a grower killed at any step leaves every
published version readable, and what it wrote is removed by the next one; vacuum, index."""

from __future__ import annotations

import importlib
import itertools
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ffrecord.dataset import (IncompleteDatasetError, ShardedDatasetWriter, SpecError, add_field,
                              index, open_dataset, vacuum, versions)
from ffrecord.dataset import manifest as manifests
from ffrecord import _remote

from remote_fixtures import bucket, keys, s3_endpoint  # noqa: F401 - fixtures

SPEC = {"image": "bytes", "label": "int"}


def point(k: int) -> dict:
    return {"image": bytes([k % 251]) * (5 + k % 4), "label": k}


def write(path: str, n: int, options: dict | None = None) -> None:
    with ShardedDatasetWriter(path, SPEC, shardlen=2, storage_options=options) as writer:
        for k in range(n):
            writer.append(point(k))


def append(path: str, options: dict | None, start: int = 6, stop: int = 11) -> None:
    with ShardedDatasetWriter(path, SPEC, shardlen=2, mode="append", storage_options=options) as writer:
        for k in range(start, stop):
            writer.append(point(k))


def add_double(path: str, options: dict | None) -> None:
    add_field(path, "double", "int", lambda d: 2 * d["label"], storage_options=options)


def everything(path: str, options: dict | None = None, version: int | None = None) -> list:
    with open_dataset(path, version=version, storage_options=options) as reader:
        return reader.read(range(len(reader)))


def test_append_publishes_the_next_version_and_readers_keep_theirs(tmp_path: Path) -> None:
    path = str(tmp_path / "ds")
    write(path, 6)
    before = open_dataset(path)
    inodes = {p: p.stat().st_ino for p in Path(path).glob("0*/*.ffr")}
    append(path, None)
    assert versions(path) == [1, 2] and before.version == 1 and len(before) == 6
    assert before.read(range(6)) == [point(k) for k in range(6)]
    assert everything(path) == [point(k) for k in range(11)]
    assert everything(path, version=1) == [point(k) for k in range(6)]
    assert {p: p.stat().st_ino for p in inodes} == inodes  # nothing rewritten
    assert sorted(os.listdir(path)) == ["000000", "000001", "000002", "000003", "000004", "000005", "_manifest"]
    with ShardedDatasetWriter(path, SPEC, shardlen=2, mode="append"):
        pass  # nothing appended: no new version
    assert versions(path) == [1, 2]


def test_add_field_writes_one_file_per_shard_and_rewrites_none(tmp_path: Path) -> None:
    path = str(tmp_path / "ds")
    write(path, 5)
    inodes = {p: p.stat().st_ino for p in Path(path).glob("0*/*")}
    reader = open_dataset(path)
    assert add_field(path, "name", "utf8", (f"n{k}" for k in range(5))) == 2
    assert add_field(path, "pairs", "int[]", lambda d: [d["label"]] * 2) == 3
    assert {p: p.stat().st_ino for p in inodes} == inodes
    assert everything(path) == [{**point(k), "name": f"n{k}", "pairs": [k, k]} for k in range(5)]
    assert reader.spec == SPEC and reader[4] == point(4)
    with pytest.raises(SpecError, match="has a field 'name' already"):
        add_field(path, "name", "utf8", [""] * 5)
    for values, match in (([1] * 4, "ended after 4 of the dataset's 5"), ([1] * 6, "more values than its 5")):
        with pytest.raises(ValueError, match=match):
            add_field(path, "count", "int", values)
    with pytest.raises(Exception, match="datapoint 2, field 'bad'"):
        add_field(path, "bad", "int", lambda d: "x" if d["label"] == 2 else 1)
    assert versions(path) == [1, 2, 3] and not list(Path(path).glob("0*/count.ffr")) \
        and not list(Path(path).glob("0*/bad.ffr"))
    with ShardedDatasetWriter(path, {**SPEC, "name": "utf8", "pairs": "int[]"}, shardlen=2,
                              mode="append") as writer:
        writer.append({**point(5), "name": "n5", "pairs": [5, 5]})
    assert everything(path)[5] == {**point(5), "name": "n5", "pairs": [5, 5]}


def test_a_plain_dataset_takes_fields_but_not_shards(tmp_path: Path) -> None:
    from ffrecord.dataset import DatasetWriter

    path = tmp_path / "plain"
    with DatasetWriter(path, SPEC) as writer:
        for k in range(3):
            writer.append(point(k))
    add_field(path, "score", "float", [0.5, 1.5, 2.5])
    assert everything(str(path))[2] == {**point(2), "score": 2.5}
    with pytest.raises(SpecError, match="not sharded"):
        append(str(path), None)


def test_one_grower_at_a_time(tmp_path: Path) -> None:
    path = str(tmp_path / "ds")
    write(path, 4)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from ffrecord.dataset import ShardedDatasetWriter
        with ShardedDatasetWriter({path!r}, {SPEC!r}, shardlen=2, mode="append") as w:
            w.append({{"image": b"x", "label": 99}})
            print("holding", flush=True)
            input()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        for grow in (lambda: append(path, None), lambda: add_double(path, None), lambda: vacuum(path)):
            with pytest.raises(FileExistsError, match=f"another writer is writing a dataset here .pid {holder.pid}"):
                grow()
        holder.communicate("\n", timeout=60)
    finally:
        holder.kill()
    assert versions(path) == [1, 2] and everything(path)[4]["label"] == 99
    with pytest.raises(SpecError, match="the shards appended would have"):
        ShardedDatasetWriter(path, {"label": "int"}, shardlen=2, mode="append")
    with pytest.raises(FileExistsError, match="holds a dataset .version 2.: append to it"):
        ShardedDatasetWriter(path, SPEC, shardlen=2)
    with pytest.raises(ValueError, match="one appender at a time"):
        ShardedDatasetWriter(path, SPEC, shardlen=2, shardstart=1, shardstep=2, mode="append")


def test_an_aborted_append_publishes_nothing_and_removes_its_shards(tmp_path: Path) -> None:
    path = str(tmp_path / "ds")
    write(path, 4)
    with pytest.raises(RuntimeError, match="stop"):
        with ShardedDatasetWriter(path, SPEC, shardlen=2, mode="append") as writer:
            for k in range(4, 9):
                writer.append(point(k))
            raise RuntimeError("stop")
    assert versions(path) == [1] and sorted(os.listdir(path)) == ["000000", "000001", "_manifest"]
    append(path, None, 4, 6)
    assert everything(path) == [point(k) for k in range(6)]


# ---- killed at every step ----------------------------------------------------------------

def _victim(work: str, path: str, options: dict | None, target: str, nth: int, when: str) -> None:
    """In a forked child: ``work`` on the dataset, SIGKILLed at the ``nth`` call of
    ``target`` ("module:attribute.path"), before or after it runs."""
    module, _, dotted = target.partition(":")
    owner = importlib.import_module(module)
    *parents, name = dotted.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    real, calls = getattr(owner, name), itertools.count(1)  # next() is atomic: threads call too

    def killing(*args, **kwargs):
        call = next(calls)
        if call == nth and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        if call == nth and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, killing)
    {"append": append, "add": add_double}[work](path, options)
    os._exit(0)


def killed(work: str, path: str, options: dict | None, target: str, nth: int, when: str) -> None:
    child = multiprocessing.get_context("fork").Process(target=_victim, args=(work, path, options, target, nth, when))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL, f"{target} #{nth} {when}: exit {child.exitcode}"


def check_after_kill(work: str, path: str, options: dict | None, s3=None) -> None:
    """Every version published reads whole; the next grower removes what the killed one
    left and publishes; nothing is left that no version lists."""
    found = versions(path, options)
    assert found in ([1], [1, 2])
    assert everything(path, options, 1) == [point(k) for k in range(6)]
    if work == "append":
        want = [point(k) for k in range(11)]
    else:
        want = [{**point(k), "double": 2 * k} for k in range(6)]
    if found == [1, 2]:
        assert everything(path, options, 2) == want
    if s3 is not None:  # object storage cannot tell a dead writer's claim: removed by hand
        client, bucket_name, prefix = s3
        client.delete_object(Bucket=bucket_name, Key=f"{prefix}/.ffrecord-writer")
    if found == [1]:
        (append if work == "append" else add_double)(path, options)
        assert versions(path, options) == [1, 2]
    assert everything(path, options) == want
    vacuum(path, keep=2, storage_options=options)
    m = manifests.load(_remote.as_path(path, options)).manifest
    listed = {m.path(k, name) for k in range(len(m.shards)) for name in m.fields}
    if s3 is None:
        present = {str(p.relative_to(path)) for p in Path(path).rglob("*.ffr") if "_manifest" not in p.parts}
        hidden = [p for p in Path(path).rglob(".*") if p.name != ".ffrecord-writer"]
        assert present == listed and not hidden, (present ^ listed, hidden)
    else:
        client, bucket_name, prefix = s3
        present = {k[len(prefix) + 1:] for k in keys(client, bucket_name, prefix + "/")
                   if k.endswith(".ffr") and "/_manifest/" not in k}
        assert present == listed and f"{prefix}/.ffrecord-writer" not in keys(client, bucket_name, prefix + "/")


LOCAL_APPEND = [("ffrecord.dataset.writer:DatasetWriter.append", 2, "before"),
                ("ffrecord.writer:FileWriter.close", 1, "after"),
                ("ffrecord.dataset.writer:write_spec", 1, "after"),
                ("ffrecord.dataset.writer:DatasetWriter.append", 4, "before"),
                ("ffrecord.dataset.manifest:_write", 1, "before"),
                ("os:link", 1, "before"),
                ("os:link", 1, "after")]
LOCAL_ADD = [("ffrecord.writer:FileWriter.write_one", 3, "before"),
             ("ffrecord.writer:FileWriter.close", 1, "after"),
             ("ffrecord.writer:FileWriter.close", 3, "after"),
             ("ffrecord.dataset.manifest:_write", 1, "before"),
             ("os:link", 1, "before"),
             ("os:link", 1, "after")]


@pytest.mark.parametrize("work, target, nth, when",
                         [("append", *step) for step in LOCAL_APPEND] + [("add", *step) for step in LOCAL_ADD])
def test_a_killed_grower_leaves_every_version_readable(tmp_path: Path, work, target, nth, when) -> None:
    path = str(tmp_path / "ds")
    write(path, 6)
    killed(work, path, None, target, nth, when)
    check_after_kill(work, path, None)


S3_STEPS = [("append", "ffrecord.dataset.writer:DatasetWriter.append", 2, "before"),
            ("append", "ffrecord._remote:upload", 1, "after"),
            ("append", "ffrecord._remote:upload", 3, "after"),
            ("append", "ffrecord.dataset.manifest:publish", 1, "before"),
            ("append", "ffrecord.dataset.manifest:publish", 1, "after"),
            ("add", "ffrecord._remote:upload", 1, "after"),
            ("add", "ffrecord._remote:upload", 2, "after"),
            ("add", "ffrecord.dataset.manifest:publish", 1, "before"),
            ("add", "ffrecord.dataset.manifest:publish", 1, "after")]


@pytest.mark.parametrize("work, target, nth, when", S3_STEPS)
def test_a_killed_grower_on_s3_leaves_every_version_readable(bucket, work, target, nth, when) -> None:
    client, name, options = bucket
    path = f"s3://{name}/ds"
    write(path, 6, options)
    killed(work, path, options, target, nth, when)
    check_after_kill(work, path, options, (client, name, "ds"))


def test_appends_and_fields_on_s3_keep_the_objects_they_do_not_add(bucket) -> None:
    client, name, options = bucket
    path = f"s3://{name}/ds"
    write(path, 5, options)
    etags = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=name)["Contents"]
             if o["Key"].endswith(".ffr")}
    reader = open_dataset(path, storage_options=options)
    append(path, options, 5, 8)
    add_double(path, options)
    assert versions(path, options) == [1, 2, 3] and len(reader) == 5 and reader[4] == point(4)
    after = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=name)["Contents"]}
    assert all(after[key] == etag for key, etag in etags.items())
    assert everything(path, options) == [{**point(k), "double": 2 * k} for k in range(8)]


# ---- vacuum and index ------------------------------------------------------------------

def test_vacuum_keeps_what_kept_versions_use_and_never_a_writers_files(tmp_path: Path) -> None:
    path = str(tmp_path / "ds")
    write(path, 4)
    append(path, None, 4, 6)
    add_double(path, None)
    (Path(path) / "000000" / "tokens.index").write_bytes(b"a companion file")
    (Path(path) / "000001" / "stray.ffr").write_bytes(b"garbage")
    (Path(path) / "000009").mkdir()
    (Path(path) / "000009" / "image.ffr").write_bytes(b"an orphan shard")
    old = open_dataset(path, version=1)
    report = vacuum(path, keep=2)
    assert report["versions"] == [1] and report["files"] == 2 and report["bytes"] == len(b"garbage") + len(b"an orphan shard")
    assert versions(path) == [2, 3] and (Path(path) / "000000" / "tokens.index").exists()
    assert old.read(range(4)) == [point(k) for k in range(4)]  # its files: still used by version 3
    with pytest.raises(FileNotFoundError, match="no version 1 .versions: 2, 3."):
        open_dataset(path, version=1)
    assert vacuum(path) == {"versions": [2], "files": 0, "bytes": 0}
    for bad in (0, -1, 1.0, True):
        with pytest.raises(ValueError, match="keep must be a positive integer"):
            vacuum(path, keep=bad)


def test_index_writes_version_1_of_a_dataset_made_before_manifests(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    write(str(path), 7)
    published = (path / "_manifest" / "v000001.ffr").read_bytes()
    expected = manifests.load(_remote.as_path(path)).manifest
    import shutil

    shutil.rmtree(path / "_manifest")
    assert index(path) == 1
    got = manifests.load(_remote.as_path(path)).manifest
    assert (got.spec, list(got.shards), got.lengths.tolist()) == (expected.spec, list(expected.shards),
                                                                    expected.lengths.tolist())
    assert all(got.entry(k) == expected.entry(k) for k in range(len(got.shards))) and published
    with pytest.raises(FileExistsError, match="has a manifest already .version 1."):
        index(path)
    shutil.rmtree(path / "_manifest")
    shutil.rmtree(path / "000001")
    with pytest.raises(IncompleteDatasetError, match="shard 1 is missing"):
        index(path)
    with pytest.raises(IncompleteDatasetError, match="holds no dataset"):
        index(tmp_path)


def test_the_cli_indexes_lists_and_vacuums(tmp_path: Path, capsys) -> None:
    from ffrecord.cli import main

    path = tmp_path / "ds"
    write(str(path), 5)
    import shutil

    shutil.rmtree(path / "_manifest")
    assert main(["index", str(path)]) == 0 and "version 1 published" in capsys.readouterr().out
    append(str(path), None, 5, 7)
    add_field(path, "score", "float", [0.5] * 7)
    assert main(["versions", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and "3 shards  5 datapoints" in lines[0]
    assert "4 shards  7 datapoints  fields: image (bytes), label (int), score (float)" in lines[2]
    assert main(["show", str(path), "6"]) == 0 and "score" in capsys.readouterr().out
    assert main(["vacuum", str(path), "--keep", "2"]) == 0
    assert "deleted versions [1]" in capsys.readouterr().out and versions(path) == [2, 3]
    assert main(["index", str(path)]) == 3  # has one: an OS error's status, said plainly
    assert "has a manifest already" in capsys.readouterr().err
    assert main(["vacuum", str(path), "--keep", "0"]) == 2


def test_chunks_of_a_dataset_opened_from_its_manifest(tmp_path: Path) -> None:
    from ffrecord.order import chunk_bounds

    from ffrecord.dataset import max_open_files, set_max_open_files

    path = str(tmp_path / "ds")
    write(path, 7)
    saved = max_open_files()
    set_max_open_files(2)
    try:
        with open_dataset(path) as reader:
            assert chunk_bounds(reader, 1 << 20).tolist() == [0, 2, 4, 6, 7]
            assert reader.stats()["open_files"] == 2  # leased for the question, not kept open
    finally:
        set_max_open_files(saved)


def test_verify_checks_the_files_the_manifest_lists(tmp_path: Path, capsys) -> None:
    from ffrecord import FileWriter
    from ffrecord.cli import main

    path = tmp_path / "ds"
    write(str(path), 4)
    add_field(path, "score", "float", [0.5] * 4)
    assert main(["verify", str(path)]) == 0
    assert "OK: 6 file(s), 12 samples verified" in capsys.readouterr().out  # score.ffr checked too
    with FileWriter(path / "000001" / "score.ffr", 2) as writer:  # another file, the same count
        writer.write_many([b"\0" * 8, b"\1" * 8])
    assert main(["verify", str(path)]) == 1
    assert "000001/score.ffr: not the file version 2 of the manifest lists" in capsys.readouterr().out


def test_two_appenders_on_s3_one_is_refused(bucket) -> None:
    client, name, options = bucket
    path = f"s3://{name}/ds"
    write(path, 4, options)
    first = ShardedDatasetWriter(path, SPEC, shardlen=2, mode="append", storage_options=options)
    first.append(point(4))
    with pytest.raises(FileExistsError, match=f"claimed by a writer .pid {os.getpid()} on"):
        append(path, options, 4, 6)
    with pytest.raises(FileExistsError, match="claimed by a writer"):
        add_double(path, options)
    first.close()
    assert versions(path, options) == [1, 2] and everything(path, options) == [point(k) for k in range(5)]
    assert f"ds/.ffrecord-writer" not in keys(client, name, "ds/")
