"""Copies of a reader in other processes skip re-checking the headers of unchanged files."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pytest

from ffrecord import FileReader
from ffrecord.errors import CorruptFileError
from ffrecord.reader import reopen
from ffr_helpers import run_in_child, write_dataset

# A file changed within a tick of the file clock before it is checked is never vouched for.
SETTLE_S = 0.25


def damage_metadata_checksum(path: Path) -> None:
    with open(path, "r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 1]))


def identity(path: Path) -> tuple[int, ...]:
    """The words ffr_reader_verified gives for path: device, inode, size, mtime, ctime."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@pytest.fixture()
def settled(tmp_path: Path) -> Path:
    path = write_dataset(tmp_path / "v.ffr", [b"a", b"bb", b"ccc"])
    time.sleep(SETTLE_S)
    return path


def test_checked_reader_vouches_for_its_files_and_pickles_it(settled: Path) -> None:
    with FileReader(settled, check_data=True) as r:
        assert r.vouched_files == identity(settled)
        copy = pickle.loads(pickle.dumps(r))
        assert copy.vouched_files == r.vouched_files
        assert [s.tobytes() for s in copy.read([2, 0])] == [b"ccc", b"a"]
        copy.close()
    with FileReader(settled, check_data=False) as unchecked:
        assert unchecked.vouched_files == ()


def test_vouched_unchanged_file_is_not_checked_again(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "v.ffr", [b"a", b"bb"])
    damage_metadata_checksum(path)
    with pytest.raises(CorruptFileError, match="metadata"):
        FileReader(path, check_data=True)
    with reopen(path, True, identity(path)) as r:  # the damage is not seen: not re-read
        assert r.n == 2
        assert r.vouched_files == identity(path)
        # A forked copy reopens by path vouching for the same file: not re-read either.
        run_in_child(lambda: [s.tobytes() for s in r.read([1])] == [b"bb"] or os._exit(3))


def test_changed_file_is_checked_in_full(settled: Path) -> None:
    r = FileReader(settled, check_data=True)
    vouched = pickle.dumps(r)
    damage_metadata_checksum(settled)
    with pytest.raises(CorruptFileError, match="metadata"):
        reopen(settled, True, r.vouched_files)
    with pytest.raises(CorruptFileError, match="metadata"):
        pickle.loads(vouched)

    def child() -> None:  # a forked copy reopens by path with what the parent checked
        with pytest.raises(CorruptFileError, match="metadata"):
            r.read([0])

    run_in_child(child)
    r.close()


def test_bad_identity_words_are_refused(settled: Path) -> None:
    with pytest.raises(ValueError, match="multiple of 5"):
        reopen(settled, True, (1, 2, 3))


def test_torch_dataset_copies_vouch_for_what_its_reader_checked(settled: Path) -> None:
    pytest.importorskip("torch")
    from ffrecord.torch import Dataset

    dataset = Dataset(str(settled))
    vouched = dataset.reader.vouched_files
    assert vouched == identity(settled)
    copy = pickle.loads(pickle.dumps(dataset))  # what a spawned loader worker receives
    assert copy.reader.vouched_files == vouched
    damage_metadata_checksum(settled)
    with pytest.raises(CorruptFileError, match="metadata"):
        pickle.loads(pickle.dumps(dataset)).reader  # noqa: B018 - opening is the point


def test_verified_files_is_a_deprecated_spelling_of_vouched_files(settled: Path) -> None:
    with FileReader(settled, check_data=True) as r:
        with pytest.warns(DeprecationWarning, match="vouched_files"):
            assert r.verified_files == r.vouched_files == identity(settled)
