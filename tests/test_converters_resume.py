"""A resumed conversion keeps a finished unit only while its source files are what they were
(names, sizes, times, inodes) and its shard is an intact dataset of the spec; a staging
directory or progress file that is damaged, planted, another's or a special file is never
trusted."""

from __future__ import annotations

import json
import os
import stat
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ffrecord.converters import SourceError, convert
from ffrecord.converters._base import run
from ffrecord.converters.mds import MDSSource
from ffrecord.converters.webdataset import WebDatasetSource
from ffrecord.dataset import open_dataset
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

ROWS = 10


def _table(start):
    return pa.table({"n": list(range(start, start + ROWS)), "s": [f"row {k}" for k in range(start, start + ROWS)]})


def _write(table, path):
    pq.write_table(table, path, compression="none", use_dictionary=False)  # its size: its row count


def _damaged_source(tmp_path):
    """A Parquet source of two files, the second's data pages damaged (its footer intact: the
    plan is made, then its unit fails); and the second's good bytes."""
    src = tmp_path / "src"
    src.mkdir()
    _write(_table(10), src / "a.parquet")
    pq.write_table(_table(100), src / "b.parquet")
    good = (src / "b.parquet").read_bytes()
    damaged = bytearray(good)
    damaged[8:120] = b"\xff" * 112
    (src / "b.parquet").write_bytes(bytes(damaged))
    return src, good


def _failed_conversion(tmp_path):
    """The conversion of ``_damaged_source`` failed, the first file's shard finished in the
    staging directory; the second file repaired since."""
    src, good = _damaged_source(tmp_path)
    with pytest.raises(SourceError, match=r"b\.parquet#row-group-0"):
        convert("parquet", src, tmp_path / "out", workers=1)
    staging = tmp_path / ".out.converting"
    assert (staging / "000000" / "spec.json").is_file() and not (staging / "000001").exists()
    (src / "b.parquet").write_bytes(good)
    return src, staging


def _values(path):
    with open_dataset(path) as ds:
        return [row["n"] for row in ds]


def _finished_at(staging):
    return (staging / "000000" / "spec.json").stat().st_mtime_ns


def test_a_unit_whose_source_changed_since_is_converted_again(tmp_path):
    src, staging = _failed_conversion(tmp_path)
    size = (src / "a.parquet").stat().st_size
    _write(_table(50), src / "a.parquet")  # rewritten in place: as many rows, as many bytes
    assert (src / "a.parquet").stat().st_size == size
    assert convert("parquet", src, tmp_path / "out") == 2 * ROWS
    assert _values(tmp_path / "out") == list(range(50, 60)) + list(range(100, 110))


def test_a_unit_replaced_by_another_file_is_converted_again(tmp_path):
    src, staging = _failed_conversion(tmp_path)
    pq.write_table(_table(70), tmp_path / "other.parquet")
    os.replace(tmp_path / "other.parquet", src / "a.parquet")
    assert convert("parquet", src, tmp_path / "out") == 2 * ROWS
    assert _values(tmp_path / "out")[:ROWS] == list(range(70, 80))


def test_an_unchanged_unit_is_kept(tmp_path):
    src, staging = _failed_conversion(tmp_path)
    finished = _finished_at(staging)
    assert convert("parquet", src, tmp_path / "out") == 2 * ROWS
    assert (tmp_path / "out" / "000000" / "spec.json").stat().st_mtime_ns == finished
    assert _values(tmp_path / "out") == list(range(10, 20)) + list(range(100, 110))


@pytest.mark.parametrize("damage", ["spec", "field_file", "other_length"])
def test_a_finished_shard_damaged_since_is_converted_again(tmp_path, damage):
    src, staging = _failed_conversion(tmp_path)
    shard = staging / "000000"
    if damage == "spec":
        (shard / "spec.json").write_text('{"format": "ffrecord.dataset", "ver')
    elif damage == "field_file":
        (shard / "n.ffr").unlink()
    else:
        spec = json.loads((shard / "spec.json").read_text())
        spec["length"] = 3
        (shard / "spec.json").write_text(json.dumps(spec))
    assert convert("parquet", src, tmp_path / "out") == 2 * ROWS
    assert _values(tmp_path / "out") == list(range(10, 20)) + list(range(100, 110))


def test_a_progress_file_without_what_its_units_were_keeps_none(tmp_path):
    src, staging = _failed_conversion(tmp_path)
    manifest = json.loads((staging / "convert.json").read_text())
    del manifest["identities"]  # an older run's, or one planted
    (staging / "convert.json").write_text(json.dumps(manifest))
    finished = _finished_at(staging)
    assert convert("parquet", src, tmp_path / "out") == 2 * ROWS
    assert (tmp_path / "out" / "000000" / "spec.json").stat().st_mtime_ns != finished


def _in_time(make, seconds=60):
    box = {}
    thread = threading.Thread(target=lambda: box.update(error=_error_of(make)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "hung"
    return box["error"]


def _error_of(make):
    try:
        make()
    except Exception as exc:
        return exc
    return None


@pytest.mark.parametrize("plant, message", [
    (lambda m: (m.unlink(), os.mkfifo(m)), r"not a regular file but a FIFO"),
    (lambda m: (m.unlink(), m.symlink_to("/dev/zero")), r"not a regular file but a character device"),
    (lambda m: m.write_bytes(b"\x00garbage"), r"not JSON"),
    (lambda m: m.write_text("[1, 2]"), r"convert\.json is not a JSON object"),
    (lambda m: os.chmod(m.parent, 0o777), r"writable by others: mode drwxrwxrwx"),
    (lambda m: (os.rename(m.parent, m.parent.with_name("elsewhere")), m.parent.symlink_to("elsewhere")),
     r"a link, another user's"),
])
def test_a_progress_file_damaged_planted_or_special_is_not_trusted(tmp_path, plant, message):
    src, staging = _failed_conversion(tmp_path)
    plant(staging / "convert.json")
    error = _in_time(lambda: convert("parquet", src, tmp_path / "out"))
    assert isinstance(error, FileExistsError) and not isinstance(error, SourceError)
    assert str(staging) in str(error) and "remove it" in str(error)
    assert message and __import__("re").search(message, str(error)), str(error)
    assert not (tmp_path / "out").exists()


def test_staging_is_private_until_published_with_a_usual_mode(tmp_path):
    src, staging = _failed_conversion(tmp_path)
    assert stat.S_IMODE(staging.stat().st_mode) == 0o700
    assert convert("parquet", src, tmp_path / "out") == 2 * ROWS
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o777 & ~umask


class _Touching(WebDatasetSource):
    """Changes its tar's modification time after reading the first sample of it."""

    def read(self, unit):
        for k, (record, datapoint) in enumerate(super().read(unit)):
            if k == 1:
                st = os.stat(unit)
                os.utime(unit, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
            yield record, datapoint


def test_a_source_changing_while_its_unit_is_converted_fails_that_unit(tmp_path):
    import webdataset as wds

    (tmp_path / "src").mkdir()
    with wds.ShardWriter(str(tmp_path / "src" / "s-%04d.tar"), maxcount=4, verbose=0) as sink:
        for k in range(8):
            sink.write({"__key__": f"k{k}", "txt": f"t{k}"})
    with pytest.raises(SourceError, match=r"s-0000\.tar: changed while it was being converted"):
        run(_Touching(tmp_path / "src"), tmp_path / "out", workers=1)
    assert not (tmp_path / ".out.converting" / "000000" / "spec.json").exists()
    assert convert("webdataset", tmp_path / "src", tmp_path / "out") == 8


def test_an_s3_mds_unit_is_bound_to_its_objects_sizes_and_etags(tmp_path, bucket):
    from streaming import MDSWriter

    client, name, options = bucket
    with MDSWriter(out=str(tmp_path / "src"), columns={"s": "str"}, size_limit=200) as writer:
        for k in range(12):
            writer.write({"s": f"value {k}"})
    for file in (tmp_path / "src").iterdir():
        client.upload_file(str(file), name, f"mds/{file.name}")

    def identities():
        source = MDSSource(f"s3://{name}/mds/", options)
        try:
            return {os.path.basename(unit): source.unit_identity(unit) for unit in source.units()}
        finally:
            source.close()

    before = identities()
    assert len(before) > 1 and identities() == before  # a new local copy each time: the same
    shard = tmp_path / "src" / "shard.00001.mds"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    client.put_object(Bucket=name, Key="mds/shard.00001.mds", Body=bytes(data))
    after = identities()
    assert [unit for unit in before if before[unit] != after[unit]] == ["shard.00001.mds"]


def test_cli_resumes_and_says_where_the_finished_units_are_kept(tmp_path, capsys):
    from ffrecord.cli import main

    src, _ = _damaged_source(tmp_path)
    command = ["convert", "parquet", str(src), str(tmp_path / "out"), "-j", "1"]
    assert main(command) == 1
    err = capsys.readouterr().err
    assert "b.parquet" in err and "kept in" in err and "Traceback" not in err
    os.chmod(tmp_path / ".out.converting", 0o777)
    assert main(command) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "writable by others" in err and "kept in" not in err


def test_an_image_folder_whose_classes_changed_since_is_refused_not_relabelled(tmp_path):
    from PIL import Image

    from ffrecord.converters._runner import OtherConversionError

    for k, label in enumerate(("cat", "dog")):
        (tmp_path / "src" / label).mkdir(parents=True)
        Image.new("RGB", (2, 2)).save(tmp_path / "src" / label / "0.png")
    (tmp_path / "src" / "dog" / "1.png").write_bytes(b"not an image")
    with pytest.raises(SourceError, match=r"dog/1\.png: record 2: not a readable image"):
        convert("imagefolder", tmp_path / "src", tmp_path / "out")
    (tmp_path / "src" / "dog" / "1.png").unlink()
    (tmp_path / "src" / "ant").mkdir()  # every label after it moves by one
    Image.new("RGB", (2, 2)).save(tmp_path / "src" / "ant" / "0.png")
    with pytest.raises(OtherConversionError, match=r"other settings \(metadata\)"):
        convert("imagefolder", tmp_path / "src", tmp_path / "out")
