"""Opening a dataset on S3 from its manifest, through a proxy that counts requests: a few
requests whatever the shard count (10,000 here), fewer in a second process of the node
(the cache holds the manifest), and a batch opens only the shards it touches."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ffrecord import _remote
from ffrecord.dataset import DatasetWriter, ShardedDatasetWriter, open_dataset
from ffrecord.dataset import manifest as manifests
from ffrecord.dataset.spec import parse_spec

from counting_proxy import CountingProxy
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

SPEC = {"image": "bytes", "label": "int"}
SHARDS = 10_000


def point(k: int) -> dict:
    return {"image": bytes([k % 251]) * 100, "label": k}


@pytest.fixture
def many_shards(bucket, tmp_path):
    """A dataset of 10,000 shards of 2 datapoints under s3://bucket/ds/: one shard written,
    its objects put straight into moto's store 10,000 times over (what 10,000 uploads
    would make, without 20,000 requests), and a manifest listing them."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    client, name, options = bucket
    local = tmp_path / "one"
    with DatasetWriter(local, SPEC, manifest=False) as writer:
        for k in range(2):
            writer.append(point(k))
    store = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    files = {field: (local / f"{field}.ffr").read_bytes() for field in SPEC}
    for k in range(SHARDS):
        for field, data in files.items():
            store.put_object(name, f"ds/{k:06d}/{field}.ffr", data)
    url = f"s3://{name}/ds"
    entry = manifests.ShardEntry("", 2, {field: manifests.describe(f"{url}/000000/{field}.ffr", options)
                                         for field in SPEC})
    manifests.publish(_remote.as_path(url, options), manifests.Manifest.build(
        1, parse_spec(SPEC), {}, [entry._replace(name=f"{k:06d}") for k in range(SHARDS)]))
    return url


def test_opening_10000_shards_takes_a_few_requests(many_shards, s3_endpoint, tmp_path) -> None:
    with CountingProxy(s3_endpoint) as proxy:
        options = {"endpoint_url": proxy.url}
        reader = open_dataset(many_shards, storage_options=options)
        opened = proxy.counts()
        assert (reader.shards, len(reader), reader.version) == (SHARDS, 2 * SHARDS, 1)
        assert sum(opened.values()) <= 4 and opened["LIST"] == 1 and "HEAD" not in opened, opened
        assert reader.stats()["open_requests"] == sum(opened.values())
        proxy.reset()
        batch = np.random.default_rng(0).choice(2 * SHARDS, 64, replace=False)
        assert reader.read(batch) == [point(int(k) % 2) for k in batch]
        touched = len({int(k) // 2 for k in batch})
        assert reader.stats()["shards_opened"] == touched
        # each field file of a shard touched: its header, its data; no HEAD (the manifest
        # holds the ETags), no listing
        assert proxy.counts()["GET"] <= 2 * 2 * 2 * touched and set(proxy.counts()) == {"GET"}
        reader.close()


SECOND = """
import json, sys
from ffrecord.dataset import open_dataset
reader = open_dataset(sys.argv[1], storage_options=json.loads(sys.argv[2]))
assert reader.read([0, 19999]) == reader.read([2, 3])
print(json.dumps(reader.stats()))
"""


def test_a_second_process_of_the_node_opens_with_one_request(many_shards, s3_endpoint, tmp_path) -> None:
    with CountingProxy(s3_endpoint) as proxy:
        options = {"endpoint_url": proxy.url, "cache_dir": str(tmp_path / "cache")}
        with open_dataset(many_shards, storage_options=options) as first:
            assert first.stats()["open_requests"] <= 3
        proxy.reset()
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND), many_shards, json.dumps(options)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stdout)
        # the listing that says which version is the latest; the manifest from the cache
        assert stats["open_requests"] <= 2 and proxy.requests[0][0] == "LIST"
        assert proxy.counts()["LIST"] == 1 and "HEAD" not in proxy.counts()


def test_an_append_on_s3_is_seen_by_new_readers_only(bucket, s3_endpoint) -> None:
    client, name, _ = bucket
    url = f"s3://{name}/grown"
    with CountingProxy(s3_endpoint) as proxy:
        options = {"endpoint_url": proxy.url}
        with ShardedDatasetWriter(url, SPEC, shardlen=3, storage_options=options) as writer:
            for k in range(5):
                writer.append(point(k))
        before = open_dataset(url, storage_options=options)
        with ShardedDatasetWriter(url, SPEC, shardlen=3, mode="append", storage_options=options) as writer:
            for k in range(5, 9):
                writer.append(point(k))
        proxy.reset()
        assert before.read(range(5)) == [point(k) for k in range(5)] and len(before) == 5
        after = open_dataset(url, storage_options=options)
        assert (after.version, after.read(range(9))) == (2, [point(k) for k in range(9)])
        assert "HEAD" not in proxy.counts()


def test_plan_counts_the_requests_of_opening_from_the_manifest(bucket, s3_endpoint) -> None:
    from ffrecord.plan import plan

    client, name, _ = bucket
    url = f"s3://{name}/plain/"
    with CountingProxy(s3_endpoint) as proxy:
        options = {"endpoint_url": proxy.url}
        with DatasetWriter(url, SPEC, storage_options=options) as writer:
            for k in range(50):
                writer.append(point(k))
        proxy.reset()
        opened = open_dataset(url, storage_options=options)
        counted = len(proxy)
        p = plan(url, nodes=4, gpus_per_node=8, storage_options=options)
    assert p.open_requests == counted == opened.stats()["open_requests"] <= 4
    assert f"{counted} requests per process, {32 * counted} for the job" in str(p)
