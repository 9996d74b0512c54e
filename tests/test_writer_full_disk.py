"""A writer that fails for want of space raises that error ("no space left on device"), never
one of its own clean-up after it; a clean-up that fails too is noted on the error. Every
writer: ``DatasetWriter``, ``ShardedDatasetWriter``, ``TokenWriter``, ``dump``, ``FileWriter``."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileWriter
from ffrecord import writer as writer_module
from ffrecord.dataset import DatasetWriter, ShardedDatasetWriter
from ffrecord.dataset import writer as dataset_writer_module
from ffrecord.tokens import TokenWriter
from ffrecord.utils import dump

FAIL_AT = 5  # the write that finds the disk full


@pytest.fixture
def disk_fills(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``FAIL_AT``-th sample written by any ``FileWriter`` finds the disk full (as a
    delayed write error surfaces at a later write)."""
    write_one = FileWriter.write_one
    written = [0]

    def filling(self, data):
        written[0] += 1
        if written[0] == FAIL_AT:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.fname))
        return write_one(self, data)

    monkeypatch.setattr(FileWriter, "write_one", filling)


def write_dataset(path: Path, **options) -> None:
    with DatasetWriter(path, {"a": "bytes", "b": "int[]"}, **options) as writer:
        for k in range(10):
            writer.append({"a": bytes(100), "b": [k, k]})


def write_sharded(path: Path) -> None:
    with ShardedDatasetWriter(path, {"a": "bytes"}, shardlen=3) as writer:
        for k in range(10):
            writer.append({"a": bytes([k])})


def write_tokens(path: Path) -> None:
    with TokenWriter(path, 1000) as writer:
        for k in range(10):
            writer.append(np.arange(k + 1))


def write_file(path: Path) -> None:
    with FileWriter(path / "one.ffr", 10) as writer:
        for k in range(10):
            writer.write_one(bytes([k]))


def dump_parts(path: Path) -> None:
    dump([bytes([k]) for k in range(20)], path, nfiles=2, max_workers=1)


WRITERS = {
    "DatasetWriter": write_dataset,
    "DatasetWriter(length=10)": lambda path: write_dataset(path, length=10),
    "ShardedDatasetWriter": write_sharded,
    "TokenWriter": write_tokens,
    "FileWriter": write_file,
    "dump": dump_parts,
}


def cleaning_notes(error: BaseException) -> list[str]:
    return [note for note in getattr(error, "__notes__", []) if note.startswith("cleaning up")]


@pytest.mark.parametrize("name", list(WRITERS))
def test_the_full_disk_is_the_error_raised(tmp_path, disk_fills, name):
    out = tmp_path / "out"
    if name == "FileWriter":
        out.mkdir()
    with pytest.raises(OSError) as info:
        WRITERS[name](out)
    assert info.value.errno == errno.ENOSPC, repr(info.value)
    assert not cleaning_notes(info.value)  # nothing went wrong cleaning up
    if name == "ShardedDatasetWriter":  # the shard full before the failure stays complete
        assert sorted(os.listdir(out)) == ["000000"]
    elif name in ("FileWriter", "dump"):  # no part left (a dump keeps the folder it made)
        assert os.listdir(out) == []
    else:
        assert not out.exists()  # the directory it made is gone again


def test_an_abort_after_the_failure_is_harmless(tmp_path, disk_fills):
    writer = DatasetWriter(tmp_path / "ds", {"a": "bytes"})
    with pytest.raises(OSError, match="No space left"):
        for _ in range(FAIL_AT):
            writer.append({"a": b"x"})
    writer.abort()
    writer.abort()
    assert not (tmp_path / "ds").exists()


def test_a_clean_up_that_fails_too_is_a_note_on_the_error(tmp_path, disk_fills, monkeypatch):
    def broken_sync(directory):
        raise OSError(errno.EIO, "Input/output error", str(directory))

    monkeypatch.setattr(dataset_writer_module, "sync_directory", broken_sync)
    with pytest.raises(OSError) as info:
        write_dataset(tmp_path / "ds")
    assert info.value.errno == errno.ENOSPC
    assert info.value.__notes__ == [f"cleaning up after it failed too: OSError: [Errno 5] Input/output "
                                    f"error: '{tmp_path / 'ds'}'"]
    # the claim was given up all the same: another writer may start
    monkeypatch.undo()
    write_dataset(tmp_path / "ds")


def test_a_context_manager_notes_a_failed_abort(tmp_path):
    class FailsToAbort(writer_module.ClosesOrAborts):
        def close(self):
            raise AssertionError("not closed after an error")

        def abort(self):
            raise FileNotFoundError("gone already")

    with pytest.raises(ValueError, match="the user's error") as info:
        with FailsToAbort():
            raise ValueError("the user's error")
    assert info.value.__notes__ == ["cleaning up after it failed too: FileNotFoundError: gone already"]


def test_a_real_write_limit_is_the_error_raised(tmp_path):
    """No mocks: a file-size limit makes the disk "full" partway through a dataset of two
    fields, in a child process (``EFBIG``, "file too large", as ENOSPC comes)."""
    script = (
        "import errno, os, resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, 3 << 20))\n"
        "from ffrecord.dataset import DatasetWriter\n"
        "try:\n"
        f"    with DatasetWriter({str(tmp_path / 'ds')!r}, {{'a': 'bytes', 'b': 'bytes[]'}}) as w:\n"
        "        for i in range(400):\n"
        "            w.append({'a': bytes(40000), 'b': [bytes(100)] * 3})\n"
        "except OSError as exc:\n"
        "    print(exc.errno == errno.EFBIG, getattr(exc, '__notes__', None))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "None"], out.stdout + out.stderr
    assert os.listdir(tmp_path) == []


def test_a_full_tmpfs_is_the_error_raised(tmp_path):
    """The disk really full: a 1 MiB tmpfs (needs root to mount)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        for write in (write_big_dataset, write_big_tokens):
            with pytest.raises(OSError) as info:
                write(mnt / "out")
            assert info.value.errno == errno.ENOSPC and "no space left" in str(info.value)
            assert not cleaning_notes(info.value) and os.listdir(mnt) == []
    finally:
        assert subprocess.run(["umount", str(mnt)]).returncode == 0


def write_big_dataset(path: Path) -> None:
    with DatasetWriter(path, {"a": "bytes", "b": "bytes[]"}) as writer:
        for _ in range(400):
            writer.append({"a": bytes(40000), "b": [bytes(100)] * 3})


def write_big_tokens(path: Path) -> None:
    with TokenWriter(path, 1000) as writer:
        for _ in range(100):
            writer.append(np.arange(20000) % 1000)
