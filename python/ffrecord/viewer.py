"""``ffrecord view``: a local, read-only web page to browse a structured dataset.

The server binds 127.0.0.1 only (a free port unless one is given) and, as Jupyter does,
answers nobody without its token: a random one made at start (``secrets``), in the URL it
prints (``http://127.0.0.1:PORT/?token=…``). A request carries it as that query parameter
(the first visit: the page's answer sets it as a cookie for this port, ``HttpOnly``,
``SameSite=Strict``) or as that cookie (what the page's own requests and images send);
anything else gets 403, before any path is looked at. So does a request whose ``Host`` is
not ``127.0.0.1``, ``localhost`` or ``[::1]`` with the server's port: a web page that
rebinds its own name to 127.0.0.1 is refused, as it never has the token either.

It answers GET requests for exactly these paths; nothing is ever mapped to a file name, so
nothing outside the dataset can be served:

- ``/``: the page (paging, jump to index, a field mask, per-field size histograms);
- ``/api/info``: length, spec, metadata, and per-field size statistics;
- ``/api/page?start=S&count=C&fields=a,b``: summaries of datapoints ``S .. S+C-1``
  (``ffrecord.dataset.display``: bounded per value, a value that cannot be decoded shown
  by its error), images as URLs of ``/raw``;
- ``/raw/INDEX/FIELD`` and ``/raw/INDEX/FIELD/ELEMENT``: a value's stored bytes (an image
  as its file), for image fields and byte fields holding images.

>>> server = start(path)                       # doctest: +SKIP
>>> server.url                                 # doctest: +SKIP
'http://127.0.0.1:41813/?token=Jx0f…'
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import sys
import threading
import webbrowser
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .dataset import open_dataset
from .dataset.display import (display_decoders, field_sizes, image_format, size_stats, spec_types,
                              summarize_datapoints)
from .dataset.spec import parse_spec

MAX_PAGE = 200
_RAW = re.compile(r"/raw/(\d+)/([^/]+)(?:/(\d+))?\Z")
_CONTENT_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
_LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")


class Viewer:
    """The dataset behind the page, and the answers to its requests (JSON-able values)."""

    def __init__(self, path: Any, storage_options: dict[str, Any] | None = None) -> None:
        self.path = str(path)
        with open_dataset(path, storage_options=storage_options) as probe:
            spec = probe.spec
        self.dataset = open_dataset(path, decoders=display_decoders(spec_types(spec)), storage_options=storage_options)
        self.fields = parse_spec(spec)
        self._info: dict[str, Any] | None = None

    def close(self) -> None:
        self.dataset.close()

    def info(self) -> dict[str, Any]:
        if self._info is None:
            self._info = {
                "path": self.path, "length": len(self.dataset), "spec": self.dataset.spec,
                "metadata": getattr(self.dataset, "metadata", {}),
                "sizes": {name: size_stats(field_sizes(self.dataset, name)) for name in self.fields}}
        return self._info

    def page(self, start: int, count: int, names: list[str] | None) -> dict[str, Any]:
        n = len(self.dataset)
        start = min(max(start, 0), n)
        indices = list(range(start, min(start + max(0, min(count, MAX_PAGE)), n)))
        spec = {name: field.spec for name, field in self.fields.items()}
        items = []
        for index, fields in zip(indices, summarize_datapoints(self.dataset, indices, names or None, spec)):
            for name, summary in fields.items():
                _add_urls(summary, f"/raw/{index}/{name}")
            items.append({"index": index, "fields": fields})
        return {"start": start, "length": n, "items": items}

    def raw(self, index: int, name: str, element: int | None) -> bytes:
        field = self.fields[name]
        if (element is None) == field.sequence or index >= len(self.dataset):
            raise KeyError(name)
        want = True if element is None else range(element, element + 1)
        value = self.dataset.read([index], {name: want})[0][name]
        value = value if element is None else value[0]
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise KeyError(name)
        return bytes(value)


def _add_urls(summary: dict[str, Any], url: str) -> None:
    if summary["kind"] == "image":
        summary["url"] = url
    elif summary["kind"] == "sequence":
        for k, item in enumerate(summary["items"]):
            _add_urls(item, f"{url}/{k}")


class ViewerServer(ThreadingHTTPServer):
    """The HTTP server of one ``Viewer``, on 127.0.0.1: ``url`` (with the token) is the
    address to open; ``shutdown()`` stops it."""

    daemon_threads = True

    def __init__(self, viewer: Viewer, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.viewer = viewer
        self.token = secrets.token_urlsafe(32)
        bound = self.server_address[1]
        self.cookie = f"ffrecord-view-{bound}"  # cookies are shared by every port of a host
        self.hosts = {f"{name}:{bound}" for name in _LOCAL_NAMES}
        if bound == 80:  # a browser leaves the default port out
            self.hosts.update(_LOCAL_NAMES)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/?token={self.token}"

    def server_close(self) -> None:
        super().server_close()
        self.viewer.close()


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "ffrecord-view"

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if not self._admitted(query):
            return
        viewer = self.server.viewer
        try:
            if url.path == "/":
                self._send(PAGE.encode(), "text/html; charset=utf-8", remember=bool(query.get("token")))
            elif url.path == "/api/info":
                self._json(viewer.info())
            elif url.path == "/api/page":
                names = [f for f in query.get("fields", [""])[0].split(",") if f in viewer.fields]
                self._json(viewer.page(int(query.get("start", ["0"])[0]), int(query.get("count", ["24"])[0]),
                                       names))
            elif _RAW.match(url.path):
                index, name, element = _RAW.match(url.path).groups()
                data = viewer.raw(int(index), name, None if element is None else int(element))
                self._send(data, _CONTENT_TYPES.get(image_format(data) or "", "application/octet-stream"))
            else:
                self.send_error(HTTPStatus.NOT_FOUND)
        except (KeyError, ValueError, IndexError):
            self.send_error(HTTPStatus.NOT_FOUND)

    def do_POST(self) -> None:  # noqa: N802
        if self._admitted(parse_qs(urlsplit(self.path).query)):
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, "read-only")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def _admitted(self, query: dict[str, list[str]]) -> bool:
        """Whether the request names this server as its host and carries the token (as the
        query parameter or the cookie); answers 403 when not."""
        host = (self.headers.get("Host") or "").lower()
        if host not in self.server.hosts:
            self.send_error(HTTPStatus.FORBIDDEN, "not a local address of this server")
            return False
        given = (query.get("token") or [None])[0] or self._cookie()
        if given is None or not hmac.compare_digest(given.encode(), self.server.token.encode()):
            self.send_error(HTTPStatus.FORBIDDEN, "open the URL that ffrecord view printed (it holds a token)")
            return False
        return True

    def _cookie(self) -> str | None:
        cookies = SimpleCookie()
        try:
            cookies.load(self.headers.get("Cookie") or "")
        except CookieError:
            return None
        morsel = cookies.get(self.server.cookie)
        return None if morsel is None else morsel.value

    def _json(self, value: Any) -> None:
        self._send(json.dumps(value).encode(), "application/json")

    def _send(self, body: bytes, content_type: str, remember: bool = False) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if remember:  # the page's own requests and images carry it from now on
            self.send_header("Set-Cookie", f"{self.server.cookie}={self.server.token}; Path=/; HttpOnly; "
                                           "SameSite=Strict")
        self.end_headers()
        self.wfile.write(body)

    def end_headers(self) -> None:
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")  # the page's URL holds the token
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal shows the URL
        pass


def start(path: Any, port: int = 0, storage_options: dict[str, Any] | None = None) -> ViewerServer:
    """Starts serving ``path`` on 127.0.0.1 in a background thread; returns the server
    (``server.url`` is the page's address with its token; ``server.shutdown()`` stops it)."""
    server = ViewerServer(Viewer(path, storage_options), port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def serve(path: Any, port: int = 0, open_browser: bool = False) -> None:
    """Serves ``path`` until interrupted (Ctrl-C), printing the page's URL (with its token:
    whoever has it reads the dataset)."""
    server = start(path, port)
    print(f"serving {path} at {server.url} (Ctrl-C to stop)", flush=True)
    if open_browser:
        webbrowser.open(server.url)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.shutdown()
        server.server_close()


PAGE = r"""<!doctype html>
<html><head><meta charset="utf-8"><title>ffrecord view</title>
<style>
body{font:14px system-ui,sans-serif;margin:1em;color:#222}
header{display:flex;gap:1em;align-items:center;flex-wrap:wrap}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:.8em;margin-top:1em}
.card{border:1px solid #ccc;border-radius:6px;padding:.5em;overflow:hidden}
.card h3{margin:0 0 .4em;font-size:13px;color:#555}
.f{margin:.3em 0}.f b{font-weight:600;margin-right:.4em}
.f img{max-width:120px;max-height:120px;min-width:48px;image-rendering:pixelated;border:1px solid #eee;margin:2px}
.seq{display:flex;flex-wrap:wrap;gap:4px;align-items:flex-end}.seq>div{font-size:11px;color:#666}
.txt{white-space:pre-wrap;word-break:break-word;font-family:monospace;font-size:12px}
.hists{display:flex;gap:1.5em;flex-wrap:wrap;margin-top:.8em}
.hist svg{background:#f6f6f6}
.mask label{margin-right:.6em}
.more{color:#888;font-style:italic}.err{color:#b00;font-family:monospace;font-size:12px;word-break:break-word}
</style></head><body>
<header>
 <strong id="title">ffrecord view</strong>
 <span id="count"></span>
 <button id="prev">&larr; prev</button><button id="next">next &rarr;</button>
 <label>index <input id="jump" type="number" min="0" style="width:7em"></label><button id="go">go</button>
 <label>per page <input id="per" type="number" min="1" max="200" value="12" style="width:4em"></label>
 <span id="status" data-shown="0" data-images="0" data-decoded="0"></span>
</header>
<div class="mask" id="mask"></div>
<div class="hists" id="hists"></div>
<div class="cards" id="cards"></div>
<script>
let info = null, start = 0;
const $ = id => document.getElementById(id);
function esc(s){return String(s).replace(/[&<>"]/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]))}
function per(){return Math.max(1, Math.min(200, parseInt($("per").value) || 12))}
function chosen(){return [...document.querySelectorAll("#mask input:checked")].map(i => i.value)}
function more(v, unit){return v.more ? `<span class="more">… ${v.more} more${unit}</span>` : ""}
function render(v){
  if (v.kind === "image") return `<img src="${v.url}" title="${esc(v.format)} ${v.width||"?"}x${v.height||"?"}"><div>${esc(v.format)} ${v.width||""}${v.width?"x":""}${v.height||""}, ${v.bytes} B</div>`;
  if (v.kind === "sequence") return `<div>${v.count} element(s)</div><div class="seq">` + v.items.map(i => `<div>${render(i)}</div>`).join("") + more(v, "") + `</div>`;
  if (v.kind === "number") return `<span>${esc(v.value)}</span>`;
  if (v.kind === "array") return `<span>array ${esc(v.dtype)} (${v.shape.join(", ")})${"min" in v ? ` min ${esc(v.min)} max ${esc(v.max)}` : ""}</span>`;
  if (v.kind === "arrays") return Object.entries(v.arrays).map(([k, a]) => `<div>${esc(k)}: ${render(a)}</div>`).join("") + more(v, "");
  if (v.kind === "bytes") return `<span class="txt">${v.bytes} B ${esc(v.hex)}${v.bytes > v.hex.length / 2 ? "…" : ""}</span>`;
  if (v.kind === "error") return `<div class="err">unreadable: ${esc(v.error)}</div>`;
  return `<div class="txt">${esc(v.text)}${more(v, " characters")}</div>`;
}
function histogram(name, s){
  if (!s.count) return "";
  const w = 220, h = 60, max = Math.max(...s.histogram.counts), bw = w / s.histogram.counts.length;
  const bars = s.histogram.counts.map((c, k) => `<rect x="${k*bw}" y="${h - h*c/max}" width="${bw-1}" height="${h*c/max}" fill="#4a7"><title>${c}</title></rect>`).join("");
  return `<div class="hist" data-field="${esc(name)}" data-count="${s.count}"><b>${esc(name)}</b> ${s.count} values, ${s.min}..${s.max} B (median ${s.median})<br><svg width="${w}" height="${h}">${bars}</svg></div>`;
}
async function load(){
  const fields = chosen().join(",");
  const page = await (await fetch(`/api/page?start=${start}&count=${per()}&fields=${encodeURIComponent(fields)}`)).json();
  start = page.start;
  $("count").textContent = `datapoints ${page.items.length ? page.start : 0}–${page.start + page.items.length - 1} of ${page.length}`;
  $("cards").innerHTML = page.items.map(d => `<div class="card" data-index="${d.index}"><h3>#${d.index}</h3>` +
    Object.entries(d.fields).map(([k, v]) => `<div class="f" data-field="${esc(k)}"><b>${esc(k)}</b>${render(v)}</div>`).join("") + `</div>`).join("");
  location.hash = `index=${start}`;
  const imgs = [...document.querySelectorAll("#cards img")];
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  const st = $("status");
  st.dataset.shown = page.items.length; st.dataset.images = imgs.length;
  st.dataset.decoded = imgs.filter(i => i.naturalWidth > 0).length;
  st.textContent = `${imgs.filter(i => i.naturalWidth > 0).length} of ${imgs.length} images shown`;
}
async function init(){
  info = await (await fetch("/api/info")).json();
  $("title").textContent = info.path;
  $("mask").innerHTML = "fields: " + Object.entries(info.spec).map(([k, t]) => `<label><input type="checkbox" value="${esc(k)}" checked> ${esc(k)} <small>${esc(t)}</small></label>`).join("");
  $("hists").innerHTML = Object.entries(info.sizes).map(([k, s]) => histogram(k, s)).join("");
  const m = /index=(\d+)/.exec(location.hash);
  if (m) start = parseInt(m[1]);
  document.querySelectorAll("#mask input").forEach(i => i.onchange = load);
  $("prev").onclick = () => { start = Math.max(0, start - per()); load(); };
  $("next").onclick = () => { if (start + per() < info.length) { start += per(); load(); } };
  $("go").onclick = () => { start = Math.max(0, parseInt($("jump").value) || 0); load(); };
  $("per").onchange = load;
  await load();
}
init();
</script></body></html>
"""
