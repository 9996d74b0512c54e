"""Converters against hostile and unlucky sources, each written by its real library and then
damaged: special files answer at once (never a hang), forged sizes never size an
allocation, malformed indexes and colliding names are typed errors naming the file and key,
never a bare Python error, a traceback, or data shifted between fields."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import threading

import pytest

from ffrecord.converters import SourceError, convert
from ffrecord.dataset import open_dataset

N = 12


def _in_time(make, seconds=60):
    """``make()``, failing the test if it has not returned after ``seconds`` (a hang)."""
    box = {}

    def target():
        try:
            box["result"] = make()
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "hung"
    if "error" in box:
        raise box["error"]
    return box["result"]


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path):
    path.unlink()
    path.symlink_to("/dev/zero")


# ---- sources, each written by its library ---------------------------------------------

def _webdataset(root):
    import webdataset as wds

    root.mkdir()
    with wds.ShardWriter(str(root / "shard-%04d.tar"), maxcount=N // 2, verbose=0) as sink:
        for k in range(N):
            sink.write({"__key__": f"s{k:04d}", "cls": k, "txt": f"t{k}"})
    return root, root / "shard-0001.tar"


def _parquet(root):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir()
    for part in range(2):
        pq.write_table(pa.table({"n": list(range(part * 6, part * 6 + 6))}), root / f"p{part}.parquet")
    return root, root / "p1.parquet"


def _mds(root):
    from streaming import MDSWriter

    with MDSWriter(out=str(root), columns={"n": "int", "s": "str"}, size_limit=200) as writer:
        for k in range(N):
            writer.write({"n": k, "s": f"s{k}"})
    return root, root / "shard.00001.mds"


def _litdata(root):
    from litdata.streaming.cache import Cache

    cache = Cache(str(root), chunk_size=4)
    for k in range(N):
        cache[k] = {"n": k, "s": f"s{k}"}
    cache.done()
    cache.merge()
    return root, root / "chunk-0-1.bin"


def _imagefolder(root):
    from PIL import Image

    for k in range(4):
        (root / f"c{k % 2}").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (2, 2), (k, 0, 0)).save(root / f"c{k % 2}" / f"{k}.png")
    return root, root / "c1" / "3.png"


def _hf(root):
    import datasets

    datasets.Dataset.from_dict({"n": list(range(N))}).save_to_disk(str(root), num_shards=2)
    return root, root / "data-00001-of-00002.arrow"


def _arrayrecord(root):
    from array_record.python.array_record_module import ArrayRecordWriter

    root.mkdir()
    for part in range(2):
        writer = ArrayRecordWriter(str(root / f"r{part}.array_record"), "group_size:2")
        for k in range(6):
            writer.write(bytes([part, k]))
        writer.close()
    return root, root / "r1.array_record"


def _granular(root):
    import granular

    with granular.ShardedDatasetWriter(root, {"n": "int", "s": "utf8"}, granular.encoders, shardlen=6) as writer:
        for k in range(N):
            writer.append({"n": k, "s": f"s{k}"})
    return root, root / "000001" / "n.idx"


SOURCES = {"webdataset": _webdataset, "parquet": _parquet, "mds": _mds, "litdata": _litdata,
           "imagefolder": _imagefolder, "hf": _hf, "arrayrecord": _arrayrecord, "granular": _granular}
INDEXES = {"mds": "index.json", "litdata": "index.json", "hf": "state.json", "granular": "000000/spec.json"}


@pytest.mark.parametrize("make_special", [_fifo, _dev_zero], ids=["fifo", "dev_zero"])
@pytest.mark.parametrize("kind", SOURCES)
def test_a_data_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind, make_special):
    root, data_file = SOURCES[kind](tmp_path / "src")
    make_special(data_file)
    with pytest.raises(ValueError, match=rf"{data_file.name}: not a regular file but a"):
        _in_time(lambda: convert(kind, root, tmp_path / "out", workers=1))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", INDEXES)
def test_an_index_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    root, _ = SOURCES[kind](tmp_path / "src")
    _fifo(root / INDEXES[kind])
    with pytest.raises(ValueError, match=r"\.json: not a regular file but a FIFO"):
        _in_time(lambda: convert(kind, root, tmp_path / "out", workers=1))


def test_a_single_tar_source_that_is_a_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "x.tar")
    with pytest.raises(ValueError, match=r"x\.tar: not a regular file but a FIFO"):
        _in_time(lambda: convert("webdataset", tmp_path / "x.tar", tmp_path / "out"))


# ---- forged sizes ----------------------------------------------------------------------

def _header(name, size, kind=tarfile.REGTYPE):
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(tarfile.GNU_FORMAT)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_member_claiming_40_gib_in_a_tiny_tar_names_the_member(tmp_path, compress):
    data = _header("s0.bin", 40 << 30) + bytes(1024)
    assert len(data) == 1536
    (tmp_path / "bomb.tar").write_bytes(gzip.compress(data) if compress else data)
    with pytest.raises(SourceError, match=r"bomb\.tar: record s0: .*'s0\.bin'.*42,949,672,960 bytes"):
        _in_time(lambda: convert("webdataset", tmp_path / "bomb.tar", tmp_path / "out"))


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE], ids=["gnu_longname", "pax"])
def test_a_tar_header_record_claiming_40_gib_is_truncation_not_an_allocation(tmp_path, kind):
    (tmp_path / "bomb.tar").write_bytes(_header("././@LongLink", 40 << 30, kind) + bytes(1024))
    with pytest.raises(SourceError, match=r"bomb\.tar: damaged or truncated tar"):
        _in_time(lambda: convert("webdataset", tmp_path / "bomb.tar", tmp_path / "out"))


# ---- WebDataset: members that would share a field -------------------------------------

def _tar(path, members):
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("members, message", [
    ([("s0.0", b"a"), ("s0._0", b"b")], r"member \._0 and member \.0 would both become field '_0'"),
    ([("s0.txt", b"a"), ("s0.__key__", b"other")], r"member \.__key__ and its key would both become field"),
])
def test_webdataset_members_sharing_a_field_are_refused_naming_both(tmp_path, members, message):
    _tar(tmp_path / "x.tar", members)
    with pytest.raises(SourceError, match=rf"x\.tar: record s0: {message}"):
        convert("webdataset", tmp_path / "x.tar", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("members, message", [
    ([("s0.cls", b"1"), ("s0.npy", b"\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (9,), }")],
     r"record s0: \.npy: not a array value"),
    ([("s0.cls", b"1"), ("s0.json", b"[" * 100000 + b"]" * 100000)], r"record s0: \.json: not a json value"),
    ([("s0.cls", b"1"), ("s1.cls", b"seven")], r"record s1: \.cls: not a int value"),
])
def test_webdataset_values_that_do_not_decode_name_the_member(tmp_path, members, message):
    _tar(tmp_path / "x.tar", members)
    with pytest.raises(SourceError, match=rf"x\.tar: {message}"):
        convert("webdataset", tmp_path / "x.tar", tmp_path / "out")


def test_webdataset_reads_past_empty_tars_to_the_first_sample(tmp_path):
    (tmp_path / "src").mkdir()
    _tar(tmp_path / "src" / "a.tar", [])
    _tar(tmp_path / "src" / "b.tar", [("s0.txt", b"kept")])
    assert convert("webdataset", tmp_path / "src", tmp_path / "out") == 1
    with open_dataset(tmp_path / "out") as ds:
        assert list(ds) == [{"__key__": "s0", "txt": "kept"}]


# ---- MDS indexes -----------------------------------------------------------------------

def _first(index):
    return index["shards"][0]


MDS_CASES = {
    "no_shards": (lambda index: index.pop("shards"), r"shards: missing"),
    "shards_not_a_list": (lambda index: index.update(shards={"a": 1}), r"shards: expected a list"),
    "not_an_object": (lambda index: index.update(shards=[7]), r"shards\[0\]: expected an object, got 7"),
    "samples_text": (lambda index: _first(index).update(samples="3"), r"shards\[0\]\.samples: expected a count"),
    "samples_negative": (lambda index: _first(index).update(samples=-1), r"shards\[0\]\.samples: expected a count"),
    "no_raw_data": (lambda index: _first(index).pop("raw_data"), r"shards\[0\]\.raw_data: missing"),
    "basename_up": (lambda index: _first(index)["raw_data"].update(basename="../x.mds"),
                    r"shards\[0\]\.raw_data\.basename: '\.\./x\.mds' is not a file name inside"),
    "basename_absolute": (lambda index: _first(index)["raw_data"].update(basename="/etc/passwd"),
                          r"shards\[0\]\.raw_data\.basename: '/etc/passwd' is not a file name inside"),
    "basename_twice": (lambda index: index["shards"][1]["raw_data"].update(basename="shard.00000.mds"),
                       r"shards\[1\]\.raw_data\.basename: shard 'shard\.00000\.mds' is listed twice"),
    "sizes_short": (lambda index: _first(index)["column_sizes"].pop(),
                    r"shards\[0\]: 2 column_names, 2 column_encodings and 1 column_sizes"),
    "column_twice": (lambda index: _first(index).update(column_names=["n", "n"]),
                     r"shards\[0\]\.column_names\[1\]: column 'n' is listed twice"),
    "size_text": (lambda index: _first(index)["column_sizes"].__setitem__(0, "8"),
                  r"shards\[0\]\.column_sizes\[0\]: expected a count"),
    "json_format": (lambda index: _first(index).update(format="json"), r"shards\[0\]\.format: 'json' shards"),
    "zip_up": (lambda index: _first(index).update(zip_data={"basename": "../z", "bytes": 3}, compression="zstd"),
               r"shards\[0\]\.zip_data\.basename: '\.\./z' is not a file name inside"),
    "top_level_list": (lambda index: index.clear() or index.update(x=[]), r"shards: missing"),
}


@pytest.mark.parametrize("case", MDS_CASES)
def test_a_malformed_mds_index_names_the_file_and_key(tmp_path, case, capsys):
    from ffrecord.cli import main

    root, _ = _mds(tmp_path / "src")
    index = json.loads((root / "index.json").read_text())
    change, message = MDS_CASES[case]
    change(index)
    (root / "index.json").write_text(json.dumps(index))
    with pytest.raises(SourceError, match=rf"src/index\.json: {message}"):
        convert("mds", root, tmp_path / "out")
    assert main(["convert", "mds", str(root), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "index.json" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


ALGORITHMS = ["zstd", "zstd:7", "gz", "bz2", "br", "snappy"]


def _compressed_mds(root, algorithm):
    from streaming import MDSWriter

    with MDSWriter(out=str(root), columns={"n": "int", "s": "str"}, size_limit=300, compression=algorithm) as writer:
        for k in range(N):
            writer.write({"n": k, "s": f"text {k}" * k})
    index = json.loads((root / "index.json").read_text())
    assert not (root / index["shards"][1]["raw_data"]["basename"]).exists()  # only the compressed files
    return index


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_compressed_mds_shards_convert(tmp_path, algorithm):
    from streaming import StreamingDataset

    _compressed_mds(tmp_path / "src", algorithm)
    assert convert("mds", tmp_path / "src", tmp_path / "out", workers=1) == N
    theirs = StreamingDataset(local=str(tmp_path / "src"), shuffle=False, batch_size=1)
    with open_dataset(tmp_path / "out") as ds:
        assert list(ds) == [{"n": theirs[k]["n"], "s": theirs[k]["s"]} for k in range(N)]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_compressed_shard_holding_more_than_its_index_says_is_stopped(tmp_path, algorithm):
    from streaming.base.compression import compress

    index = _compressed_mds(tmp_path / "src", algorithm)
    shard = index["shards"][1]
    bomb = compress(algorithm, bytes(48 << 20))
    (tmp_path / "src" / shard["zip_data"]["basename"]).write_bytes(bomb)
    shard["zip_data"]["bytes"] = len(bomb)  # the compressed size as it is: only the content lies
    (tmp_path / "src" / "index.json").write_text(json.dumps(index))
    with pytest.raises(SourceError, match=rf"{shard['zip_data']['basename']}: decompresses to more than the "
                                          rf"{shard['raw_data']['bytes']:,} bytes its index says"):
        convert("mds", tmp_path / "src", tmp_path / "out", workers=1)


def test_an_mds_index_that_is_a_list_or_not_json(tmp_path):
    root, _ = _mds(tmp_path / "src")
    (root / "index.json").write_text("[1, 2]")
    with pytest.raises(SourceError, match=r"index\.json: the document: expected an object"):
        convert("mds", root, tmp_path / "out")
    (root / "index.json").write_bytes(b"\xff{")
    with pytest.raises(SourceError, match=r"index\.json: not JSON"):
        convert("mds", root, tmp_path / "out")


def test_a_merged_mds_index_with_shards_in_sub_directories_converts(tmp_path):
    from streaming import MDSWriter, StreamingDataset
    from streaming.base.util import merge_index

    for part in range(2):
        with MDSWriter(out=str(tmp_path / "src" / f"part{part}"), columns={"n": "int"}, size_limit=100) as writer:
            for k in range(5):
                writer.write({"n": part * 10 + k})
    merge_index(str(tmp_path / "src"), keep_local=True)
    index = json.loads((tmp_path / "src" / "index.json").read_text())
    assert index["shards"][0]["raw_data"]["basename"].startswith("part0/")
    assert convert("mds", tmp_path / "src", tmp_path / "out", workers=1) == 10
    theirs = StreamingDataset(local=str(tmp_path / "src"), shuffle=False, batch_size=1)
    with open_dataset(tmp_path / "out") as ds:
        assert [row["n"] for row in ds] == [theirs[k]["n"] for k in range(10)]


# ---- Hugging Face, Granular ------------------------------------------------------------

@pytest.mark.parametrize("name, message", [
    ("../data.arrow", r"_data_files\[1\]\.filename: '\.\./data\.arrow' is not a file name inside"),
    ("data-00000-of-00002.arrow", r"_data_files\[1\]\.filename: data file 'data-00000-of-00002\.arrow' is listed twice"),
])
def test_hf_state_naming_files_outside_or_twice(tmp_path, name, message):
    root, _ = _hf(tmp_path / "src")
    state = json.loads((root / "state.json").read_text())
    state["_data_files"][1]["filename"] = name
    (root / "state.json").write_text(json.dumps(state))
    with pytest.raises(SourceError, match=rf"state\.json: {message}"):
        convert("hf", root, tmp_path / "out")


def test_granular_damage_is_named(tmp_path):
    root, idx = _granular(tmp_path / "src")
    with idx.open("ab") as f:
        f.write(b"\0\0\0")
    with pytest.raises(SourceError, match=r"000001/n\.idx: .* not a whole number of 8-byte offsets"):
        convert("granular", root, tmp_path / "out", workers=1)
    os.rename(root / "000001", root / "000002")
    with pytest.raises(SourceError, match=r"shard folders are not numbered 0, 1, 2, \.\.\.: 000002 where 000001"):
        convert("granular", root, tmp_path / "out", workers=1)
    (root / "000000" / "spec.json").write_text('{"n": 5}')
    os.rename(root / "000002", root / "000001")
    with pytest.raises(SourceError, match=r"000000/spec\.json: n: expected a string, got 5"):
        convert("granular", root, tmp_path / "out", workers=1)


# ---- the command line ------------------------------------------------------------------

def test_cli_prints_each_error_on_one_line_without_a_traceback(tmp_path, capsys):
    from ffrecord.cli import main

    (tmp_path / "bomb.tar").write_bytes(_header("s0.bin", 40 << 30) + bytes(1024))
    _tar(tmp_path / "c.tar", [("s0.0", b"a"), ("s0._0", b"b")])
    os.mkfifo(tmp_path / "f.tar")
    for name, status in (("bomb.tar", 1), ("c.tar", 1), ("f.tar", 2)):
        assert _in_time(lambda: main(["convert", "webdataset", str(tmp_path / name), str(tmp_path / "out")])) == status
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and name in err and "Traceback" not in err, err
