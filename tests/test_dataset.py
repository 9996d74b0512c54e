"""``ffrecord.dataset``: structured datasets over FFRecord files."""

from __future__ import annotations

import doctest
import json
import multiprocessing
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ffrecord import CorruptFileError, FileReader
from ffrecord.dataset import (CodecError, CorruptDatasetError, DatapointError, DatasetReader,
                              DatasetWriter, IncompleteDatasetError, MaskError,
                              MissingDependencyError, Mixture, SequenceRangeError,
                              ShardedDatasetReader, ShardedDatasetWriter, SpecError,
                              UnsupportedVersionError)
from ffrecord.dataset import codecs, sequence
from ffrecord.dataset.spec import VERSION
from ffr_helpers import payload

SPEC = {"label": "int", "image": "bytes", "caption": "utf8:zstd", "frames": "bytes[]",
        "boxes": "array[]:lz4"}


def datapoint(k: int) -> dict:
    return {"label": k - 5, "image": payload(k, 100 + 37 * k), "caption": f"picture {k} " * k,
            "frames": [payload(1000 * k + e, 10 + e) for e in range(k % 6)],
            "boxes": [np.full((e, 4), k, np.float32) for e in range(3)]}


def write(path: Path, count: int, spec: dict = SPEC, make=datapoint, **options) -> Path:
    with DatasetWriter(path, spec, **options) as writer:
        for k in range(count):
            assert writer.append(make(k)) == k
    return path


def same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        if key == "boxes":
            assert [b.tolist() for b in got[key]] == [b.tolist() for b in value]
        else:
            assert got[key] == value, key


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("ds") / "ds", 12)


# ---- writing and reading ---------------------------------------------------------------

def test_round_trip_every_way(dataset: Path) -> None:
    with DatasetReader(dataset) as reader:
        assert len(reader) == 12 and reader.spec == SPEC
        for k in (0, 5, 11, -1):
            same(reader[k], datapoint(k % 12))
        batch = reader.read([11, 0, 5, 5])
        for got, k in zip(batch, [11, 0, 5, 5]):
            same(got, datapoint(k))
        assert [d["label"] for d in reader] == [k - 5 for k in range(12)]
        assert reader.size == sum(os.path.getsize(f) for f in reader.files) > 0


def test_every_field_file_is_a_base_format_file(dataset: Path) -> None:
    names = sorted(os.listdir(dataset))
    assert names == ["_manifest", "boxes.ffr", "caption.ffr", "frames.ffr", "image.ffr", "label.ffr",
                     "spec.json"]
    assert os.listdir(dataset / "_manifest") == ["v000001.ffr"]
    with FileReader(dataset / "image.ffr") as images:
        assert images.read_one(3).tobytes() == datapoint(3)["image"]
    with FileReader(dataset / "label.ffr") as labels:
        assert int.from_bytes(labels.read_one(7).tobytes(), "little", signed=True) == 2
    spec = json.loads((dataset / "spec.json").read_text())
    assert spec == {"format": "ffrecord.dataset", "version": 1, "length": 12, "fields": SPEC}


def test_masks(dataset: Path) -> None:
    with DatasetReader(dataset) as reader:
        assert reader[3, {"label": True}] == {"label": -2}
        assert reader[3, ["caption", "label"]] == {"label": -2, "caption": "picture 3 " * 3}
        assert reader[3, "label"] == {"label": -2}
        assert reader[3, {"label": False, "image": None}] == {}
        want = datapoint(11)["frames"]
        assert reader[11, {"frames": range(1, 4)}] == {"frames": want[1:4]}
        assert reader[11, {"frames": range(0, 5, 2)}] == {"frames": want[0:5:2]}
        assert reader[11, {"frames": slice(3, None)}] == {"frames": want[3:]}
        assert reader[11, {"frames": range(2, 2)}] == {"frames": []}
        assert reader.read([4, 11, 10], {"frames": range(1, 3)}) == [
            {"frames": datapoint(k)["frames"][1:3]} for k in (4, 11, 10)]
        boxes = reader[7, {"boxes": range(2, 3)}]["boxes"]
        assert [b.shape for b in boxes] == [(2, 4)]
        assert reader.available(11) == {"label": True, "image": True, "caption": True,
                                        "frames": 5, "boxes": 3}


def test_a_masked_read_touches_only_the_selected_files(dataset: Path) -> None:
    with DatasetReader(dataset) as reader:
        touched = []
        for name in reader.spec:
            field_reader = reader.field_reader(name)
            for method in ("read_batch", "read_ranges"):
                original = getattr(field_reader, method)
                setattr(field_reader, method,
                        lambda *a, _o=original, _n=name, **k: (touched.append(_n), _o(*a, **k))[1])
        reader.read(range(12), {"label": True, "frames": range(0, 0)})
        assert touched == ["label", "frames", "frames"]  # a range: the table, then the elements
        touched.clear()
        reader.read(range(12), ["caption"])
        assert touched == ["caption"]


def test_a_range_reads_only_its_elements(tmp_path: Path) -> None:
    """4 elements of 32: two ranged reads of the counts, table entries and element bytes."""
    frames = [payload(e, 8192) for e in range(32)]
    path = write(tmp_path / "seq", 3, {"frames": "bytes[]"}, lambda k: {"frames": frames})
    with DatasetReader(path) as reader:
        field_reader = reader.field_reader("frames")
        calls = []
        original = field_reader.read_ranges
        field_reader.read_ranges = lambda ranges: (calls.append(np.asarray(ranges)), original(ranges))[1]
        assert reader[1, {"frames": range(10, 14)}] == {"frames": frames[10:14]}
        assert len(calls) == 2
        requested = sum(int(c[:, 2].sum()) for c in calls)
        assert requested == sequence.HEADER + 4 * sequence.ENTRY.itemsize + 4 * 8192
        whole = sequence.HEADER + 32 * (sequence.ENTRY.itemsize + 8192)
        assert requested * 7 < whole


def test_cache_keys_serve_from_memory(dataset: Path) -> None:
    with DatasetReader(dataset, cache_keys=("label", "frames")) as reader:
        reader.read([0])
        for name in ("label", "frames"):
            reader.field_reader(name).close()  # anything not served from memory now fails
        assert [d["label"] for d in reader.read([3, 1], ["label"])] == [-2, -4]
        assert reader[11, {"frames": range(1, 3)}] == {"frames": datapoint(11)["frames"][1:3]}
        assert reader.available(11)["frames"] == 5
        reader.field_reader("image").close()
        with pytest.raises(ValueError, match="closed"):
            reader[0, ["image"]]
    with pytest.raises(SpecError, match="'nope'"):
        DatasetReader(dataset, cache_keys=("nope",))


def test_pickles_by_path(dataset: Path) -> None:
    with DatasetReader(dataset, cache_keys=("label",), check_data=False) as reader:
        clone = pickle.loads(pickle.dumps(reader))
    assert (clone.cache_keys, clone.check_data) == (("label",), False)
    same(clone[2], datapoint(2))
    clone.close()


@pytest.mark.parametrize("value", [0, 1, -1, 255, 256, 2**63 - 1, -(2**63), np.int16(-7)])
def test_int_codec_keeps_any_int64(value: int) -> None:
    stored = codecs.BUILTIN["int"].encode(value)
    assert len(stored) == 8
    assert codecs.BUILTIN["int"].decode(memoryview(stored)) == value


def _arrays() -> list[np.ndarray]:
    return [np.arange(12, dtype=np.float64).reshape(3, 4), np.array(5, np.int8),
            np.zeros((0, 3), np.uint16), np.array([True, False]), np.array(["ab", "c"]),
            np.arange(6, dtype=">i4")[::2], np.ones((2, 2), np.complex64)]


@pytest.mark.parametrize("name, value", [
    ("bytes", b"\x00raw"), ("bytes", bytearray(b"ba")), ("utf8", "h\u00e9llo \U0001f600"),
    ("float", -1.5e300), ("float", 3), ("json", {"a": [1, 2.5, None, "x"]}),
    ("msgpack", {"k": [1, b"bin", "s"]}),
    *[("array", a) for a in _arrays()],
])
def test_builtin_codecs_round_trip(name: str, value) -> None:
    codec = codecs.BUILTIN[name]
    stored = codec.encode(value)
    got = codec.decode(memoryview(bytes(memoryview(stored).cast("B"))))
    if name == "array":
        assert got.dtype == value.dtype and got.shape == value.shape
        assert np.array_equal(got, value)
    else:
        assert got == (float(value) if name == "float" else bytes(value) if name == "bytes" else value)


def test_array_decoding_is_zero_copy(tmp_path: Path) -> None:
    path = write(tmp_path / "a", 2, {"x": "array"}, lambda k: {"x": np.arange(8.0) + k})
    with DatasetReader(path) as reader:
        first, second = reader.read([0, 1])
        assert second["x"].tolist() == list(np.arange(8.0) + 1)
        assert np.shares_memory(first["x"], second["x"]) is False  # separate values...
        assert first["x"].base is not None  # ...each a view of the batch buffer


def test_npz_jpg_png_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    image = np.zeros((16, 24, 3), np.uint8)
    image[:, 12:] = 200
    spec = {"arrays": "npz", "photo": "jpg", "mask": "png", "shots": "png[]"}
    make = lambda k: {"arrays": {"a": np.arange(3), "b": np.eye(2)}, "photo": image,  # noqa: E731
                      "mask": image[:, :, 0], "shots": [image, image[:4]]}
    with DatasetReader(write(tmp_path / "img", 2, spec, make)) as reader:
        got = reader[1]
    assert got["arrays"]["a"].tolist() == [0, 1, 2] and got["arrays"]["b"].tolist() == np.eye(2).tolist()
    assert got["photo"].shape == image.shape and np.abs(got["photo"].astype(int) - image).max() < 8
    assert np.array_equal(got["mask"], image[:, :, 0])
    assert [s.shape for s in got["shots"]] == [(16, 24, 3), (4, 24, 3)]


def test_user_codecs_and_no_pickle_by_default(tmp_path: Path) -> None:
    spec = {"point": "xy", "points": "xy[]"}
    encoders = {"xy": lambda p: f"{p[0]},{p[1]}".encode()}
    decoders = {"xy": lambda v: tuple(int(t) for t in bytes(v).split(b","))}
    path = write(tmp_path / "u", 2, spec, lambda k: {"point": (k, 2), "points": [(1, k)] * k},
                 encoders=encoders)
    with DatasetReader(path, decoders) as reader:
        assert reader[1] == {"point": (1, 2), "points": [(1, 1)]}
    with pytest.raises(SpecError, match=r"'xy'.*decoders="):
        DatasetReader(path)
    assert "pickle" not in codecs.BUILTIN


def test_missing_optional_packages_are_named(tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['msgpack'] = None; sys.modules['PIL'] = None\n"
        "from ffrecord.dataset import DatasetWriter, MissingDependencyError\n"
        "for spec, package in (({'m': 'msgpack'}, 'msgpack'), ({'p': 'jpg[]'}, 'Pillow')):\n"
        "    try:\n"
        f"        DatasetWriter({str(tmp_path / 'x')!r}, spec)\n"
        "    except MissingDependencyError as exc:\n"
        "        assert package in str(exc) and 'pip install' in str(exc), exc\n"
        "    else:\n"
        "        raise SystemExit('no error')\n"
        f"assert not __import__('os').path.exists({str(tmp_path / 'x')!r})\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert issubclass(MissingDependencyError, ImportError)


# ---- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec, match", [
    ({"x": "mp4"}, r"field 'x' has type 'mp4'.*encoders="),
    ({"x": "int[][]"}, "not a type string"),
    ({"x": "int:gzip"}, "unknown compression 'gzip'"),
    ({"x/y": "int"}, "field name 'x/y'"),
    ({}, "non-empty"),
])
def test_bad_specs(tmp_path: Path, spec: dict, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        DatasetWriter(tmp_path / "d", spec)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("bad, error, match", [
    ({"label": 1}, DatapointError, r"datapoint 2 lacks field 'frames'"),
    ({"label": 1, "frames": [], "extra": 0}, DatapointError, r"datapoint 2 has field 'extra'"),
    ({"label": "one", "frames": []}, CodecError, r"datapoint 2, field 'label' \(int\): encoder failed"),
    ({"label": 2**64, "frames": []}, CodecError, r"field 'label'.*64 bits"),
    ({"label": 1, "frames": b"abc"}, DatapointError, r"field 'frames'.*list of elements, not bytes"),
    ({"label": 1, "frames": [b"ok", 5]}, CodecError, r"field 'frames' \(bytes\[\]\), element 1"),
    ([1, 2], DatapointError, "must be a dict"),
])
def test_bad_datapoints_write_nothing(tmp_path: Path, bad, error, match) -> None:
    path = tmp_path / "d"
    with DatasetWriter(path, {"label": "int", "frames": "bytes[]"}) as writer:
        writer.append({"label": 0, "frames": [b"a"]})
        writer.append({"label": 1, "frames": []})
        with pytest.raises(error, match=match) as caught:
            writer.append(bad)
        assert caught.value.index == 2
        writer.append({"label": 2, "frames": [b"b", b"c"]})  # still usable
    with DatasetReader(path) as reader:
        assert [d["label"] for d in reader] == [0, 1, 2]


def test_codec_errors_keep_their_cause(tmp_path: Path) -> None:
    def broken(value):
        raise RuntimeError("boom")

    with DatasetWriter(tmp_path / "d", {"v": "mine"}, encoders={"mine": broken}) as writer:
        with pytest.raises(CodecError, match="RuntimeError: boom") as caught:
            writer.append({"v": 1})
        assert isinstance(caught.value.__cause__, RuntimeError) and caught.value.field == "v"
    path = write(tmp_path / "e", 1, {"v": "bytes"}, lambda k: {"v": b"x"})
    with DatasetReader(path, {"bytes": broken}) as reader:
        with pytest.raises(CodecError, match=r"datapoint 0, field 'v' \(bytes\): decoder failed"):
            reader[0]


def test_wrong_array_dtype_is_refused(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "d", {"x": "array"}) as writer:
        with pytest.raises(CodecError, match=r"datapoint 0, field 'x'.*dtype object"):
            writer.append({"x": np.array([{"a": 1}], dtype=object)})
        with pytest.raises(CodecError, match="numpy array, not list"):
            writer.append({"x": [1, 2]})
        writer.append({"x": np.zeros(2)})


@pytest.mark.parametrize("mask, error, match", [
    ({"nope": True}, MaskError, r"field 'nope'.*fields: label, image"),
    ({"label": range(0, 1)}, MaskError, "'label' .*not a sequence"),
    ({"frames": range(-1, 2)}, MaskError, "start, stop >= 0"),
    ({"frames": "yes"}, MaskError, "True, False, a range"),
    ({"frames": range(2, 5)}, SequenceRangeError, r"datapoint 4, field 'frames': elements \[2, 5\).*4 elements"),
    ({"frames": range(3, 40)}, SequenceRangeError, r"datapoint 11.*\[3, 40\).*5 elements"),
    (42, TypeError, "mask"),
])
def test_bad_masks(dataset: Path, mask, error, match) -> None:
    with DatasetReader(dataset) as reader:
        with pytest.raises(error, match=match):
            reader.read([11, 4], mask)
        with pytest.raises(IndexError, match="datapoint 12 out of range"):
            reader.read([12])
    assert issubclass(SequenceRangeError, IndexError)


def test_newer_version_missing_file_and_count_mismatch(tmp_path: Path, dataset: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in os.listdir(dataset):
        if name.endswith((".ffr", ".json")):  # the dataset without its manifest
            (copy / name).write_bytes((dataset / name).read_bytes())
    spec = json.loads((copy / "spec.json").read_text())
    (copy / "spec.json").write_text(json.dumps({**spec, "version": VERSION + 1}))
    with pytest.raises(UnsupportedVersionError, match=f"version {VERSION + 1} is newer"):
        DatasetReader(copy)
    (copy / "spec.json").write_text(json.dumps({**spec, "length": 11}))
    with pytest.raises(CorruptDatasetError, match=r"label.ffr: field 'label' holds 12 datapoints; spec.json says 11"):
        DatasetReader(copy)
    assert issubclass(CorruptDatasetError, CorruptFileError)
    (copy / "spec.json").write_text(json.dumps(spec))
    (copy / "image.ffr").unlink()
    with pytest.raises(IncompleteDatasetError, match="field 'image': image.ffr is missing"):
        DatasetReader(copy)
    (copy / "spec.json").unlink()
    with pytest.raises(IncompleteDatasetError, match="no spec.json"):
        DatasetReader(copy)
    with pytest.raises(FileExistsError):
        DatasetWriter(dataset, SPEC)


def test_damaged_elements_are_caught_by_their_crc(tmp_path: Path) -> None:
    frames = [b"A" * 50, b"B" * 50, b"C" * 50]
    path = write(tmp_path / "s", 1, {"frames": "bytes[]"}, lambda k: {"frames": frames})
    file = path / "frames.ffr"
    raw = bytearray(file.read_bytes())
    raw[raw.index(b"B" * 50) + 7] ^= 1
    file.write_bytes(bytes(raw))
    with DatasetReader(path) as reader:
        assert reader[0, {"frames": range(2, 3)}] == {"frames": frames[2:]}
        with pytest.raises(CorruptDatasetError, match="datapoint 0, field 'frames': element 1: CRC-32"):
            reader[0, {"frames": range(1, 3)}]
        with pytest.raises(CorruptFileError):  # the whole sample: its own CRC
            reader[0]


def test_failures_leave_no_dataset(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with pytest.raises(KeyError):
        with DatasetWriter(path, {"a": "int", "b": "bytes"}) as writer:
            writer.append({"a": 1, "b": b"x"})
            raise KeyError("stop")
    assert not path.exists()
    path.mkdir()
    writer = DatasetWriter(path, {"a": "int"})
    writer.append({"a": 1})
    assert os.listdir(path) and not (path / "spec.json").exists()  # only hidden temporaries
    assert all(name.startswith(".") for name in os.listdir(path))
    writer.abort()
    assert os.listdir(path) == []  # a directory it did not create is kept, emptied


def test_an_interrupted_writer_leaves_nothing_that_reads(tmp_path: Path) -> None:
    path = tmp_path / "killed"
    script = (f"from ffrecord.dataset import DatasetWriter\n"
              f"w = DatasetWriter({str(path)!r}, {{'a': 'int', 'b': 'bytes[]'}})\n"
              f"for k in range(100): w.append({{'a': k, 'b': [b'x'] * k}})\n"
              f"import os; os._exit(0)\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    with pytest.raises(IncompleteDatasetError):
        DatasetReader(path)


# ---- shards and mixtures -------------------------------------------------------------------

def _write_shards(directory: str, start: int, step: int) -> int:
    spec = {"n": "int", "text": "utf8"}
    with ShardedDatasetWriter(directory, spec, shardlen=5, shardstart=start, shardstep=step) as writer:
        for shard in range(start, 6, step):  # shard s holds n = 5s ... 5s+4 (the last: 2)
            for n in range(5 * shard, min(5 * shard + 5, 27)):
                writer.append({"n": n, "text": str(n)})
    return writer.shards


def test_sharded_datasets_written_by_two_processes(tmp_path: Path) -> None:
    directory = str(tmp_path / "sharded")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        shards = pool.starmap(_write_shards, [(directory, 0, 2), (directory, 1, 2)])
    assert shards == [3, 3] and sorted(os.listdir(directory)) == [f"{s:06d}" for s in range(6)] + ["_manifest"]
    with ShardedDatasetReader(directory) as reader:
        assert len(reader) == 27 and reader.shards == 6
        assert [d["n"] for d in reader] == list(range(27))
        assert reader.read([26, 0, 13], ["text"]) == [{"text": "26"}, {"text": "0"}, {"text": "13"}]
        clone = pickle.loads(pickle.dumps(reader))
        assert clone[-1] == {"n": 26, "text": "26"}
        clone.close()
    with ShardedDatasetReader(directory, shardstart=1, shardstep=2) as odd:
        assert [d["n"] for d in odd] == [5, 6, 7, 8, 9, 15, 16, 17, 18, 19, 25, 26]
    with pytest.raises(IncompleteDatasetError, match="sharded dataset .*open_dataset or ShardedDatasetReader"):
        DatasetReader(directory)  # the reader of one dataset names the one to use
    (Path(directory) / "000003" / "spec.json").unlink()
    with pytest.raises(IncompleteDatasetError, match="000003: no spec.json"):
        ShardedDatasetReader(directory)
    os.rename(Path(directory) / "000003", tmp_path / "elsewhere")
    with pytest.raises(IncompleteDatasetError, match="shard 3 is missing"):
        ShardedDatasetReader(directory)


def test_mixture_is_deterministic_resumable_and_exact(tmp_path: Path) -> None:
    a = write(tmp_path / "a", 70, {"src": "utf8", "n": "int"}, lambda k: {"src": "a", "n": k})
    b = write(tmp_path / "b", 40, {"src": "utf8", "n": "int"}, lambda k: {"src": "b", "n": k})
    with DatasetReader(a) as ra, DatasetReader(b) as rb:
        mix = Mixture([ra, rb], weights=[0.7, 0.3], seed=0, period=10)
        assert len(mix) == 100  # a runs out first: 70 = 7 per period x 10 periods
        items = mix.read(range(len(mix)))
        assert [d["n"] for d in items if d["src"] == "a"] == list(range(70))
        assert [d["n"] for d in items if d["src"] == "b"] == list(range(30))
        for start in range(0, 100, 10):  # every period holds exactly 7 a's
            assert sum(d["src"] == "a" for d in items[start:start + 10]) == 7
        for k in (0, 37, 99):  # any index alone, in any process, gives the same datapoint
            assert mix[k] == items[k]
            assert pickle.loads(pickle.dumps(mix))[k] == items[k]
        assert mix.read([99, 3], {"n": True}) == [{"n": items[99]["n"]}, {"n": items[3]["n"]}]
        assert Mixture([ra, rb], [0.7, 0.3], seed=1, period=10).read(range(100)) != items
        wrapped = Mixture([ra, rb], [1, 1], seed=0, length=200, period=2)
        assert len(wrapped) == 200 and [d["n"] for d in wrapped.read(range(200)) if d["src"] == "b"] \
            == [n % 40 for n in range(100)]
        with pytest.raises(SpecError, match="same fields"):
            Mixture([ra, DatasetReader(write(tmp_path / "c", 1, {"x": "int"}, lambda k: {"x": 1}))], [1, 1])
        with pytest.raises(ValueError, match="weights"):
            Mixture([ra, rb], [1, -1])
        with pytest.raises(IndexError):
            mix[100]


def test_module_examples() -> None:
    from ffrecord import dataset
    from ffrecord.dataset import codecs as c, datapoint, manifest, mixture, reader, sequence as q, spec, writer

    for module in (dataset, c, datapoint, manifest, mixture, reader, q, spec, writer):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_a_known_length_is_held_to(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "exact", {"n": "int", "s": "bytes[]"}, length=2) as writer:
        writer.append({"n": 0, "s": [b"a"]})
        writer.append({"n": 1, "s": []})
        with pytest.raises(ValueError, match="length=2 datapoints; datapoint 2 is one too many"):
            writer.append({"n": 2, "s": []})
    with DatasetReader(tmp_path / "exact") as reader:
        assert reader.read([1, 0]) == [{"n": 1, "s": []}, {"n": 0, "s": [b"a"]}]
    writer = DatasetWriter(tmp_path / "short", {"n": "int"}, length=3)
    writer.append({"n": 0})
    with pytest.raises(ValueError, match="closed after 1 datapoints; the dataset was created for length=3"):
        writer.close()
    assert not (tmp_path / "short").exists()


def test_sharded_writers_with_a_known_length(tmp_path: Path) -> None:
    for start in (0, 1):
        with ShardedDatasetWriter(tmp_path / "s", {"n": "int"}, shardlen=4, shardstart=start,
                                  shardstep=2, length=10) as writer:
            for shard in range(start, 3, 2):
                for n in range(4 * shard, min(4 * shard + 4, 10)):
                    writer.append({"n": n})
    with ShardedDatasetReader(tmp_path / "s") as reader:
        assert [d["n"] for d in reader] == list(range(10))
    with ShardedDatasetWriter(tmp_path / "t", {"n": "int"}, shardlen=2, length=3) as writer:
        for n in range(3):
            writer.append({"n": n})
        with pytest.raises(ValueError, match="more datapoints than length"):
            writer.append({"n": 3})
