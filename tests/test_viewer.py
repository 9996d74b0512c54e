"""``ffrecord view``: the page in a real headless browser (Debian's chromium, installed by
``make test``'s browser-deps), its API, its refusals, and an s3:// dataset."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from ffrecord.dataset import DatasetWriter
from ffrecord.viewer import start
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

N = 30
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def _write(path, **options):
    spec = {"label": "int", "image": "png", "frames": "jpg[]", "caption": "utf8", "vec": "array"}
    with DatasetWriter(path, spec, **options) as writer:
        for k in range(N):
            writer.append({"label": k, "image": np.full((16, 12, 3), 8 * k, np.uint8),
                           "frames": [np.full((8, 8), 40 * j, np.uint8) for j in range(k % 3)],
                           "caption": f"caption <b>{k}</b>", "vec": np.arange(k % 4, dtype=np.float32)})


@pytest.fixture
def served(tmp_path):
    _write(tmp_path / "ds")
    process = subprocess.Popen([sys.executable, "-m", "ffrecord", "view", str(tmp_path / "ds")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line + process.stderr.read()
        yield url.group(0)
    finally:
        process.terminate()
        process.wait(10)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def test_the_page_in_a_headless_browser(served, tmp_path):
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: make test installs it (browser-deps)"
    browse = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=8000",
              "--window-size=1280,1000"]
    dom = subprocess.run(browse + ["--dump-dom", served + "#index=3"], capture_output=True, text=True,
                         timeout=120).stdout
    status = re.search(r'id="status" data-shown="(\d+)" data-images="(\d+)" data-decoded="(\d+)"', dom)
    assert status, dom[-2000:]
    shown, images, decoded = map(int, status.groups())
    # datapoints 3..14: one image each, plus k % 3 frames
    assert shown == 12 and images == 12 + sum(k % 3 for k in range(3, 15)) and decoded == images
    assert re.findall(r'class="card" data-index="(\d+)"', dom) == [str(k) for k in range(3, 15)]
    assert "caption &lt;b&gt;7&lt;/b&gt;" in dom  # text shown as text, never as markup
    assert "array float32 (3) min 0 max 2" in dom
    histograms = dict(re.findall(r'class="hist" data-field="(\w+)" data-count="(\d+)"', dom))
    assert histograms == {name: str(N) for name in ("label", "image", "frames", "caption", "vec")}
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "viewer.png"
    subprocess.run(browse + [f"--screenshot={shot}", served], capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copy(shot, tmp_path / "viewer.png")


def test_api_serves_the_dataset_and_nothing_else(served):
    status, body = _get(served + "api/info")
    info = json.loads(body)
    assert status == 200 and info["length"] == N and info["sizes"]["label"]["max"] == 8
    page = json.loads(_get(served + "api/page?start=28&count=5&fields=label,frames")[1])
    assert [item["index"] for item in page["items"]] == [28, 29]
    assert set(page["items"][0]["fields"]) == {"label", "frames"}  # the mask
    frame = page["items"][0]["fields"]["frames"]["items"][0]
    status, body = _get(served + frame["url"][1:])
    assert status == 200 and body[:3] == b"\xff\xd8\xff"
    for path in ("../spec.json", "raw/0/../../spec.json", "label.ffr", "spec.json", "raw/999/label",
                 "raw/0/nope", "raw/0/frames", "raw/0/label/0", "%2e%2e/%2e%2e/etc/passwd"):
        assert _get(served + path)[0] == 404, path
    request = urllib.request.Request(served + "api/info", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 405


def test_an_s3_dataset(bucket):
    client, name, options = bucket
    _write(f"s3://{name}/ds/", storage_options=options)
    server = start(f"s3://{name}/ds/", storage_options=options)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        assert server.server_address[0] == "127.0.0.1"
        assert json.loads(_get(url + "api/info")[1])["length"] == N
        item = json.loads(_get(url + "api/page?start=4&count=1")[1])["items"][0]
        assert item["fields"]["caption"]["text"] == "caption <b>4</b>"
        status, body = _get(url + item["fields"]["image"]["url"][1:])
        assert status == 200 and body[:4] == b"\x89PNG"
    finally:
        server.shutdown()
