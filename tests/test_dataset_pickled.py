"""A pickled dataset reader carries what it was opened with (spec, length, metadata, each
field file's identity), and its copy (in a spawned loader worker, say) reopens by path and
checks it found the same dataset: another ``spec.json`` or a replaced field file is a
``DatasetChangedError``, never values decoded with other types. For ``DatasetReader``,
``ShardedDatasetReader``, ``Mixture``, views and ``ffrecord.torch`` datasets over them."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from ffrecord.dataset import (DatasetChangedError, DatasetReader, DatasetWriter,
                              IncompleteDatasetError, Mixture, ShardedDatasetReader,
                              ShardedDatasetWriter)
from ffrecord.dataset.reader import field_identity
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

SPEC = {"x": "int", "y": "float"}


def write(path: Path | str, values: list[tuple[int, float]], spec: dict = SPEC, **options) -> Path:
    with DatasetWriter(path, spec, **options) as writer:
        for x, y in values:
            writer.append({"x": x, "y": y})
    return path


def rewrite(path: Path, values: list[tuple[int, float]], spec: dict = SPEC, **options) -> None:
    """The dataset at ``path`` written again, as a user would (removed, then written)."""
    shutil.rmtree(path)
    write(path, values, spec, **options)


def swap_types(path: Path) -> None:
    """The issue's case: spec.json replaced by one whose fields have each other's types
    (both 8 bytes a value), the field files as they are."""
    spec_file = path / "spec.json"
    document = json.loads(spec_file.read_text())
    document["fields"] = {"x": "float", "y": "int"}
    spec_file.write_text(json.dumps(document))


VALUES = [(3, 3.5), (4, 4.5)]

CHANGES = {
    "spec.json with other types": (swap_types, r"spec.json changed .*fields \{'x': 'int', 'y': 'float'\}, "
                                               r"now \{'x': 'float', 'y': 'int'\}"),
    "a field file of other values, same size": (
        lambda path: rewrite(path, [(3, 9.25), (4, 4.5)]), r"y.ffr: replaced since the reader was opened"),
    "more datapoints": (lambda path: rewrite(path, VALUES + [(5, 5.5)]), "datapoints 2, now 3"),
    "other metadata": (lambda path: rewrite(path, VALUES, metadata={"classes": ["cat"]}),
                       r"metadata \{\}, now \{'classes': \['cat'\]\}"),
    "a field added": (lambda path: rewrite_with_field(path), r"fields .*now .*'z': 'utf8'"),
}


def rewrite_with_field(path: Path) -> None:
    shutil.rmtree(path)
    with DatasetWriter(path, {**SPEC, "z": "utf8"}) as writer:
        for x, y in VALUES:
            writer.append({"x": x, "y": y, "z": ""})


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_copy_of_a_reader_refuses_a_changed_dataset(tmp_path, change):
    path = write(tmp_path / "ds", VALUES)
    with DatasetReader(path) as reader:
        assert reader[0] == {"x": 3, "y": 3.5}
        pickled = pickle.dumps(reader)
        alter, message = CHANGES[change]
        alter(path)
        with pytest.raises(DatasetChangedError, match=message):
            pickle.loads(pickled)
        assert reader[0] == {"x": 3, "y": 3.5}  # the original reads what it opened


def test_a_copy_of_an_unchanged_dataset_reads_it(tmp_path):
    """Written again with the same values, the dataset is the same one (same identities)."""
    path = write(tmp_path / "ds", VALUES, metadata={"k": 1})
    with DatasetReader(path, check_data=False) as reader:
        pickled = pickle.dumps(reader)
        rewrite(path, VALUES, metadata={"k": 1})
        with pickle.loads(pickled) as copy:
            assert copy.read([0, 1]) == [{"x": 3, "y": 3.5}, {"x": 4, "y": 4.5}]
            assert copy.check_data is False and copy.metadata == {"k": 1}
            twice = pickle.loads(pickle.dumps(copy))  # a copy of a copy checks the same
            assert twice[1] == {"x": 4, "y": 4.5}
            twice.close()


def test_the_identity_is_the_file_opened_not_the_path(tmp_path):
    """The original's identities come from the files it holds open, even when the path
    was replaced before the reader was pickled."""
    path = write(tmp_path / "ds", VALUES)
    with DatasetReader(path) as reader:
        before = field_identity(reader.field_reader("y"))
        assert before == (os.path.getsize(path / "y.ffr"), len(VALUES),
                          int.from_bytes((path / "y.ffr").read_bytes()[:4], "little"))
        write(tmp_path / "other", [(3, 9.25), (4, 4.5)])
        os.replace(tmp_path / "other" / "y.ffr", path / "y.ffr")
        assert field_identity(reader.field_reader("y")) == before
        with pytest.raises(DatasetChangedError, match="y.ffr: replaced"):
            pickle.loads(pickle.dumps(reader))


def test_sharded_readers_check_every_shard_and_their_count(tmp_path):
    path = tmp_path / "sharded"
    with ShardedDatasetWriter(path, SPEC, shardlen=2) as writer:
        for k in range(5):
            writer.append({"x": k, "y": k + 0.5})
    with ShardedDatasetReader(path) as reader:
        pickled = pickle.dumps(reader)
        with pickle.loads(pickled) as copy:
            assert copy[4] == {"x": 4, "y": 4.5}
        for shard in sorted(p for p in path.iterdir() if p.name.isdigit()):  # all alike: no shard differs
            swap_types(shard)
        with pytest.raises(DatasetChangedError, match="000000: spec.json changed"):
            pickle.loads(pickled)
        shutil.rmtree(path)
        with ShardedDatasetWriter(path, SPEC, shardlen=2) as writer:
            for k in range(7):  # the same first shards, and one more
                writer.append({"x": k, "y": k + 0.5})
        with pytest.raises(DatasetChangedError, match="3 shard\\(s\\) when the reader was opened, 4 now"):
            pickle.loads(pickled)


def test_views_mixtures_and_torch_datasets_carry_their_readers_checks(tmp_path):
    torch = pytest.importorskip("torch")
    from ffrecord.torch.structured import StructuredDataset

    a, b = write(tmp_path / "a", VALUES), write(tmp_path / "b", [(7, 7.5)])
    with DatasetReader(a) as ra, DatasetReader(b) as rb:
        wrappers = {"view": ra.select([1, 0]), "mixture": Mixture([ra, rb], weights=[1, 1]),
                    "structured": StructuredDataset(ra), "subset": torch.utils.data.Subset(ra, [1])}
        pickled = {name: pickle.dumps(w) for name, w in wrappers.items()}
        assert pickle.loads(pickled["view"])[0] == {"x": 4, "y": 4.5}
        swap_types(a)
        for name, data in pickled.items():
            with pytest.raises(DatasetChangedError, match="spec.json changed"):
                pickle.loads(data)


def test_a_spawned_loader_worker_refuses_a_changed_dataset(tmp_path, capfd):
    """The issue's case end to end: a loader with spawned workers pickles the dataset when
    the iteration starts; a spec replaced after the reader opened is the worker's error,
    not wrong values (torch reports a worker that fails to start as one that exited)."""
    pytest.importorskip("torch")
    from ffrecord.torch import DataLoader
    from ffrecord.torch.structured import StructuredDataset

    path = write(tmp_path / "ds", VALUES * 4)
    with DatasetReader(path) as reader:
        loader = DataLoader(StructuredDataset(reader), batch_size=2, num_workers=1,
                            multiprocessing_context="spawn", timeout=120)
        swap_types(path)
        with pytest.raises(RuntimeError, match="exited unexpectedly"):
            next(iter(loader))
    assert "DatasetChangedError: " in capfd.readouterr().err


def test_a_forked_copy_refuses_a_dataset_rewritten_since(tmp_path):
    """The default loader forks its workers: the reader's copy there keeps the spec it was
    opened with and reopens the field files by path, which must be the same files."""
    from ffr_helpers import run_in_child
    from ffrecord import ObjectChangedError

    path = write(tmp_path / "ds", VALUES)
    with DatasetReader(path) as reader:
        rewrite(path, [(1.5, 7), (2.5, 8)], {"x": "float", "y": "int"})  # the rewrite

        def child() -> None:
            with pytest.raises(ObjectChangedError, match="x.ffr: replaced since the reader opened it"):
                reader[0]

        run_in_child(child)
        assert reader[0] == {"x": 3, "y": 3.5}


def test_a_copy_of_a_remote_reader_refuses_a_changed_dataset(bucket, tmp_path):
    """On S3: a spec.json replaced is ``DatasetChangedError`` when the copy reopens; a field
    object replaced is ``ObjectChangedError`` (the copy reads the versions its original
    opened, pinned); a sharded prefix opened as one dataset names the reader to use."""
    from ffrecord import ObjectChangedError
    from remote_fixtures import keys

    client, name, opts = bucket
    url = f"s3://{name}/ds/"
    write(url, VALUES, storage_options=opts)
    with DatasetReader(url, storage_options=opts) as reader:
        assert reader[0] == {"x": 3, "y": 3.5}
        pickled = pickle.dumps(reader)
        spec = json.loads(client.get_object(Bucket=name, Key="ds/spec.json")["Body"].read())
        client.put_object(Bucket=name, Key="ds/spec.json",
                          Body=json.dumps({**spec, "fields": {"x": "float", "y": "int"}}).encode())
        with pytest.raises(DatasetChangedError, match="spec.json changed since the reader was opened"):
            pickle.loads(pickled)
        client.put_object(Bucket=name, Key="ds/spec.json", Body=json.dumps(spec).encode())
        other = write(tmp_path / "other", [(3, 9.25), (4, 4.5)])
        client.put_object(Bucket=name, Key="ds/y.ffr", Body=(other / "y.ffr").read_bytes())
        with pytest.raises(ObjectChangedError):
            pickle.loads(pickled)[0]
    with ShardedDatasetWriter(f"s3://{name}/sharded/", SPEC, shardlen=1, storage_options=opts) as writer:
        writer.append({"x": 1, "y": 1.5})
    assert "sharded/000000/spec.json" in keys(client, name)
    with pytest.raises(IncompleteDatasetError, match="sharded dataset .*open_dataset or ShardedDatasetReader"):
        DatasetReader(f"s3://{name}/sharded/", storage_options=opts)
