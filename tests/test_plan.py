"""``ffrecord.plan`` against a real run at small scale: processes acting as the ranks of two
nodes (a cache directory each) read a chunk-aware epoch over the loopback server; the data
GETs and bytes they make are within 10% of the plan's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter
from ffrecord.cli import main
from ffrecord.plan import PlanError, plan

from range_server import RangeServer

N, SAMPLE, CHUNK, WINDOW, BATCH = 2400, 2048, 64 << 10, 4, 16
NODES, GPUS = 2, 2

# A rank's share of a chunk-aware epoch: chunks permuted and dealt to the nodes, each node
# reading windows of WINDOW chunks with samples shuffled inside, its GPUs taking turns.
RANK = textwrap.dedent("""
    import json, sys
    import numpy as np
    from ffrecord import FileReader
    url, cache, node, gpu, nodes, gpus, window, batch, chunk = json.loads(sys.argv[1])
    r = FileReader(url, cache_dir=cache, chunk_size=chunk)
    bounds = r.chunk_bounds(chunk)
    rng = np.random.default_rng(0)
    mine = rng.permutation(len(bounds) - 1)[node::nodes]
    batches = []
    for w in range(0, len(mine), window):
        idx = np.concatenate([np.arange(bounds[c], bounds[c + 1]) for c in mine[w:w + window]])
        rng.shuffle(idx)
        batches += [idx[at:at + batch] for at in range(0, len(idx), batch)]
    for b in batches[gpu::gpus]:
        r.read(b)
    print(json.dumps(r.stats()))
""")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "d.ffr"
    rng = np.random.default_rng(0)
    with FileWriter(path, N) as w:
        w.write_many([rng.integers(0, 256, SAMPLE, dtype=np.uint8).tobytes() for _ in range(N)])
    with RangeServer({"/d.ffr": path.read_bytes()}) as srv:
        yield srv, srv.url + "/d.ffr"


def test_measured_gets_and_bytes_are_within_10_percent_of_the_plan(served, tmp_path):
    srv, url = served
    with FileReader(url) as r:
        header = r.file_info(0).header_bytes
    p = plan(url, nodes=NODES, gpus_per_node=GPUS, batch_size=BATCH, samples_per_second=1000,
             chunk_size=CHUNK, window=WINDOW)
    start = len(srv.log)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    procs = [subprocess.Popen([sys.executable, "-c", RANK, json.dumps(
                [url, str(tmp_path / f"node{node}"), node, gpu, NODES, GPUS, WINDOW, BATCH, CHUNK])],
                env=env, stdout=subprocess.PIPE, text=True)
             for node in range(NODES) for gpu in range(GPUS)]
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
    # Data GETs: those after the header's; data bytes: of every GET, the header's included
    # (each node's first request also brings its first chunks, first_request_bytes).
    # The ranks of a node open the file at once: the first fetches the header, the other
    # waits for it and finds it in the node's cache.
    assert sum(1 for _, s, _ in srv.log[start:] if s < header) == NODES
    gets = sum(1 for _, s, _ in srv.log[start:] if s >= header)
    got_bytes = sum(max(0, e - max(s, header)) for _, s, e in srv.log[start:])
    assert abs(gets - p.job_gets_cold) <= 0.1 * p.job_gets_cold, (gets, p.job_gets_cold)
    planned_bytes = p.node_bytes_cold * NODES
    assert abs(got_bytes - planned_bytes) <= 0.1 * planned_bytes, (got_bytes, planned_bytes)


def test_full_shuffle_without_cache_and_the_s3_warning(served, capsys):
    srv, url = served
    p = plan(url, nodes=64, gpus_per_node=8, batch_size=64, samples_per_second=200_000,
             shuffle="full", cached=False)
    assert p.job_gets_cold == 64 * -(-N // 64) and p.job_gets_warm == p.job_gets_cold
    assert "503 SlowDown" in str(p)
    assert p.open_requests == 2 and "2 requests per process, 1,024 for the job" in str(p)  # HEAD, GET
    assert main(["plan", url, "--nodes", "2", "--gpus-per-node", "8", "--batch-size", "64",
                 "--samples-per-second", "20000", "--chunk-size", str(CHUNK), "--window", "4"]) == 0
    out = capsys.readouterr().out
    assert "per node, epoch 1" in out and "GETs/s on the prefix" in out
    with pytest.raises(PlanError, match="window"):
        plan(url, window=0)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan-args") / "d.ffr"
    with FileWriter(path, 100) as writer:
        writer.write_many([bytes(1000)] * 100)
    return str(path)


COUNTS = ("nodes", "gpus_per_node", "batch_size", "chunk_size", "window", "cache_limit")
BAD_COUNTS = [float("nan"), float("inf"), -float("inf"), 1.5, 2.0, 0, -1, 2**63, 2**64 + 5, True,
              np.float64(3), "4", None]
BAD_RATES = [float("nan"), float("inf"), -float("inf"), 0, -1, 0.0, -1e-9, 10**400, True, "100", None]


@pytest.mark.parametrize("name,value", [(name, value) for name in COUNTS for value in BAD_COUNTS
                                        if not (name == "cache_limit" and value is None)]
                         + [("samples_per_second", value) for value in BAD_RATES]
                         + [("shuffle", "random"), ("cached", "no"), ("cached", 1)])
def test_every_argument_is_checked(small, name, value):
    with pytest.raises(PlanError, match=f"^{name} must be") as refused:
        plan(small, **{name: value})
    assert isinstance(refused.value, ValueError)


def test_the_largest_arguments_are_modelled(small):
    for name in COUNTS:
        assert plan(small, **{name: 2**63 - 1}).samples == 100
    assert plan(small, nodes=np.int64(3), samples_per_second=np.float32(2.5)).nodes == 3
    tiny = plan(small, samples_per_second=1e-300)
    assert tiny.epoch_seconds == 100 / 1e-300 and "epoch ~" in str(tiny)


@pytest.mark.parametrize("option,text,named", [
    ("--nodes", "nan", "nodes"), ("--nodes", "1.5", "nodes"), ("--nodes", "inf", "nodes"),
    ("--gpus-per-node", "0", "gpus_per_node"), ("--batch-size", "2.5", "batch_size"),
    ("--batch-size", "NaN", "batch_size"), ("--samples-per-second", "nan", "samples_per_second"),
    ("--samples-per-second", "inf", "samples_per_second"), ("--samples-per-second", "-5", "samples_per_second"),
    ("--samples-per-second", "1e400", "samples_per_second"), ("--chunk-size", "18446744073709551621", "chunk_size"),
    ("--window", "abc", "window"), ("--cache-limit", "1e3", "cache_limit"),
])
def test_the_command_prints_one_line_and_exits_2(small, option, text, named):
    out = subprocess.run([sys.executable, "-m", "ffrecord", "plan", small, option, text],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"ffrecord plan: error: {named} must be"), \
        out.stderr
