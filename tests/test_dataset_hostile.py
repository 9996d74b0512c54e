"""Structured datasets under hostile or careless use (issue 17): clobbering writers, damaged
counts, tables and specs, encoders that reuse their buffer, huge masks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileWriter
from ffrecord.dataset import (CorruptDatasetError, DatasetReader, DatasetWriter,
                              SequenceRangeError, ShardedDatasetReader, ShardedDatasetWriter,
                              UnsupportedVersionError)
from ffrecord.dataset import sequence
from ffrecord.dataset.spec import VERSION
from ffrecord.dataset.claim import CLAIM_FILE
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

SPEC = {"a": "utf8", "b": "utf8"}


def _contents(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (its manifest's too), by relative path."""
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file()}


# ---- item 4: one writer per directory ----------------------------------------------------

def test_a_second_writer_is_refused_while_the_first_writes(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    first = DatasetWriter(path, SPEC)
    first.append({"a": "P", "b": "P"})
    with pytest.raises(FileExistsError, match="another writer is writing"):
        DatasetWriter(path, SPEC)
    first.append({"a": "P", "b": "P"})
    first.close()
    with pytest.raises(FileExistsError, match="already holds a dataset"):
        DatasetWriter(path, SPEC)
    assert DatasetReader(path).read([0, 1]) == [{"a": "P", "b": "P"}] * 2
    assert sorted(os.listdir(path)) == ["_manifest", "a.ffr", "b.ffr", "spec.json"]  # the claim is gone


_HOLDER = """
import sys
from ffrecord.dataset import {cls}
writer = {cls}(sys.argv[1], {{"a": "utf8", "b": "utf8"}}{extra})
writer.append({{"a": "Q", "b": "Q"}})
print("ready", flush=True)
sys.stdin.readline()
writer.close()
print("closed", flush=True)
"""


def _holder(path: Path, cls: str = "DatasetWriter", extra: str = "") -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER.format(cls=cls, extra=extra), str(path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_writers_in_two_processes_and_a_killed_writer(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    other = _holder(path)
    try:
        with pytest.raises(FileExistsError, match=r"another writer is writing a dataset here \(pid"):
            DatasetWriter(path, SPEC)
        assert (path / CLAIM_FILE).exists()  # the refusal removed nothing of the other's
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait(timeout=60)
    # The dead writer's claim is taken over; its leftovers never read as a dataset.
    with DatasetWriter(path, SPEC) as writer:
        writer.append({"a": "P", "b": "P"})
    assert DatasetReader(path)[0] == {"a": "P", "b": "P"}


def test_a_claim_ends_with_its_process_not_its_children(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    script = ("import os, sys, time\n"
              "from ffrecord.dataset import DatasetWriter\n"
              f"writer = DatasetWriter({str(path)!r}, {{'a': 'utf8'}})\n"
              "if os.fork() == 0:\n"
              "    time.sleep(60)\n"
              "    os._exit(0)\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        with pytest.raises(FileExistsError, match="another writer"):
            DatasetWriter(path, SPEC)
        proc.send_signal(signal.SIGKILL)  # the writer dies; its forked child lives on
        proc.wait(timeout=60)
        with DatasetWriter(path, SPEC) as writer:
            writer.append({"a": "P", "b": "P"})
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def test_a_finished_other_writer_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    other = _holder(path)
    other.communicate("\n", timeout=60)
    done = _contents(path)
    for spec in (SPEC, {"c": "int"}):
        with pytest.raises(FileExistsError, match="already holds a dataset"):
            DatasetWriter(path, spec)
    assert _contents(path) == done and DatasetReader(path)[0] == {"a": "Q", "b": "Q"}


def test_close_refuses_a_spec_that_appeared_and_removes_only_its_own_files(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    writer = DatasetWriter(path, SPEC)
    writer.append({"a": "P", "b": "P"})
    (path / "spec.json").write_text("someone else's")
    (path / "notes.txt").write_text("the user's")
    with pytest.raises(FileExistsError, match="not replacing it"):
        writer.close()
    assert _contents(path) == {"notes.txt": b"the user's", "spec.json": b"someone else's"}


def test_abort_and_failed_close_keep_what_others_made(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    with DatasetWriter(path, SPEC) as writer:
        writer.append({"a": "P", "b": "P"})
    done = _contents(path)
    writer.abort()  # after a successful close: nothing to discard
    assert _contents(path) == done
    fresh = tmp_path / "fresh"
    short = DatasetWriter(fresh, SPEC, length=2)  # it creates the directory
    short.append({"a": "P", "b": "P"})
    (fresh / "notes.txt").write_text("the user's")
    with pytest.raises(ValueError):
        short.close()  # one datapoint short
    assert _contents(fresh) == {"notes.txt": b"the user's"}


def test_sharded_writers_with_overlapping_shards_fail_for_the_second(tmp_path: Path) -> None:
    path = tmp_path / "sharded"
    other = _holder(path, "ShardedDatasetWriter", ", shardlen=2")  # writing shard 0
    try:
        writer = ShardedDatasetWriter(path, SPEC, shardlen=2)
        with pytest.raises(FileExistsError, match="shard 0 is another writer's"):
            writer.append({"a": "P", "b": "P"})
        writer.abort()
        other.communicate("\n", timeout=60)
    finally:
        other.kill()
    with pytest.raises(FileExistsError, match="holds a dataset .version 1.: append to it"):
        ShardedDatasetWriter(path, SPEC, shardlen=2)
    with ShardedDatasetReader(path) as reader:  # the first writer's shard, unmixed
        assert list(reader) == [{"a": "Q", "b": "Q"}]


def test_threads_racing_for_one_directory(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    outcomes: list[str] = []

    def attempt(tag: str) -> None:
        try:
            with DatasetWriter(path, SPEC) as writer:
                writer.append({"a": tag, "b": tag})
            outcomes.append("wrote")
        except FileExistsError:
            outcomes.append("refused")

    threads = [threading.Thread(target=attempt, args=(str(k),)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("wrote") == 1, outcomes
    point = DatasetReader(path)[0]
    assert point["a"] == point["b"]


# ---- item 7: encoders that reuse their output buffer --------------------------------------

def test_an_encoder_reusing_one_scratch_buffer(tmp_path: Path) -> None:
    scratch = bytearray(8)

    def encode(value: int) -> bytearray:
        scratch[:] = value.to_bytes(8, "little")
        return scratch

    def decode(view: memoryview) -> int:
        return int.from_bytes(view, "little")

    spec = {"x": "n", "y": "n", "s": "n[]", "z": "n:zstd"}
    with DatasetWriter(tmp_path / "ds", spec, {"n": encode}) as writer:
        writer.append({"x": 1, "y": 2, "s": [3, 4, 5], "z": 6})
        writer.append({"x": 7, "y": 8, "s": [], "z": 9})
    with DatasetReader(tmp_path / "ds", {"n": decode}) as reader:
        assert reader.read([0, 1]) == [{"x": 1, "y": 2, "s": [3, 4, 5], "z": 6},
                                       {"x": 7, "y": 8, "s": [], "z": 9}]
        assert reader[0, {"s": range(1, 3)}] == {"s": [4, 5]}


# ---- items 6, 10, 12: damaged counts and tables, huge masks -----------------------------------

def _one_sequence(tmp_path: Path, sample: bytes, compression: str | None = None) -> Path:
    path = tmp_path / f"bad{len(os.listdir(tmp_path))}"
    path.mkdir()
    with FileWriter(path / "s.ffr", 1, compression=compression) as writer:
        writer.write_one(sample)
    (path / "spec.json").write_text(json.dumps({"format": "ffrecord.dataset", "version": 1,
                                                "length": 1, "fields": {"s": "bytes[]"}}))
    return path


def _table(*entries: tuple[int, int, int], count: int | None = None) -> bytes:
    head = struct.pack("<Q", len(entries) if count is None else count)
    return head + b"".join(struct.pack("<QQI", *e) for e in entries)


DAMAGED = {
    "2**62 elements in 33 bytes": (struct.pack("<Q", 2**62) + b"x" * 25, "element count does not fit"),
    "count -1": (struct.pack("<Q", 2**64 - 1) + b"x" * 25, "element count does not fit"),
    "no room for the count": (b"abc", "element count does not fit a sample of 3 bytes"),
    "a length of 10**19": (_table((28, 10**19, 0)), "past the end of the sample"),
    "offset + length wraps": (_table((28, 2**64 - 1, 0)) + b"x", "past the end of the sample"),
    "offset in the table": (_table((0, 4, 0)) + b"xxxx", "points into itself"),
    "overlapping elements": (_table((48, 3, zlib.crc32(b"xyz")), (48, 3, zlib.crc32(b"xyz"))) + b"xyz",
                             "overlap or are out of order"),
    "huge offset": (_table((2**63, 1, 0)) + b"x", "past the end of the sample"),
}


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_sequence_tables(tmp_path: Path, case: str, compression: str | None) -> None:
    sample, match = DAMAGED[case]
    path = _one_sequence(tmp_path, sample, compression)
    counts_ok = "count" not in match
    with DatasetReader(path) as reader:
        reads = {"whole": lambda: reader[0], "range": lambda: reader[0, {"s": range(0, 1)}],
                 "open range": lambda: reader[0, {"s": slice(0, None)}],
                 "stepped": lambda: reader[0, {"s": range(0, 1, 3)}],
                 "available": lambda: reader.available(0),
                 "element_counts": lambda: reader.element_counts("s")}
        for how, read in reads.items():
            if counts_ok and how in ("available", "element_counts"):
                assert read() in ({"s": 1}, {"s": 2}) or read().tolist() in ([1], [2])
                continue
            if case == "overlapping elements" and how in ("range", "stepped"):
                assert read() == {"s": [b"xyz"]}  # element 0 alone is intact
                continue
            with pytest.raises(CorruptDatasetError, match=f"s.ffr: datapoint 0, field 's': .*{match}"):
                read()
    with DatasetReader(path, cache_keys=["s"]) as cached:
        with pytest.raises(CorruptDatasetError):
            cached[0]
        if not counts_ok:
            with pytest.raises(CorruptDatasetError, match=match):
                cached.available(0)


@pytest.mark.parametrize("mask", [range(0, 2**40), range(0, 10**30), range(10**30, 10**31),
                                  range(3, 2**64)])
def test_huge_ranges_are_validated_first(tmp_path: Path, mask: range) -> None:
    with DatasetWriter(tmp_path / "ds", {"s": "bytes[]"}) as writer:
        writer.append({"s": [b"ab", b"c"]})
    with DatasetReader(tmp_path / "ds") as reader, DatasetReader(tmp_path / "ds", cache_keys=["s"]) as cached:
        for r in (reader, cached):
            with pytest.raises(SequenceRangeError, match=r"past the end of its 2 elements"):
                r[0, {"s": mask}]
        for r in (reader, cached):
            assert r[0, {"s": slice(5, None)}] == r[0, {"s": slice(10**30, None)}] == {"s": []}
            assert r[0, {"s": range(0, 2, 10**30)}] == r[0, {"s": slice(0, None, 2**64)}] == {"s": [b"ab"]}


# ---- items 8 and 12: spec.json -----------------------------------------------------------------

@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    with DatasetWriter(tmp_path / "ds", {"n": "int"}) as writer:
        writer.append({"n": 1})
    return tmp_path / "ds"


SPEC_BASE = {"format": "ffrecord.dataset", "version": 1, "length": 1, "fields": {"n": "int"}}


@pytest.mark.parametrize("text, match", [
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    (b'{"format": "ffrecord.dataset", "v\xff": 1}', r"not UTF-8 text \(invalid start byte at byte 33\)"),
    ('{"format": "ffrecord.dataset", "version": 1, "version": 1, "length": 1, "fields": {"n": "int"}}',
     "key 'version' appears twice"),
    (json.dumps(SPEC_BASE)[:-1] + ', "fields": {"n": "utf8"}}', "key 'fields' appears twice"),
    ('{"format": "ffrecord.dataset", "version": 1, "length": 1, "fields": {"n": "int", "n": "utf8"}}',
     "key 'n' appears twice"),
    (json.dumps({**SPEC_BASE, "version": 0}), "bad format version 0"),
    (json.dumps({**SPEC_BASE, "version": -3}), "bad format version -3"),
    (json.dumps({**SPEC_BASE, "version": True}), "bad format version True"),
    (json.dumps({**SPEC_BASE, "version": 1.0}), "bad format version 1.0"),
    (json.dumps({**SPEC_BASE, "length": True}), "bad datapoint count True"),
    (json.dumps({**SPEC_BASE, "length": -1}), "bad datapoint count -1"),
    (json.dumps({**SPEC_BASE, "format": "other"}), "not a structured dataset spec"),
    (json.dumps([1, 2]), "not a structured dataset spec"),
    (json.dumps({**SPEC_BASE, "fields": {"../x": "int"}}), "field name '../x'"),
    ("{not json", "not JSON"),
    ("", "not JSON"),
])
def test_damaged_spec_files(dataset: Path, text: str | bytes, match: str) -> None:
    spec = dataset / "spec.json"
    spec.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(CorruptDatasetError, match=f"spec.json: {match}"):
        DatasetReader(dataset)


def test_a_newer_version_still_says_upgrade(dataset: Path) -> None:
    (dataset / "spec.json").write_text(json.dumps({**SPEC_BASE, "version": VERSION + 1}))
    with pytest.raises(UnsupportedVersionError, match="upgrade"):
        DatasetReader(dataset)


def test_spec_files_that_block_or_never_end(dataset: Path) -> None:
    spec = dataset / "spec.json"
    spec.unlink()
    os.mkfifo(spec)  # no writer ever opens it: a blocking open would wait forever
    with pytest.raises(ValueError, match="spec.json: not a regular file but a FIFO"):
        DatasetReader(dataset)
    spec.unlink()
    spec.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="spec.json: not a regular file but a character device"):
        DatasetReader(dataset)
    spec.unlink()
    with open(spec, "wb") as f:
        f.truncate(64 << 20)  # sparse: costs no disk
    with pytest.raises(CorruptDatasetError, match="spec.json: larger than 16 MiB"):
        DatasetReader(dataset)


def test_the_cli_reports_a_deep_spec_without_a_traceback(dataset: Path) -> None:
    shutil.rmtree(dataset / "_manifest")  # read by its spec.json, as before manifests
    (dataset / "spec.json").write_text("[" * 100_000)
    run = subprocess.run([sys.executable, "-m", "ffrecord", "info", str(dataset)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "spec.json: nested too deep" in run.stderr


def test_counts_are_arrays_of_checked_ints(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds", {"s": "bytes[]"}) as writer:
        for k in range(5):
            writer.append({"s": [b"x"] * k})
    with DatasetReader(tmp_path / "ds") as reader:
        counts = reader.element_counts("s")
        assert counts.dtype == np.int64 and counts.tolist() == [0, 1, 2, 3, 4]
        assert [reader.available(k)["s"] for k in range(5)] == [0, 1, 2, 3, 4]


# ---- item 13: the command line on structured datasets ----------------------------------------

def _cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    from ffrecord.cli import main

    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture()
def rich(tmp_path: Path) -> Path:
    path = tmp_path / "rich"
    with DatasetWriter(path, {"label": "int", "image": "bytes", "caption": "utf8:zstd",
                              "frames": "bytes[]:lz4", "meta": "json", "box": "array"}) as writer:
        for k in range(600):
            writer.append({"label": k, "image": bytes([k % 256]) * (k + 40), "caption": f"pic {k}",
                           "frames": [b"f%d" % e for e in range(k % 20)], "meta": {"k": [k]},
                           "box": np.full((2, 3), k, np.int16)})
    return path


def test_cli_verify_checks_a_dataset_whole(capsys: pytest.CaptureFixture, rich: Path, tmp_path: Path) -> None:
    assert _cli(capsys, "verify", str(rich))[:2] == (0, "OK: 6 file(s), 3,600 samples verified\n")
    # An element table damaged behind an intact sample CRC (as a buggy writer would leave it).
    bad = tmp_path / "bad"
    with DatasetWriter(bad, {"s": "bytes[]"}) as writer:
        for k in range(3):
            writer.append({"s": []})
    sample = bytearray(sequence.pack([b"abc", b"de"]))
    sample[8 + 20 + 8] = 99  # element 1's length
    (bad / "s.ffr").unlink()
    with FileWriter(bad / "s.ffr", 3) as w:
        w.write_one(b"\0" * 8)  # datapoint 0: no elements, fine
        w.write_one(b"\1")  # datapoint 1: too short for its count
        w.write_one(bytes(sample))
    status, out, err = _cli(capsys, "verify", str(bad))
    assert status == 1 and "3 dataset problem(s)" in err
    assert f"{bad / 's.ffr'}: not the file version 1 of the manifest lists" in out  # written by hand
    assert f"{bad / 's.ffr'}: datapoint 1: the element count does not fit a sample of 1 bytes" in out
    assert f"{bad / 's.ffr'}: datapoint 2: the element table points past the end of the sample" in out
    (rich / "label.ffr").unlink()  # info reports it, so must verify
    status, out, err = _cli(capsys, "verify", str(rich))
    assert status == 1 and "field 'label': label.ffr is missing" in out and "FAILED" in err
    assert _cli(capsys, "info", str(rich))[0] != 0
    spec = json.loads((rich / "spec.json").read_text())
    (rich / "spec.json").write_text(json.dumps({**spec, "length": 601}))
    status, out, _ = _cli(capsys, "verify", str(rich))
    assert status == 1 and "image.ffr: field 'image' holds 600 datapoints; spec.json says 601" in out
    (rich / "spec.json").write_text("{")
    status, out, _ = _cli(capsys, "verify", str(rich))
    assert status == 1 and "spec.json: not JSON" in out


def test_cli_verify_a_sharded_dataset(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    path = tmp_path / "sharded"
    with ShardedDatasetWriter(path, {"s": "bytes[]"}, shardlen=2) as writer:
        for k in range(5):
            writer.append({"s": [b"x"] * k})
    assert _cli(capsys, "verify", str(path))[0] == 0
    (path / "000001" / "s.ffr").unlink()
    status, out, _ = _cli(capsys, "verify", str(path))
    assert status == 1 and "000001: field 's': s.ffr is missing" in out


def test_cli_cat_addresses_datapoints(capsys: pytest.CaptureFixture, rich: Path, tmp_path: Path) -> None:
    status, out, _ = _cli(capsys, "cat", str(rich), "500", "-1")
    assert status == 0
    first, last = map(json.loads, out.splitlines())
    assert first["label"] == 500 and first["caption"] == "pic 500" and first["meta"] == {"k": [500]}
    assert first["image"] == {"bytes": 540, "hex": "f4" * 16, "text": "." * 16}
    assert first["box"] == {"array": "int16", "shape": [2, 3], "values": [500] * 6}
    assert last["frames"][:2] == [{"bytes": 2, "hex": "6630", "text": "f0"},
                                  {"bytes": 2, "hex": "6631", "text": "f1"}]
    assert last["frames"][-1] == "(3 more)" and len(last["frames"]) == 17
    out_file = tmp_path / "image.bin"
    assert _cli(capsys, "cat", str(rich), "3", "--field", "image", "--out", str(out_file))[0] == 0
    assert out_file.read_bytes() == bytes([3]) * 43
    assert _cli(capsys, "cat", str(rich), "7", "--field", "frames", "--out", str(out_file))[0] == 0
    assert out_file.read_bytes() == b"f0f1f2f3f4f5f6"
    status, _, err = _cli(capsys, "cat", str(rich), "0", "--field", "nope")
    assert status == 2 and "no field 'nope'" in err
    assert _cli(capsys, "cat", str(rich), "600")[0] == 2
    assert _cli(capsys, "cat", str(rich), "0", "600", "--out", str(tmp_path / "partial"))[0] == 2
    assert not (tmp_path / "partial").exists()
    assert _cli(capsys, "cat", str(rich / "label.ffr"), "0", "--out", str(out_file))[0] == 0
    assert out_file.read_bytes() == (0).to_bytes(8, "little")  # a plain file: raw samples
    status, _, err = _cli(capsys, "cat", str(rich / "label.ffr"), "0", "--field", "label")
    assert status == 2 and "--field applies to a structured dataset" in err


def test_cli_cat_field_bytes_on_stdout(rich: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "ffrecord", "cat", str(rich), "2:4", "--field", "image"],
                         capture_output=True, timeout=60)
    assert run.returncode == 0 and run.stdout == bytes([2]) * 42 + bytes([3]) * 43


@pytest.mark.parametrize("command", [["info", ""], ["verify", ""], ["cat", "", "0"]])
def test_cli_refuses_an_empty_path(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
                                   tmp_path: Path, command: list[str]) -> None:
    with DatasetWriter(tmp_path, {"n": "int"}) as writer:
        writer.append({"n": 1})
    monkeypatch.chdir(tmp_path)  # an empty path must not mean this directory
    status, out, err = _cli(capsys, *command)
    assert status == 2 and out == "" and "an empty path" in err


def test_module_examples() -> None:
    import doctest

    from ffrecord.dataset import check, claim, display, sequence, spec

    for module in (check, claim, display, sequence, spec):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__


def test_cached_numbers_in_any_order(tmp_path: Path) -> None:
    """Found by the property test: a read of as many indices as a cached int field holds
    returned the values in file order, whatever the indices."""
    with DatasetWriter(tmp_path / "ds", {"n": "int", "x": "float"}) as writer:
        for k in range(4):
            writer.append({"n": k, "x": k / 2})
    with DatasetReader(tmp_path / "ds", cache_keys=["n", "x"]) as reader:
        assert reader.read([3, 3, 0, 1]) == [{"n": 3, "x": 1.5}, {"n": 3, "x": 1.5},
                                             {"n": 0, "x": 0.0}, {"n": 1, "x": 0.5}]


def test_a_damaged_remote_spec_names_the_object(bucket) -> None:  # noqa: F811 - a fixture
    client, name, options = bucket
    url = f"s3://{name}/ds/"
    with DatasetWriter(url, {"n": "int"}, storage_options=options) as writer:
        writer.append({"n": 1})
    for body, match in ((b'{"format": "ffrecord.dataset", "v\xff": 1}', "not UTF-8 text"),
                        (b"[" * 100_000, "nested too deep")):
        client.put_object(Bucket=name, Key="ds/spec.json", Body=body)
        with pytest.raises(CorruptDatasetError, match=f"s3://{name}/ds/spec.json: {match}"):
            DatasetReader(url, storage_options=options)


def test_cli_verify_reports_a_bad_sequence_sample_once(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    path = tmp_path / "ds"
    with DatasetWriter(path, {"s": "bytes[]"}) as writer:
        writer.append({"s": [b"A" * 40, b"B" * 40]})
    raw = bytearray((path / "s.ffr").read_bytes())
    raw[raw.index(b"B" * 40)] ^= 1  # the sample's CRC and element 1's both disagree now
    (path / "s.ffr").write_bytes(bytes(raw))
    status, out, err = _cli(capsys, "verify", str(path))
    assert status == 1 and "1 bad sample(s)" in err and "0 dataset problem(s)" in err, err
    assert len(out.splitlines()) == 1 and "sample 0" in out


def test_claims_on_a_file_system_without_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import fcntl

    from ffrecord.dataset.claim import Claim

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "no locks")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    first = Claim(tmp_path)  # the exclusive creation claims
    with pytest.raises(FileExistsError, match=f"no locks to tell.*remove {tmp_path / CLAIM_FILE}"):
        Claim(tmp_path)
    first.release()
    Claim(tmp_path).release()
    assert os.listdir(tmp_path) == []
