"""Converters into structured datasets: each source is written by its real library (from
PyPI) and read back from our dataset value for value; damaged sources fail naming the file
and record and leave no dataset; an interrupted conversion resumes."""

from __future__ import annotations

import io
import json
import os
import tarfile

import numpy as np
import pytest
from PIL import Image

from ffrecord.converters import SourceError, convert
from ffrecord.dataset import open_dataset
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

N = 24


def _png(k: int) -> bytes:
    stream = io.BytesIO()
    Image.new("RGB", (3 + k % 4, 2), (k, 2 * k, 0)).save(stream, "PNG")
    return stream.getvalue()


def _jpeg(k: int) -> bytes:
    stream = io.BytesIO()
    Image.new("RGB", (8, 8 + k % 3), (k, 0, 255 - k)).save(stream, "JPEG")
    return stream.getvalue()


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


def _read_all(path, raw_types=("jpg", "png")):
    with open_dataset(path, decoders={t: bytes for t in raw_types}) as ds:
        return list(ds), ds.spec, ds.metadata


def _assert_no_dataset(path):
    assert not os.path.exists(path)


# ---- image folders ---------------------------------------------------------------------

def test_imagefolder_labels_paths_and_class_names(tmp_path):
    images = {}
    for k in range(N):
        label = ("cat", "dog", "emu")[k % 3]
        (tmp_path / "src" / label).mkdir(parents=True, exist_ok=True)
        images[f"{label}/{k:03d}.png"] = _png(k)
        (tmp_path / "src" / label / f"{k:03d}.png").write_bytes(images[f"{label}/{k:03d}.png"])
    (tmp_path / "src" / "cat" / "notes.txt").write_text("skipped")
    assert convert("imagefolder", tmp_path / "src", tmp_path / "out") == N
    rows, spec, metadata = _read_all(tmp_path / "out")
    assert spec == {"image": "png", "label": "int", "path": "utf8"}
    assert metadata["classes"] == ["cat", "dog", "emu"]
    assert {row["path"]: row["image"] for row in rows} == images
    assert all(metadata["classes"][row["label"]] == row["path"].split("/")[0] for row in rows)


def test_imagefolder_not_an_image_names_the_file(tmp_path):
    (tmp_path / "src" / "cat").mkdir(parents=True)
    (tmp_path / "src" / "cat" / "a.jpg").write_bytes(_jpeg(1))
    (tmp_path / "src" / "cat" / "b.jpg").write_bytes(b"<html>not an image</html>")
    with pytest.raises(SourceError, match=r"b\.jpg: record 1: not a readable image"):
        convert("imagefolder", tmp_path / "src", tmp_path / "out")
    _assert_no_dataset(tmp_path / "out")


# ---- Parquet and Hugging Face ----------------------------------------------------------

def _table():
    import pyarrow as pa

    return pa.table({
        "id": pa.array(range(N), pa.int32()),
        "big": pa.array([2**40 + k for k in range(N)], pa.uint64()),
        "score": pa.array([k / 7 for k in range(N)], pa.float32()),
        "text": [f"caption {k} é" for k in range(N)],
        "blob": [bytes([k]) * k for k in range(N)],
        "vector": pa.array([[k, k + 1, k * 2] for k in range(N)], pa.list_(pa.int16())),
        "tags": [[f"t{j}" for j in range(k % 3)] for k in range(N)],
        "flag": [k % 2 == 0 for k in range(N)],
        "meta": [{"a": k, "b": [k, k + 1]} for k in range(N)],
    })


def _assert_same_as_arrow(rows, table):
    expected = table.to_pylist()
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected):
        assert row["vector"].dtype == np.int16 and row["vector"].tolist() == want.pop("vector")
        if "image" in want:
            assert row.pop("image") == want.pop("image")["bytes"]
        row.pop("vector")
        assert row == want


def test_parquet_round_trip_in_parallel(tmp_path):
    import pyarrow.parquet as pq

    table = _table()
    (tmp_path / "src").mkdir()
    pq.write_table(table.slice(0, 10), tmp_path / "src" / "a.parquet", row_group_size=4)
    pq.write_table(table.slice(10), tmp_path / "src" / "b.parquet", row_group_size=8)
    (tmp_path / "src" / ".c.parquet").write_bytes(b"a download in progress: hidden, skipped")
    assert convert("parquet", tmp_path / "src", tmp_path / "out", workers=2) == N
    rows, spec, _ = _read_all(tmp_path / "out")
    assert spec == {"id": "int", "big": "int", "score": "float", "text": "utf8", "blob": "bytes",
                    "vector": "array", "tags": "utf8[]", "flag": "json", "meta": "json"}
    _assert_same_as_arrow(rows, table)
    with open_dataset(tmp_path / "out") as ds:
        assert ds.shards == 5 and ds.version == 1  # one per row group, listed by its manifest
        back = ds.to_arrow()
    assert sorted(os.listdir(tmp_path / "out" / "000000")) == ["big.ffr", "blob.ffr", "flag.ffr", "id.ffr",
                                                               "meta.ffr", "score.ffr", "spec.json",
                                                               "tags.ffr", "text.ffr", "vector.ffr"]
    assert back.column("text").to_pylist() == table.column("text").to_pylist()
    assert back.column("vector").to_pylist() == table.column("vector").to_pylist()


def test_corrupt_parquet_names_the_file(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(_table(), tmp_path / "t.parquet")
    data = (tmp_path / "t.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match=r"t\.parquet.*not a readable Parquet file"):
        convert("parquet", tmp_path / "t.parquet", tmp_path / "out")
    _assert_no_dataset(tmp_path / "out")


def test_hf_save_to_disk_round_trip(tmp_path):
    import datasets

    table = _table()
    features = datasets.Features.from_arrow_schema(table.schema)
    features["image"] = datasets.Image()
    rows = table.to_pylist()
    for k, row in enumerate(rows):
        row["image"] = {"bytes": _jpeg(k), "path": None}
    saved = datasets.Dataset.from_list(rows, features=features)
    saved.save_to_disk(str(tmp_path / "src"), num_shards=2)
    assert convert("hf", tmp_path / "src", tmp_path / "out") == N
    got, spec, _ = _read_all(tmp_path / "out")
    assert spec["image"] == "bytes"
    _assert_same_as_arrow(got, saved.data.table.cast(saved.features.arrow_schema))
    with open_dataset(tmp_path / "out", decoders={"jpg": bytes}) as ds:
        view = ds.to_hf()
    assert view[3]["text"] == rows[3]["text"] and len(view) == N


# ---- MosaicML Streaming, LitData, WebDataset ------------------------------------------

def _samples():
    return [{"label": k, "name": f"sample {k}", "vec": np.arange(k + 1, dtype=np.int16) * k,
             "score": k / 3, "raw": bytes([k]) * k, "img": _jpeg(k), "meta": {"k": k, "odd": k % 2 == 1}}
            for k in range(N)]


def test_mds_round_trip(tmp_path):
    from streaming import MDSWriter, StreamingDataset

    columns = {"label": "int", "name": "str", "vec": "ndarray", "score": "float32", "raw": "bytes",
               "img": "jpeg", "meta": "json", "small": "uint8"}
    with MDSWriter(out=str(tmp_path / "src"), columns=columns, size_limit=2000) as writer:
        for sample in _samples():
            writer.write({**sample, "img": Image.open(io.BytesIO(sample["img"])),
                          "score": np.float32(sample["score"]), "small": np.uint8(sample["label"])})
    assert convert("mds", tmp_path / "src", tmp_path / "out", workers=2) == N
    rows, spec, metadata = _read_all(tmp_path / "out")
    assert spec == {"label": "int", "name": "utf8", "vec": "array", "score": "float", "raw": "bytes",
                    "img": "jpg", "meta": "json", "small": "int"}
    assert metadata["encodings"]["score"] == "float32"
    theirs = StreamingDataset(local=str(tmp_path / "src"), shuffle=False, batch_size=1)
    for k, row in enumerate(rows):
        want = theirs[k]
        assert row["vec"].dtype == want["vec"].dtype and (row["vec"] == want["vec"]).all()
        assert row["img"][:3] == b"\xff\xd8\xff"  # the JPEG file as stored, not decoded
        assert (_pixels(row["img"]) == np.asarray(want["img"])).all()
        assert row["score"] == want["score"] and row["small"] == want["small"]
        for name in ("label", "name", "raw", "meta"):
            assert row[name] == want[name], name


def test_mds_index_that_lies_about_shard_sizes(tmp_path):
    from streaming import MDSWriter

    with MDSWriter(out=str(tmp_path / "src"), columns={"name": "str"}, size_limit=200) as writer:
        for k in range(N):
            writer.write({"name": f"name {k}"})
    index = json.loads((tmp_path / "src" / "index.json").read_text())
    shard = index["shards"][1]
    shard["raw_data"]["bytes"] += 10
    (tmp_path / "src" / "index.json").write_text(json.dumps(index))
    with pytest.raises(SourceError, match=rf"{shard['raw_data']['basename']}: index.json says"):
        convert("mds", tmp_path / "src", tmp_path / "out", workers=1)
    _assert_no_dataset(tmp_path / "out")


def test_mds_from_s3(tmp_path, bucket):
    from streaming import MDSWriter

    client, name, options = bucket
    with MDSWriter(out=str(tmp_path / "src"), columns={"name": "str", "n": "int"}, size_limit=300) as writer:
        for k in range(N):
            writer.write({"name": f"name {k}", "n": k})
    for file in (tmp_path / "src").iterdir():
        client.upload_file(str(file), name, f"mds/{file.name}")
    assert convert("mds", f"s3://{name}/mds/", tmp_path / "out", storage_options=options) == N
    rows, _, _ = _read_all(tmp_path / "out")
    assert rows == [{"name": f"name {k}", "n": k} for k in range(N)]
    with pytest.raises(ValueError, match="local sources only"):
        convert("parquet", f"s3://{name}/x.parquet", tmp_path / "out2")


def test_litdata_round_trip(tmp_path):
    from litdata.streaming.cache import Cache
    from litdata import StreamingDataset

    cache = Cache(str(tmp_path / "src"), chunk_size=10)
    for k, sample in enumerate(_samples()):
        sample.pop("meta")
        cache[k] = {**sample, "img": Image.open(io.BytesIO(sample["img"])),
                    "pixels": Image.new("L", (3, 2), k)}
    cache.done()
    cache.merge()
    assert convert("litdata", tmp_path / "src", tmp_path / "out") == N
    rows, spec, _ = _read_all(tmp_path / "out")
    assert spec == {"label": "int", "name": "utf8", "vec": "array", "score": "float", "raw": "bytes",
                    "img": "jpg", "pixels": "array"}
    theirs = StreamingDataset(str(tmp_path / "src"))
    for k, row in enumerate(rows):
        want = theirs[k]
        chw = np.asarray(want["img"])  # LitData decodes a JPEG to a channels-first tensor
        assert row["img"][:3] == b"\xff\xd8\xff" and (_pixels(row["img"]) == np.moveaxis(chw, 0, -1)).all()
        assert (row["pixels"] == np.asarray(want["pixels"])).all()
        assert row["vec"].dtype == np.int16 and (row["vec"] == np.asarray(want["vec"])).all()
        for name in ("label", "name", "score", "raw"):
            assert row[name] == want[name], name


def _write_webdataset(path, samples, per_shard=10):
    import webdataset as wds

    path.mkdir()
    with wds.ShardWriter(str(path / "shard-%04d.tar"), maxcount=per_shard, verbose=0) as sink:
        for k, sample in enumerate(samples):
            sink.write({"__key__": f"s{k:04d}", "jpg": sample["img"], "cls": sample["label"],
                        "txt": sample["name"], "json": sample["meta"], "npy": sample["vec"]})


def test_webdataset_round_trip(tmp_path):
    import webdataset as wds

    _write_webdataset(tmp_path / "src", _samples())
    assert convert("webdataset", tmp_path / "src", tmp_path / "out", workers=2) == N
    rows, spec, _ = _read_all(tmp_path / "out")
    assert spec == {"__key__": "utf8", "jpg": "jpg", "cls": "int", "txt": "utf8", "json": "json", "npy": "array"}
    tars = sorted(str(p) for p in (tmp_path / "src").glob("*.tar"))
    theirs = list(wds.WebDataset(tars, shardshuffle=False).decode())
    assert len(theirs) == len(rows)
    for row, want in zip(rows, theirs):
        assert row["__key__"] == want["__key__"] and row["cls"] == want["cls"]
        assert row["txt"] == want["txt"] and row["json"] == want["json"]
        assert row["npy"].dtype == want["npy"].dtype and (row["npy"] == want["npy"]).all()
    raw = list(wds.WebDataset(tars, shardshuffle=False))  # undecoded: the stored bytes
    assert [row["jpg"] for row in rows] == [sample["jpg"] for sample in raw]


def test_truncated_tar_names_the_file_and_sample(tmp_path):
    _write_webdataset(tmp_path / "src", _samples(), per_shard=N)
    tar = tmp_path / "src" / "shard-0000.tar"
    data = tar.read_bytes()
    tar.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(SourceError, match=r"shard-0000\.tar: record s\d{4}: damaged or truncated tar"):
        convert("webdataset", tmp_path / "src", tmp_path / "out")
    _assert_no_dataset(tmp_path / "out")


# ---- ArrayRecord -----------------------------------------------------------------------

def test_arrayrecord_round_trip(tmp_path):
    from array_record.python.array_record_module import ArrayRecordWriter

    records = [os.urandom(k) for k in range(N)]
    (tmp_path / "src").mkdir()
    for part in range(2):
        writer = ArrayRecordWriter(str(tmp_path / "src" / f"part-{part}.array_record"), "group_size:4")
        for record in records[part * 12:(part + 1) * 12]:
            writer.write(record)
        writer.close()
    assert convert("arrayrecord", tmp_path / "src", tmp_path / "out", workers=1) == N
    rows, spec, _ = _read_all(tmp_path / "out")
    assert spec == {"record": "bytes"} and [row["record"] for row in rows] == records


# ---- resuming, the command line --------------------------------------------------------

def test_failed_conversion_resumes_keeping_finished_units(tmp_path):
    import pyarrow.parquet as pq

    table = _table()
    (tmp_path / "src").mkdir()
    pq.write_table(table.slice(0, 12), tmp_path / "src" / "a.parquet")
    pq.write_table(table.slice(12), tmp_path / "src" / "b.parquet")
    good = (tmp_path / "src" / "b.parquet").read_bytes()
    # b's data pages damaged, its footer intact: the plan is made, then b's unit fails
    damaged = bytearray(good)
    damaged[8:200] = b"\xff" * 192
    (tmp_path / "src" / "b.parquet").write_bytes(bytes(damaged))
    with pytest.raises(SourceError, match=r"b\.parquet#row-group-0"):
        convert("parquet", tmp_path / "src", tmp_path / "out", workers=1)
    _assert_no_dataset(tmp_path / "out")
    staging = tmp_path / ".out.converting"
    finished = (staging / "000000" / "spec.json").stat().st_mtime_ns
    (tmp_path / "src" / "b.parquet").write_bytes(good)
    assert convert("parquet", tmp_path / "src", tmp_path / "out") == N
    assert not staging.exists()
    rows, _, _ = _read_all(tmp_path / "out")
    _assert_same_as_arrow(rows, table)
    assert (tmp_path / "out" / "000000" / "spec.json").stat().st_mtime_ns == finished


def test_cli_convert_exit_codes(tmp_path, capsys):
    import pyarrow.parquet as pq
    from ffrecord.cli import main

    pq.write_table(_table(), tmp_path / "t.parquet")
    convert_ = ["convert", "parquet"]
    assert main(convert_ + [str(tmp_path / "t.parquet"), str(tmp_path / "out"), "--progress"]) == 0
    done = capsys.readouterr()
    assert f"{N} datapoints" in done.out and "datapoint/s" in done.err
    assert main(convert_ + [str(tmp_path / "t.parquet"), str(tmp_path / "out")]) == 3
    assert "already exists" in capsys.readouterr().err
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 nonsense")
    assert main(convert_ + [str(tmp_path / "bad.parquet"), str(tmp_path / "out2")]) == 1
    assert "bad.parquet" in capsys.readouterr().err
