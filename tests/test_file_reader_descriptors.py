"""``FileReader(descriptors=False)``: thousands of files open at once under a small
``RLIMIT_NOFILE``, read from their mappings, and ``descriptors_held`` counting what a reader
holds."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from ffrecord import FileReader
from ffr_helpers import run_python, write_dataset

FILES = 2000
LIMIT = 256


def sample(file: int, index: int) -> bytes:
    return f"file {file} sample {index};".encode() * (1 + (file + index) % 7)


@pytest.fixture(scope="module")
def many_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("many")
    for k in range(FILES):
        write_dataset(root / f"{k:04d}.ffr", [sample(k, i) for i in range(3)])
    return root


# Opens every file of a directory as a FileReader of its own, all kept open, in a process
# limited to LIMIT descriptors, then reads each (batches and single samples, in a random
# order) and prints what it found as JSON. The library is loaded before the limit is set:
# the Go runtime raises the soft limit to the hard one when it starts.
CHILD = """
import json, os, random, resource, sys
from ffrecord import FileReader, _lib
from test_file_reader_descriptors import sample

_lib.current()
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
paths = sorted(os.path.join({root!r}, name) for name in os.listdir({root!r}))
readers = []
try:
    for path in paths:
        readers.append(FileReader(path, descriptors={descriptors}))
except OSError as exc:
    print(json.dumps({{"opened": len(readers), "errno": exc.errno, "message": str(exc)}}))
    sys.exit(0)
rng = random.Random(5)
wrong = []
for _ in range(3):
    for k in rng.sample(range(len(readers)), len(readers)):
        got = [s.tobytes() for s in readers[k].read([2, 0, 1])] + [readers[k].read_one(1).tobytes()]
        if got != [sample(k, 2), sample(k, 0), sample(k, 1), sample(k, 1)]:
            wrong.append(k)
print(json.dumps({{"opened": len(readers), "held": sum(r.descriptors_held for r in readers),
                  "open_now": len(os.listdir("/proc/self/fd")), "wrong": wrong}}))
"""


def run_child(root: Path, descriptors: bool) -> dict:
    return json.loads(run_python(CHILD.format(limit=LIMIT, root=str(root), descriptors=descriptors)))


def test_thousands_of_files_open_without_descriptors(many_files: Path) -> None:
    found = run_child(many_files, descriptors=False)
    assert found == {"opened": FILES, "held": 0, "open_now": found["open_now"], "wrong": []}
    assert found["open_now"] < LIMIT


def test_with_descriptors_the_limit_stops_the_opens(many_files: Path) -> None:
    found = run_child(many_files, descriptors=True)
    assert found["errno"] == 24  # EMFILE
    assert 0 < found["opened"] < LIMIT
    assert "too many open files" in found["message"].lower()
    assert f"{found['opened']:04d}.ffr" in found["message"]  # names the file it could not open


def test_descriptors_held_and_options(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "a.ffr", [sample(0, i) for i in range(3)])
    with FileReader(path, descriptors=False) as lean, FileReader(path) as usual:
        assert (lean.descriptors, usual.descriptors) == (False, True)
        assert (lean.descriptors_held, usual.descriptors_held) == (0, 1)
        assert [s.tobytes() for s in lean.read([0, 1, 2])] == [s.tobytes() for s in usual.read([0, 1, 2])]
        assert repr(lean) == f"FileReader({str(path)!r}, check_data=True, descriptors=False) n=3"
        copy = pickle.loads(pickle.dumps(lean))
        with copy:
            assert copy.descriptors is False and copy.descriptors_held == 0
            assert copy.read_one(2).tobytes() == sample(0, 2)
    with FileReader(path, direct=True, descriptors=False) as direct:  # a request, not a promise
        assert direct.descriptors_held >= 1 and direct.read_one(0).tobytes() == sample(0, 0)
    with pytest.raises(ValueError, match="closed"):
        _ = lean.descriptors_held


def test_a_file_replaced_after_the_open_reads_as_opened(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "a.ffr", [sample(0, i) * 2000 for i in range(3)])
    with FileReader(path, descriptors=False) as reader:
        write_dataset(tmp_path / "next.ffr", [b"another"] * 5)
        os.replace(tmp_path / "next.ffr", path)
        assert len(reader) == 3 and reader.read_one(2).tobytes() == sample(0, 2) * 2000


# A read of mapped data that a truncation took away raises SIGBUS, which the Go runtime's
# handler turns into CorruptFileError; it runs in a fresh interpreter because a SIGBUS
# handler installed after the library loaded (faulthandler.enable() again, as some test
# runs do) takes the signal first.
TRUNCATED = """
import os
from ffrecord import FileReader
from ffrecord.errors import CorruptFileError

with FileReader({path!r}, descriptors=False) as reader:
    os.truncate({path!r}, 100)
    for read in (lambda: reader.read([2]), lambda: reader.read_one(1), lambda: reader.validate()):
        try:
            read()
            print("read")
        except CorruptFileError as exc:
            print("truncated while open" in str(exc) and {path!r} in str(exc))
"""


def test_a_file_cut_short_after_the_open_raises(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "b.ffr", [sample(1, i) * 2000 for i in range(3)])
    assert run_python(TRUNCATED.format(path=str(path))).split() == ["True"] * 3
