"""URLs as paths: which paths name remote objects, and the storage options sent with them.

The format, the requests, signing, retries and listing all live in the Go core, and so do
the rules of URLs and of storage options: this module asks the core which paths are URLs and
whether options are valid, encodes ``storage_options`` for the C ABI and stages writes.

>>> is_url("s3://bucket/train/"), is_url("https://host/a.ffr"), is_url("/data/a.ffr")
(True, True, False)
>>> import json
>>> sent = json.loads(encode_options({"endpoint_url": "http://127.0.0.1:9000"}))
>>> sent["endpoint_url"], isinstance(sent["env"], dict)
('http://127.0.0.1:9000', True)
"""

from __future__ import annotations

import ctypes
import json
import math
import os
from typing import Any, NamedTuple

from . import _lib, _paths
from .errors import clean_up_after

_UPLOADS = 4  # files uploaded at once (each upload is itself parallel for a large file)
_ENV_PREFIXES = ("AWS_", "FFRECORD_CACHE_DIR", "FFRECORD_CACHE_LIMIT", "FFRECORD_REMOTE_")


def _locate(text: str) -> tuple[int, str]:
    """The core's reading of a path: what it names (``_lib.PATH_LOCAL``, ``PATH_S3`` or
    ``PATH_HTTP``), and the path to open (a ``file://`` URL's local path; anything else as
    it is)."""
    kind = ctypes.c_uint32()
    local = _lib.copy_text(_lib.current().dll.ffr_locate, _paths.encode(text), ctypes.byref(kind))
    return kind.value, os.fsdecode(local)


def is_url(path: Any) -> bool:
    """Whether ``path`` names a remote object (``s3://``, ``http://``, ``https://``), as the
    core reads paths."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return isinstance(path, str) and _locate(path)[0] != _lib.PATH_LOCAL


def local_path(path: Any) -> Any:
    """The local path of a ``file://`` URL (``ValueError`` when it names another host); any
    other path unchanged. The core reads the URL, as it does when a reader opens one.

    >>> local_path("file:///data/a%20b.ffr"), local_path("data/a.ffr")
    ('/data/a b.ffr', 'data/a.ffr')
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        return path
    text = os.fsdecode(path)
    kind, local = _locate(text)
    return path if kind != _lib.PATH_LOCAL or local == text else local


def check_url(url: str) -> None:
    """``ValueError`` unless the core reads ``url`` as a well-formed remote URL (no request
    is made): the rules of ``s3://`` keys and of credentials in URLs live there.

    >>> check_url("s3://bucket/results?v2.ffr")
    """
    _lib.check(_lib.current().dll.ffr_check_url(url.encode()))


def check_writable(url: str) -> None:
    """``ValueError`` unless ``url`` is a place objects can be written (``s3://``)."""
    check_url(url)
    if _locate(url)[0] != _lib.PATH_S3:
        raise ValueError(f"{url}: only s3:// URLs can be written (HTTP is read only)")


def encode_options(options: dict[str, Any] | None) -> bytes:
    """``storage_options`` as the JSON the core reads, checked (``check_options``).

    The environment variables the core reads go with them: the Go runtime sees only the
    environment the process started with, not later changes to ``os.environ``."""
    options = check_options(options)
    env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
    return json.dumps({**options, "env": env}).encode()


def check_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """``storage_options`` (``{}`` for None) if the core takes them: ``ValueError`` for an
    unknown name, a value not of its option's type (the core judges both, as it reads them)
    or a value JSON cannot hold, ``TypeError`` for anything but a dict.

    >>> check_options(None)
    {}
    """
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise TypeError(f"storage_options must be a dict, not {type(options).__name__}")
    if not options:
        return options  # nothing for the core to judge: a local reader's open pays no call
    try:
        given = json.dumps(options, allow_nan=False)
    except (TypeError, ValueError) as exc:
        # JSON has no NaN nor infinity: the core never sees them to name the option.
        for name, value in options.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"storage option {name} {value} is not a finite number") from None
        raise ValueError(f"storage_options: {exc}") from None
    _lib.check(_lib.current().dll.ffr_check_options(given.encode()))
    return options


def with_cache(options: dict[str, Any] | None, cache_dir: Any = None,
               cache_limit: int | None = None, chunk_size: int | None = None) -> dict[str, Any] | None:
    """``options`` with the chunk cache's settings that are given (not None) added: a
    reader's ``cache_dir=``, ``cache_limit=`` and ``chunk_size=`` are storage options.

    >>> with_cache({"region": "x"}, cache_dir="/tmp/c", chunk_size=1 << 20)
    {'region': 'x', 'cache_dir': '/tmp/c', 'chunk_size': 1048576}
    >>> with_cache(None) is None
    True
    """
    given = {k: v for k, v in (("cache_dir", None if cache_dir is None else os.fspath(cache_dir)),
                               ("cache_limit", cache_limit), ("chunk_size", chunk_size))
             if v is not None}
    if not given:
        return options
    return {**(options or {}), **given}


def upload(local: str, url: str, options: dict[str, Any] | None) -> None:
    """Uploads a local file to ``url`` (multipart when large); on failure nothing appears."""
    dll = _lib.current().dll
    _lib.check(dll.ffr_upload(os.fsencode(local), url.encode(), encode_options(options)))


def put_new(url: str, options: dict[str, Any] | None, data: bytes) -> None:
    """Creates the object at ``url`` holding ``data`` only if none has that key;
    ``FileExistsError`` if one has."""
    _lib.check(_lib.current().dll.ffr_put_new(url.encode(), encode_options(options), data,
                                              len(data)))


def remove(url: str, options: dict[str, Any] | None) -> None:
    """Deletes the object at ``url``; a missing one is not an error."""
    _lib.check(_lib.current().dll.ffr_remove(url.encode(), encode_options(options)))


def remove_if_holds(url: str, options: dict[str, Any] | None, data: bytes) -> None:
    """Deletes the object at ``url`` only while it holds ``data`` (what this process put
    there: a claim with a random token), on condition of the ETag read; ``FileExistsError``
    when it holds another's, which stays. A missing one is not an error."""
    _lib.check(_lib.current().dll.ffr_remove_if_holds(url.encode(), encode_options(options), data,
                                                      len(data)))


def list_dir(url: str, options: dict[str, Any] | None) -> list[str]:
    """What lies directly under the prefix ``url``, sorted: object names, and the names of
    "sub-directories" followed by ``/``. A missing prefix lists nothing."""
    dll = _lib.current().dll
    text = _lib.copy_text(dll.ffr_list, url.encode(), encode_options(options)).decode("utf-8")
    return text.splitlines()


class ObjectVersion(NamedTuple):
    """An object as a listing describes it: what ``pinned`` pins a read to."""

    size: int
    etag: str  #: "" when the store gives none


# First buffer for a listing: ~1,000 objects, so that a listing is not sent again for room.
_LISTING_CAPACITY = 64 << 10


def list_objects(url: str, options: dict[str, Any] | None) -> tuple[dict[str, ObjectVersion], int]:
    """The objects directly under the s3:// prefix ``url`` (not its "sub-directories"), by
    name, and the requests the listing took (one per 1,000 objects)."""
    dll = _lib.current().dll
    encoded, capacity, requests = encode_options(options), _LISTING_CAPACITY, 0
    while True:
        buf, needed, listed = ctypes.create_string_buffer(capacity), ctypes.c_size_t(), ctypes.c_uint64()
        status = dll.ffr_list_objects(url.encode(), encoded, buf, capacity, ctypes.byref(needed),
                                      ctypes.byref(listed))
        requests += listed.value
        if status != _lib.E_SHORTBUF or needed.value < capacity:
            break
        capacity = needed.value + 1
    _lib.check(status)
    objects = {}
    for line in buf.value.decode("utf-8").splitlines():
        name, size, etag = line.split("\t")
        objects[name] = ObjectVersion(int(size), etag)
    return objects, requests


def dataset_urls(url: str, options: dict[str, Any] | None) -> list[str]:
    """The objects under the s3:// prefix ``url`` that a reader opens as its dataset, in key
    order (the core's rule: named ``*.ffr``, not hidden)."""
    dll = _lib.current().dll
    text = _lib.copy_text(dll.ffr_dataset_urls, url.encode(), encode_options(options))
    return text.decode("utf-8").splitlines()


def upload_all(pairs: list[tuple[str, str]], options: dict[str, Any] | None) -> None:
    """Uploads ``(local path, url)`` pairs a few at a time. When one fails, every target is
    deleted again, so nothing of a failed upload is left to look complete (a failure to
    delete is a note on the upload's error, which is the one raised)."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait  # ~5 ms: not at import

    try:
        with ThreadPoolExecutor(max_workers=_UPLOADS) as pool:
            futures = [pool.submit(upload, path, url, options) for path, url in pairs]
            wait(futures, return_when=FIRST_EXCEPTION)
            for f in futures:
                f.cancel()
            for f in futures:
                if not f.cancelled() and f.exception() is not None:
                    raise f.exception()
    except BaseException as exc:
        clean_up_after(exc, lambda: remove_all([url for _, url in pairs], options))
        raise


def remove_all(urls: list[str], options: dict[str, Any] | None) -> None:
    """Deletes every object of ``urls`` (missing ones are no error), trying each even when
    one fails; the first failure is raised at the end."""
    failures = []
    for url in urls:
        try:
            remove(url, options)
        except OSError as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


def join(prefix: str, name: str) -> str:
    """``name`` under the URL ``prefix``.

    >>> join("s3://bucket/train/", "PART_00000.ffr"), join("s3://bucket/train", "a.ffr")
    ('s3://bucket/train/PART_00000.ffr', 's3://bucket/train/a.ffr')
    """
    return prefix.rstrip("/") + "/" + name


class Staging:
    """A private local directory where a file bound for ``url`` is written before upload.

    The staged file's name is fixed, not the key's last segment: a key may hold up to 1024
    bytes and any character, a local file name at most 255 bytes and no "/".

    >>> s = Staging("s3://bucket/data/" + "p" * 1000 + ".ffr")
    >>> os.path.basename(s.path)
    'staged.ffr'
    >>> s.discard(); os.path.exists(s.path)
    False
    """

    def __init__(self, url: str) -> None:
        import tempfile

        check_writable(url)
        self.dir = tempfile.mkdtemp(prefix="ffrecord-upload-")
        self.path = os.path.join(self.dir, "staged.ffr")

    def discard(self) -> None:
        """Removes the staged file and its directory."""
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"Staging({self.path!r})"


def fetch_bytes(url: str, options: dict[str, Any] | None) -> bytes:
    """The whole of a small remote document (at most 16 MiB), such as a spec."""
    dll = _lib.current().dll
    return _lib.copy_text(dll.ffr_fetch_text, url.encode(), encode_options(options))


def remembered_bytes(url: str, options: dict[str, Any] | None) -> bytes | None:
    """The copy of a small document that ``fetch_bytes`` last fetched with the same cache
    directory (``cache_dir``, else ``FFRECORD_CACHE_DIR``), without a request; None when
    none was kept. The object may have changed since: a guess, to start work that a fetch
    then confirms."""
    dll = _lib.current().dll
    status, text = _lib.fetch_text_status(dll.ffr_fetched_text, url.encode(), encode_options(options))
    if status == _lib.E_NOTFOUND:
        return None
    _lib.check(status)
    return text


class RemotePath:
    """A URL standing where a ``pathlib.Path`` of a directory or file would: it joins with
    ``/``, reads a small document whole, and is an ``os.PathLike`` that ``FileReader``
    accepts. Existence is not checked up front: opening a missing object raises
    ``FileNotFoundError``.

    >>> p = RemotePath("s3://bucket/ds/") / "spec.json"
    >>> str(p), p.name, os.fspath(p)
    ('s3://bucket/ds/spec.json', 'spec.json', 's3://bucket/ds/spec.json')
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.storage_options = storage_options

    def __truediv__(self, name: str) -> RemotePath:
        return RemotePath(join(self.url, name), self.storage_options)

    @property
    def name(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    def read_text(self, encoding: str = "utf-8") -> str:
        """The object's text (``encoding`` must be UTF-8, the core's)."""
        if encoding.lower().replace("-", "") != "utf8":
            raise ValueError(f"remote documents are read as UTF-8, not {encoding}")
        return self.read_bytes().decode("utf-8")

    def read_bytes(self) -> bytes:
        """The object's bytes (a small document: at most 16 MiB)."""
        return fetch_bytes(self.url, self.storage_options)

    def remembered_bytes(self) -> bytes | None:
        """The object's bytes as last read with this cache directory, or None (a guess)."""
        return remembered_bytes(self.url, self.storage_options)

    def is_file(self) -> bool:
        return True  # checked when opened, by the one request that opening makes anyway

    def is_dir(self) -> bool:
        return True

    def __fspath__(self) -> str:
        return self.url

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"RemotePath({self.url!r})"


def as_path(path: Any, storage_options: dict[str, Any] | None = None) -> Any:
    """``path`` as a ``pathlib.Path``, or a ``RemotePath`` when it is a URL."""
    text = os.fsdecode(local_path(path))
    if is_url(text):
        return RemotePath(text, storage_options)
    import pathlib

    return pathlib.Path(text)


def pinned(storage_options: dict[str, Any] | None, versions: dict[str, Any]) -> dict[str, Any] | None:
    """``storage_options`` with remote files pinned to ``versions`` (``FileReader.versions``).

    >>> pinned({"region": "x"}, {"s3://b/a.ffr": {"size": 9, "etag": "e"}})["versions"]
    {'s3://b/a.ffr': {'size': 9, 'etag': 'e'}}
    >>> pinned(None, {}) is None
    True
    """
    if not versions:
        return storage_options
    return {**(storage_options or {}), "versions": {**(storage_options or {}).get("versions", {}), **versions}}


def unpinned(storage_options: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``storage_options`` without the versions ``pinned`` added, and those versions.

    >>> unpinned(pinned({"region": "x"}, {"s3://b/a.ffr": {"size": 9, "etag": "e"}}))[0]
    {'region': 'x'}
    """
    if storage_options is None:
        return None, {}
    options = dict(storage_options)
    return options, dict(options.pop("versions", None) or {})
