"""Fixed-size fields stored as column blocks: every type, shape and compression written
row by row and in batches reads back the same through every read path, at block boundaries;
damaged blocks name their field and datapoints; old datasets read as before."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileReader
from ffrecord.dataset import (CodecError, CorruptDatasetError, DatapointError, DatasetReader, DatasetWriter,
                              Mixture, ShardedDatasetReader, ShardedDatasetWriter, SpecError)
from ffrecord.dataset.spec import FIXED_TYPES, PLAIN_VERSION, VERSION
from range_server import RangeServer
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

BLOCK_BYTES = 48  # small blocks: a few values each, so every test crosses block boundaries
SHAPES = [(), (3,), (2, 2)]
COMPRESSIONS = [None, "lz4", "zstd"]


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def _values(kind: str, shape: tuple[int, ...], n: int, seed: int = 0) -> np.ndarray:
    """``n`` values of ``kind`` spanning its range (extremes included when there is room)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(FIXED_TYPES[kind])
    size = (n, *shape)
    if dtype.kind == "b":
        return rng.integers(0, 2, size).astype(bool)
    if dtype.kind == "f":
        values = (rng.standard_normal(size) * 1000).astype(dtype)
        if values.size > 2:
            values.reshape(-1)[:2] = [np.finfo(dtype).max, np.finfo(dtype).tiny]
        return values
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    if values.size > 2:
        values.reshape(-1)[:2] = [info.min, info.max]
    return values


def _type(kind: str, shape: tuple[int, ...], compression: str | None) -> str:
    return kind + (f"[{','.join(map(str, shape))}]" if shape else "") + (f":{compression}" if compression else "")


def _write(path: Path, columns: dict[str, np.ndarray], spec: dict[str, str], by_rows: bool, **options) -> None:
    n = len(next(iter(columns.values())))
    with DatasetWriter(path, spec, block_bytes=BLOCK_BYTES, **options) as writer:
        if by_rows:
            for k in range(n):
                writer.append({name: (v[k] if v.ndim > 1 else v[k].item()) for name, v in columns.items()})
        else:  # in three batches of uneven sizes, so that blocks are cut across batches
            for part in np.array_split(np.arange(n), 3):
                writer.append_batch({name: v[part] for name, v in columns.items()})


def _assert_reads(reader, columns: dict[str, np.ndarray]) -> None:
    """Every read path of ``reader`` gives ``columns``."""
    n = len(reader)
    assert n == len(next(iter(columns.values())))
    rng = np.random.default_rng(1)
    for name, want in columns.items():
        whole = reader[name]
        assert isinstance(whole, np.ndarray) and whole.dtype == want.dtype and whole.shape == want.shape
        np.testing.assert_array_equal(whole, want)
        for start in range(0, n + 1, 3):  # runs across every boundary
            for stop in range(start, min(n, start + 9) + 1):
                np.testing.assert_array_equal(reader.read_columns(range(start, stop), [name])[name], want[start:stop])
        idx = rng.integers(0, n, 40) if n else np.empty(0, np.int64)
        np.testing.assert_array_equal(reader.read_columns(idx, [name])[name], want[idx])
        rows = reader.read(idx, [name])
        for k, row in zip(idx.tolist(), rows):
            _assert_value(row[name], want[k])
        batches = list(reader.iter_batches(5, [name]))
        assert sum(len(b[name]) for b in batches) == n
        if n:
            np.testing.assert_array_equal(np.concatenate([b[name] for b in batches]), want)
    for k in ([0, n // 2, n - 1] if n else []):
        datapoint = reader[k]
        for name, want in columns.items():
            _assert_value(datapoint[name], want[k])
    if n:
        for row, k in zip(reader[max(0, n - 4):], range(max(0, n - 4), n)):  # a slice
            _assert_value(row[next(iter(columns))], columns[next(iter(columns))][k])


def _assert_value(got, want: np.ndarray) -> None:
    if want.ndim == 0:
        assert type(got) is type(want.item()) and got == want.item()
    else:
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("shape", SHAPES)
def test_every_type_round_trips(tmp_path: Path, shape: tuple[int, ...], compression: str | None) -> None:
    for k, kind in enumerate(FIXED_TYPES):
        per_block = max(1, BLOCK_BYTES // np.dtype((FIXED_TYPES[kind], shape)).itemsize)
        n = 2 * per_block + 1
        columns = {"v": _values(kind, shape, n, k)}
        path = tmp_path / kind
        _write(path, columns, {"v": _type(kind, shape, compression)}, by_rows=k % 2 == 0)
        spec = json.loads((path / "spec.json").read_text())
        assert spec["version"] == VERSION and spec["blocks"] == {"v": per_block}
        assert FileReader(path / "v.ffr").n == 3  # blocks, not datapoints
        with DatasetReader(path) as reader:
            _assert_reads(reader, columns)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_lengths_at_block_boundaries(tmp_path: Path, compression: str | None) -> None:
    per_block = BLOCK_BYTES // 4
    for n in (0, 1, per_block - 1, per_block, per_block + 1, 2 * per_block, 3 * per_block + 2):
        for by_rows in (True, False):
            columns = {"x": _values("float32", (), n), "e": _values("int16", (3,), n, 1),
                       "n": np.arange(n, dtype=np.int64)}
            path = tmp_path / f"{n}-{by_rows}"
            spec = {"x": _type("float32", (), compression), "e": _type("int16", (3,), compression), "n": "int"}
            _write(path, columns, spec, by_rows)
            with DatasetReader(path) as reader:
                _assert_reads(reader, columns)
            with DatasetReader(path, cache_keys=["x", "e"]) as held:
                _assert_reads(held, columns)


def test_shards_views_and_mixtures_read_columns(tmp_path: Path) -> None:
    n = 50
    columns = {"x": _values("uint16", (), n), "e": _values("float16", (2,), n, 1), "t": [f"t{k}" for k in range(n)]}
    with ShardedDatasetWriter(tmp_path / "s", {"x": "uint16", "e": "float16[2]", "t": "utf8"}, shardlen=7,
                              block_bytes=BLOCK_BYTES) as writer:
        assert writer.append_batch({**columns, "t": columns["t"][:20]} | {"x": columns["x"][:20], "e": columns["e"][:20]}) == range(20)
        for k in range(20, 23):
            writer.append({"x": int(columns["x"][k]), "e": columns["e"][k], "t": columns["t"][k]})
        writer.append_batch({"x": columns["x"][23:], "e": columns["e"][23:], "t": columns["t"][23:]})
    with ShardedDatasetReader(tmp_path / "s") as reader:
        assert reader.shards == 8
        _assert_reads(reader, {"x": columns["x"], "e": columns["e"]})
        assert reader["t"] == columns["t"]
        view = reader.where(lambda c: c["x"] % 2 == 0)
        expected = np.flatnonzero(columns["x"] % 2 == 0)
        np.testing.assert_array_equal(view.indices, expected)
        _assert_reads(view, {"x": columns["x"][expected], "e": columns["e"][expected]})
        table = view.to_arrow()
        assert table.column("x").to_pylist() == columns["x"][expected].tolist()
        assert table.column("e").to_pylist() == columns["e"][expected].tolist()
        mixed = Mixture([view, reader.where(~(np.asarray(reader["x"]) % 2 == 0))], weights=[0.5, 0.5], seed=0)
        got = mixed.read_columns(np.arange(len(mixed)), ["x"])["x"]
        assert np.array_equal(got, np.array([d["x"] for d in mixed.read(np.arange(len(mixed)), ["x"])], np.uint16))


def test_to_arrow_types_and_values(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    n = 30
    columns = {"b": _values("bool", (), n), "f": _values("float64", (2, 3), n), "s": _values("uint8", (32,), n)}
    _write(tmp_path / "d", columns, {"b": "bool", "f": "float64[2,3]", "s": "uint8[32]"}, by_rows=False)
    with DatasetReader(tmp_path / "d") as reader:
        table = reader.to_arrow()
        assert table.schema.field("b").type == pa.bool_()
        assert table.schema.field("f").type == pa.list_(pa.list_(pa.float64(), 3), 2)
        assert table.schema.field("s").type == pa.list_(pa.uint8(), 32)
        for name, want in columns.items():
            assert table.column(name).to_pylist() == want.tolist()
        batches = list(reader.iter_batches(8, ["s"], arrow=True))
        assert [b.num_rows for b in batches] == [8, 8, 8, 6]
        # and back: from_arrow's write path takes the table as it is
        with DatasetWriter(tmp_path / "again", {"b": "bool", "f": "float64[2,3]", "s": "uint8[32]"}) as writer:
            writer.append_batch(table)
        with DatasetReader(tmp_path / "again") as again:
            for name, want in columns.items():
                np.testing.assert_array_equal(again[name], want)


def _serve(path: Path) -> dict[str, bytes]:
    return {f"/ds/{p.relative_to(path)}": p.read_bytes() for p in path.rglob("*")
            if p.is_file() and not p.name.startswith(".")}


def test_remote_and_cached_reads(tmp_path: Path, bucket) -> None:  # noqa: F811 - a fixture
    n = 61
    columns = {"x": _values("int32", (), n), "e": _values("float32", (4,), n, 1)}
    for compression in COMPRESSIONS:
        path = tmp_path / f"d-{compression}"
        _write(path, columns, {"x": _type("int32", (), compression), "e": _type("float32", (4,), compression)},
               by_rows=False)
        with RangeServer(_serve(path)) as server:
            with DatasetReader(server.url + "/ds") as reader:  # small: held in memory after one read
                _assert_reads(reader, columns)
            with DatasetReader(server.url + "/ds", cache_dir=tmp_path / f"cache-{compression}") as cached:
                _assert_reads(cached, columns)
        client, name, options = bucket
        for file, data in _serve(path).items():
            client.put_object(Bucket=name, Key=f"{compression}{file}", Body=data)
        with DatasetReader(f"s3://{name}/{compression}/ds/", storage_options=options) as reader:
            _assert_reads(reader, columns)


def test_loader_with_worker_processes(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from ffrecord.torch import DataLoader, StructuredDataset

    n = 40
    columns = {"x": _values("int64", (), n), "e": _values("float32", (3,), n, 1)}
    _write(tmp_path / "d", columns, {"x": "int64", "e": "float32[3]:lz4"}, by_rows=False)
    for workers in (0, 2):
        loader = DataLoader(StructuredDataset(DatasetReader(tmp_path / "d")), batch_size=8, num_workers=workers)
        got = list(loader)
        assert len(got) == 5
        for k, batch in enumerate(got):
            assert torch.equal(torch.as_tensor(batch["x"]), torch.from_numpy(columns["x"][8 * k:8 * k + 8]))
            assert torch.equal(torch.as_tensor(np.stack(batch["e"]) if isinstance(batch["e"], list) else batch["e"]),
                               torch.from_numpy(columns["e"][8 * k:8 * k + 8]))


def test_a_damaged_block_names_its_field_and_datapoints(tmp_path: Path) -> None:
    n = 40
    columns = {"x": np.arange(n, dtype=np.int64), "y": np.arange(n, dtype=np.int64)}
    _write(tmp_path / "d", columns, {"x": "int64", "y": "int64"}, by_rows=False)
    file = tmp_path / "d" / "x.ffr"
    header = 12 + 12 * FileReader(file).n
    flip_byte(file, header + 6 * 8 + 2)  # in block 1: datapoints 6 to 11
    with DatasetReader(tmp_path / "d") as reader:
        for read in (lambda: reader[7], lambda: reader["x"], lambda: reader.read([0, 11]),
                     lambda: reader.read_columns(range(5, 7)), lambda: list(reader.iter_batches(4))):
            with pytest.raises(CorruptDatasetError, match=r"field 'x' \(int64\).*column block 1: values 6 to 11"):
                read()
        assert reader.read([0, 5, 12, 39], ["x"]) == [{"x": 0}, {"x": 5}, {"x": 12}, {"x": 39}]
        np.testing.assert_array_equal(reader["y"], columns["y"])
    with DatasetReader(tmp_path / "d", check_data=False) as unchecked:
        assert len(unchecked["x"]) == n


def test_a_column_file_of_the_wrong_size_is_corrupt(tmp_path: Path) -> None:
    _write(tmp_path / "d", {"x": np.arange(20, dtype=np.int16)}, {"x": "int16"}, by_rows=False)
    spec = json.loads((tmp_path / "d" / "spec.json").read_text())
    (tmp_path / "d" / "spec.json").write_text(json.dumps({**spec, "length": 40}))
    with pytest.raises(CorruptDatasetError, match="holds 1 blocks; spec.json says 40 datapoints, 24 to a block"):
        DatasetReader(tmp_path / "d")
    for blocks, what in (({"x": 0}, "bad values per block 0"), ({"q": 3}, "names 'q'"), ([1], '"blocks" is not')):
        (tmp_path / "d" / "spec.json").write_text(json.dumps({**spec, "blocks": blocks}))
        with pytest.raises(CorruptDatasetError, match=what):
            DatasetReader(tmp_path / "d")
    (tmp_path / "d" / "spec.json").write_text(json.dumps({**spec, "blocks": {"x": 7}}))
    with pytest.raises(CorruptDatasetError, match="field 'x'"):  # 3 blocks of 7 != the file's 1
        DatasetReader(tmp_path / "d")


def test_bad_batches_write_nothing(tmp_path: Path) -> None:
    spec = {"x": "int8", "e": "float32[2]", "t": "utf8", "n": "int"}
    good = {"x": np.arange(4), "e": np.zeros((4, 2)), "t": ["a", "b", "c", "d"], "n": [1, 2, 3, 4]}
    cases = [
        ({**good, "x": np.array([1, 2, 300, 4])}, CodecError, r"datapoint 4, field 'x' \(int8\): a value does not fit"),
        ({**good, "x": np.array([1.5, 2, 3, 4])}, CodecError, "an integer field takes integers"),
        ({**good, "e": np.zeros((4, 3))}, CodecError, r"values of shape \(4, 3\), need \(4, 2\)"),
        ({**good, "t": ["a", "b", 3, "d"]}, CodecError, r"datapoint 4, field 't'"),
        ({**good, "n": [1, 2, 2**64, 4]}, CodecError, "field 'n'"),
        ({k: v for k, v in good.items() if k != "t"}, DatapointError, "lacks field 't'"),
        ({**good, "z": [1, 2, 3, 4]}, DatapointError, "has field 'z'"),
        ({**good, "n": [1, 2, 3]}, DatapointError, "differ in length"),
        ([1, 2], DatapointError, "takes a dict"),
    ]
    with DatasetWriter(tmp_path / "d", spec, block_bytes=BLOCK_BYTES) as writer:
        writer.append_batch({k: v[:2] for k, v in good.items()})
        for batch, error, match in cases:
            with pytest.raises(error, match=match):
                writer.append_batch(batch)
            assert len(writer) == 2
        assert writer.append_batch(good) == range(2, 6)
    with DatasetReader(tmp_path / "d") as reader:
        assert reader["x"].tolist() == [0, 1, 0, 1, 2, 3] and reader["t"] == ["a", "b", "a", "b", "c", "d"]
    pa = pytest.importorskip("pyarrow")
    with DatasetWriter(tmp_path / "nulls", {"t": "utf8", "x": "int8"}) as writer:
        with pytest.raises(DatapointError, match="datapoint 1, field 't'"):
            writer.append_batch({"t": pa.array(["a", None]), "x": [1, 2]})
        with pytest.raises(CodecError, match="1 values are null"):
            writer.append_batch({"t": pa.array(["a", "b"]), "x": pa.array([1, None])})
        writer.append_batch({"t": pa.chunked_array([["a"], ["bé"]]), "x": pa.array([1, 2], pa.int8())})
    with DatasetReader(tmp_path / "nulls") as reader:
        assert reader[1] == {"t": "bé", "x": 2}


def test_values_one_at_a_time_are_checked(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "d", {"b": "bool", "u": "uint8", "e": "float32[2]"}) as writer:
        for bad, match in (({"b": 1, "u": 0, "e": [0, 0]}, "must be a bool"),
                           ({"b": True, "u": 256, "e": [0, 0]}, "does not fit in uint8"),
                           ({"b": True, "u": True, "e": [0, 0]}, "not bool"),
                           ({"b": True, "u": 1, "e": [0, 0, 0]}, "need")):
            with pytest.raises(CodecError, match=match):
                writer.append(bad)
        writer.append({"b": np.True_, "u": np.uint8(7), "e": np.array([1.5, 2])})
    with DatasetReader(tmp_path / "d") as reader:
        d = reader[0]
        assert d["b"] is True and d["u"] == 7 and d["e"].tolist() == [1.5, 2.0]


@pytest.mark.parametrize("text, match", [
    ("float32[0]", "at least 1"), ("utf8[4]", "needs a fixed-size type"), ("float32[4,]", "not a type string"),
    ("uint8[99999,99999]", "at most"), ("int[3]", "needs a fixed-size type")])
def test_bad_shapes(text: str, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        DatasetWriter.__new__(DatasetWriter).__init__("/nonexistent/never", {"v": text})


def test_sequences_of_fixed_types_and_user_codecs_stay_per_sample(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "d", {"s": "int16[]", "a": "int8[2][]", "u": "float32"},
                       encoders={"float32": lambda v: np.float64(v).tobytes()}) as writer:
        writer.append({"s": [1, -2], "a": [np.array([1, 2])], "u": 0.5})
        writer.append_batch({"s": [[3]], "a": [[]], "u": [1.5]})
    spec = json.loads((tmp_path / "d" / "spec.json").read_text())
    assert spec["version"] == PLAIN_VERSION and "blocks" not in spec  # no column: old readers read it
    decode = {"float32": lambda view: float(np.frombuffer(view, np.float64)[0])}
    with DatasetReader(tmp_path / "d", decoders=decode) as reader:
        first, second = reader.read([0, 1])
        assert first["s"] == [1, -2] and first["a"][0].tolist() == [1, 2] and first["u"] == 0.5
        assert second == {"s": [3], "a": [], "u": 1.5}
        assert reader[1, {"s": range(0, 1)}] == {"s": [3]}


def test_old_datasets_read_unchanged(tmp_path: Path) -> None:
    """A dataset written by the code before columns (tests/data/v1_dataset, written by main's
    writer) reads as it did: lists of datapoints, and whole number columns as arrays of the
    same values."""
    source = Path(__file__).parent / "data" / "v1_dataset"
    shutil.copytree(source, tmp_path / "d")
    expected = json.loads((source / "expected.json").read_text())
    with DatasetReader(tmp_path / "d") as reader:
        assert json.loads((tmp_path / "d" / "spec.json").read_text())["version"] == 1
        rows = reader.read(np.arange(len(reader)))
        assert [{k: (v.hex() if isinstance(v, bytes) else v) for k, v in row.items()} for row in rows] == expected
        assert reader["label"].tolist() == [row["label"] for row in expected]
        assert reader["score"].tolist() == [row["score"] for row in expected]
        assert reader.to_arrow().column("text").to_pylist() == [row["text"] for row in expected]


def test_where_checks_its_condition(tmp_path: Path) -> None:
    _write(tmp_path / "d", {"x": np.arange(10, dtype=np.int32)}, {"x": "int32"}, by_rows=False)
    with DatasetReader(tmp_path / "d") as reader:
        assert reader.where(np.arange(10) > 6).indices.tolist() == [7, 8, 9]
        assert reader.where(lambda c: c["x"] < 2)[1] == {"x": 1}
        for bad in (np.arange(10), np.ones(9, bool), lambda c: c["x"]):
            with pytest.raises(ValueError, match="boolean array of the dataset's length"):
                reader.where(bad)


def test_bulk_writes_match_rows(tmp_path: Path) -> None:
    """append_batch stores every field byte for byte as append does, for every codec."""
    spec = {"i": "int", "f": "float", "b": "bytes", "t": "utf8:zstd", "j": "json", "seq": "bytes[]:lz4", "a": "array"}
    rows = [{"i": k - 3, "f": k / 3, "b": bytes([k]) * k, "t": "é" * k, "j": {"k": k}, "seq": [b"x"] * k,
             "a": np.arange(k, dtype=np.uint16)} for k in range(7)]
    with DatasetWriter(tmp_path / "rows", spec) as writer:
        for row in rows:
            writer.append(row)
    with DatasetWriter(tmp_path / "batch", spec) as writer:
        writer.append_batch({name: [row[name] for row in rows[:3]] for name in spec})
        writer.append_batch({name: (np.array([row[name] for row in rows[3:]]) if name in "if" else
                                    [row[name] for row in rows[3:]]) for name in spec})
    for name in spec:
        assert (tmp_path / "rows" / f"{name}.ffr").read_bytes() == (tmp_path / "batch" / f"{name}.ffr").read_bytes()


def test_sharded_batches_cut_at_shard_ends(tmp_path: Path) -> None:
    with ShardedDatasetWriter(tmp_path / "s", {"x": "int32", "t": "utf8"}, shardlen=4, length=10) as writer:
        assert writer.append_batch({"x": np.arange(6), "t": [str(k) for k in range(6)]}) == range(6)
        assert writer.append_batch({"x": np.arange(6, 10), "t": [str(k) for k in range(6, 10)]}) == range(6, 10)
        with pytest.raises(ValueError, match="more datapoints than length"):
            writer.append_batch({"x": [1], "t": ["1"]})
    assert sorted(os.listdir(tmp_path / "s")) == ["000000", "000001", "000002", "_manifest"]
    with ShardedDatasetReader(tmp_path / "s") as reader:
        assert reader["x"].tolist() == list(range(10)) and reader["t"] == [str(k) for k in range(10)]


def test_from_arrow_and_the_arrow_converters(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from ffrecord.converters._base import SourceError, run
    from ffrecord.converters.arrow import ParquetSource
    from ffrecord.dataset import from_arrow

    n = 30
    table = pa.table({"b": pa.array(np.arange(n) % 2 == 0), "u": pa.array(np.arange(n), pa.uint16()),
                      "e": pa.array(_values("float32", (2,), n).tolist(), pa.list_(pa.float32(), 2)),
                      "t": [f"t{k}" for k in range(n)], "raw": pa.array([bytes([k]) * 3 for k in range(n)], pa.binary(3)),
                      "v": pa.array([list(range(k % 4)) for k in range(n)], pa.list_(pa.int64())),
                      "j": pa.array([{"k": k} for k in range(n)])})
    assert from_arrow(table, tmp_path / "t") == n
    assert from_arrow(table.to_batches(max_chunksize=7), tmp_path / "b") == n
    for path in (tmp_path / "t", tmp_path / "b"):
        with DatasetReader(path) as reader:
            assert reader.spec == {"b": "bool", "u": "uint16", "e": "float32[2]", "t": "utf8", "raw": "bytes",
                                   "v": "array", "j": "json"}
            assert reader.to_arrow().drop_columns(["v", "raw"]).equals(table.drop_columns(["v", "raw"]))
            assert [x.tolist() for x in reader["v"]] == table.column("v").to_pylist()
            assert reader["raw"] == table.column("raw").to_pylist()
    # the Parquet converter writes each record batch by one append_batch, errors naming the record
    pq.write_table(table.select(["u", "t"]), tmp_path / "ok.parquet")
    assert run(ParquetSource(tmp_path / "ok.parquet"), tmp_path / "ok") == n
    with DatasetReader(tmp_path / "ok") as reader:
        assert reader["u"].tolist() == list(range(n)) and reader["t"] == table.column("t").to_pylist()
    for k, column in enumerate([pa.array([1, None, 3], pa.int64()), pa.array([1, 2**63, 3], pa.uint64())]):
        pq.write_table(pa.table({"a": column}), tmp_path / f"bad{k}.parquet")
        with pytest.raises(SourceError, match=f"bad{k}.parquet#row-group-0: record 1: "):
            run(ParquetSource(tmp_path / f"bad{k}.parquet"), tmp_path / f"bad{k}")


def test_token_write_many_matches_append(tmp_path: Path) -> None:
    from ffrecord.tokens import TokenBlocks, TokenWriter
    from ffrecord.tokens.errors import EmptyDocumentError, TokenizerError, TokenRangeError

    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 1000, int(rng.integers(1, 50))) for _ in range(40)]
    with TokenWriter(tmp_path / "one", 1000, spec={"src": "utf8"}) as writer:
        for k, doc in enumerate(docs):
            writer.append(doc, src=f"s{k}")
    with TokenWriter(tmp_path / "many", 1000, spec={"src": "utf8"}) as writer:
        assert writer.write_many(docs[:25], src=[f"s{k}" for k in range(25)]) == range(25)
        flat = np.concatenate(docs[25:])
        assert writer.write_many(tokens=flat, lengths=[len(d) for d in docs[25:]],
                                 src=[f"s{k}" for k in range(25, 40)]) == range(25, 40)
        for bad, error, match in (
                (dict(docs=[[1, 2], []]), EmptyDocumentError, "document 41 has no tokens"),
                (dict(docs=[[1, 2], [3, 1000]]), TokenRangeError, "document 41: token id 1000 at position 1"),
                (dict(docs=[[1.5]]), TokenizerError, "document 40"),
                (dict(tokens=[1, 2, 3], lengths=[1, 1]), TokenizerError, "lengths add up to 2"),
                (dict(docs=[[1]], tokens=[1]), ValueError, "not both")):
            with pytest.raises(error, match=match):
                writer.write_many(**bad, src=["x"] * len(bad.get("docs", bad.get("lengths", [1]))))
        assert len(writer) == 40 and writer.tokens == sum(map(len, docs))
    for name in ("tokens.ffr", "src.ffr", "tokens.index"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes(), name
    blocks = TokenBlocks(tmp_path / "many", block_size=16)
    assert blocks.read([0])[0].tolist() == np.concatenate(docs)[:17].tolist()


def test_tools_show_column_fields(tmp_path: Path) -> None:
    from ffrecord.cli import main
    from ffrecord.dataset.display import field_sizes

    _write(tmp_path / "d", {"x": np.arange(30, dtype=np.int16), "e": _values("float32", (2,), 30)},
           {"x": "int16", "e": "float32[2]"}, by_rows=False)
    with DatasetReader(tmp_path / "d") as reader:
        assert field_sizes(reader, "x").tolist() == [2] * 30 and field_sizes(reader, "e").tolist() == [8] * 30
        frame = reader.to_pandas()
        assert frame["x"].tolist() == list(range(30)) and len(frame["e"][3]) == 2
    assert main(["show", str(tmp_path / "d"), "29", "--field", "x", "--out", str(tmp_path / "v")]) == 0
    assert (tmp_path / "v").read_bytes() == np.int16(29).tobytes()
    assert main(["cat", str(tmp_path / "d"), "3:5", "--field", "e", "--out", str(tmp_path / "c")]) == 0
    assert (tmp_path / "c").read_bytes() == _values("float32", (2,), 30)[3:5].tobytes()


def test_verify_checks_column_blocks(tmp_path: Path) -> None:
    from ffrecord.dataset.check import survey

    _write(tmp_path / "d", {"x": np.arange(30, dtype=np.int32)}, {"x": "int32"}, by_rows=False)
    assert survey(tmp_path / "d").problems == []
    spec = json.loads((tmp_path / "d" / "spec.json").read_text())
    (tmp_path / "d" / "spec.json").write_text(json.dumps({**spec, "length": 29}))  # the last block a value short
    assert survey(tmp_path / "d").problems == [
        f"{tmp_path / 'd' / 'x.ffr'}: field 'x': column block 2 (datapoints 24 to 28) holds 24 bytes, not 20"]
    (tmp_path / "d" / "spec.json").write_text(json.dumps({**spec, "length": 60}))
    assert "holds 3 blocks; spec.json says 60 datapoints, 12 to a block" in survey(tmp_path / "d").problems[0]
