"""Parquet (and Hugging Face) columns the type table sends to ``json``: temporal, decimal and
duration values become exact text, at any depth, that reads back to the very values pyarrow
reads; nulls a field cannot hold and names that appear twice are errors naming the file,
column and row."""

from __future__ import annotations

import datetime
import decimal
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ffrecord.converters import SourceError, convert
from ffrecord.dataset import open_dataset

TEMPORAL = {
    "ts_s": pa.array([0, 1700000000, -86401, None], pa.timestamp("s")),
    "ts_ms": pa.array([0, 1700000000123, -1, 5], pa.timestamp("ms")),
    "ts_us_offset": pa.array([0, 1700000000123456, 5, -7], pa.timestamp("us", tz="+05:30")),
    "ts_ns_zone": pa.array([0, 1700000000123456789, -1, 10**18], pa.timestamp("ns", tz="Europe/Paris")),
    "date32": pa.array([0, 19000, -1, None], pa.date32()),
    "date64": pa.array([0, 86400000 * 19000, -86400000, 86400000], pa.date64()),
    "time32": pa.array([0, 3723, 86399, None], pa.time32("s")),
    "time64_ns": pa.array([0, 3723123456789, 1, 86399999999999], pa.time64("ns")),
    "decimal": pa.array([decimal.Decimal(x) for x in ("12.340", "-0.001", "99999999.999", "0.000")],
                        pa.decimal128(11, 3)),
    "decimal256": pa.array([decimal.Decimal(10**39), decimal.Decimal(-2), None, decimal.Decimal(0)],
                           pa.decimal256(40, 0)),
    "duration_s": pa.array([0, 90, -3, None], pa.duration("s")),
    "duration_ms": pa.array([1500, -1, 0, 86400000], pa.duration("ms")),
    "duration_us": pa.array([1, -1000001, 2**40, 0], pa.duration("us")),
    "duration_ns": pa.array([1500, -3, 10**18 + 1, 0], pa.duration("ns")),
}
_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _count_of_time(text, unit):
    """A time of day's text (``HH:MM:SS[.fraction]``) as a count of ``unit``s since midnight."""
    hours, minutes, seconds = text.split(":")
    whole, _, fraction = seconds.partition(".")
    count = (int(hours) * 60 + int(minutes)) * 60 + int(whole)
    return count * 10**_DIGITS[unit] + int((fraction or "0").ljust(_DIGITS[unit], "0") or 0)


def _count_of_duration(text, unit):
    """ISO 8601 ``[-]PT<seconds>[.fraction]S`` as a count of ``unit``s."""
    match = re.fullmatch(r"(-?)PT(\d+)(?:\.(\d+))?S", text)
    assert match, text
    count = int(match[2]) * 10**_DIGITS[unit] + int((match[3] or "").ljust(_DIGITS[unit], "0") or 0)
    return -count if match[1] else count


def _back(texts, arrow_type):
    """Our texts as the Arrow values they stand for."""
    if pa.types.is_time(arrow_type):
        return pa.array([None if t is None else _count_of_time(t, arrow_type.unit) for t in texts], arrow_type)
    if pa.types.is_duration(arrow_type):
        return pa.array([None if t is None else _count_of_duration(t, arrow_type.unit) for t in texts], arrow_type)
    return pa.array(texts, pa.string()).cast(arrow_type)


def _nested():
    return pa.array([{"at": datetime.datetime(2024, 1, 2, 3, 4, 5, 6), "days": [datetime.date(2020, 1, k + 1)],
                      "took": datetime.timedelta(seconds=k, microseconds=500), "price": decimal.Decimal(f"{k}.50"),
                      "by": {"when": datetime.time(1, 2, k)}}
                     for k in range(4)])


def test_temporal_decimal_and_duration_columns_convert_to_exact_text_and_back(tmp_path):
    table = pa.table({**TEMPORAL, "nested": _nested(), "n": list(range(4))})
    pq.write_table(table, tmp_path / "t.parquet")
    theirs = pq.read_table(tmp_path / "t.parquet")  # the types as Parquet keeps them
    assert convert("parquet", tmp_path / "t.parquet", tmp_path / "out") == 4
    with open_dataset(tmp_path / "out") as ds:
        assert all(ds.spec[name] == "json" for name in [*TEMPORAL, "nested"]) and ds.spec["n"] == "int"
        rows = list(ds)
    for name in TEMPORAL:
        texts = [row[name] for row in rows]
        assert all(t is None or isinstance(t, str) for t in texts), (name, texts)
        assert _back(texts, theirs.column(name).type).equals(theirs.column(name).combine_chunks()), name
    assert rows[1]["ts_ns_zone"] == "2023-11-14 23:13:20.123456789+0100"
    assert rows[0]["decimal"] == "12.340" and rows[1]["duration_ns"] == "-PT0.000000003S"
    assert [row["nested"] for row in rows][1] == {
        "at": "2024-01-02 03:04:05.000006", "days": ["2020-01-02"], "took": "PT1.0005S", "price": "1.50",
        "by": {"when": "01:02:01.000000"}}


def test_hf_temporal_columns_convert_the_same(tmp_path):
    import datasets

    table = pa.table({"at": TEMPORAL["ts_ms"], "day": TEMPORAL["date32"], "took": TEMPORAL["duration_us"]})
    datasets.Dataset(datasets.table.InMemoryTable(table)).save_to_disk(str(tmp_path / "src"))
    assert convert("hf", tmp_path / "src", tmp_path / "out") == 4
    with open_dataset(tmp_path / "out") as ds:
        rows = list(ds)
    for name in table.column_names:
        assert _back([row[name] for row in rows], table.column(name).type).equals(table.column(name).combine_chunks())


@pytest.mark.parametrize("column, kind", [
    (pa.array([[1, 2], [3, None, 5], []], pa.list_(pa.int64())), "array"),
    (pa.array([[1.5], [], [None]], pa.large_list(pa.float32())), "array"),
    (pa.array([[1, 2], [None, 5], [6, 7]], pa.list_(pa.int16(), 2)), "array"),
    (pa.array([["a"], ["b", None], []], pa.list_(pa.string())), "utf8[]"),
    (pa.array([[b"a"], [], [None]], pa.list_(pa.binary())), "bytes[]"),
])
def test_a_null_inside_a_list_names_the_column_and_row(tmp_path, column, kind):
    pq.write_table(pa.table({"ok": [1, 2, 3], "values": column}), tmp_path / "t.parquet")
    row = next(k for k, value in enumerate(column.to_pylist()) if value is not None and None in value)
    with pytest.raises(SourceError, match=rf"t\.parquet#row-group-0: record {row}: column 'values' holds a null "
                                          rf"inside its list, which a '{re.escape(kind)}' field cannot hold"):
        convert("parquet", tmp_path / "t.parquet", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_nulls_inside_lists_of_a_json_column_are_kept(tmp_path):
    values = [[[1, None]], None, [[None], []]]
    pq.write_table(pa.table({"deep": pa.array(values, pa.list_(pa.list_(pa.int64())))}), tmp_path / "t.parquet")
    assert convert("parquet", tmp_path / "t.parquet", tmp_path / "out") == 3
    with open_dataset(tmp_path / "out") as ds:
        assert [row["deep"] for row in ds] == values


@pytest.mark.parametrize("table, message", [
    (pa.table([pa.array([1]), pa.array([2])], names=["x", "x"]), r"column 'x' appears twice"),
    (pa.table({"s": pa.array([{"a": 1, "b": 2}])}).cast(
        pa.schema([("s", pa.struct([("a", pa.int64()), ("a", pa.int64())]))])), r"s field '\.a' appears twice"),
    (pa.table({"s": pa.array([{"raw": b"\x00\xff", "n": 1}])}), r"column 's\.raw' holds binary data"),
])
def test_names_twice_and_binary_inside_json_are_named(tmp_path, table, message):
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(SourceError, match=rf"t\.parquet: {message}"):
        convert("parquet", tmp_path / "t.parquet", tmp_path / "out")


def test_dictionary_columns_take_their_values_type(tmp_path):
    table = pa.table({"label": pa.array(["cat", "dog", "cat"]).dictionary_encode(),
                      "n": pa.array([1, 2, 1]).dictionary_encode()})
    pq.write_table(table, tmp_path / "t.parquet")
    assert convert("parquet", tmp_path / "t.parquet", tmp_path / "out") == 3
    with open_dataset(tmp_path / "out") as ds:
        assert ds.spec == {"label": "utf8", "n": "int"}
        assert list(ds) == [{"label": "cat", "n": 1}, {"label": "dog", "n": 2}, {"label": "cat", "n": 1}]


def test_files_whose_columns_differ_are_named_on_one_line(tmp_path):
    (tmp_path / "src").mkdir()
    pq.write_table(pa.table({"n": [1]}), tmp_path / "src" / "a.parquet")
    pq.write_table(pa.table({"n": ["one"]}), tmp_path / "src" / "b.parquet")
    with pytest.raises(SourceError) as caught:
        convert("parquet", tmp_path / "src", tmp_path / "out", workers=1)
    assert "\n" not in str(caught.value)
    assert re.search(r"b\.parquet#row-group-0: record 0: the columns \(n: string\) differ from the first "
                     r"file's \(n: int64\)", str(caught.value))
