"""pack_folder / PackedFolder: reference compatibility, round trips and a safe index reader."""

from __future__ import annotations

import hashlib
import os
import pickle
from collections import OrderedDict
from pathlib import Path

import pytest

import ffrecord
from ffrecord import CorruptFileError, FileWriter, PackedFolder, pack_folder
from ffrecord.packed import MAGIC, load_index, unpack_folder
from tools_support import manifest, parse_base_format, sample_offsets

GOLDEN_TREE = {
    "001.txt": 0, "002.bin": 1,
    "sub": {"a.json": 2, "deeper": {"z.txt": 3}, "empty.dat": 4},
}


def sha256(data) -> str:
    return hashlib.sha256(data).hexdigest()


def as_plain(tree):
    return {k: as_plain(v) if isinstance(v, OrderedDict) else v for k, v in tree.items()}


def test_reads_every_file_of_the_reference_packed_golden(golden):
    expected = manifest(golden)["packed.ffr"]
    with PackedFolder(golden / "packed.ffr") as packed:
        assert packed.num_files() == len(expected) == 5
        assert as_plain(packed.structure) == GOLDEN_TREE
        for path, info in expected.items():
            data = packed.read_one(path)
            assert len(data) == info["len"]
            assert sha256(data) == info["sha256"], path
        batch = packed.read(list(expected))
        assert [sha256(b) for b in batch] == [i["sha256"] for i in expected.values()]


def test_queries_on_the_golden_tree(golden):
    with PackedFolder(golden / "packed.ffr", check_data=False) as packed:
        assert packed.list() == ["001.txt", "002.bin", "sub"]
        assert packed.list(list_dir=False) == ["001.txt", "002.bin"]
        assert packed.list(list_file=False) == ["sub"]
        assert packed.list("sub") == ["a.json", "deeper", "empty.dat"]
        assert packed.list(recursive=True) == [
            "001.txt", "002.bin", "sub", "sub/a.json", "sub/deeper", "sub/deeper/z.txt",
            "sub/empty.dat"]
        assert packed.list("sub", list_dir=False, recursive=True) == [
            "a.json", "deeper/z.txt", "empty.dat"]
        assert packed.is_file("sub/deeper/z.txt") and not packed.is_dir("sub/deeper/z.txt")
        assert packed.is_dir("sub/deeper") and not packed.is_file("sub/deeper")
        assert packed.exists("sub") and packed.exists("") and "001.txt" in packed
        assert not packed.exists("nope") and not packed.is_file("001.txt/x")
        assert not packed.exists("sub/deeper/z.txt/more")
        with pytest.raises(FileNotFoundError, match="missing.txt"):
            packed.read_one("sub/missing.txt")
        with pytest.raises(IsADirectoryError):
            packed.read_one("sub/deeper")
        with pytest.raises(NotADirectoryError):
            packed.list("001.txt")
        with pytest.raises(FileNotFoundError):
            packed.list("nowhere")
        with pytest.raises(TypeError):
            packed.read("001.txt")
        assert "files=5" in repr(packed)


def test_repacking_the_golden_tree_gives_the_reference_bytes(tmp_path, golden):
    assert unpack_folder(golden / "packed.ffr", tmp_path / "tree") == 5
    assert (tmp_path / "tree" / "sub" / "empty.dat").read_bytes() == b""
    assert pack_folder(tmp_path / "tree", tmp_path / "again.ffr") == 5
    assert (tmp_path / "again.ffr").read_bytes() == (golden / "packed.ffr").read_bytes()


def make_tree(root: Path) -> dict:
    files = {
        "b.txt": b"bee",
        "a.bin": bytes(range(256)) * 40,
        "empty": b"",
        "données/été.txt": "ünïcödé ✓".encode(),
        "données/日本/写真.jpg": os.urandom(5000),
        "données/zz/ 'quoted' & spaced": b"x",
        "z/y/x/w/deep": b"deep" * 3,
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "empty_dir").mkdir()
    return files


def test_round_trip_with_unicode_names_empty_files_and_empty_dirs(tmp_path):
    files = make_tree(tmp_path / "src")
    out = tmp_path / "out.ffr"
    assert pack_folder(tmp_path / "src", out) == len(files)
    with PackedFolder(out) as packed:
        assert packed.num_files() == len(files)
        for rel, data in files.items():
            assert packed.read_one(rel).tobytes() == data
        assert packed.is_dir("empty_dir") and packed.list("empty_dir") == []
        listed = packed.list(recursive=True, list_dir=False)
        assert sorted(listed) == sorted(files)
        # samples are in depth-first, name-sorted order, like the reference
        assert listed == sorted(listed, key=lambda p: Path(p).parts)
    # the file obeys the base format and carries the reference's index record
    base = parse_base_format(out)
    assert base.n == len(files) + 1 and base.samples[-1].startswith(MAGIC)
    assert unpack_folder(out, tmp_path / "back") == len(files)
    for rel, data in files.items():
        assert (tmp_path / "back" / rel).read_bytes() == data
    assert (tmp_path / "back" / "empty_dir").is_dir()


def test_index_is_the_reference_pickle_protocol_and_ordering(tmp_path):
    (tmp_path / "src" / "d").mkdir(parents=True)
    for name in ("b", "a", "d/c"):
        (tmp_path / "src" / name).write_bytes(name.encode())
    pack_folder(tmp_path / "src", tmp_path / "p.ffr")
    index = parse_base_format(tmp_path / "p.ffr").samples[-1]
    expected = OrderedDict([("a", 0), ("b", 1), ("d", OrderedDict([("c", 2)]))])
    assert index == MAGIC + pickle.dumps(expected, protocol=4)


def test_empty_folder_packs_to_an_index_only(tmp_path):
    (tmp_path / "src").mkdir()
    assert pack_folder(tmp_path / "src", tmp_path / "e.ffr") == 0
    with PackedFolder(tmp_path / "e.ffr") as packed:
        assert packed.num_files() == 0 and packed.list() == []


def test_pack_errors_leave_nothing(tmp_path):
    with pytest.raises(NotADirectoryError):
        pack_folder(tmp_path / "missing", tmp_path / "x.ffr")
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok").write_bytes(b"1")
    os.mkfifo(src / "pipe")
    with pytest.raises(ValueError, match="pipe"):
        pack_folder(src, tmp_path / "x.ffr")
    assert not (tmp_path / "x.ffr").exists()


def write_packed(path: Path, samples: list, index_record: bytes) -> None:
    with FileWriter(path, len(samples) + 1) as writer:
        for sample in samples:
            writer.write_one(sample)
        writer.write_one(index_record)


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_malicious_index_is_refused_and_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    payload = OrderedDict([("a", 0), ("evil", _RunsCode(marker))])
    path = tmp_path / "evil.ffr"
    write_packed(path, [b"data"], MAGIC + pickle.dumps(payload, protocol=4))
    with pytest.raises(CorruptFileError, match=r"(posix|os)\.system.*refused"):
        PackedFolder(path)
    assert not marker.exists()
    # the reference's plain pickle.loads would indeed have run it: the payload is live
    pickle.loads(pickle.dumps(_RunsCode(marker)))
    assert marker.exists()


def test_other_globals_are_refused():
    payload = pickle.dumps(OrderedDict(a=eval), protocol=4)
    with pytest.raises(CorruptFileError, match="builtins.eval"):
        load_index(MAGIC + payload, nfiles=1)


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_any_pickle_protocol_naming_ordered_dict_is_accepted(protocol):
    tree = OrderedDict([("a", 0), ("d", OrderedDict([("b", 1)]))])
    assert load_index(MAGIC + pickle.dumps(tree, protocol=protocol), nfiles=2) == tree


@pytest.mark.parametrize("tree, message", [
    (OrderedDict([("../escape", 0)]), "invalid name"),
    (OrderedDict([("a/b", 0)]), "invalid name"),
    (OrderedDict([("a", 7)]), "points to 7"),
    (OrderedDict([("a", -1)]), "points to -1"),
    (OrderedDict([("a", "0")]), "points to '0'"),
    (OrderedDict([("a", True)]), "points to True"),
    ({"a": 0}, "not a directory"),
])
def test_impossible_trees_are_rejected(tree, message):
    with pytest.raises(CorruptFileError, match=message):
        load_index(MAGIC + pickle.dumps(tree, protocol=4), nfiles=1)


def test_files_that_are_not_packed_folders(tmp_path):
    plain = tmp_path / "plain.ffr"
    with FileWriter(plain, 1) as writer:
        writer.write_one(b"just data")
    with pytest.raises(CorruptFileError, match="not a packed folder"):
        PackedFolder(plain)
    empty = tmp_path / "empty.ffr"
    FileWriter(empty, 0).close()
    with pytest.raises(CorruptFileError, match="empty"):
        PackedFolder(empty)
    garbage = tmp_path / "garbage.ffr"
    write_packed(garbage, [b"x"], MAGIC + b"\x80\x04not a pickle")
    with pytest.raises(CorruptFileError, match="unreadable packed-folder index"):
        PackedFolder(garbage)


def test_lazy_exports_and_pickling(tmp_path, golden):
    assert ffrecord.pack_folder is pack_folder and ffrecord.PackedFolder is PackedFolder
    with PackedFolder(golden / "packed.ffr") as packed:
        clone = pickle.loads(pickle.dumps(packed))
        assert clone.read_one("001.txt").tobytes() == packed.read_one("001.txt").tobytes()
        clone.close()


def test_check_data_detects_a_damaged_packed_file(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"A" * 100)
    out = tmp_path / "p.ffr"
    pack_folder(src, out)
    raw = bytearray(out.read_bytes())
    raw[sample_offsets(raw)[0] + 5] ^= 0xFF  # inside the first file's data
    out.write_bytes(bytes(raw))
    with PackedFolder(out) as packed, pytest.raises(CorruptFileError):
        packed.read_one("f")
    with PackedFolder(out, check_data=False) as packed:
        assert packed.read_one("f").tobytes() != b"A" * 100
