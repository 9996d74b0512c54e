"""A dataset's manifest: numbered, immutable versions of what the dataset holds, so that
opening it reads one small file (one or two requests remote) whatever its shard count.

Version ``k`` is the file ``_manifest/v{k:06d}.ffr`` under the dataset's directory (or
``s3://`` prefix). It lists the shards in order (directory names, ``""`` for the dataset's
own directory), each one's datapoint count, and for each field of the spec each shard's
file: its name, size, the sample count and metadata checksum of its header (what the core
reads when it opens it: a replaced file is found at open, before any of its data is used)
and, remote, its ETag (which opens it without a request). The layout is specified in
``docs/structured-datasets.md``.

A version is published last, atomically and never replacing one: locally a hard link of
a finished file (``FileExistsError`` when another writer published that number first), on
S3 a conditional PUT. A published version never changes; growing a dataset publishes the
next number (see ``ffrecord.dataset.grow``).

>>> import tempfile, os
>>> from ffrecord.dataset import DatasetWriter
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"label": "int"}) as writer:
...     _ = writer.append({"label": 7})
>>> loaded = load(_remote.as_path(path))
>>> loaded.manifest.version, loaded.manifest.spec, loaded.manifest.shards
(1, {'label': 'int'}, [''])
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import _paths, _remote
from .._file_info import FileStamp
from ..errors import CorruptFileError, ObjectChangedError
from .errors import CorruptDatasetError, SpecError, UnsupportedVersionError
from .spec import Field, checked_blocks, parse_spec, sync_directory, with_blocks

MANIFEST_DIR = "_manifest"
FORMAT = "ffrecord.manifest"
LAYOUT = 1
# The columns of each field, in the order their samples follow the head (see _SAMPLES).
_COLUMNS = ("names", "sizes", "stored", "checksums", "etags")
_HEAD, _SHARDS, _LENGTHS = 0, 1, 2
_VERSION_NAME = re.compile(r"v(\d{6,})\.ffr\Z")
_NAME_CHARACTER = re.compile(r"[^A-Za-z0-9_.\-\n]")  # what no shard or file name holds
MAX_HEAD_BYTES = 16 << 20


def version_name(version: int) -> str:
    """The file name of version ``version``: ``v000001.ffr``, … (more digits past 999,999).

    >>> version_name(3), version_name(1234567)
    ('v000003.ffr', 'v1234567.ffr')
    """
    return f"v{version:06d}.ffr"


class FileVersion(NamedTuple):
    """One file of a shard as a manifest records it: its name in the shard's directory,
    size, the sample count and metadata checksum stored in its header, and (remote) the
    ETag it was uploaded as ("" when unknown: it is then opened with a HEAD request)."""

    name: str
    size: int
    stored: int
    checksum: int
    etag: str = ""

    @property
    def stamp(self) -> FileStamp:
        """The file's stamp as recorded (``FileReader.file_stamp`` of the file it was)."""
        return FileStamp(self.size, self.stored, self.checksum)

    def matches(self, found: FileStamp) -> bool:
        """Whether a file found with the stamp ``found`` is this version."""
        return self.stamp == found

    def mismatch(self, found: FileStamp) -> str:
        """What was recorded and what was found, for a message."""
        return (f"{self.size} bytes, {self.stored} samples, checksum {self.checksum:08x}; found "
                f"{found.file_bytes}, {found.stored_samples}, {found.header_checksum:08x}")


class ShardEntry(NamedTuple):
    """One shard: its directory name (``""``: the dataset's own directory), datapoint
    count, and its file of each field."""

    name: str
    length: int
    files: dict[str, FileVersion]


@dataclass
class Manifest:
    """One version of a dataset: its spec, metadata and shards (see the module)."""

    version: int
    fields: dict[str, Field]
    metadata: dict[str, Any]
    shards: Sequence[str]
    lengths: np.ndarray  #: int64, the datapoints of each shard
    files: dict[str, dict[str, Any]]  #: per field, each column of _COLUMNS, per shard
    kind: str = "dataset"  #: "files" for parts of plain samples (``dump``): one field, "bytes"
    writer: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    @classmethod
    def build(cls, version: int, fields: dict[str, Field], metadata: dict[str, Any],
              entries: list[ShardEntry], kind: str = "dataset") -> Manifest:
        """The manifest of ``entries`` (shards in order), each with a file for every field."""
        files = {name: {column: [] for column in _COLUMNS} for name in fields}
        for entry in entries:
            for name in fields:
                for column, value in zip(_COLUMNS, entry.files[name]):
                    files[name][column].append(value)
        return cls(version, dict(fields), dict(metadata), [e.name for e in entries],
                   np.array([e.length for e in entries], np.int64),
                   {name: _typed(columns) for name, columns in files.items()}, kind)

    @property
    def spec(self) -> dict[str, str]:
        return {name: f.spec for name, f in self.fields.items()}

    def __repr__(self) -> str:
        return (f"Manifest(version={self.version}, {self.spec}, shards={len(self.shards)}, "
                f"length={self.length}, kind={self.kind!r})")

    @property
    def length(self) -> int:
        return int(self.lengths.sum())

    def entry(self, k: int) -> ShardEntry:
        """Shard ``k`` as an entry."""
        return ShardEntry(self.shards[k], int(self.lengths[k]), {
            name: FileVersion(columns["names"][k], int(columns["sizes"][k]), int(columns["stored"][k]),
                              int(columns["checksums"][k]), columns["etags"][k])
            for name, columns in self.files.items()})

    def entries(self) -> list[ShardEntry]:
        return [self.entry(k) for k in range(len(self.shards))]

    def successor(self, entries: list[ShardEntry], fields: dict[str, Field] | None = None) -> Manifest:
        """The next version: ``entries`` for the shards (with a file for each of ``fields``,
        by default the same fields), the metadata and kind kept."""
        return Manifest.build(self.version + 1, fields or self.fields, self.metadata, entries, self.kind)

    def digest(self) -> str:
        """What the version holds, as 16 hex digits: a digest of its spec, shards, their
        datapoint counts and each file's name, size and header digest (not of who wrote it
        or when): two copies of a dataset, or a dataset and its ``ffrecord index``, agree.

        >>> one, renumbered = (Manifest.build(v, {}, {}, [ShardEntry("", 3, {})]) for v in (1, 2))
        >>> longer = Manifest.build(1, {}, {}, [ShardEntry("", 4, {})])
        >>> one.digest() == renumbered.digest() != longer.digest()
        True
        """
        digest = hashlib.sha256(json.dumps([self.spec, list(self.shards)]).encode())
        digest.update(self.lengths.astype("<i8").tobytes())
        for columns in self.files.values():
            digest.update(_joined(columns["names"]))
            for column, dtype in (("sizes", "<u8"), ("stored", "<u8"), ("checksums", "<u4")):
                digest.update(columns[column].astype(dtype).tobytes())
        return digest.hexdigest()[:16]

    def grown_from(self, older: Manifest) -> str | None:
        """Why this version did not grow from ``older`` (None when it did): growing keeps
        every shard, its datapoint count and its file of each field as they were, and only
        appends shards or adds fields (``ffrecord.dataset.grow``). The first datapoints of a
        version grown so are those of ``older``, unchanged.

        >>> v1 = Manifest.build(1, {}, {}, [ShardEntry("a", 3, {})])
        >>> v2 = v1.successor([ShardEntry("a", 3, {}), ShardEntry("b", 2, {})])
        >>> v2.grown_from(v1) is None, v1.grown_from(v2)
        (True, 'version 2 has 2 shard(s), version 1 has 1')
        """
        count = len(older.shards)
        if count > len(self.shards):
            return f"version {older.version} has {count} shard(s), version {self.version} has {len(self.shards)}"
        if list(self.shards[:count]) != list(older.shards) or not np.array_equal(self.lengths[:count], older.lengths):
            return f"the shards of version {older.version} are not the first ones of version {self.version}"
        for name, kept in older.fields.items():
            if self.fields.get(name) != kept:
                return f"field {name!r} of version {older.version} is not in version {self.version} as it was"
            files, before = self.files[name], older.files[name]
            for column in ("names", "sizes", "stored", "checksums"):
                if list(files[column][:count]) != list(before[column]):
                    return f"field {name!r}: a file of version {older.version} was replaced in version {self.version}"
        return None

    def path(self, shard: int, name: str) -> str:
        """The path of shard ``shard``'s file of field ``name``, relative to the dataset."""
        file = self.files[name]["names"][shard]
        return f"{self.shards[shard]}/{file}" if self.shards[shard] else file

    # -- the file ---------------------------------------------------------------------

    def samples(self) -> list[bytes]:
        """The samples of the manifest's file, in order (see _SAMPLES)."""
        head = {"format": FORMAT, "layout": LAYOUT, "version": self.version, "kind": self.kind,
                "fields": self.spec, "metadata": self.metadata, "shards": len(self.shards),
                "length": self.length, "writer": self.writer, "created": self.created}
        blocks = {name: f.block for name, f in self.fields.items() if f.block is not None}
        if blocks:  # values to a sample of each column field, as spec.json has them
            head["blocks"] = blocks
        out = [json.dumps(head, separators=(",", ":")).encode(), _joined(self.shards),
               self.lengths.astype("<i8").tobytes()]
        for columns in self.files.values():
            out += [_joined(columns["names"]), columns["sizes"].astype("<u8").tobytes(),
                    columns["stored"].astype("<u8").tobytes(),
                    columns["checksums"].astype("<u4").tobytes(), _joined(columns["etags"])]
        return out

    @classmethod
    def parse(cls, where: Any, expected: int | None, samples: list[Any]) -> Manifest:
        """The manifest in ``samples`` (of the file ``where``, for messages), checked: its
        version must be ``expected`` (the number its name gives) when given."""
        head = _head(where, samples[_HEAD] if samples else b"")
        try:
            fields = parse_spec(head.get("fields"))
        except SpecError as exc:
            raise _damaged(where, str(exc)) from None
        fields = with_blocks(fields, checked_blocks(where, head.get("blocks", {}), fields))
        version, count, kind = head.get("version"), head.get("shards"), head.get("kind", "dataset")
        if not _is_count(version) or version < 1 or (expected is not None and version != expected):
            raise _damaged(where, f"holds version {version!r:.40}, not {expected}")
        if not _is_count(count) or kind not in ("dataset", "files"):
            raise _damaged(where, f"bad shard count {count!r:.40} or kind {kind!r:.40}")
        if len(samples) != 3 + len(_COLUMNS) * len(fields):
            raise _damaged(where, f"{len(samples)} samples for {len(fields)} fields")
        shards = _names(where, samples[_SHARDS], count, "shard", "shard")
        lengths = _numbers(where, samples[_LENGTHS], "<i8", count, "datapoint counts")
        if (lengths < 0).any() or int(lengths.sum()) != head.get("length"):
            raise _damaged(where, "datapoint counts do not add up to its length")
        files = {}
        for j, name in enumerate(fields):
            at = 3 + len(_COLUMNS) * j
            columns = {"names": _names(where, samples[at], count, "file", f"field {name!r} file"),
                       "sizes": _numbers(where, samples[at + 1], "<u8", count, f"field {name!r} sizes"),
                       "stored": _numbers(where, samples[at + 2], "<u8", count, f"field {name!r} counts"),
                       "checksums": _numbers(where, samples[at + 3], "<u4", count, f"field {name!r} checksums"),
                       "etags": _names(where, samples[at + 4], count, "etag", f"field {name!r} ETag")}
            stored = columns["stored"].astype(np.int64)
            block = fields[name].block
            want = lengths if block is None else -(-lengths // block)  # a column: its blocks
            if ((stored != want) & (stored != want + 1)).any():  # + 1: a compression record
                k = int(np.argmax((stored != want) & (stored != want + 1)))
                raise _damaged(where, f"shard {shards[k]!r}: field {name!r} stores {int(stored[k])} "
                                      f"samples for {int(lengths[k])} datapoints")
            files[name] = columns
        metadata = head.get("metadata", {})
        if not isinstance(metadata, dict):
            raise _damaged(where, '"metadata" is not an object')
        return cls(version, fields, metadata, shards, lengths, files, kind,
                   str(head.get("writer", "")), str(head.get("created", "")))


def _typed(columns: dict[str, list]) -> dict[str, Any]:
    return {"names": list(columns["names"]), "sizes": np.array(columns["sizes"], np.uint64),
            "stored": np.array(columns["stored"], np.uint64),
            "checksums": np.array(columns["checksums"], np.uint32), "etags": list(columns["etags"])}


def _joined(names: list[str]) -> bytes:
    return "\n".join(names).encode()


def _head(where: Any, raw: Any) -> dict[str, Any]:
    raw = bytes(raw)
    if len(raw) > MAX_HEAD_BYTES:
        raise _damaged(where, f"a head over {MAX_HEAD_BYTES >> 20} MiB")
    try:
        head = json.loads(raw)
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise _damaged(where, f"head is not JSON ({type(exc).__name__})") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise _damaged(where, "not a dataset manifest")
    layout = head.get("layout")
    if not _is_count(layout) or layout < 1:
        raise _damaged(where, f"bad layout {layout!r:.40}")
    if layout > LAYOUT:
        raise UnsupportedVersionError(f"{where}: manifest layout {layout} is newer than this library "
                                      f"reads ({LAYOUT}): upgrade ffrecord")
    return head


def _names(where: Any, raw: Any, count: int, kind: str, what: str) -> Sequence[str]:
    """``count`` names, one a line, checked in a few passes over the text and split only
    when asked for: a shard's (letters, digits, ``_.-``, not hidden; ``""`` the dataset's own
    directory), a file's (the same, ending in ``.ffr``) or an ETag (no tab)."""
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise _damaged(where, f"{what} names are not UTF-8") from None
    lines = text.count("\n") + 1 if count else 0
    if lines != count or (not count and text):
        raise _damaged(where, f"{lines} {what} names for {count} shards")
    if kind == "etag":
        bad = "\t" in text
    else:
        bad = bool(_NAME_CHARACTER.search(text)) or text.startswith(".") or "\n." in text
        if kind == "file":
            bad = bad or (count and (text.count(".ffr\n") != count - 1 or not text.endswith(".ffr")))
    if bad:
        raise _damaged(where, f"{what} names: one is not allowed")
    return _Lines(text, count)


class _Lines(Sequence):
    """Names kept as the text that holds them one a line, split on first use (a manifest of
    100,000 shards holds 300,000 names, most of which a reader never asks for)."""

    def __init__(self, text: str, count: int) -> None:
        self._text, self._count = text, count
        self._split: list[str] | None = None

    def _names(self) -> list[str]:
        if self._split is None:
            self._split = self._text.split("\n") if self._count else []
        return self._split

    def __getitem__(self, k: Any) -> Any:
        return self._names()[k]

    def __len__(self) -> int:
        return self._count

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return repr(self._names())


def _numbers(where: Any, raw: Any, dtype: str, count: int, what: str) -> np.ndarray:
    data = np.frombuffer(bytes(raw), np.uint8)
    width = np.dtype(dtype).itemsize
    if len(data) != width * count:
        raise _damaged(where, f"{what}: {len(data)} bytes for {count} shards")
    return data.view(dtype).astype(np.dtype(dtype).newbyteorder("="))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _damaged(where: Any, what: str) -> CorruptDatasetError:
    return CorruptDatasetError(f"{where}: damaged manifest: {what}")


# -- finding, reading and publishing versions ---------------------------------------------


class Loaded(NamedTuple):
    """A manifest as read: the manifest, the identity of its file (what a copy of the reader
    in another process opens again: remote, its size and ETag; local, its size, sample count
    and metadata checksum), and the requests the open took."""

    manifest: Manifest
    identity: tuple
    requests: int


def versions(root: Any) -> tuple[dict[int, Any], int]:
    """The versions of the dataset at ``root`` (a ``Path`` or ``RemotePath``): each one's
    file (local: its name; remote: its ``ObjectVersion``), and the requests the listing
    took (0 locally)."""
    if isinstance(root, _remote.RemotePath):
        if not root.url.lower().startswith("s3://"):
            return {}, 0  # an HTTP server lists nothing: such a dataset opens as before
        objects, requests = _remote.list_objects(_remote.join(root.url, MANIFEST_DIR) + "/",
                                                 root.storage_options)
        return {int(m[1]): v for name, v in objects.items() if (m := _VERSION_NAME.match(name))}, requests
    try:
        names = os.listdir(Path(root) / MANIFEST_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return {}, 0
    return {int(m[1]): name for name in names if (m := _VERSION_NAME.match(name))}, 0


def load(root: Any, version: int | None = None, identity: tuple | None = None) -> Loaded | None:
    """Version ``version`` (default: the latest) of the manifest of the dataset at ``root``,
    or None when it has no manifest. ``identity`` (a ``Loaded.identity``) opens that file
    without listing, as it was opened before: ``ObjectChangedError`` when it changed since.
    ``FileNotFoundError`` for a version the dataset does not have (or no longer has)."""
    requests = 0
    if identity is None:
        found, requests = versions(root)
        if not found:
            return None
        if version is None:
            version = max(found)
        elif version not in found:
            raise FileNotFoundError(errno.ENOENT, f"{root}: no version {version} (versions: "
                                                  f"{_span(sorted(found))})")
        listed = found[version]
    elif isinstance(root, _remote.RemotePath):
        listed = _remote.ObjectVersion(*identity)
    else:
        listed = version_name(version)
    where = root / MANIFEST_DIR / version_name(version)
    manifest, own, opened = _read(where, version, listed)
    if identity is not None and tuple(own) != tuple(identity):
        raise ObjectChangedError(errno.ESTALE, f"{where}: the manifest of version {version} was "
                                               f"replaced since a reader opened it")
    return Loaded(manifest, tuple(own), requests + opened)


def _read(where: Any, version: int, listed: Any) -> tuple[Manifest, tuple, int]:
    """The manifest in the file ``where``, its identity and the requests reading it took."""
    from ..reader import FileReader

    options = None
    if isinstance(where, _remote.RemotePath):
        options = _remote.pinned(where.storage_options, {where.url: listed._asdict()} if listed.etag else {})
    else:
        _paths.check_regular(os.lstat(where).st_mode, where)  # not a link to elsewhere
    try:
        with FileReader(where, check_data=True, storage_options=options) as reader:
            samples = reader.read(range(reader.n))
            stamp = reader.file_stamp(0)
            requests = reader.stats()["requests"]
    except CorruptFileError as exc:
        raise _damaged(where, str(exc)) from exc
    manifest = Manifest.parse(where, version, samples)
    if isinstance(where, _remote.RemotePath):
        return manifest, tuple(listed), requests
    return manifest, tuple(stamp), requests


def _span(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) if len(numbers) <= 6 else f"{numbers[0]} … {numbers[-1]}"


def publish(root: Any, manifest: Manifest, durable: bool = True) -> None:
    """Publishes ``manifest`` as its version of the dataset at ``root``, never replacing
    one: ``FileExistsError`` when that version exists (another writer published it).
    ``durable=False`` skips the fsyncs (a scratch dataset's writer: see ``FileWriter``)."""
    tmp = tempfile.mkdtemp(prefix="ffrecord-manifest-") if isinstance(root, _remote.RemotePath) \
        else _local_manifest_dir(root)
    staged = os.path.join(tmp, f".pending-{manifest.writer}.ffr")
    try:
        _write(staged, manifest, durable)
        if isinstance(root, _remote.RemotePath):
            with open(staged, "rb") as f:
                body = f.read()
            try:
                _remote.put_new(_remote.join(root.url, f"{MANIFEST_DIR}/{version_name(manifest.version)}"),
                                root.storage_options, body)
            except FileExistsError:
                raise _taken(root, manifest.version) from None
            return
        try:
            os.link(staged, os.path.join(tmp, version_name(manifest.version)))
        except FileExistsError:
            raise _taken(root, manifest.version) from None
        if durable:
            sync_directory(Path(tmp))
    finally:
        if os.path.lexists(staged):
            os.unlink(staged)
        if isinstance(root, _remote.RemotePath):
            os.rmdir(tmp)


def _local_manifest_dir(root: Path) -> str:
    folder = Path(root) / MANIFEST_DIR
    try:
        folder.mkdir()
        sync_directory(Path(root))
    except FileExistsError:
        pass
    return str(folder)


def _write(path: str, manifest: Manifest, durable: bool) -> None:
    from ..writer import FileWriter

    samples = manifest.samples()
    with FileWriter(path, len(samples), compression="zstd", durable=durable) as writer:
        writer.write_many(samples)


def _taken(root: Any, version: int) -> FileExistsError:
    return FileExistsError(errno.EEXIST, f"{root}: version {version} was published by another "
                                         f"writer meanwhile: not replacing it")


# -- describing files ----------------------------------------------------------------------


def describe(path: Any, storage_options: dict[str, Any] | None = None) -> FileVersion:
    """The file at ``path`` (local, or a URL) as a manifest records it: its name, size,
    header digest and (remote) ETag, from its first 12 bytes (one request remote)."""
    from .. import _lib

    text = os.fsdecode(path)
    version = (ctypes.c_uint64 * 3)()
    etag = _lib.copy_text(_lib.current().dll.ffr_describe_file, _paths.encode(text),
                          _remote.encode_options(storage_options) if _remote.is_url(text) else None, version)
    return FileVersion(text.rstrip("/").rsplit("/", 1)[-1], version[0], version[1], version[2],
                       etag.decode("utf-8"))


def with_etags(files: dict[str, FileVersion], url: str, options: dict[str, Any] | None) -> dict[str, FileVersion]:
    """``files`` (local, uploaded under the prefix ``url``) with the ETags the store gave
    them, asked for at once (one request each): a reader opens them with no request of its
    own. ``ObjectChangedError`` when an uploaded object is not the file described."""
    from concurrent.futures import ThreadPoolExecutor

    names = list(files)
    with ThreadPoolExecutor(min(len(names), 16) or 1) as pool:
        found = list(pool.map(lambda name: describe(_remote.join(url, files[name].name), options), names))
    for name, seen in zip(names, found):
        if not files[name].matches(seen.stamp):
            raise ObjectChangedError(errno.ESTALE, f"{_remote.join(url, files[name].name)}: replaced "
                                                   "while it was uploaded")
    return {name: files[name]._replace(etag=seen.etag) for name, seen in zip(names, found)}
