"""ffrecord.utils.dump: one file or PART_xxxxx.ffr parts written by worker processes."""

from __future__ import annotations

import gc
import os
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileReader
from ffrecord.utils import dump
from ffr_helpers import garbage_pending
from tools_support import parse_base_format, read_all



def samples(n: int) -> list:
    return [pickle.dumps((i, "é" * (i % 7))) for i in range(n)]


def test_single_file(tmp_path):
    data = samples(200)
    out = tmp_path / "one.ffr"
    dump(data, out, nfiles=1)
    assert read_all(out) == data
    assert parse_base_format(out).n == 200


@pytest.mark.parametrize("n, nfiles, nparts", [(200, 8, 8), (200, 64, 50), (10, 16, 10),
                                               (7, 3, 3), (0, 4, 1)])
def test_parts_hold_contiguous_ranges_in_order(tmp_path, n, nfiles, nparts):
    data = samples(n)
    out = tmp_path / "parts"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dump(data, out, nfiles=nfiles)
    parts = sorted(out.glob("*.ffr"))
    assert [p.name for p in parts] == [f"PART_{k:05d}.ffr" for k in range(nparts)]
    assert any("rather than" in str(w.message) for w in caught) == (nparts != nfiles)
    assert read_all(out) == data
    sizes = [parse_base_format(p).n for p in parts]
    assert sum(sizes) == n and sizes == sorted(sizes, reverse=True)  # equal, last smaller


def test_bytes_like_samples_of_every_kind(tmp_path):
    data = [b"bytes", bytearray(b"bytearray"), memoryview(b"memoryview"),
            np.arange(10, dtype=np.int32), b""]
    dump(data, tmp_path / "parts", nfiles=2)
    expected = [bytes(memoryview(d).cast("B")) for d in data]
    assert read_all(tmp_path / "parts") == expected


class Squares:
    """An indexable dataset computed on demand (and picklable)."""

    def __len__(self) -> int:
        return 50

    def __getitem__(self, i: int) -> bytes:
        return str(i * i).encode()


class Unpicklable(Squares):
    def __init__(self) -> None:
        self.fn = lambda i: i  # lambdas do not pickle


def test_spawn_workers_receive_a_pickled_dataset(tmp_path):
    dump(Squares(), tmp_path / "spawned", nfiles=3, start_method="spawn")
    assert read_all(tmp_path / "spawned") == [str(i * i).encode() for i in range(50)]


def test_unpicklable_dataset_uses_fork_or_falls_back_in_process(tmp_path):
    dump(Unpicklable(), tmp_path / "forked", nfiles=3)  # default start method shares it
    assert read_all(tmp_path / "forked") == [str(i * i).encode() for i in range(50)]
    with pytest.warns(UserWarning, match="cannot be pickled"):
        dump(Unpicklable(), tmp_path / "local", nfiles=3, start_method="spawn")
    assert read_all(tmp_path / "local") == read_all(tmp_path / "forked")


class Collecting(Squares):
    """Collects garbage before every sample: in a worker, whatever its collector can see."""

    def __getitem__(self, i: int) -> bytes:
        gc.collect()
        return super().__getitem__(i)


def test_forked_workers_never_finalize_the_callers_garbage(tmp_path):
    record = tmp_path / "finalized"
    with garbage_pending(record):
        dump(Collecting(), tmp_path / "parts", nfiles=3, max_workers=2, start_method="fork")
        assert not record.exists(), f"finalized in a worker: {record.read_text()}"
    assert read_all(tmp_path / "parts") == [Squares()[i] for i in range(50)]
    assert record.read_text().split() == [str(os.getpid())]


class FailsAt(Squares):
    def __init__(self, bad: int) -> None:
        self.bad = bad

    def __getitem__(self, i: int):
        if i == self.bad:
            raise KeyError(f"sample {i} is missing")
        return super().__getitem__(i)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_failure_leaves_no_part_files(tmp_path, start_method):
    out = tmp_path / "parts"
    with pytest.raises(KeyError, match="sample 37 is missing"):
        dump(FailsAt(37), out, nfiles=5, start_method=start_method)
    assert list(out.glob("*.ffr")) == []
    with pytest.raises(Exception):
        FileReader(out)


class DiesAt(Squares):
    """A dataset whose worker process is killed at one sample (as the OOM killer would)."""

    def __getitem__(self, i: int):
        if i == 40:
            os._exit(9)
        return super().__getitem__(i)


def test_a_worker_killed_raises_oserror_and_leaves_no_part_files(tmp_path):
    with pytest.raises(OSError, match="worker process died"):
        dump(DiesAt(), tmp_path / "parts", nfiles=3, max_workers=2)
    assert list((tmp_path / "parts").glob("*.ffr")) == []


def test_a_failure_in_a_single_file_dump_leaves_nothing(tmp_path):
    with pytest.raises(TypeError):
        dump([b"ok", 12345, b"ok"], tmp_path / "one.ffr", nfiles=1)
    assert list(tmp_path.iterdir()) == []


def test_failures_name_the_sample(tmp_path):
    with pytest.raises(TypeError) as info:
        dump([b"ok"] * 10 + [object()], tmp_path / "p", nfiles=2)
    assert any("dataset[10]" in note for note in info.value.__notes__)


def test_stale_parts_from_an_earlier_dump_are_refused(tmp_path):
    out = tmp_path / "parts"
    dump(samples(30), out, nfiles=6)
    with pytest.raises(FileExistsError, match=r"3 other .ffr file.*PART_00003"):
        dump(samples(30), out, nfiles=3)
    dump(samples(12), out, nfiles=6)  # same parts: replaced in place
    assert read_all(out) == samples(12)


def test_files_the_reader_skips_are_not_stale(tmp_path):
    """Hidden files and directories named *.ffr are no part of a dataset for the core, so
    dump neither refuses them nor do they change what FileReader(folder) reads."""
    out = tmp_path / "parts"
    out.mkdir()
    (out / ".notes.ffr").write_bytes(b"not a part")
    (out / "x.ffr").mkdir()
    dump(samples(20), out, nfiles=4)
    assert read_all(out) == samples(20)
    with FileReader(out) as reader:
        assert [Path(f).name for f in reader.fnames] == [f"PART_0000{k}.ffr" for k in range(4)]


def test_part_names_sort_in_part_order_past_100000_parts():
    from ffrecord._paths import part_name

    assert part_name(0, 3) == "PART_00000.ffr"  # the reference's names
    names = [part_name(k, 100_001) for k in (0, 9, 10, 99_999, 100_000)]
    assert names == sorted(names) and names[-1] == "PART_100000.ffr"


def test_argument_checks(tmp_path):
    with pytest.raises(ValueError):
        dump(samples(3), tmp_path / "x", nfiles=0)


def test_verbose_shows_a_progress_bar(tmp_path, capsys):
    dump(samples(40), tmp_path / "v", nfiles=2, verbose=True)
    assert "40/40" in capsys.readouterr().err
    dump(samples(40), tmp_path / "v1.ffr", nfiles=1, verbose=True)
    assert "40/40" in capsys.readouterr().err


def test_compressed_dump(tmp_path):
    data = [b"compress me " * 100 for _ in range(20)]
    dump(data, tmp_path / "z", nfiles=2, compression="lz4")
    assert read_all(tmp_path / "z") == data
    stored = sum(p.stat().st_size for p in Path(tmp_path / "z").glob("*.ffr"))
    assert stored < sum(map(len, data)) / 4
