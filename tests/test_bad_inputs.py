"""Bad inputs get a clear, typed error at once: FIFOs and devices, NUL bytes in paths,
impossible writer targets, hostile packed-folder indices, links under an unpack target,
and the command line's exit status when the system refuses. docs/bad-inputs.md lists them."""

from __future__ import annotations

import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import pytest

import ffrecord
from ffrecord import CorruptFileError, FileReader, FileWriter, PackedFolder, convert
from ffrecord.cli import EXIT_CORRUPT, EXIT_OK, EXIT_OS, EXIT_USAGE, main
from ffrecord.packed import MAGIC, load_index, pack_folder, unpack_folder
from ffrecord.utils import dump
from ffr_helpers import deadline, fifo_that_unblocks, write_dataset
from tools_support import tfrecord_frame

NOT_REGULAR = "not a regular file but a FIFO"


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def write_packed(path: Path, samples: list, tree: object) -> Path:
    """A packed folder whose index record is the pickled ``tree``, whatever it holds."""
    return write_dataset(path, [*samples, MAGIC + pickle.dumps(tree, protocol=4)])


# ---- FIFOs and devices -------------------------------------------------------------------

def test_a_fifo_is_refused_by_the_reader_at_once(tmp_path):
    with fifo_that_unblocks(tmp_path / "p.ffr") as fifo:
        with pytest.raises(ValueError, match=f"p.ffr: invalid argument: {NOT_REGULAR}"):
            FileReader(fifo)
        with pytest.raises(ValueError, match=NOT_REGULAR):
            FileReader(fifo, direct=True)


def test_a_fifo_inside_a_dataset_directory_is_refused(tmp_path):
    write_dataset(tmp_path / "a.ffr", [b"a"])
    with fifo_that_unblocks(tmp_path / "b.ffr"):
        with pytest.raises(ValueError, match=f"b.ffr: invalid argument: {NOT_REGULAR}"):
            FileReader(tmp_path)
        with pytest.raises(ValueError, match=NOT_REGULAR):
            PackedFolder(tmp_path / "b.ffr")


def test_a_character_device_is_refused():
    with pytest.raises(ValueError, match="not a regular file but a character device"):
        FileReader("/dev/zero")


@pytest.mark.parametrize("command", ["info", "verify", "cat"])
def test_cli_refuses_a_fifo(capsys, tmp_path, command):
    extra = ["0"] if command == "cat" else []
    with fifo_that_unblocks(tmp_path / "p.ffr") as fifo:
        status, _, err = run_cli(capsys, command, fifo, *extra)
    assert status == EXIT_USAGE and NOT_REGULAR in err and "p.ffr" in err


def test_cli_refuses_a_fifo_inside_a_directory(capsys, tmp_path):
    write_dataset(tmp_path / "a.ffr", [b"a"])
    with fifo_that_unblocks(tmp_path / "b.ffr"):
        status, _, err = run_cli(capsys, "verify", tmp_path)
    assert status == EXIT_USAGE and NOT_REGULAR in err


@pytest.mark.parametrize("kind", ["tfrecord", "ofrecord"])
def test_convert_refuses_a_fifo_input_and_writes_nothing(capsys, tmp_path, kind):
    out = tmp_path / "out.ffr"
    with fifo_that_unblocks(tmp_path / "part-0") as fifo:
        status, _, err = run_cli(capsys, "convert", kind, fifo, out)
        assert status == EXIT_USAGE and NOT_REGULAR in err and "part-0" in err
        with pytest.raises(ValueError, match=NOT_REGULAR):
            list(convert.read_tfrecord(fifo))
    assert not out.exists()
    with pytest.raises(ValueError, match="character device"):
        convert.tfrecord_to_ffr("/dev/zero", out, verify=False)
    assert not out.exists()


def test_pack_never_opens_a_fifo_that_replaced_a_scanned_file(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"data")
    scan = ffrecord.packed._scan

    def scan_then_swap(folder, counter=0):
        found = scan(folder, counter)
        (src / "f").unlink()
        os.mkfifo(src / "f")
        return found

    monkeypatch.setattr(ffrecord.packed, "_scan", scan_then_swap)
    with deadline(10), pytest.raises(ValueError, match=f"f: {NOT_REGULAR}"):
        pack_folder(src, tmp_path / "out.ffr")
    assert not (tmp_path / "out.ffr").exists()


# ---- hostile packed-folder indices --------------------------------------------------------

def shared_tree(levels: int) -> OrderedDict:
    """A tree of 2**levels paths whose pickle holds ``levels`` distinct directories."""
    node = OrderedDict(f=0)
    for _ in range(levels):
        node = OrderedDict(a=node, b=node)
    return node


def test_a_tiny_pack_of_shared_sub_trees_is_refused_fast(tmp_path):
    path = write_packed(tmp_path / "bomb.ffr", [b"x"], shared_tree(60))
    assert path.stat().st_size < 1000  # 2**60 paths in an 882-byte file
    with deadline(10):
        with pytest.raises(CorruptFileError, match="seen before .shared or cyclic."):
            PackedFolder(path)
        with pytest.raises(CorruptFileError, match="shared or cyclic"):
            unpack_folder(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_cyclic_index_is_refused():
    tree = OrderedDict(f=0)
    tree["loop"] = tree
    with deadline(10), pytest.raises(CorruptFileError, match="'loop' is a sub-tree seen before"):
        load_index(MAGIC + pickle.dumps(tree, protocol=4), nfiles=1)


def test_two_entries_for_one_file_are_refused():
    tree = OrderedDict(a=0, d=OrderedDict(b=0))
    with pytest.raises(CorruptFileError, match="'d/b' points to file 0, which another entry"):
        load_index(MAGIC + pickle.dumps(tree, protocol=4), nfiles=1)


def test_a_huge_memo_index_allocates_nothing():
    # GLOBAL collections.OrderedDict, EMPTY_TUPLE, REDUCE, LONG_BINPUT 2**27, STOP: the C
    # unpickler would size its memo to 2**28 slots (2 GiB) for this 40-byte pickle.
    meta = (MAGIC + b"\x80\x02ccollections\nOrderedDict\n)R" + b"r" + (2**27).to_bytes(4, "little")
            + b".")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with deadline(10):
        assert load_index(meta, nfiles=0) == OrderedDict()
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 256 << 10


def deep_index(levels: int) -> bytes:
    """The index record of ``d/d/…/d/leaf`` (``levels`` directories), pickled by hand: the
    pickler itself recurses."""
    new_dict = b"ccollections\nOrderedDict\n)R"  # GLOBAL, EMPTY_TUPLE, REDUCE
    key = b"X\x01\x00\x00\x00d"  # BINUNICODE "d"
    body = (new_dict + key) * levels + new_dict + b"X\x04\x00\x00\x00leafK\x00"
    return MAGIC + b"\x80\x02" + body + b"s" * (levels + 1) + b"."  # SETITEM each level


def test_a_deep_index_needs_no_recursion(tmp_path):
    meta = deep_index(3000)
    load_index(meta, nfiles=1)
    path = write_dataset(tmp_path / "deep.ffr", [b"x", meta])
    with PackedFolder(path) as packed:
        listed = packed.list(recursive=True)
        assert len(listed) == 3001 and listed[-1] == "d/" * 3000 + "leaf"
        assert [index for _, index in packed.items()] == [0]


# ---- links under an unpack target ---------------------------------------------------------

@pytest.fixture
def packed_tree(tmp_path) -> Path:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "001.txt").write_bytes(b"packed 001")
    (src / "sub" / "a.txt").write_bytes(b"packed a")
    pack_folder(src, tmp_path / "packed.ffr")
    return tmp_path / "packed.ffr"


@pytest.fixture
def victim(tmp_path) -> Path:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim.txt").write_bytes(b"precious")
    return elsewhere / "victim.txt"


def untouched(victim: Path) -> bool:
    return victim.read_bytes() == b"precious" and sorted(os.listdir(victim.parent)) == [
        "victim.txt"]


def test_unpack_refuses_a_file_symlink_in_the_target(tmp_path, packed_tree, victim):
    out = tmp_path / "out"
    out.mkdir()
    (out / "001.txt").symlink_to(victim)
    with pytest.raises(FileExistsError, match="symbolic link is in the way.*001.txt"):
        unpack_folder(packed_tree, out)
    assert untouched(victim) and (out / "001.txt").is_symlink()


def test_unpack_refuses_a_directory_symlink_in_the_target(tmp_path, packed_tree, victim):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").symlink_to(victim.parent, target_is_directory=True)
    with pytest.raises(FileExistsError, match="symbolic link is in the way.*sub"):
        unpack_folder(packed_tree, out)
    assert untouched(victim)
    assert (out / "001.txt").read_bytes() == b"packed 001"  # what came before the link


def test_cli_unpack_refuses_links(capsys, tmp_path, packed_tree, victim):
    out = tmp_path / "out"
    out.mkdir()
    (out / "001.txt").symlink_to(victim)
    status, _, err = run_cli(capsys, "unpack", packed_tree, out)
    assert status == EXIT_OS and "symbolic link" in err and "001.txt" in err
    assert untouched(victim)


def test_unpack_replaces_files_without_writing_through_hard_links(tmp_path, packed_tree, victim):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    os.link(victim, out / "001.txt")
    os.mkfifo(out / "sub" / "a.txt")  # replaced too, never opened
    with deadline(10):
        assert unpack_folder(packed_tree, out) == 2
    assert untouched(victim)
    assert (out / "001.txt").read_bytes() == b"packed 001"
    assert (out / "sub" / "a.txt").read_bytes() == b"packed a"
    assert sorted(os.listdir(out)) == ["001.txt", "sub"]  # no temporary left


def test_unpack_reports_what_is_in_the_way(tmp_path, packed_tree):
    out = tmp_path / "out"
    (out / "001.txt").mkdir(parents=True)
    with pytest.raises(IsADirectoryError, match="001.txt"):
        unpack_folder(packed_tree, out)
    shutil.rmtree(out)
    out.mkdir()
    (out / "sub").write_bytes(b"a file")
    with pytest.raises(NotADirectoryError, match="sub"):
        unpack_folder(packed_tree, out)


def test_unpack_follows_the_target_itself_when_it_is_a_link(tmp_path, packed_tree):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    assert unpack_folder(packed_tree, tmp_path / "link") == 2
    assert (tmp_path / "real" / "sub" / "a.txt").read_bytes() == b"packed a"


# ---- NUL bytes in paths -------------------------------------------------------------------

NUL = "embedded null byte"


def test_nul_bytes_never_shorten_a_path(tmp_path, golden):
    basic = str(golden / "basic.ffr")
    for bad in (basic + "\0/whatever", basic.encode() + b"\0", [basic, basic + "\0"]):
        with pytest.raises(ValueError, match=NUL):
            FileReader(bad)
    with pytest.raises(ValueError, match=NUL):
        PackedFolder(str(golden / "packed.ffr") + "\0")
    with pytest.raises(ValueError, match=NUL):
        FileWriter(tmp_path / "x.ffr\0.txt", 1)
    assert os.listdir(tmp_path) == []


def test_nul_bytes_are_refused_by_every_tool(capsys, tmp_path, golden):
    src = tmp_path / "src"
    src.mkdir()
    tf = tmp_path / "a.tfrecord"
    tf.write_bytes(tfrecord_frame(b"record"))
    calls = [
        lambda: dump([b"a", b"b"], str(tmp_path / "x.ffr\0"), nfiles=1),
        lambda: dump([b"a", b"b"], str(tmp_path / "parts\0"), nfiles=2),
        lambda: pack_folder(str(src) + "\0", tmp_path / "p.ffr"),
        lambda: pack_folder(src, str(tmp_path / "p.ffr\0")),
        lambda: unpack_folder(str(golden / "packed.ffr") + "\0", tmp_path / "out"),
        lambda: unpack_folder(golden / "packed.ffr", str(tmp_path / "out\0")),
        lambda: convert.tfrecord_to_ffr([str(tf) + "\0"], tmp_path / "t.ffr"),
        lambda: convert.tfrecord_to_ffr(tf, str(tmp_path / "t.ffr\0")),
        lambda: convert.ofrecord_to_ffr(str(tmp_path) + "\0", tmp_path / "o.ffr"),
        lambda: convert.write_iterable([b"a"], str(tmp_path / "w.ffr\0")),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=NUL):
            call()
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "src"]
    for argv in (["info", str(golden / "basic.ffr") + "\0x"], ["verify", "\0"],
                 ["cat", str(golden / "basic.ffr") + "\0", "0"],
                 ["convert", "tfrecord", tf, str(tmp_path / "t.ffr\0")]):
        status, _, err = run_cli(capsys, *argv)
        assert status == EXIT_USAGE and NUL in err


# ---- writer targets -----------------------------------------------------------------------

def test_writer_refuses_a_directory_at_construction(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path}: invalid argument: is a directory"):
        FileWriter(tmp_path, 1)
    with pytest.raises(ValueError, match="is a directory"):
        FileWriter(str(tmp_path / "new") + "/", 1)
    assert os.listdir(tmp_path) == []


def test_writer_names_the_path_whose_directory_is_missing(tmp_path):
    target = tmp_path / "no" / "such" / "x.ffr"
    with pytest.raises(FileNotFoundError, match=f"create {target}: no such file or directory"):
        FileWriter(target, 1)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OSError, match=f"create {tmp_path / 'file' / 'x.ffr'}: not a directory"):
        FileWriter(tmp_path / "file" / "x.ffr", 1)


# ---- exports ------------------------------------------------------------------------------

def test_unpack_folder_is_a_top_level_export():
    from ffrecord import unpack_folder as exported

    assert exported is unpack_folder
    assert "unpack_folder" in ffrecord.__all__ and "unpack_folder" in dir(ffrecord)


# ---- the command line when the system refuses ----------------------------------------------

NOBODY = 65534

# As root the child drops to nobody itself, after a first run of the same (read-only)
# command as root has imported all it needs: the interpreter's own files may sit where
# nobody cannot read them (/root), and root would ignore the mode of the file under test.
_AS_NOBODY = """
import contextlib, os, sys
from ffrecord.cli import main
if os.geteuid() == 0:
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), \\
            contextlib.redirect_stderr(sink):
        main(sys.argv[1:])
    os.setgroups([])
    os.setgid({uid})
    os.setuid({uid})
sys.exit(main(sys.argv[1:]))
""".format(uid=NOBODY)


def run_unprivileged(*argv: str) -> subprocess.CompletedProcess:
    """``ffrecord ARGV`` in a child without root's power to ignore file permissions."""
    return subprocess.run([sys.executable, "-c", _AS_NOBODY, *argv], capture_output=True,
                          text=True, timeout=120, cwd="/")


@pytest.fixture
def locked_dataset():
    """A readable good file, a damaged one, and one nobody may read (mode 000), in a
    directory any user can enter."""
    folder = Path(tempfile.mkdtemp(prefix="ffrecord-locked-"))
    try:
        folder.chmod(0o755)
        for name, samples in (("good.ffr", [b"a", b"b"]), ("bad.ffr", [b"c" * 100]),
                              ("locked.ffr", [b"d"])):
            write_dataset(folder / name, samples).chmod(0o644)
        raw = bytearray((folder / "bad.ffr").read_bytes())
        raw[-10] ^= 0xFF
        (folder / "bad.ffr").write_bytes(bytes(raw))
        (folder / "locked.ffr").chmod(0)
        yield folder
    finally:
        shutil.rmtree(folder)


def test_cli_exits_refused_when_a_file_cannot_be_opened(locked_dataset):
    good, bad, locked = (str(locked_dataset / n) for n in ("good.ffr", "bad.ffr", "locked.ffr"))
    assert run_unprivileged("verify", good).returncode == EXIT_OK
    proc = run_unprivileged("verify", good, locked)
    assert proc.returncode == EXIT_OS, (proc.stdout, proc.stderr)
    assert f"{locked}: cannot open: open {locked}: permission denied" in proc.stdout
    assert "1 file(s) that could not be opened" in proc.stderr
    proc = run_unprivileged("info", locked)
    assert proc.returncode == EXIT_OS and "permission denied" in proc.stderr
    # damage found outranks a file that could not be looked at
    assert run_unprivileged("verify", bad, locked).returncode == EXIT_CORRUPT
