"""Tools around structured datasets: ``ffrecord info DIR`` and the Granular converter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ffrecord.cli import main
from ffrecord.dataset import DatasetReader, ShardedDatasetReader, ShardedDatasetWriter
from ffrecord.dataset.granular import from_granular

SPEC = {"label": "int", "frames": "bytes[]", "text": "utf8:zstd"}


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("info") / "sharded"
    with ShardedDatasetWriter(path, SPEC, shardlen=4) as writer:
        for k in range(10):
            writer.append({"label": k, "frames": [b"f" * 10] * k, "text": "word " * k})
    return path


def test_info_describes_fields(sharded: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["info", "--json", str(sharded), str(sharded / "000001")]) == 0
    whole, shard = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (whole["kind"], whole["shards"], whole["datapoints"]) == ("sharded", 3, 10)
    assert [(f["field"], f["type"], f["datapoints"]) for f in whole["fields"]] == [
        ("label", "int", 10), ("frames", "bytes[]", 10), ("text", "utf8:zstd", 10)]
    assert whole["fields"][1]["elements"] == sum(range(10))
    assert shard["fields"][1]["elements"] == sum(range(4, 8)) and shard["kind"] == "dataset"
    label_bytes = sum((s / "label.ffr").stat().st_size for s in sharded.iterdir() if s.name.isdigit())
    assert whole["fields"][0]["bytes"] == label_bytes and whole["fields"][2]["compression"] == "zstd"
    assert main(["info", str(sharded)]) == 0
    text = capsys.readouterr().out
    assert "3 shards" in text and "frames  bytes[]" in text and "45 elements" in text


def test_convert_from_granular(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    granular = pytest.importorskip("granular")
    spec = {"label": "int", "big": "i64", "name": "utf8", "blob": "bytes", "pixels": "array",
            "meta": "msgpack", "photo": "png"}
    image = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)

    def point(k: int) -> dict:
        return {"label": k * 10, "big": -(2**40) * k, "name": f"n{k}", "blob": bytes([k]) * k,
                "pixels": np.full((2, 3), k, np.float32), "meta": {"k": k}, "photo": image + k}

    with granular.ShardedDatasetWriter(tmp_path / "g", spec, granular.encoders, shardlen=3) as writer:
        for k in range(7):
            writer.append(point(k))
    assert main(["convert", "granular", str(tmp_path / "g"), str(tmp_path / "ours"),
                 "--compression", "zstd"]) == 0
    assert "wrote 7 datapoints" in capsys.readouterr().out
    with ShardedDatasetReader(tmp_path / "ours") as reader:
        assert reader.shards == 3 and reader.spec["pixels"] == "array:zstd" and reader.spec["label"] == "int"
        for k, got in enumerate(reader):
            want = point(k)
            assert {key: got[key] for key in ("label", "big", "name", "blob", "meta")} == {
                key: want[key] for key in ("label", "big", "name", "blob", "meta")}
            assert np.array_equal(got["pixels"], want["pixels"]) and np.array_equal(got["photo"], want["photo"])
    with granular.DatasetWriter(tmp_path / "single", {"v": "tree"}, granular.encoders) as writer:
        writer.append({"v": {"a": [1, 2]}})
    assert from_granular(tmp_path / "single", tmp_path / "tree") == 1
    with DatasetReader(tmp_path / "tree", {"tree": granular.decoders["tree"]}) as reader:
        assert reader[0] == {"v": {"a": [1, 2]}}


def test_structured_benchmark_runs(tmp_path: Path) -> None:
    """The benchmark's code paths on tiny data: it prints every figure (no timing asserted)."""
    pytest.importorskip("granular")
    import subprocess
    import sys

    from conftest import REPO

    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "structured.py"), "--mode", "smoke",
                          "--data-dir", str(tmp_path)], check=True, capture_output=True, text=True,
                         timeout=300).stdout
    for row in ("write images", "write frames", "random whole datapoints", "label only vs whole",
                "4 of 32 elements vs whole: bytes asked"):
        assert row in out
    assert "0.125x" in out  # 4 of 32 elements: the bytes asked are exact, not timed
    assert list(tmp_path.iterdir()) == []


def test_granular_conversion_keeps_sharding_and_names_a_bad_record(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    granular = pytest.importorskip("granular")
    from ffrecord.converters import SourceError

    with granular.ShardedDatasetWriter(tmp_path / "g", {"n": "u64"}, granular.encoders, shardlen=10) as writer:
        for k in range(3):
            writer.append({"n": k})
    assert main(["convert", "granular", str(tmp_path / "g"), str(tmp_path / "one"), "-v"]) == 0
    assert "wrote 3 datapoints" in capsys.readouterr().out
    with ShardedDatasetReader(tmp_path / "one") as reader:  # one shard, still sharded
        assert reader.shards == 1 and [d["n"] for d in reader] == [0, 1, 2]
    with granular.DatasetWriter(tmp_path / "big", {"n": "u64"}, granular.encoders) as writer:
        writer.append({"n": 1})
        writer.append({"n": 2**63})
    with pytest.raises(SourceError, match=r"record 1: field 'n' cannot be converted: OverflowError"):
        from_granular(tmp_path / "big", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cat_and_show_decode_the_same_fields(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from ffrecord.dataset import DatasetWriter

    with DatasetWriter(tmp_path / "d", {"arrays": "npz", "blob": "bytes"}) as writer:
        writer.append({"arrays": {"x": np.arange(3, dtype=np.int8)}, "blob": b"\x00\x01"})
    assert main(["cat", str(tmp_path / "d"), "0"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["arrays"] == {"x": {"array": "int8", "shape": [3], "values": [0, 1, 2]}}
    assert shown["blob"]["hex"] == "0001"
    assert main(["show", str(tmp_path / "d"), "0"]) == 0
    out = capsys.readouterr().out
    assert "arrays  x: array int8 (3,)  min 0  max 2" in out
