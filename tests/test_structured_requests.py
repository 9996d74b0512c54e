"""A remote structured dataset reads a batch of all its fields as one request plan:
small fixed-size fields held whole, nearby ranges merged, at most one GET per datapoint
without the cache and one per chunk with it."""

from __future__ import annotations

import numpy as np
import pytest

from ffrecord.dataset import DatasetReader, DatasetWriter

from range_server import RangeServer

N, IMAGE = 512, 8000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds") / "ds"
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, IMAGE, dtype=np.uint8).tobytes() for _ in range(N)]
    with DatasetWriter(path, {"image": "bytes", "label": "int"}) as w:
        for i in range(N):
            w.append({"image": images[i], "label": i * 7})
    objects = {f"/ds/{f.name}": f.read_bytes() for f in path.iterdir() if f.is_file()}
    with RangeServer(objects) as srv:
        yield srv, srv.url + "/ds/", images


def data_gets(srv) -> int:
    return sum(n for path, n in srv.gets.items() if path.endswith(".ffr"))


def epoch(reader, batch: int = 64, seed: int = 0):
    order = np.random.default_rng(seed).permutation(N)
    for at in range(0, N, batch):
        yield order[at:at + batch], reader.read(order[at:at + batch])


def test_an_epoch_makes_at_most_one_get_per_datapoint(served):
    srv, url, images = served
    with DatasetReader(url) as reader:
        before = data_gets(srv)
        for idx, rows in epoch(reader):
            assert [r["label"] for r in rows] == [int(i) * 7 for i in idx]
            assert [r["image"] for r in rows] == [images[i] for i in idx]
        gets = data_gets(srv) - before
    assert gets <= N  # the labels: one whole read for the epoch; images: at most one each


def test_with_the_cache_an_epoch_makes_one_get_per_chunk(served, tmp_path):
    srv, url, images = served
    opts = {"cache_dir": str(tmp_path / "cache"), "chunk_size": 64 * IMAGE}
    before = data_gets(srv)
    with DatasetReader(url, cache_dir=tmp_path / "cache", chunk_size=64 * IMAGE) as reader:
        assert len(reader.field_reader("image").chunk_bounds(64 * IMAGE)) - 1 == 8
        for idx, rows in epoch(reader):
            assert [r["image"] for r in rows] == [images[i] for i in idx]
        # One GET per field file reads its header: the labels' (10 KB) brings the whole
        # file, the images' (4 MB) its first 1 MiB + a chunk, so chunks 0-2 whole
        # (first_request_bytes); then one GET per other chunk, 5.
        assert data_gets(srv) - before == 2 + 5
    with DatasetReader(url, storage_options=opts) as reader:
        before = data_gets(srv)
        for idx, rows in epoch(reader, seed=1):
            assert [r["label"] for r in rows] == [int(i) * 7 for i in idx]
        assert data_gets(srv) - before == 0  # headers and chunks, the labels' too, cached


def test_nearby_values_merge_into_one_request(served):
    srv, url, _ = served
    with DatasetReader(url) as reader:
        label = reader.field_reader("label")  # read per batch, as a larger field would be
        before = data_gets(srv)
        label.read(np.random.default_rng(3).choice(N, 64, replace=False))
        assert data_gets(srv) - before == 1  # 64 labels 8 bytes each, bytes apart: one GET


def test_opening_asks_for_the_spec_once_then_opens_the_fields_together(served):
    # Every process of a job opens the dataset as it starts, each open a round trip to the
    # store: the spec is one GET (no HEAD first), and the fields' files open at once.
    srv, _, _ = served
    with RangeServer(srv.objects, latency=0.1) as slow:
        with DatasetReader(slow.url + "/ds/") as reader:
            assert slow.gets["/ds/spec.json"] == 1
            assert slow.requests == 1 + 2 * 2  # the spec; per field, its size and its header
            assert slow.peak == 2
            assert reader[3]["label"] == 21


def test_a_warm_open_fetches_the_spec_while_it_opens_the_fields(served, tmp_path):
    # With a cache directory, the fields the spec named when last read start opening while
    # the spec is fetched again: one round trip. A dataset replaced meanwhile (other
    # fields, another length) is opened as it is now.
    srv, _, images = served
    with RangeServer(srv.objects, latency=0.1) as slow:
        url = slow.url + "/ds/"
        with DatasetReader(url, cache_dir=tmp_path / "cache") as reader:
            assert slow.peak == 2  # cold: the spec, then the fields' files
        slow.peak = 0
        with DatasetReader(url, cache_dir=tmp_path / "cache") as reader:
            assert slow.peak == 3  # the spec's GET and the two fields' HEADs at once
            assert reader[7] == {"image": images[7], "label": 49}
        other = tmp_path / "other"
        with DatasetWriter(other, {"label": "int", "caption": "utf8"}) as w:
            for i in range(5):
                w.append({"label": -i, "caption": f"#{i}"})
        slow.objects = {f"/ds/{f.name}": f.read_bytes() for f in other.iterdir() if f.is_file()}
        with DatasetReader(url, cache_dir=tmp_path / "cache") as reader:
            assert len(reader) == 5 and reader[3] == {"label": -3, "caption": "#3"}
