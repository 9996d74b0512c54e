"""The ffrecord command: output, messages and exit status, on golden and generated files."""

from __future__ import annotations

import hashlib
import json
import re
import os
import shutil
import statistics
import subprocess
import sys

import pytest

from ffrecord import FileWriter
from ffrecord.cli import EXIT_CORRUPT, EXIT_OK, EXIT_OS, EXIT_USAGE, main
from tools_support import manifest, sample_offsets, tfrecord_frame


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def golden_sizes(golden, name: str) -> list:
    return [s["len"] for s in manifest(golden)["files"][name]["samples"]]


def test_info_on_a_file(capsys, golden):
    status, out, _ = run(capsys, "info", "--json", golden / "basic.ffr")
    assert status == EXIT_OK
    info = json.loads(out)
    sizes = golden_sizes(golden, "basic.ffr")
    assert info["samples"] == len(sizes) == 25
    assert info["sample_bytes"] == sum(sizes)
    assert info["bytes"] == (golden / "basic.ffr").stat().st_size
    assert info["sample_size"] == {"min": min(sizes), "median": statistics.median(sizes),
                                   "max": max(sizes), "mean": pytest.approx(sum(sizes) / 25)}
    assert info["compression"] == "none"
    status, out, _ = run(capsys, "info", golden / "basic.ffr")
    assert "samples      25" in out and "compression  none" in out
    assert f"max {max(sizes):,}" in out


def test_info_on_a_directory_lists_its_files(capsys, golden):
    status, out, _ = run(capsys, "info", "--json", golden / "multi")
    info = json.loads(out)
    names = [f"multi/PART_0000{k}.ffr" for k in range(3)]
    counts = [manifest(golden)["files"][n]["n"] for n in names]
    assert [f["samples"] for f in info["files"]] == counts
    assert info["samples"] == 44
    all_sizes = sum((golden_sizes(golden, n) for n in names), [])
    assert info["sample_size"]["median"] == statistics.median(all_sizes)


def test_info_reports_compression_and_packed_folders(tmp_path, capsys, golden):
    path = tmp_path / "z.ffr"
    with FileWriter(path, 3, compression="lz4") as w:
        for _ in range(3):
            w.write_one(b"abcd" * 1000)
    status, out, _ = run(capsys, "info", "--json", path, golden / "packed.ffr")
    first, second = map(json.loads, out.splitlines())
    assert first["compression"] == "lz4" and first["samples"] == 3
    assert first["sample_bytes"] == 12000 > first["stored_bytes"]
    assert second["files"][0]["packed_folder"] and second["compression"] == "none"
    assert first["files"][0]["metadata"] == second["files"][0]["metadata"] == "intact"
    status, out, _ = run(capsys, "info", path)
    assert "compression  lz4" in out and "ratio" in out


def test_verify_good_files(capsys, golden):
    status, out, err = run(capsys, "verify", golden / "basic.ffr", golden / "multi",
                           "--jobs", 3)
    assert status == EXIT_OK
    assert "OK: 4 file(s), 69 samples verified" in out and err == ""


def test_verify_names_the_bad_sample(capsys, golden):
    status, out, err = run(capsys, "verify", golden / "corrupt_sample.ffr", golden / "basic.ffr")
    assert status == EXIT_CORRUPT
    lines = out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{golden / 'corrupt_sample.ffr'}: sample 2: checksum")
    assert "FAILED: 1 bad sample(s)" in err


def test_verify_lists_the_samples_of_a_file_with_damaged_metadata(capsys, golden):
    status, out, _ = run(capsys, "verify", golden / "corrupt_header.ffr")
    lines = out.splitlines()
    assert status == EXIT_CORRUPT and len(lines) == 3
    assert "unreadable" in lines[0] and "metadata" in lines[0]
    assert [line.split(": ")[1] for line in lines[1:]] == ["sample 0", "sample 1"]


@pytest.mark.parametrize("name, expected", [
    ("corrupt_header.ffr", r"corrupt_header\.ffr: unreadable: .*checksum"),
    ("truncated_header.ffr", r"truncated_header\.ffr: unreadable: .*"),
    ("truncated.ffr", r"truncated\.ffr: sample \d+: "),
])
def test_verify_fails_on_damaged_golden_files(capsys, name, expected, golden):
    status, out, err = run(capsys, "verify", golden / name)
    assert status == EXIT_CORRUPT
    assert re.search(expected, out), out
    assert "FAILED" in err


def test_verify_truncated_lists_every_sample_past_the_end(capsys, golden):
    status, out, _ = run(capsys, "verify", golden / "truncated.ffr")
    size = (golden / "truncated.ffr").stat().st_size
    offsets = sample_offsets((golden / "truncated.ffr").read_bytes())
    ends = offsets[1:] + [None]
    cut = [i for i, end in enumerate(ends) if end is None or end > size]
    listed = [int(line.split("sample ")[1].split(":")[0]) for line in out.splitlines()
              if ": sample " in line]
    assert listed == cut and cut


def test_verify_legacy_file_passes_with_a_warning(capsys, golden):
    status, out, err = run(capsys, "verify", golden / "legacy_zero_checksum.ffr")
    assert status == EXIT_OK
    assert "warning:" in err and "metadata" in err


def test_verify_reports_damage_in_a_directory_by_file(tmp_path, capsys, golden):
    shutil.copytree(golden / "multi", tmp_path / "multi")
    part = tmp_path / "multi" / "PART_00001.ffr"
    os.chmod(part, 0o644)
    raw = bytearray(part.read_bytes())
    raw[sample_offsets(raw)[7]] ^= 0xFF
    part.write_bytes(bytes(raw))
    status, out, _ = run(capsys, "verify", tmp_path / "multi", "-j", "2")
    assert status == EXIT_CORRUPT
    assert out.startswith(f"{part}: sample 7: ")


def test_a_directory_is_the_files_the_reader_reads(tmp_path, capsys, golden):
    """A hidden *.ffr file and a directory named x.ffr are skipped, as FileReader does."""
    shutil.copytree(golden / "multi", tmp_path / "multi")
    (tmp_path / "multi" / ".hidden.ffr").write_bytes(b"damaged")
    (tmp_path / "multi" / "x.ffr").mkdir()
    status, out, err = run(capsys, "verify", tmp_path / "multi")
    assert status == EXIT_OK, (out, err)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".hidden.ffr").write_bytes(b"")
    (tmp_path / "empty" / "x.ffr").mkdir()
    assert run(capsys, "verify", tmp_path / "empty")[0] == EXIT_USAGE


def test_cat_writes_raw_bytes(capfdbinary, golden):
    samples = manifest(golden)["files"]["basic.ffr"]["samples"]
    assert main(["cat", str(golden / "basic.ffr"), "3", "-1", "1:3"]) == EXIT_OK
    out = capfdbinary.readouterr().out
    want = [samples[3], samples[24], samples[1], samples[2]]
    assert len(out) == sum(s["len"] for s in want)
    pos = 0
    for s in want:
        assert hashlib.sha256(out[pos:pos + s["len"]]).hexdigest() == s["sha256"]
        pos += s["len"]


@pytest.mark.parametrize("argv, status, message", [
    (["cat", "basic.ffr", "25"], EXIT_USAGE, "index 25 is out of range for 25 samples"),
    (["cat", "basic.ffr", "x"], EXIT_USAGE, "'x' is not an index"),
    (["cat", "no_such.ffr", "0"], EXIT_OS, "no_such.ffr"),
    (["cat", "corrupt_sample.ffr", "2"], EXIT_CORRUPT, "sample 2: checksum mismatch"),
    (["info", "truncated_header.ffr"], EXIT_CORRUPT, "truncated_header.ffr"),
    (["verify", "no_such_dir/"], EXIT_OS, "no_such_dir"),
    (["unpack", "basic.ffr", "out"], EXIT_CORRUPT, "not a packed folder"),
    (["verify", "--jobs", "0", "basic.ffr"], EXIT_USAGE, "must be at least 1"),
    (["frobnicate"], EXIT_USAGE, "invalid choice"),
])
def test_errors_have_a_message_and_a_status(capsys, tmp_path, argv, status, message, golden):
    argv = [str(golden / a) if a.endswith((".ffr", "/")) else a for a in argv]
    argv = [str(tmp_path / "out") if a == "out" else a for a in argv]
    got, out, err = run(capsys, *argv)
    assert got == status
    assert message in err


def test_pack_and_unpack(tmp_path, capsys):
    src = tmp_path / "src"
    (src / "ü").mkdir(parents=True)
    (src / "ü" / "f.bin").write_bytes(b"\0\1\2")
    (src / "empty").write_bytes(b"")
    status, out, _ = run(capsys, "pack", src, tmp_path / "p.ffr")
    assert status == EXIT_OK and "packed 2 file(s)" in out
    status, out, _ = run(capsys, "unpack", tmp_path / "p.ffr", tmp_path / "back")
    assert status == EXIT_OK and "unpacked 2 file(s)" in out
    assert (tmp_path / "back" / "ü" / "f.bin").read_bytes() == b"\0\1\2"
    assert (tmp_path / "back" / "empty").read_bytes() == b""
    status, out, err = run(capsys, "pack", tmp_path / "missing", tmp_path / "q.ffr")
    assert status == EXIT_OS and "missing" in err


def test_convert_subcommands(tmp_path, capsys):
    tf = tmp_path / "a.tfrecord"
    tf.write_bytes(b"".join(tfrecord_frame(b"rec%d" % k) for k in range(4)))
    status, out, _ = run(capsys, "convert", "tfrecord", tf, tf, tmp_path / "t.ffr",
                         "--compression", "lz4")
    assert status == EXIT_OK and "wrote 8 samples" in out
    status, out, _ = run(capsys, "cat", tmp_path / "t.ffr", "5")
    assert out == "rec1"
    raw = bytearray(tf.read_bytes())
    raw[14] ^= 1  # record 0's data
    tf.write_bytes(bytes(raw))
    status, _, err = run(capsys, "convert", "tfrecord", tf, tmp_path / "bad.ffr")
    assert status == EXIT_CORRUPT and "record 0" in err and "a.tfrecord" in err
    status, out, _ = run(capsys, "convert", "tfrecord", "--no-verify", tf, tmp_path / "nv.ffr")
    assert status == EXIT_OK
    of = tmp_path / "of"
    of.mkdir()
    (of / "part-0").write_bytes(b"".join(len(r).to_bytes(8, "little") + r for r in [b"x", b"yz"]))
    status, out, _ = run(capsys, "convert", "ofrecord", of, tmp_path / "o.ffr")
    assert status == EXIT_OK and "wrote 2 samples" in out
    status, out, _ = run(capsys, "convert", "folder", of, tmp_path / "f.ffr")
    assert status == EXIT_OK and "wrote 1 samples" in out
    status, _, err = run(capsys, "convert", "folder", of, of, tmp_path / "g.ffr")
    assert status == EXIT_USAGE and "exactly one" in err


@pytest.mark.parametrize("argv", [[], ["info"], ["verify"], ["cat"], ["pack"], ["unpack"],
                                  ["convert"], ["convert", "tfrecord"],
                                  ["convert", "ofrecord"], ["convert", "folder"]])
def test_every_command_has_help_with_exit_codes(capsys, argv):
    status, out, _ = run(capsys, *argv, "--help")
    assert status == EXIT_OK
    assert out.startswith("usage: ffrecord") and "exit status:" in out


def test_missing_arguments_are_usage_errors(capsys, golden):
    status, _, err = run(capsys, "cat", str(golden / "basic.ffr"))
    assert status == EXIT_USAGE and "required" in err


def test_python_dash_m_runs_the_cli(golden):
    proc = subprocess.run([sys.executable, "-m", "ffrecord", "verify",
                           str(golden / "corrupt_sample.ffr")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_CORRUPT
    assert "sample 2" in proc.stdout and "FAILED" in proc.stderr


def test_verify_progress_bar_on_request(capsys, golden):
    status, out, err = run(capsys, "verify", "--progress", golden / "basic.ffr")
    assert status == EXIT_OK and "verify" in err and "25/25" in err
    status, out, err = run(capsys, "verify", "--no-progress", golden / "basic.ffr")
    assert err == ""


def test_os_errors_name_the_file_once(capsys, golden):
    inside = golden / "basic.ffr" / "x.ffr"  # a file used as a directory: ENOTDIR
    status, _, err = run(capsys, "cat", inside, "0")
    assert status == EXIT_OS
    assert err.count(str(inside)) == 1 and "not a directory" in err and "[Errno" not in err
