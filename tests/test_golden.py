"""The reference implementation's files (``shared/golden``): every sample by sha256, every
file alone, as a list and as a directory, and every corrupt file as ``MANIFEST.json`` says.

Driven by the manifest, so more files, bigger samples or more parts are checked the same way.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

from ffrecord import CorruptFileError, FFRecordWarning, FileReader


def manifest(golden: Path) -> dict:
    return json.loads((golden / "MANIFEST.json").read_text())


def sha256s(samples) -> list[str]:
    return [hashlib.sha256(s).hexdigest() for s in samples]


def expected(entry: dict) -> list[str]:
    return [s["sha256"] for s in entry["samples"]]


def test_every_sample_of_every_file(golden: Path) -> None:
    files = manifest(golden)["files"]
    assert files, "the manifest lists no files"
    for name, entry in files.items():
        with FileReader(golden / name, check_data=True) as reader:
            assert reader.n == entry["n"] == len(entry["samples"]), name
            batch = reader.read(range(reader.n)) if reader.n else []
            assert sha256s(batch) == expected(entry), name
            assert [len(s) for s in batch] == [s["len"] for s in entry["samples"]], name
            one_by_one = [reader.read_one(i) for i in reversed(range(reader.n))]
            assert sha256s(one_by_one[::-1]) == expected(entry), name
            assert reader.verify() == [], name
            reader.validate()


@pytest.mark.parametrize("direct", [False, True])
def test_directories_and_lists_read_as_one_dataset(golden: Path, direct: bool) -> None:
    files = manifest(golden)["files"]
    folders: dict[str, list[str]] = defaultdict(list)
    for name in files:
        if "/" in name:
            folders[name.rsplit("/", 1)[0]].append(name)
    assert folders, "the manifest lists no multi-file directory"
    for folder, names in folders.items():
        names.sort()
        want = [h for name in names for h in expected(files[name])]
        for source in (golden / folder, [golden / name for name in names]):
            with FileReader(source, check_data=True, direct=direct) as reader:
                assert reader.fnames == [str(golden / name) for name in names]
                assert reader.n == len(want)
                order = list(range(reader.n))[::-1]
                assert sha256s(reader.read(order)) == [want[i] for i in order], folder


def test_corrupt_sample(golden: Path) -> None:
    path = golden / "corrupt_sample.ffr"
    with FileReader(path, check_data=True) as reader:
        with pytest.raises(CorruptFileError, match=r"corrupt_sample\.ffr.*sample 2"):
            reader.read([2])
        with pytest.raises(CorruptFileError, match="sample 2"):
            reader.read_one(2)
        others = [i for i in range(reader.n) if i != 2]
        assert len(reader.read(others)) == len(others)
        assert reader.verify() == [2]
        with pytest.raises(CorruptFileError, match=r"corrupt_sample\.ffr: sample 2"):
            reader.validate()
    with FileReader(path, check_data=False) as reader:
        assert len(reader.read_one(2)) > 0  # unchecked: the stored bytes come back
        assert reader.verify() == [2]


def test_corrupt_header(golden: Path) -> None:
    path = golden / "corrupt_header.ffr"
    with pytest.raises(CorruptFileError, match="corrupt_header.ffr"):
        FileReader(path, check_data=True)
    with FileReader(path, check_data=False) as reader:  # unchecked: opens; validation fails
        with pytest.raises(CorruptFileError):
            reader.validate()


def test_truncated_data(golden: Path) -> None:
    path = golden / "truncated.ffr"
    for check_data in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FFRecordWarning)  # "file is cut short" is fine
            reader = FileReader(path, check_data=check_data)
        with reader:
            readable = []
            for index in range(reader.n):
                try:
                    readable.append(len(reader.read_one(index)))
                except CorruptFileError as exc:
                    assert "truncated.ffr" in str(exc)
                    break
            assert len(readable) < reader.n, "samples past the end must fail"
            assert reader.sizes(range(len(readable))).tolist() == readable
            for index in range(len(readable), reader.n):  # every later one fails too
                with pytest.raises(CorruptFileError, match="truncated.ffr"):
                    reader.read([0, index])


def test_truncated_header(golden: Path) -> None:
    for check_data in (True, False):
        with pytest.raises(CorruptFileError, match="truncated_header.ffr"):
            FileReader(golden / "truncated_header.ffr", check_data=check_data)


def test_legacy_zero_checksum_reads_with_one_warning(golden: Path) -> None:
    path = golden / "legacy_zero_checksum.ffr"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = FileReader(path, check_data=True)
    legacy = [w for w in caught if issubclass(w.category, FFRecordWarning)]
    assert len(legacy) == 1 and "legacy_zero_checksum.ffr" in str(legacy[0].message)
    with reader:
        assert len(reader.read(range(reader.n))) == reader.n
        entry = manifest(golden)["files"].get("legacy_zero_checksum.ffr")
        if entry:
            assert sha256s(reader.read(range(reader.n))) == expected(entry)


@pytest.mark.filterwarnings("ignore::ffrecord.FFRecordWarning")
def test_every_corrupt_file_in_the_manifest_fails_loudly(golden: Path) -> None:
    """Any corrupt file the manifest describes, known or new: either it is the readable legacy
    kind, or opening and reading it with check_data raises CorruptFileError; never garbage."""
    for name, description in manifest(golden).get("corrupt", {}).items():
        if "readable" in description:
            with FileReader(golden / name) as reader:
                reader.read(range(reader.n))
            continue
        with pytest.raises(CorruptFileError):
            with FileReader(golden / name, check_data=True) as reader:
                reader.read(range(reader.n))
