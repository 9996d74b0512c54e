"""``ffrecord.ray`` on a real local Ray cluster (one for the module: starting Ray is slow)."""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import ffrecord
from ffrecord.dataset import open_dataset, versions

ray = pytest.importorskip("ray")
from ffrecord.ray import FFRecordDatasink, read_ffrecord, write_ffrecord  # noqa: E402
from ffrecord.utils import dump  # noqa: E402
from remote_fixtures import CREDENTIALS, bucket, s3_endpoint  # noqa: E402, F401 - fixtures

pytestmark = pytest.mark.usefixtures("ray_garbage_collected")  # Ray runs in this process

ROWS = 100_000


def payload(i: int) -> bytes:
    """Row ``i``'s sample: its number, repeated 0 to 4 times (empty samples included)."""
    return (b"%07d" % i) * (i % 5)


def payload_batch(batch: dict) -> dict:
    column = np.empty(len(batch["id"]), object)
    column[:] = [payload(int(i)) for i in batch["id"]]
    return {"bytes": column}


@pytest.fixture(scope="module")
def cluster():
    # Ray's workers cannot import this module: its functions travel by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # The workers sign their S3 requests with the object-storage tests' credentials.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": CREDENTIALS})
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    try:
        yield context
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def written(cluster, tmp_path_factory) -> Path:
    """``ROWS`` rows written by Ray into ``samples_per_file=30_000`` files."""
    path = tmp_path_factory.mktemp("ray") / "out"
    ds = ray.data.range(ROWS, override_num_blocks=8).map_batches(payload_batch)
    write_ffrecord(ds, path, samples_per_file=30_000)
    return path


def staging_left(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.startswith(".")]


def test_write_gives_one_dataset_with_exact_bytes_in_order_per_file(written: Path) -> None:
    names = sorted(os.listdir(written))
    assert names == [f"PART_{k:05d}.ffr" for k in range(len(names) - 1)] + ["_manifest"]
    assert versions(written) == [1]  # its parts listed, as a dump's are
    assert staging_left(written.parent) == []
    seen = []
    with ffrecord.FileReader(written) as reader:
        assert len(reader) == ROWS
        for k in range(len(reader.fnames)):
            with ffrecord.FileReader(reader.fnames[k]) as part:
                assert 0 < len(part) <= 30_000
                samples = [s.tobytes() for s in part.read(range(len(part)))]
            ids = [int(s[:7]) if s else None for s in samples]
            # Rows keep their order inside a file: each file is a run of consecutive ids.
            k, known = next((k, i) for k, i in enumerate(ids) if i is not None)
            first = known - k
            assert samples == [payload(i) for i in range(first, first + len(samples))]
            seen.append((first, len(samples)))
    starts = sorted(seen)
    assert [start for start, _ in starts] == list(np.cumsum([0] + [n for _, n in starts[:-1]]))
    assert sum(n for _, n in seen) == ROWS


def test_read_splits_files_into_ranges_and_keeps_bytes_and_order(cluster, written: Path) -> None:
    with ffrecord.FileReader(written) as reader:
        expected = [s.tobytes() for s in reader.read(range(len(reader)))]
        files = len(reader.fnames)
    cluster.execution_options.preserve_order = True
    try:
        ds = read_ffrecord(written, override_num_blocks=3 * files).materialize()
    finally:
        cluster.execution_options.preserve_order = False
    assert ds.num_blocks() >= 3 * files  # more tasks than files: ranges within files
    assert [row["bytes"] for row in ds.iter_rows()] == expected


def test_read_in_a_chunk_aware_order_gives_that_order(cluster, written: Path, tmp_path: Path) -> None:
    from ffrecord.dataset import DatasetWriter
    from ffrecord.order import ChunkShuffle

    with ffrecord.FileReader(written) as reader:
        expected = [s.tobytes() for s in reader.read(range(len(reader)))]
        order = ChunkShuffle.of(reader, 64 << 10, seed=3, window=2)
    with DatasetWriter(tmp_path / "ds", {"label": "int"}) as writer:
        for k in range(500):
            writer.append({"label": k})
    with open_dataset(tmp_path / "ds") as reader:
        labels = ChunkShuffle.of(reader.field_reader("label"), 1 << 10, seed=1, window=1)
    cluster.execution_options.preserve_order = True
    try:
        ds = read_ffrecord(written, order=order, epoch=1, override_num_blocks=4)
        got = [row["bytes"] for row in ds.iter_rows()]
        structured = [row["label"] for row in read_ffrecord(tmp_path / "ds", order=labels).iter_rows()]
    finally:
        cluster.execution_options.preserve_order = False
    positions = order.indices(1, np.arange(ROWS))
    assert got == [expected[i] for i in positions] and got != expected
    assert structured == labels.indices(0, np.arange(500)).tolist()
    with pytest.raises(ValueError, match="over 500 samples"):
        read_ffrecord(written, order=labels)


def test_read_rows_are_bytes_and_numpy_batches(cluster, tmp_path: Path) -> None:
    path = tmp_path / "small.ffr"
    with ffrecord.FileWriter(path, 3) as writer:
        writer.write_many([b"a", b"", b"ccc"])
    ds = read_ffrecord(str(path))
    assert ds.take_all() == [{"bytes": b"a"}, {"bytes": b""}, {"bytes": b"ccc"}]
    batch = next(iter(ds.iter_batches(batch_size=3, batch_format="numpy")))
    assert list(batch["bytes"]) == [b"a", b"", b"ccc"]


def test_blocks_of_a_range_keep_their_bytes_while_later_batches_are_read(tmp_path: Path) -> None:
    """Each block holds its read buffer without a copy: reading the next batches must not
    reuse it (the reader recycles only buffers nothing refers to)."""
    from ffrecord import ray as ffr_ray

    path = tmp_path / "many.ffr"
    with ffrecord.FileWriter(path, 1000) as writer:
        writer.write_many([payload(i) for i in range(1000)])
    # An average sample size of a tenth of a block: batches of 10 samples.
    blocks = list(ffr_ray._read_bytes(str(path), 5, 995, ffr_ray._BLOCK_BYTES // 10, True))
    assert len(blocks) == 99 and all(block.num_rows == 10 for block in blocks)
    got = [value.as_py() for block in blocks for value in block.column("bytes")]
    assert got == [payload(i) for i in range(5, 995)]


def test_failed_task_commits_nothing_and_leaves_no_staging(cluster, tmp_path: Path) -> None:
    folder = str(tmp_path)

    def encode(value):  # fails in the second file of a write task: its first one is staged
        if value == 130:
            staged = [f"{stage}/{name}" for stage in os.listdir(folder)
                      for name in sorted(os.listdir(os.path.join(folder, stage)))]
            raise RuntimeError(f"disk on fire; staged: {staged}")
        return b"%d" % value

    path = tmp_path / "failed"
    ds = ray.data.range(200, override_num_blocks=4)
    with pytest.raises(Exception, match="disk on fire") as failure:
        write_ffrecord(ds.map(lambda r: {"x": r["id"]}), path, samples_per_file=20,
                       spec={"x": "boom"}, encoders={"boom": encode})
    staged = re.search(r"staged: (\[.*?\])", str(failure.value))[1]
    assert re.search(r"\.ffrecord-staging-failed-\w+/\d+-0'", staged), staged
    assert os.listdir(tmp_path) == []


def test_bad_column_fails_before_anything_is_committed(cluster, tmp_path: Path) -> None:
    ds = ray.data.range(10).map(lambda r: {"a": b"x", "b": b"y"})
    with pytest.raises(Exception, match="name the one holding the samples"):
        write_ffrecord(ds, tmp_path / "out", samples_per_file=4)
    with pytest.raises(Exception, match="column 'c' is not in the dataset"):
        write_ffrecord(ds, tmp_path / "out", samples_per_file=4, column="c")
    assert os.listdir(tmp_path) == []
    write_ffrecord(ds, tmp_path / "out", samples_per_file=4, column="b")
    with ffrecord.FileReader(tmp_path / "out") as reader:
        assert [s.tobytes() for s in reader.read(range(len(reader)))] == [b"y"] * 10


def test_sink_refuses_bad_arguments_at_once(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_bytes(b"")
    with pytest.raises(FileExistsError):
        FFRecordDatasink(tmp_path / "full", 10)
    with pytest.raises(ValueError, match="samples_per_file"):
        FFRecordDatasink(tmp_path / "out", 0)
    with pytest.raises(ValueError, match="not to a URL"):
        FFRecordDatasink("s3://bucket/out", 10)
    with pytest.raises(ValueError, match="one or the other"):
        FFRecordDatasink(tmp_path / "out", 10, column="a", spec={"a": "bytes"})
    with pytest.raises(FileNotFoundError):
        FFRecordDatasink(tmp_path / "missing" / "out", 10)
    sink = FFRecordDatasink(tmp_path / "out", 10, column="a")
    assert "samples_per_file=10" in repr(sink)


def test_empty_dataset_writes_an_empty_file(cluster, tmp_path: Path) -> None:
    write_ffrecord(ray.data.range(0).map(lambda r: {"bytes": b""}), tmp_path / "out", 10)
    with ffrecord.FileReader(tmp_path / "out") as reader:
        assert len(reader) == 0


def test_structured_round_trip_through_sharded_dataset(cluster, tmp_path: Path) -> None:
    spec = {"label": "int", "caption": "utf8:zstd", "image": "array", "frames": "array[]",
            "tokens": "int[]"}
    rows = [{"label": k, "caption": f"clip {k}", "image": np.full((2, 3), k, np.uint8),
             "frames": [np.arange(f + 1, dtype=np.float64) for f in range(k % 3)],
             "tokens": list(range(k % 4))} for k in range(60)]
    write_ffrecord(ray.data.from_items(rows, override_num_blocks=3), tmp_path / "ds",
                   samples_per_file=25, spec=spec)
    assert sorted(os.listdir(tmp_path / "ds"))[0] == "000000"
    with open_dataset(tmp_path / "ds") as reader:
        assert reader.spec == spec and len(reader) == 60 and reader.version == 1  # its manifest's
        back = sorted(reader.read(range(60)), key=lambda d: d["label"])
    for got, want in zip(back, rows):
        assert got["caption"] == want["caption"] and got["tokens"] == want["tokens"]
        assert np.array_equal(got["image"], want["image"])
        assert [f.tolist() for f in got["frames"]] == [f.tolist() for f in want["frames"]]

    ds = read_ffrecord(tmp_path / "ds")
    read_back = sorted(ds.take_all(), key=lambda d: d["label"])
    assert [d["caption"] for d in read_back] == [d["caption"] for d in rows]
    assert all(np.array_equal(d["image"], w["image"]) for d, w in zip(read_back, rows))
    labels = read_ffrecord(tmp_path / "ds", mask=["label"]).take_all()
    assert sorted(d["label"] for d in labels) == list(range(60)) and set(labels[0]) == {"label"}


def test_read_from_s3_keeps_bytes_and_order(cluster, bucket) -> None:
    from ffrecord.dataset import ShardedDatasetWriter

    client, name, opts = bucket
    samples = [payload(i) for i in range(500)]
    dump(samples, f"s3://{name}/parts/", nfiles=3, storage_options=opts)
    cluster.execution_options.preserve_order = True
    try:
        rows = read_ffrecord(f"s3://{name}/parts/", storage_options=opts,
                             override_num_blocks=6).take_all()
        with ShardedDatasetWriter(f"s3://{name}/ds/", {"n": "int", "text": "utf8"}, shardlen=40,
                                  storage_options=opts) as writer:
            for i in range(100):
                writer.append({"n": i, "text": "t%d" % i})
        fields = read_ffrecord(f"s3://{name}/ds/", storage_options=opts, mask=["n"]).take_all()
    finally:
        cluster.execution_options.preserve_order = False
    assert [row["bytes"] for row in rows] == samples
    assert [row["n"] for row in fields] == list(range(100)) and set(fields[0]) == {"n"}


def as_bytes(batch: list) -> list[bytes]:
    return [bytes(sample) for sample in batch]


def test_ray_reads_while_torch_dataloader_reads_the_same_files(cluster, written: Path) -> None:
    torch_ffr = pytest.importorskip("ffrecord.torch")
    with ffrecord.FileReader(written) as reader:
        expected = sorted(s.tobytes() for s in reader.read(range(len(reader))))
    loader = torch_ffr.DataLoader(torch_ffr.Dataset(str(written)), batch_size=4096,
                                  num_workers=2, collate_fn=as_bytes, timeout=120)
    from_torch: list[bytes] = []
    failure: list[BaseException] = []

    def drain() -> None:
        try:
            for batch in loader:
                from_torch.extend(batch)
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)

    thread = threading.Thread(target=drain)
    thread.start()
    from_ray = [row["bytes"] for row in read_ffrecord(written, concurrency=2).iter_rows()]
    thread.join(timeout=180)
    assert not thread.is_alive() and not failure, failure
    assert sorted(from_ray) == expected
    assert sorted(from_torch) == expected
