"""``ffrecord view``: the page in a real headless browser (Debian's chromium, installed by
``make test``'s browser-deps), its API, its refusals (no token, another Host), values it
cannot decode or that are long, and an s3:// dataset."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

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
        url = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{40,}", line)
        assert url, line + process.stderr.read()
        yield url.group(0)
    finally:
        process.terminate()
        process.wait(10)


def _get(url: str, **headers: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def _with_token(url: str, path: str) -> str:
    """``path`` of the server at ``url`` (the URL it printed), with its token."""
    base, token = url.split("?token=")
    return f"{base}{path}{'&' if '?' in path else '?'}token={token}"


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
    status, body = _get(_with_token(served, "api/info"))
    info = json.loads(body)
    assert status == 200 and info["length"] == N and info["sizes"]["label"]["max"] == 8
    page = json.loads(_get(_with_token(served, "api/page?start=28&count=5&fields=label,frames"))[1])
    assert [item["index"] for item in page["items"]] == [28, 29]
    assert set(page["items"][0]["fields"]) == {"label", "frames"}  # the mask
    frame = page["items"][0]["fields"]["frames"]["items"][0]
    status, body = _get(_with_token(served, frame["url"][1:]))
    assert status == 200 and body[:3] == b"\xff\xd8\xff"
    for path in ("../spec.json", "raw/0/../../spec.json", "label.ffr", "spec.json", "raw/999/label",
                 "raw/0/nope", "raw/0/frames", "raw/0/label/0", "%2e%2e/%2e%2e/etc/passwd"):
        assert _get(_with_token(served, path))[0] == 404, path
    request = urllib.request.Request(_with_token(served, "api/info"), data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 405


def test_an_s3_dataset(bucket):
    client, name, options = bucket
    _write(f"s3://{name}/ds/", storage_options=options)
    server = start(f"s3://{name}/ds/", storage_options=options)
    try:
        url = server.url
        assert server.server_address[0] == "127.0.0.1"
        assert json.loads(_get(_with_token(url, "api/info"))[1])["length"] == N
        item = json.loads(_get(_with_token(url, "api/page?start=4&count=1"))[1])["items"][0]
        assert item["fields"]["caption"]["text"] == "caption <b>4</b>"
        status, body = _get(_with_token(url, item["fields"]["image"]["url"][1:]))
        assert status == 200 and body[:4] == b"\x89PNG"
    finally:
        server.shutdown()


# ---- who may read: the token and the Host ----------------------------------------------------

def _request(url: str, path: str, headers: dict[str, str], method: str = "GET") -> tuple[int, dict, bytes]:
    """``path`` of the server at ``url`` with exactly ``headers`` (no Host unless given)."""
    connection = http.client.HTTPConnection(urlsplit(url).hostname, urlsplit(url).port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.fixture
def server(tmp_path):
    _write(tmp_path / "ds")
    server = start(tmp_path / "ds")
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


PATHS = ["/", "/api/info", "/api/page?start=0&count=3", "/raw/0/image", "/raw/2/frames/1", "/spec.json",
         "/nope", "/../label.ffr"]


def test_nothing_is_readable_without_the_token(server):
    port, token = server.server_address[1], server.token
    host = {"Host": f"127.0.0.1:{port}"}
    cookie = server.cookie
    wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
    refusals = [{}, {"Cookie": f"{cookie}={wrong}"}, {"Cookie": f"ffrecord-view-{port + 1}={token}"},
                {"Cookie": f"{cookie}=\"bad\\cookie; ="}, {"Cookie": f"{cookie}={token}x"}]
    for path in PATHS:
        for headers in refusals:
            status, _, body = _request(server.url, path, {**host, **headers})
            assert status == 403 and token.encode() not in body and b"caption" not in body, (path, headers)
        for query in (f"token={wrong}", "token=", f"token={token[:20]}", "tok=" + token):
            joined = f"{path}{'&' if '?' in path else '?'}{query}"
            assert _request(server.url, joined, host)[0] == 403, joined
        assert _request(server.url, path, host, method="POST")[0] == 403
        status, _, body = _request(server.url, path, {**host, "Cookie": f"{cookie}={token}"})
        assert status == (404 if path in PATHS[-3:] else 200), path
    assert len(token) >= 40 and start_token_differs(server)


def start_token_differs(server) -> bool:
    other = start(server.viewer.path)
    try:
        return other.token != server.token and other.cookie != server.cookie
    finally:
        other.shutdown()
        other.server_close()


def test_the_first_visit_sets_the_cookie_the_page_then_sends(server):
    port = server.server_address[1]
    status, headers, body = _request(server.url, f"/?token={server.token}", {"Host": f"127.0.0.1:{port}"})
    assert status == 200 and b"ffrecord view" in body
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"{server.cookie}={server.token};")
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {part.strip() for part in cookie.split(";")}
    assert headers["Referrer-Policy"] == "no-referrer" and headers["X-Frame-Options"] == "DENY"
    sent = {"Host": f"localhost:{port}", "Cookie": cookie.split(";")[0]}
    status, headers, body = _request(server.url, "/api/info", sent)
    assert status == 200 and json.loads(body)["length"] == N and "Set-Cookie" not in headers


@pytest.mark.parametrize("host,status", [
    ("127.0.0.1:{port}", 200), ("localhost:{port}", 200), ("LOCALHOST:{port}", 200), ("[::1]:{port}", 200),
    ("evil.example:{port}", 403), ("evil.example", 403), ("127.0.0.1", 403), ("127.0.0.1:{other}", 403),
    ("localhost.evil.example:{port}", 403), ("127.0.0.1.nip.io:{port}", 403), ("0.0.0.0:{port}", 403),
    ("127.0.0.2:{port}", 403), ("", 403), (None, 403),
])
def test_the_host_must_be_this_server(server, host, status):
    """A page that rebinds its own name to 127.0.0.1 sends its name as the Host: refused,
    whatever it carries."""
    port = server.server_address[1]
    headers = {"Cookie": f"{server.cookie}={server.token}"}
    if host is not None:
        headers["Host"] = host.format(port=port, other=port + 1)
    for path in ("/api/info", f"/?token={server.token}"):
        assert _request(server.url, path, headers)[0] == status, (host, path)


# ---- values it cannot decode, values that are long --------------------------------------------

def _odd_dataset(path: Path) -> Path:
    """Datapoint 2's ``meta`` is not JSON (the field file holds what no encoder wrote); datapoint
    1 holds a sequence of 100,000 ints, a text of 300,000 characters and 5,000 bytes."""
    from ffrecord import FileWriter

    spec = {"label": "int", "meta": "json", "seq": "int[]", "text": "utf8", "blob": "bytes"}
    with DatasetWriter(path, spec, manifest=False) as writer:  # its meta.ffr is replaced below
        for k in range(4):
            long = k == 1
            writer.append({"label": k, "meta": {"k": k}, "seq": list(range(100_000 if long else 3)),
                           "text": "é" * (300_000 if long else 5), "blob": bytes(range(256)) * (20 if long else 1)})
    (path / "meta.ffr").unlink()
    with FileWriter(path / "meta.ffr", 4) as file:
        for k in range(4):
            file.write_one(b"\xff{not json" if k == 2 else json.dumps({"k": k}).encode())
    return path


def test_one_undecodable_value_shows_its_error_in_place(tmp_path):
    server = start(_odd_dataset(tmp_path / "odd"))
    try:
        status, body = _get(_with_token(server.url, "api/page?start=0&count=4"))
        assert status == 200
        items = json.loads(body)["items"]
        assert [item["fields"]["label"]["value"] for item in items] == [0, 1, 2, 3]  # the rest is shown
        bad = items[2]["fields"]["meta"]
        assert bad["kind"] == "error" and "datapoint 2, field 'meta'" in bad["error"] and "CodecError" in bad["error"]
        assert [item["fields"]["meta"]["text"] for k, item in enumerate(items) if k != 2] == \
            ['{"k": 0}', '{"k": 1}', '{"k": 3}']
        masked = json.loads(_get(_with_token(server.url, "api/page?start=2&count=1&fields=label"))[1])
        assert masked["items"][0]["fields"] == {"label": {"kind": "number", "value": 2}}
    finally:
        server.shutdown()
        server.server_close()


def test_a_long_value_sends_its_head_and_a_count(tmp_path):
    server = start(_odd_dataset(tmp_path / "odd"))
    try:
        status, body = _get(_with_token(server.url, "api/page?start=1&count=1"))
    finally:
        server.shutdown()
        server.server_close()
    assert status == 200 and len(body) < 16_000, len(body)
    fields = json.loads(body)["items"][0]["fields"]
    seq, text, blob = fields["seq"], fields["text"], fields["blob"]
    assert seq["count"] == 100_000 and seq["more"] == 100_000 - len(seq["items"]) and len(seq["items"]) == 8
    assert [item["value"] for item in seq["items"]] == list(range(8))
    assert text["text"] == "é" * 2000 and text["more"] == 298_000 and text["length"] == 300_000
    assert blob["bytes"] == 5120 and blob["hex"] == bytes(range(64)).hex()


def test_show_prints_the_same_heads_and_the_error_in_place(tmp_path):
    path = _odd_dataset(tmp_path / "odd")
    out = subprocess.run([sys.executable, "-m", "ffrecord", "show", str(path), "1:3"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1 and not out.stderr, out.stderr  # every value shown, one unreadable
    lines = out.stdout.splitlines()
    assert "… 99,992 more" in [line.strip() for line in lines] and lines.count("datapoint 1") == 1
    assert any(line.endswith("… 298,000 more characters") for line in lines)
    meta = [line for line in lines if line.lstrip().startswith("meta")]
    assert meta[0].split(None, 1)[1] == '{"k": 1}'
    assert meta[1].split(None, 1)[1].startswith("unreadable: CodecError:") and "datapoint 2" in meta[1]
    assert len(lines) < 40 and max(map(len, lines)) < 2100
