"""What a DataLoader downloads per epoch from object storage without a chunk cache, counted
at the server: at most 1.15 times the dataset's bytes in every epoch, with or without
workers, plain or structured, shuffled or chunk-ordered, over ``http://`` (the tests' range
server) and ``s3://`` (moto behind a counting proxy). The loader's ``stats()`` add up to what
the server counted, whatever process read."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter, UncachedRemoteWarning
from ffrecord.dataset import DatasetReader, DatasetWriter
from ffrecord.order import ChunkShuffle
from ffrecord.torch import DataLoader, Dataset, StructuredDataset
from ffrecord.torch import _stats

from counting_proxy import CountingProxy
from range_server import RangeServer
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

N, SAMPLE, BATCH = 768, 16 << 10, 32
DATA_BYTES = N * SAMPLE  # the images; a structured dataset's labels add N * 8
BOUND = 1.15


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    """The dataset as a plain file and as a structured dataset: path -> bytes."""
    root = tmp_path_factory.mktemp("egress")
    images = np.random.default_rng(0).integers(0, 256, (N, SAMPLE), dtype=np.uint8)
    with FileWriter(root / "plain.ffr", N) as w:
        w.write_many(images)
    with DatasetWriter(root / "structured", {"image": "bytes", "label": "int"}) as w:
        for i in range(N):
            w.append({"image": images[i].tobytes(), "label": i})
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def served(objects):
    """``(base URL, storage options, count)`` of the range server; ``count()`` is ``(GETs of
    .ffr files, bytes sent)``."""
    with RangeServer({"/" + path: data for path, data in objects.items()}) as srv:
        def count() -> tuple[int, int]:
            return sum(n for p, n in srv.gets.items() if p.endswith(".ffr")), srv.bytes_sent

        yield srv.url, None, count


@pytest.fixture
def served_s3(objects, bucket):  # noqa: F811 - a fixture
    client, name, opts = bucket
    for path, data in objects.items():
        client.put_object(Bucket=name, Key=path, Body=data)
    with CountingProxy(opts["endpoint_url"]) as proxy:
        yield f"s3://{name}", {"endpoint_url": proxy.url}, lambda: proxy.counted(".ffr")


def _loader(base: str, options: dict | None, kind: str, workers: int, order: str) -> DataLoader:
    if kind == "plain":
        dataset = Dataset(base + "/plain.ffr", storage_options=options)
        bounds = dataset.reader.chunk_bounds(N * SAMPLE // 6)
    else:
        keys = ("label",) if kind == "structured, labels held" else ()
        reader = DatasetReader(base + "/structured/", cache_keys=keys, storage_options=options)
        dataset = StructuredDataset(reader)
        bounds = reader.field_reader("image").chunk_bounds(N * SAMPLE // 6)
    how = {"shuffle": True, "seed": 0} if order == "shuffled" else {"order": ChunkShuffle(bounds, seed=0, window=2)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncachedRemoteWarning)
        return DataLoader(dataset, batch_size=BATCH, num_workers=workers, **how)


def _epochs_within_the_bound(loader: DataLoader, count, kind: str) -> None:
    for epoch in range(2):
        gets, sent = count()
        seen = []
        for batch in loader:
            images = batch if kind == "plain" else batch["image"]
            seen += [v[:8].numpy().tobytes() if hasattr(v, "numpy") else bytes(v[:8]) for v in images]
        gets, sent = count()[0] - gets, count()[1] - sent
        assert len(seen) == N and len(set(seen)) == N, f"epoch {epoch}: every sample once"
        assert DATA_BYTES <= sent <= BOUND * DATA_BYTES, (
            f"epoch {epoch}: {sent / DATA_BYTES:.3f}x the dataset's bytes downloaded ({gets} GETs)")


MODES = [(kind, workers, order) for kind in ("plain", "structured", "structured, labels held")
         for workers in (0, 2) for order in ("shuffled", "chunk-ordered")]


@pytest.mark.parametrize("kind, workers, order", MODES)
def test_an_epoch_over_http_downloads_the_dataset_about_once(served, kind, workers, order):
    base, options, count = served
    _epochs_within_the_bound(_loader(base, options, kind, workers, order), count, kind)


# moto answers a request in milliseconds: each kind with and without workers, the orders alternating
S3_MODES = [(kind, workers, ("shuffled", "chunk-ordered")[(k + workers // 2) % 2])
            for k, kind in enumerate(("plain", "structured", "structured, labels held")) for workers in (0, 2)]


@pytest.mark.parametrize("kind, workers, order", S3_MODES)
def test_an_epoch_over_s3_downloads_the_dataset_about_once(served_s3, kind, workers, order):
    base, options, count = served_s3
    _epochs_within_the_bound(_loader(base, options, kind, workers, order), count, kind)


@pytest.mark.parametrize("kind", ["plain", "structured"])
def test_loader_stats_add_up_to_what_the_server_sent(served, kind):
    base, options, count = served
    before = count()[1]
    loader = _loader(base, options, kind, 2, "shuffled")  # the main process opens the files
    for epoch in range(2):
        for _ in loader:
            pass
        stats = loader.stats()
        sent = count()[1] - before
        # What is not the readers': a structured dataset's spec.json, read by Python at each open.
        specs, rest = divmod(sent - stats["bytes_fetched"], len(_spec(base)) if kind != "plain" else sent + 1)
        assert rest == 0 and specs <= 1 + 2 * (epoch + 1), f"epoch {epoch}: {sent} sent, {stats}"
        assert stats["bytes_delivered"] >= (epoch + 1) * DATA_BYTES
        assert stats["fetched_per_delivered"] == pytest.approx(stats["bytes_fetched"] / stats["bytes_delivered"])
        assert 1 <= stats["fetched_per_delivered"] <= BOUND


@pytest.mark.parametrize("keys", [(), ("label",)])
def test_a_held_field_is_read_once_per_process_and_epoch(served, keys):
    # Labels are held in memory remotely (small), or named by cache_keys: a worker's batches,
    # read column by column into shared memory, take them from there.
    base, options, _ = served
    srv_gets = _gets_of(base, "/structured/label.ffr")
    before = srv_gets()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncachedRemoteWarning)
        loader = DataLoader(StructuredDataset(DatasetReader(base + "/structured/", cache_keys=keys)),
                            batch_size=BATCH, num_workers=2, shuffle=True, seed=0)
    labels = []
    for batch in loader:
        labels += batch["label"].tolist()
    assert sorted(labels) == list(range(N))
    # the main process's open; each worker's open and whole read (a batch each, else)
    assert srv_gets() - before <= 1 + 2 * 2


def _gets_of(base: str, path: str):
    import json
    import urllib.request

    from range_server import STATS_PATH

    def gets() -> int:
        with urllib.request.urlopen(base + STATS_PATH) as answer:
            return json.loads(answer.read())["gets"].get(path, 0)
    return gets


def _spec(base: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(base + "/structured/spec.json") as answer:
        return answer.read()


def test_reader_stats_show_fetched_against_delivered(served):
    base, options, count = served
    with FileReader(base + "/plain.ffr", storage_options=options) as r:
        opened = r.stats()
        assert opened["bytes_delivered"] == 0 and opened["fetched_per_delivered"] == 0.0
        r.read(range(0, N, 2))
        stats = r.stats()
    assert stats["bytes_delivered"] == N // 2 * SAMPLE
    # 384 requests for a pool of 64: gaps read through to save round trips, within 1/16
    assert N // 2 * SAMPLE < stats["bytes_fetched"] - opened["bytes_fetched"] <= N // 2 * SAMPLE * 17 // 16
    assert stats["fetched_per_delivered"] == pytest.approx(stats["bytes_fetched"] / stats["bytes_delivered"])


def test_structured_reader_stats_sum_its_fields(served):
    base, options, _ = served
    with DatasetReader(base + "/structured/", storage_options=options) as reader:
        reader.read(range(10))
        stats = reader.stats()
        fields = [reader.field_reader(name).stats() for name in reader.fields]
    assert stats["bytes_fetched"] == sum(f["bytes_fetched"] for f in fields) > 0
    assert stats["bytes_delivered"] >= 10 * SAMPLE


def test_prefetch_without_a_cache_fetches_nothing(served):
    base, options, count = served
    with FileReader(base + "/plain.ffr", storage_options=options) as r:
        before = count()
        assert r.prefetch(range(100)) == 0
        assert count() == before


def test_opening_without_a_cache_downloads_little_past_the_header(served, tmp_path):
    base, options, count = served
    before = count()[1]
    with FileReader(base + "/plain.ffr", storage_options=options) as r:
        header = r.file_info(0).header_bytes
        assert r.file_info(0).read_from == "remote"
    assert count()[1] - before <= max(header, 64 << 10)
    with FileReader(base + "/plain.ffr", cache_dir=tmp_path / "cache") as r:
        assert r.file_info(0).read_from == "cached"


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(_stats, "_warned", False)


def test_a_loader_without_a_cache_warns_once_naming_cache_dir_and_the_traffic(served, fresh_warning):
    base, options, _ = served
    with pytest.warns(UncachedRemoteWarning, match=r"cache_dir=.*FFRECORD_CACHE_DIR") as caught:
        DataLoader(Dataset(base + "/plain.ffr"), batch_size=BATCH)
    message = str(caught[0].message)
    assert f"{DATA_BYTES / 2**20:,.1f} MiB in {N:,} GETs" in message and "ffrecord plan" in message
    assert base not in message  # no URL: it may be a signed one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DataLoader(Dataset(base + "/plain.ffr"), batch_size=BATCH)  # once per process


def test_a_rank_is_told_its_share(served, fresh_warning):
    base, options, _ = served
    with pytest.warns(UncachedRemoteWarning, match=f"{DATA_BYTES / 4 / 2**20:,.1f} MiB in {N // 4:,} GETs"):
        DataLoader(Dataset(base + "/plain.ffr"), batch_size=BATCH, rank=1, world_size=4, shuffle=True)


def test_no_warning_with_a_cache_or_local_files(served, fresh_warning, tmp_path, objects):
    base, options, _ = served
    local = tmp_path / "plain.ffr"
    local.write_bytes(objects["plain.ffr"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DataLoader(Dataset(base + "/plain.ffr", storage_options={"cache_dir": str(tmp_path / "c")}), batch_size=BATCH)
        DataLoader(Dataset(str(local)), batch_size=BATCH)
        DataLoader(StructuredDataset(DatasetReader(base + "/structured/", cache_dir=tmp_path / "c")), batch_size=BATCH)
    assert _stats._warned is False


def test_held_fields_of_any_size_reach_the_batches_whole(tmp_path):
    # cache_keys may name a field of values of many sizes: a worker's columns copy them out.
    path = tmp_path / "held"
    with DatasetWriter(path, {"text": "bytes", "n": "int"}) as w:
        for i in range(300):
            w.append({"text": b"t" * (i % 7) + str(i).encode(), "n": i})
    loader = DataLoader(StructuredDataset(DatasetReader(path, cache_keys=("text", "n"))),
                        batch_size=16, num_workers=2, shuffle=True, seed=1)
    got = {}
    for batch in loader:
        for text, n in zip(batch["text"], batch["n"].tolist()):
            got[n] = bytes(text)
    assert got == {i: b"t" * (i % 7) + str(i).encode() for i in range(300)}
