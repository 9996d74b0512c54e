"""LitData datasets as the installed litdata (0.2.76 on) writes them, each layout read back
from our dataset value for value against LitData's own ``StreamingDataset``; leaves whose
field names would collide, and index entries that leave the directory, are errors naming
them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from ffrecord.converters import SourceError, convert
from ffrecord.dataset import open_dataset

N = 11


def _write(path, items, **options):
    from litdata.streaming.cache import Cache

    cache = Cache(str(path), chunk_size=4, **options)
    for k, item in enumerate(items):
        cache[k] = item
    cache.done()
    cache.merge()
    return path


def _index(path):
    return json.loads((path / "index.json").read_text())


def _footer(path):
    """Whether the chunks end with LitData's Arrow table of rows (0.2.76 on)."""
    chunk = path / _index(path)["chunks"][0]["filename"]
    return chunk.read_bytes().endswith(b"LDARW01\0")


def _same(ours, theirs):
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and ours.keys() == theirs.keys()
        return all(_same(ours[k], theirs[k]) for k in theirs)
    if hasattr(theirs, "numpy") or isinstance(theirs, np.ndarray):
        theirs = np.asarray(theirs)
        return ours.dtype == theirs.dtype and ours.shape == theirs.shape and (ours == theirs).all()
    return type(ours) is type(theirs) and ours == theirs


def _flat(item, prefix=""):
    """A LitData item as our fields name its leaves (dict keys joined with dots)."""
    if not isinstance(item, dict):
        return {prefix or "item": item}
    out = {}
    for key, value in item.items():
        name = f"{prefix}.{key}" if prefix else key
        out.update(_flat(value, name) if isinstance(value, dict) else {name: value})
    return out


CASES = {
    # the issue's case: ints and strings, stored as LitData 0.2.76's Arrow rows only
    "ints_and_strings": (lambda k: {"n": k, "s": f"text {k} é"}, {}, True),
    "nested_and_lists": (lambda k: {"n": k, "tags": ["x"] * (k % 3), "meta": {"a": -k, "b": f"q{k}"}}, {}, True),
    "floats_bytes_bools": (lambda k: {"f": k / 3, "b": bytes([k]) * k, "ok": k % 2 == 0}, {}, True),
    "rows_ipc_zstd": (lambda k: {"n": k * 10**12, "s": "z" * k}, {"compression": "zstd"}, True),
    "array_items": (lambda k: {"n": k, "v": np.arange(k, dtype=np.int16) * k}, {}, False),
    "zstd_batch": (lambda k: {"n": k, "v": np.full(k, k, np.float32), "tags": ["t"] * k},
                   {"compression": "zstd"}, False),
    "zstd_sample": (lambda k: {"n": k, "v": np.arange(k, dtype=np.int64)},
                    {"compression": "zstd", "compression_level": "sample"}, False),
    "zstd_chunk": (lambda k: {"n": k, "v": np.arange(k, dtype=np.uint8)},
                   {"compression": "zstd", "compression_level": "chunk"}, False),
    "plain_ints": (lambda k: k - 5, {}, False),
    "tuples": (lambda k: (k, f"s{k}"), {}, False),
}


@pytest.mark.parametrize("case", CASES)
def test_litdata_layouts_read_back_as_litdata_reads_them(tmp_path, case):
    from litdata import StreamingDataset

    make, options, rows = CASES[case]
    src = _write(tmp_path / "src", [make(k) for k in range(N)], **options)
    assert _footer(src) == rows  # the layout this case is about
    assert convert("litdata", src, tmp_path / "out", workers=1) == N
    theirs = StreamingDataset(str(src))
    with open_dataset(tmp_path / "out") as ds:
        for k in range(N):
            want = theirs[k]
            want = {f"_{j}": v for j, v in enumerate(want)} if isinstance(want, tuple) else _flat(want)
            assert _same(ds[k], want), (k, ds[k], want)


def test_a_key_some_items_add_becomes_a_json_field_never_dropped(tmp_path):
    from litdata import StreamingDataset

    items = [{"n": k, "s": f"s{k}", **({"extra": [k, k]} if k % 4 == 3 else {})} for k in range(N)]
    src = _write(tmp_path / "src", items)
    assert convert("litdata", src, tmp_path / "out") == N
    theirs = StreamingDataset(str(src))
    with open_dataset(tmp_path / "out") as ds:
        assert ds.spec["extra"] == "json"
        assert [row["extra"] for row in ds] == [item.get("extra") for item in items]
        assert [row["extra"] for row in ds] == [theirs[k].get("extra") for k in range(N)]


@pytest.mark.parametrize("item, first, second", [
    ({"a": {"b": 1}, "a.b": 2}, "['a']['b']", "['a.b']"),
    ({"0": 1, "_0": 2}, "['0']", "['_0']"),
])
@pytest.mark.parametrize("rows", [True, False])
def test_leaves_whose_names_collide_are_refused_naming_both(tmp_path, item, first, second, rows):
    items = [item if rows else {**item, "v": np.zeros(2)} for _ in range(5)]
    src = _write(tmp_path / "src", items)
    assert _footer(src) == rows
    with pytest.raises(SourceError, match=rf"index\.json: config: leaves {_re(first)} and {_re(second)} "
                                          r"would both become field"):
        convert("litdata", src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _re(text):
    import re

    return re.escape(text)


def test_a_row_holding_a_key_no_field_takes_is_an_error(tmp_path):
    src = _write(tmp_path / "src", [{"n": k, "s": "x"} for k in range(N)])
    index = _index(src)
    index["config"]["types"] = {"n": "int"}  # "s" stays a leaf: data_spec names it
    index["config"]["data_spec"] = index["config"]["data_spec"].replace('[\\"n\\", \\"s\\"]', '[\\"n\\", \\"t\\"]')
    (src / "index.json").write_text(json.dumps(index))
    with pytest.raises(SourceError, match=r"chunk-0-0\.bin: record 0: holds \['s'\], which the index's "
                                          r"data_spec and types lack"):
        convert("litdata", src, tmp_path / "out", workers=1)


def test_chunks_in_a_sub_directory_convert_and_paths_that_leave_are_refused(tmp_path):
    from litdata import StreamingDataset

    src = _write(tmp_path / "src", [{"n": k, "s": f"s{k}"} for k in range(N)])
    index = _index(src)
    (src / "sub").mkdir()
    for chunk in index["chunks"]:
        os.rename(src / chunk["filename"], src / "sub" / chunk["filename"])
        chunk["filename"] = f"sub/{chunk['filename']}"
    (src / "index.json").write_text(json.dumps(index))
    theirs = StreamingDataset(str(src))
    assert convert("litdata", src, tmp_path / "out") == N
    with open_dataset(tmp_path / "out") as ds:
        assert list(ds) == [theirs[k] for k in range(N)]
    for bad, what in (("../outside.bin", "is not a file name inside"), ("/etc/passwd", "is not a file name inside"),
                      (index["chunks"][0]["filename"], "is listed twice")):
        changed = json.loads(json.dumps(index))
        changed["chunks"][1]["filename"] = bad
        (src / "index.json").write_text(json.dumps(changed))
        with pytest.raises(SourceError, match=rf"index\.json: chunks\[1\]\.filename: .*{what}"):
            convert("litdata", src, tmp_path / "out2")


@pytest.mark.parametrize("change, message", [
    (lambda index: index.pop("chunks"), r"chunks: missing"),
    (lambda index: index["chunks"][0].update(chunk_size="4"), r"chunks\[0\]\.chunk_size: expected a count"),
    (lambda index: index["chunks"][0].update(chunk_size=-1), r"chunks\[0\]\.chunk_size: expected a count"),
    (lambda index: index["config"].update(data_spec="[1, 7]"), r"config\.data_spec: not a LitData tree spec"),
    (lambda index: index["config"].update(data_format="int"), r"config\.data_format: expected a list"),
    (lambda index: index["config"].update(compression_level="most"), r"unknown compression_level"),
    (lambda index: index["config"].update(format="mds"), r"convert the dataset with the mds kind"),
])
def test_malformed_indexes_name_the_file_and_key(tmp_path, change, message):
    src = _write(tmp_path / "src", [{"n": k, "s": "x"} for k in range(N)])
    index = _index(src)
    change(index)
    (src / "index.json").write_text(json.dumps(index))
    with pytest.raises(SourceError, match=rf"src/index\.json: .*{message}"):
        convert("litdata", src, tmp_path / "out")


def test_cli_prints_one_line_for_a_chunk_path_with_a_directory_part(tmp_path, capsys):
    from ffrecord.cli import main

    src = _write(tmp_path / "src", [{"n": k, "s": "x"} for k in range(N)])
    index = _index(src)
    index["chunks"][0]["filename"] = "elsewhere/" + index["chunks"][0]["filename"]
    (src / "index.json").write_text(json.dumps(index))
    assert main(["convert", "litdata", str(src), str(tmp_path / "out")]) == 3  # no such chunk file
    err = capsys.readouterr().err
    assert "Traceback" not in err and "elsewhere/chunk-0-0.bin" in err


def test_a_compressed_chunk_holding_more_than_its_index_says_is_stopped(tmp_path):
    import zstd

    src = _write(tmp_path / "src", [{"n": k, "v": np.arange(k)} for k in range(N)],
                 compression="zstd", compression_level="chunk")
    chunk = _index(src)["chunks"][1]
    (src / chunk["filename"]).write_bytes(zstd.compress(bytes(48 << 20)))
    with pytest.raises(SourceError, match=rf"{chunk['filename']}: decompresses to more than the "
                                          rf"{chunk['chunk_bytes']:,} bytes its index says"):
        convert("litdata", src, tmp_path / "out", workers=1)
