"""``ffrecord.metrics`` (issue 36): the loaders' counters in Prometheus' text format, read by
Prometheus' own parser (``prometheus_client``), and a scrape endpoint on 127.0.0.1 that
stops; names and labels as Prometheus' conventions want them, and no secret in them."""

from __future__ import annotations

import doctest
import gc
import socket
import urllib.error
import urllib.request
import warnings

import pytest

torch = pytest.importorskip("torch")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from ffrecord import FileWriter, UncachedRemoteWarning, metrics  # noqa: E402
from ffrecord.torch import DataLoader, Dataset  # noqa: E402

from ffr_helpers import run_python  # noqa: E402
from range_server import RangeServer  # noqa: E402

N, BATCH = 24, 8
STAGES = ("read", "transform", "collate", "transfer")


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    target = tmp_path_factory.mktemp("metrics") / "samples.ffr"
    with FileWriter(target, N) as writer:
        for k in range(N):
            writer.write_one(bytes([k]) * 100)
    return target


def families() -> dict:
    return {family.name: family for family in text_string_to_metric_families(metrics.text())}


def samples_of(loader_name: str) -> dict:
    """(sample name, stage or None) -> value, for one loader's series."""
    found = {}
    for family in families().values():
        for sample in family.samples:
            if sample.labels["loader"] == loader_name:
                found[(sample.name, sample.labels.get("stage"))] = sample.value
    return found


@pytest.mark.parametrize("workers", [0, 2])
def test_the_text_parses_and_holds_each_loaders_stats(path, workers):
    loader = DataLoader(Dataset(str(path)), batch_size=BATCH, num_workers=workers, name=f"train-{workers}")
    for _ in loader:
        pass
    stats = loader.stats()
    found = families()
    assert all(family.type == "counter" for family in found.values())
    for family in found.values():
        assert family.documentation, family.name
        for sample in family.samples:  # counters: *_total, labelled by loader (and stage) only
            assert sample.name == family.name + "_total"
            assert set(sample.labels) <= {"loader", "stage"}
    mine = samples_of(f"train-{workers}")
    assert mine[("ffrecord_loader_batches_total", None)] == stats["batches"] == N // BATCH
    assert mine[("ffrecord_loader_datapoints_total", None)] == N
    assert mine[("ffrecord_loader_delivered_bytes_total", None)] == stats["bytes_delivered"]  # (remote bytes: 0)
    assert mine[("ffrecord_loader_wait_seconds_total", None)] == pytest.approx(stats["wait_s"])
    assert mine[("ffrecord_loader_wait_seconds_total", None)] > 0
    for stage in STAGES:
        assert mine[("ffrecord_loader_stage_seconds_total", stage)] == pytest.approx(stats[f"{stage}_s"])
    assert all(name.startswith("ffrecord_loader_") for name in found)
    assert {"ffrecord_loader_wait_seconds", "ffrecord_loader_fetched_bytes", "ffrecord_loader_cache_hits",
            "ffrecord_loader_requests", "ffrecord_loader_stage_seconds"} <= set(found)


def test_loaders_of_one_name_add_up_and_a_dropped_one_goes(path):
    first = DataLoader(Dataset(str(path)), batch_size=BATCH, name="shared-name")
    second = DataLoader(Dataset(str(path)), batch_size=BATCH, name="shared-name")
    unnamed = DataLoader(Dataset(str(path)), batch_size=BATCH)
    assert unnamed.name.startswith("loader-")
    for loader in (first, second):
        for _ in loader:
            pass
    assert samples_of("shared-name")[("ffrecord_loader_batches_total", None)] == 2 * (N // BATCH)
    assert samples_of(unnamed.name)[("ffrecord_loader_batches_total", None)] == 0
    del first, second, loader  # (the loop's variable holds the second)
    gc.collect()
    assert samples_of("shared-name") == {}
    assert f'loader="{unnamed.name}"' in metrics.text()


def test_no_secret_reaches_the_text(path):
    token = "s3cr3t-signature-value"
    with RangeServer({"/samples.ffr": path.read_bytes()}) as server:
        url = f"{server.url}/samples.ffr?X-Amz-Signature={token}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncachedRemoteWarning)
            loader = DataLoader(Dataset(url), batch_size=BATCH, name="remote")
        for _ in loader:
            pass
        text = metrics.text()
    assert samples_of("remote")[("ffrecord_loader_requests_total", None)] > 0
    assert token not in text and server.url not in text and "127.0.0.1" not in text
    for family in families().values():
        for sample in family.samples:
            assert all("://" not in value and "?" not in value for value in sample.labels.values())


def test_the_server_serves_the_text_on_loopback_until_stopped(path):
    loader = DataLoader(Dataset(str(path)), batch_size=BATCH, name="served")
    for _ in loader:
        pass
    with metrics.serve(0) as server:
        assert server.url.startswith("http://127.0.0.1:") and "serving" in repr(server)
        with urllib.request.urlopen(server.url, timeout=10) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = answer.read().decode()
        assert 'ffrecord_loader_batches_total{loader="served"} 3' in body
        assert list(text_string_to_metric_families(body))
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.url.replace("/metrics", "/elsewhere"), timeout=10)
        assert missing.value.code == 404
        port = server.port
    assert "stopped" in repr(server)
    server.stop()  # idempotent
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_a_loader_loads_no_http_server_until_metrics_are_served():
    out = run_python("""
        import sys
        from ffrecord import metrics
        from ffrecord.torch import DataLoader
        loader = DataLoader(list(range(4)), batch_size=2)
        before = "http.server" in sys.modules
        with metrics.serve(0):
            print(before, "http.server" in sys.modules)
    """)
    assert out == "False True"


@pytest.mark.parametrize("port", [-1, 65536, "80", True, 1.5])
def test_a_bad_port_is_refused(port):
    with pytest.raises((ValueError, TypeError), match="port|integer"):
        metrics.serve(port)


def test_a_taken_port_is_an_os_error():
    with metrics.serve(0) as server:
        with pytest.raises(OSError):
            metrics.serve(server.port)


def test_docstring_examples_run():
    assert doctest.testmod(metrics, optionflags=doctest.ELLIPSIS).failed == 0
