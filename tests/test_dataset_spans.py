"""Runs of datapoints of ``bytes`` and ``utf8`` fields read as spans (one native call per
field file, data and offsets straight into Arrow's layout): every whole-range read path
gives back what was written, at empty values and boundary sizes, across shards, with each
compression, checks on and off, local, remote and cached; a damaged sample is reported as
a batch read reports it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from ffrecord import FileReader
from ffrecord.dataset import DatasetReader, DatasetWriter, ShardedDatasetReader, ShardedDatasetWriter
from ffrecord.errors import CorruptFileError
from range_server import RangeServer

COMPRESSIONS = [None, "lz4", "zstd"]
SIZES = [0, 1, 31, 32, 33, 4095, 4096, 4097, 70_000]  # empty, around words, pages, a large value


def _values(n: int, seed: int, min_size: int = 0) -> tuple[list[bytes], list[str]]:
    """``n`` byte strings (every size in ``SIZES`` among them, then random ones, half of
    them compressible) and as many texts (multi-byte characters included)."""
    rng = np.random.default_rng(seed)
    sizes = [max(min_size, s) for s in SIZES] + rng.integers(min_size, 300, max(0, n - len(SIZES))).tolist()
    data = [rng.integers(0, 256, s, dtype=np.uint8).tobytes() if k % 2 else b"ab" * (s // 2) + b"c" * (s % 2)
            for k, s in enumerate(sizes[:n])]
    texts = ["".join("aé€😀"[j % 4] for j in range(int(rng.integers(0, 40)))) for _ in range(n)]
    return data, texts


def _spec(compression: str | None) -> dict[str, str]:
    suffix = f":{compression}" if compression else ""
    return {"b": "bytes" + suffix, "t": "utf8" + suffix, "i": "int64"}


def _write(path: Path, data: list[bytes], texts: list[str], compression: str | None) -> None:
    with DatasetWriter(path, _spec(compression), durable=False) as writer:
        half = len(data) // 2  # one batch, then row by row
        writer.append_batch({"b": data[:half], "t": texts[:half], "i": np.arange(half)})
        for k in range(half, len(data)):
            writer.append({"b": data[k], "t": texts[k], "i": k})


def _assert_runs(reader, data: list[bytes], texts: list[str]) -> None:
    """Every whole-range read path of ``reader`` gives ``data`` and ``texts``."""
    n = len(data)
    assert reader["b"] == data and reader["t"] == texts
    assert all(type(v) is bytes for v in reader["b"]) and all(type(v) is str for v in reader["t"])
    table = reader.to_arrow()
    assert table.column("b").to_pylist() == data and table.column("t").to_pylist() == texts
    assert table.schema.field("b").type == pa.binary() and table.schema.field("t").type == pa.string()
    for size in (1, 7, 16, 17, 64, n + 1):
        batches = list(reader.iter_batches(size, ["b", "t"]))
        assert sum((b["b"] for b in batches), []) == data and sum((b["t"] for b in batches), []) == texts
        arrow = list(reader.iter_batches(size, ["t", "b"], arrow=True))
        assert pa.Table.from_batches(arrow).to_pydict() == {"t": texts, "b": data}
    for start in range(0, n + 1, 5):
        for stop in (start, start + 1, start + 16, start + 40, n):
            stop = min(stop, n)
            got = reader.read_columns(range(start, stop), ["b", "t"])
            assert got == {"b": data[start:stop], "t": texts[start:stop]}
            assert [row["b"] for row in reader.read(range(start, stop), ["b"])] == data[start:stop]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_runs_read_back_what_was_written(tmp_path: Path, compression: str | None) -> None:
    data, texts = _values(60, 1)
    _write(tmp_path / "d", data, texts, compression)
    for check in (True, False):
        with DatasetReader(tmp_path / "d", check_data=check) as reader:
            _assert_runs(reader, data, texts)
    with FileReader(tmp_path / "d" / "b.ffr") as file:
        for start, stop in [(0, 60), (0, 0), (60, 60), (3, 9), (8, 9), (59, 60)]:
            buf, offsets = file.read_span(start, stop)
            want_buf, want_offsets = file.read_batch(range(start, stop))
            assert buf.tobytes() == want_buf.tobytes() and offsets.tolist() == want_offsets.tolist()
        for start, stop in [(-1, 2), (3, 2), (0, 61), (61, 61)]:
            with pytest.raises(IndexError, match=rf"samples \[{start}, {stop}\)"):
                file.read_span(start, stop)
        with pytest.raises(TypeError):
            file.read_span(0.5, 3)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_runs_across_shards(tmp_path: Path, compression: str | None) -> None:
    data, texts = _values(45, 2)
    with ShardedDatasetWriter(tmp_path / "s", _spec(compression), shardlen=16, length=45) as writer:
        writer.append_batch({"b": data[:20], "t": texts[:20], "i": np.arange(20)})
        writer.append_batch({"b": data[20:], "t": texts[20:], "i": np.arange(20, 45)})
    with ShardedDatasetReader(tmp_path / "s") as reader:
        _assert_runs(reader, data, texts)
        assert reader.read_columns(range(10, 40), ["b"])["b"] == data[10:40]  # three shards


def _serve(path: Path) -> dict[str, bytes]:
    return {f"/ds/{p.relative_to(path)}": p.read_bytes() for p in path.rglob("*")
            if p.is_file() and not p.name.startswith(".")}


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_remote_and_cached_runs(tmp_path: Path, compression: str | None) -> None:
    data, texts = _values(40, 3, min_size=200)  # large values: fields read, not held in memory
    _write(tmp_path / "d", data, texts, compression)
    with RangeServer(_serve(tmp_path / "d")) as server:
        with DatasetReader(server.url + "/ds") as reader:
            assert "b" not in reader._held
            _assert_runs(reader, data, texts)
        with DatasetReader(server.url + "/ds", cache_dir=tmp_path / "cache") as cached:
            _assert_runs(cached, data, texts)
        with FileReader(server.url + "/ds/b.ffr") as remote, FileReader(tmp_path / "d" / "b.ffr") as local:
            for start, stop in [(0, 40), (5, 31)]:
                got, want = remote.read_span(start, stop), local.read_span(start, stop)
                assert got[0].tobytes() == want[0].tobytes() and got[1].tolist() == want[1].tolist()


def test_a_damaged_sample_is_reported_as_a_batch_reports_it(tmp_path: Path) -> None:
    data = [bytes([k]) * 30 for k in range(50)]
    _write(tmp_path / "d", data, [str(k) for k in range(50)], None)
    file = tmp_path / "d" / "b.ffr"
    header = 12 + 12 * 50
    with open(file, "r+b") as f:  # one byte of datapoint 37's value
        f.seek(header + 37 * 30 + 5)
        f.write(b"\xff")
    with DatasetReader(tmp_path / "d") as reader:
        with pytest.raises(CorruptFileError) as batch:
            reader.read([0, 37], ["b"])
        message = str(batch.value)
        assert "b.ffr: sample 37:" in message
        for read in (lambda: reader["b"], lambda: reader.to_arrow(), lambda: reader.read_columns(range(30, 40)),
                     lambda: list(reader.iter_batches(16, ["b"], arrow=True)), lambda: reader.read(range(20, 50))):
            with pytest.raises(CorruptFileError) as spanned:
                read()
            assert str(spanned.value) == message
        assert reader.read_columns(range(0, 37), ["b"])["b"] == data[:37]
        assert reader.read_columns(range(38, 50), ["b"])["b"] == data[38:]
        assert reader["t"] == [str(k) for k in range(50)]
    with DatasetReader(tmp_path / "d", check_data=False) as unchecked:
        values = unchecked["b"]
        assert values[37] != data[37] and values[:37] == data[:37] and values[38:] == data[38:]
