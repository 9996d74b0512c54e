"""URLs everywhere a path works: ``dump``, the CLI and DataLoader workers, against moto's S3."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

from ffrecord import FileReader
from ffrecord.dataset import open_dataset
from ffrecord.utils import dump
from remote_fixtures import bucket, keys, s3_endpoint  # noqa: F401 - fixtures

SPEC = {"label": "int", "frames": "bytes[]", "text": "utf8"}


def _datapoint(i):
    return {"label": i, "frames": [b"f%d.%d" % (i, j) for j in range(i % 4)], "text": "t%d" % i}


def test_dump_to_an_s3_prefix(bucket):
    client, name, opts = bucket
    data = [pickle.dumps(i) for i in range(50)]
    dump(data, f"s3://{name}/parts/", nfiles=3, storage_options=opts, start_method="spawn")
    assert keys(client, name) == [f"parts/PART_0000{k}.ffr" for k in range(3)] + ["parts/_manifest/v000001.ffr"]
    with FileReader(f"s3://{name}/parts/", storage_options=opts) as r:
        assert [s.tobytes() for s in r.read(range(r.n))] == data
    with open_dataset(f"s3://{name}/parts/", storage_options=opts) as parts:  # by its manifest
        assert parts.version == 1 and [d["bytes"] for d in parts.read(range(50))] == data
    dump(data[:5], f"s3://{name}/one.ffr", nfiles=1, storage_options=opts)
    with FileReader(f"s3://{name}/one.ffr", storage_options=opts) as r:
        assert r.n == 5


def test_a_failed_dump_leaves_nothing(bucket):
    client, name, opts = bucket

    class Broken:
        def __len__(self):
            return 10

        def __getitem__(self, i):
            if i == 7:
                raise RuntimeError("bad sample")
            return b"x"

    with pytest.raises(RuntimeError, match="bad sample"):
        dump(Broken(), f"s3://{name}/broken/", nfiles=2, storage_options=opts, start_method="fork")
    assert keys(client, name) == []


def test_cli_reads_urls(bucket, golden, s3_endpoint, monkeypatch):
    client, name, _ = bucket
    for part in sorted((golden / "multi").glob("*.ffr")):
        client.upload_file(str(part), name, f"multi/{part.name}")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    for command in (["info", f"s3://{name}/multi/"], ["verify", f"s3://{name}/multi/"],
                    ["cat", f"s3://{name}/multi/PART_00001.ffr", "0"]):
        done = subprocess.run([sys.executable, "-m", "ffrecord", *command], capture_output=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr.decode()
    info = subprocess.run([sys.executable, "-m", "ffrecord", "info", "--json", f"s3://{name}/multi/"],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert "PART_00002.ffr" in info


def test_cli_describes_a_sharded_dataset_on_s3(bucket, s3_endpoint, monkeypatch):
    from ffrecord.dataset import ShardedDatasetWriter

    client, name, opts = bucket
    with ShardedDatasetWriter(f"s3://{name}/ds/", SPEC, shardlen=4, storage_options=opts) as writer:
        for i in range(10):
            writer.append(_datapoint(i))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    done = subprocess.run([sys.executable, "-m", "ffrecord", "info", "--json", f"s3://{name}/ds/"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["kind"], summary["shards"], summary["datapoints"]) == ("sharded", 3, 10)
    frames = next(f for f in summary["fields"] if f["field"] == "frames")
    assert frames["elements"] == sum(i % 4 for i in range(10))
    assert summary["bytes"] == sum(o["Size"] for o in client.list_objects_v2(
        Bucket=name, Prefix="ds/")["Contents"] if o["Key"].endswith(".ffr") and "_manifest/" not in o["Key"])


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_dataloader_workers_read_from_s3(bucket, tmp_path, method):
    pytest.importorskip("torch")
    from torch_scripts.common import PickleDataset, epoch_batches, write_samples

    from ffrecord.torch import DataLoader

    client, name, opts = bucket
    client.upload_file(write_samples(tmp_path / "s.ffr", 30), name, "s.ffr")
    dataset = PickleDataset(f"s3://{name}/s.ffr", storage_options=opts)
    expected = epoch_batches(DataLoader(dataset, batch_size=4, shuffle=True, seed=3))
    loader = DataLoader(dataset, batch_size=4, shuffle=True, seed=3, num_workers=2,
                        multiprocessing_context=method, timeout=60)
    assert epoch_batches(loader) == expected


def test_remote_benchmark_runs_its_quick_mode(capsys):
    """The benchmark cannot rot: every installed contender reads (and checks) its batches."""
    from conftest import REPO

    sys.path.insert(0, str(REPO))
    from benchmarks import remote

    assert remote.main(["--quick", "--batches", "2", "--samples", "600", "--batch", "32"]) == 0
    out = capsys.readouterr().out
    assert "ffrecord" in out and "ms/batch" in out


def test_structured_dataset_reads_from_s3(bucket, tmp_path):
    from ffrecord.dataset import DatasetReader, DatasetWriter

    client, name, opts = bucket
    local = tmp_path / "ds"
    with DatasetWriter(local, {"label": "int", "frames": "bytes[]"}) as writer:
        for i in range(5):
            writer.append({"label": i, "frames": [b"f%d" % j for j in range(i)]})
    for path in sorted(local.rglob("*")):
        if path.is_file():  # the manifest's file too: the dataset as it is
            client.upload_file(str(path), name, f"ds/{path.relative_to(local)}")
    want = DatasetReader(local)
    got = DatasetReader(f"s3://{name}/ds/", storage_options=opts)
    assert len(got) == 5
    assert [got[i] for i in range(5)] == [want[i] for i in range(5)]
    assert got[4, {"frames": range(1, 3)}] == {"frames": [b"f1", b"f2"]}
    clone = pickle.loads(pickle.dumps(got))
    assert clone[3] == want[3]
    with pytest.raises(Exception, match="spec.json"):
        DatasetReader(f"s3://{name}/nothing/", storage_options=opts)


def test_dump_refuses_a_prefix_holding_ffr_objects(bucket, tmp_path):
    client, name, opts = bucket
    client.put_object(Bucket=name, Key="taken/old.ffr", Body=b"not ours")
    client.put_object(Bucket=name, Key="free/notes.txt", Body=b"not a part")
    client.put_object(Bucket=name, Key="free/.staged.ffr", Body=b"hidden: never read")
    with pytest.raises(FileExistsError, match="old.ffr"):
        dump([b"a", b"b"], f"s3://{name}/taken/", nfiles=2, storage_options=opts)
    assert keys(client, name, "taken/") == ["taken/old.ffr"]
    dump([b"a", b"b"], f"s3://{name}/free/", nfiles=2, storage_options=opts)
    assert keys(client, name, "free/") == ["free/.staged.ffr", "free/PART_00000.ffr",
                                           "free/PART_00001.ffr", "free/_manifest/v000001.ffr",
                                           "free/notes.txt"]


def test_structured_dataset_round_trip_through_s3(bucket):
    from ffrecord.dataset import DatasetReader, DatasetWriter

    client, name, opts = bucket
    url = f"s3://{name}/ds/"
    with DatasetWriter(url, SPEC, storage_options=opts) as writer:
        for i in range(9):
            writer.append(_datapoint(i))
    assert keys(client, name) == ["ds/_manifest/v000001.ffr", "ds/frames.ffr", "ds/label.ffr",
                                  "ds/spec.json", "ds/text.ffr"]
    reader = DatasetReader(url, storage_options=opts)
    assert [reader[i] for i in range(9)] == [_datapoint(i) for i in range(9)]
    assert reader.read([7, 3], mask={"frames": range(1, 3), "label": True}) == [
        {"frames": [b"f7.1", b"f7.2"], "label": 7}, {"frames": [b"f3.1", b"f3.2"], "label": 3}]
    with pytest.raises(FileExistsError, match="spec.json"):
        DatasetWriter(url, SPEC, storage_options=opts)


def test_sharded_dataset_round_trip_through_s3(bucket):
    from ffrecord.dataset import ShardedDatasetReader, ShardedDatasetWriter

    client, name, opts = bucket
    url = f"s3://{name}/sharded"
    for start in (0, 1):  # two writers, as two processes would be
        with ShardedDatasetWriter(url, SPEC, shardlen=3, shardstart=start, shardstep=2,
                                  length=11, storage_options=opts) as writer:
            for i in range(11):
                if (i // 3) % 2 == start:
                    writer.append(_datapoint(i))
    assert sorted({k.split("/")[1] for k in keys(client, name)}) == ["000000", "000001", "000002",
                                                                     "000003", "_manifest"]
    assert keys(client, name, "sharded/_manifest/") == ["sharded/_manifest/v000001.ffr"]  # parts gone
    reader = ShardedDatasetReader(url, storage_options=opts)
    assert (len(reader), reader.shards) == (11, 4)
    assert reader.read(list(range(10, -1, -1))) == [_datapoint(i) for i in range(10, -1, -1)]
    assert reader[10, {"frames": slice(1, None)}] == {"frames": [b"f10.1"]}
    clone = pickle.loads(pickle.dumps(ShardedDatasetReader(url, shardstart=1, shardstep=2,
                                                           storage_options=opts)))
    assert [d["label"] for d in clone.read(range(len(clone)))] == [3, 4, 5, 9, 10]
    with pytest.raises(FileNotFoundError):
        ShardedDatasetReader(f"s3://{name}/nothing/", storage_options=opts)


def test_a_failed_dataset_upload_or_write_leaves_nothing(bucket, monkeypatch):
    from ffrecord import _remote
    from ffrecord.dataset import DatasetWriter, ShardedDatasetWriter

    client, name, opts = bucket
    with pytest.raises(RuntimeError, match="stop"):
        with ShardedDatasetWriter(f"s3://{name}/aborted/", SPEC, storage_options=opts) as writer:
            writer.append(_datapoint(0))
            raise RuntimeError("stop")
    real, uploads = _remote.upload, []

    def fails_third(local, url, options):
        uploads.append(url)
        if len(uploads) == 3:
            raise OSError("connection lost")
        real(local, url, options)

    monkeypatch.setattr(_remote, "upload", fails_third)
    writer = DatasetWriter(f"s3://{name}/failed/", SPEC, storage_options=opts)
    writer.append(_datapoint(1))
    with pytest.raises(OSError, match="connection lost"):
        writer.close()
    assert uploads[-1].endswith("spec.json") is False and len(uploads) == 3
    assert keys(client, name) == []
    assert not os.path.exists(writer._staging)


def test_one_writer_at_a_time_on_an_s3_prefix(bucket):
    """A conditional PUT claims the prefix: a second writer (or dump) is refused at once,
    naming the holder, until the first finishes; a claim left by a killed writer says how to
    clear it, and nothing of the refused writers is uploaded."""
    from ffrecord.dataset import DatasetReader, DatasetWriter

    client, name, opts = bucket
    url = f"s3://{name}/shared/"
    first = DatasetWriter(url, SPEC, storage_options=opts)
    first.append(_datapoint(0))
    holder = f"pid {os.getpid()} on "
    with pytest.raises(FileExistsError, match=f"claimed by a writer \\({holder}"):
        DatasetWriter(url, SPEC, storage_options=opts)
    with pytest.raises(FileExistsError, match="claimed by a writer"):
        dump([b"a", b"b"], url, nfiles=2, storage_options=opts)
    assert keys(client, name) == ["shared/.ffrecord-writer"]
    first.close()
    assert keys(client, name) == ["shared/_manifest/v000001.ffr", "shared/frames.ffr", "shared/label.ffr",
                                  "shared/spec.json", "shared/text.ffr"]
    assert DatasetReader(url, storage_options=opts)[0] == _datapoint(0)

    client.put_object(Bucket=name, Key="left/.ffrecord-writer", Body=b"pid 1 on gone-host\n")
    with pytest.raises(FileExistsError, match=f"pid 1 on gone-host.*remove s3://{name}/left/"):
        dump([b"a", b"b"], f"s3://{name}/left/", nfiles=2, storage_options=opts)
    client.delete_object(Bucket=name, Key="left/.ffrecord-writer")
    dump([b"a", b"b"], f"s3://{name}/left/", nfiles=2, storage_options=opts)
    assert keys(client, name, "left/") == ["left/PART_00000.ffr", "left/PART_00001.ffr",
                                           "left/_manifest/v000001.ffr"]
