"""Growing a dataset without rewriting it: shards appended (``ShardedDatasetWriter(...,
mode="append")``), a field added (``add_field``), each publishing the next version of the
manifest; ``versions`` lists them, ``vacuum`` deletes what no version kept references, and
``index`` writes the first version of a dataset made before manifests (``ffrecord index``).

Each of these claims the dataset's directory (its ``.ffrecord-writer``, see
``ffrecord.dataset.claim``) for as long as it runs, so that one at a time grows a dataset
and no other writer's files are ever taken for garbage. A grower killed part-way leaves the
versions published before as they were (a version is published last, in one step); what it
wrote is in no version, and the next one to claim the directory removes it.

>>> import tempfile, os
>>> from ffrecord.dataset import ShardedDatasetWriter, open_dataset
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with ShardedDatasetWriter(path, {"n": "int"}, shardlen=2) as writer:
...     for k in range(3):
...         _ = writer.append({"n": k})
>>> with ShardedDatasetWriter(path, {"n": "int"}, shardlen=2, mode="append") as writer:
...     _ = writer.append({"n": 3})
>>> add_field(path, "double", "int", lambda d: 2 * d["n"])
3
>>> versions(path), open_dataset(path)[3], len(open_dataset(path, version=1))
([1, 2, 3], {'n': 3, 'double': 6}, 3)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import _paths, _remote
from .._progress import ProgressBar
from ..errors import clean_up_after
from ..reader import FileReader
from . import codecs, columns
from . import manifest as manifests
from .claim import CLAIM_FILE, Claim, RemoteClaim
from .errors import IncompleteDatasetError, SpecError
from .manifest import FileVersion, Manifest, ShardEntry
from .spec import SPEC_FILE, Field, parse_spec, read_spec_and_metadata

_AT_ONCE = 32  # files described, removed or uploaded at once
_BATCH = 256  # datapoints a function of the datapoint is given per read
_PARTS = "parts"  # under _manifest/: what each of several writers wrote, until one publishes


class Root:
    """A dataset's directory or ``s3://`` prefix, as growing it needs: its claim, its
    entries, and removing what is garbage."""

    def __init__(self, path: Any, storage_options: dict[str, Any] | None = None) -> None:
        self.path = path if isinstance(path, (Path, _remote.RemotePath)) else \
            _remote.as_path(path, storage_options)
        self.remote = isinstance(self.path, _remote.RemotePath)
        self.options = self.path.storage_options if self.remote else None

    def __str__(self) -> str:
        return str(self.path)

    def writable(self) -> Root:
        if self.remote:
            _remote.check_writable(self.path.url)
        elif not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such directory")
        return self

    def claim(self) -> Claim | RemoteClaim:
        """Claims the directory; ``FileExistsError`` naming the writer that holds it."""
        if self.remote:
            return RemoteClaim(self.path.url, self.options)
        return Claim(self.path)

    def at(self, *names: str) -> Any:
        """The path (or URL) of ``names`` under the directory (empty names skipped)."""
        place = self.path
        for name in names:
            if name:
                place = place / name
        return place

    def shard_names(self) -> list[str]:
        """The names of the directory's sub-directories that are shard numbers."""
        if self.remote:
            entries = _remote.list_dir(self.path.url, self.options)
            names = [name[:-1] for name in entries if name.endswith("/")]
        else:
            names = [e.name for e in os.scandir(self.path) if e.is_dir(follow_symlinks=False)]
        return sorted((name for name in names if name.isdigit()), key=int)

    def files(self, shard: str) -> dict[str, int]:
        """The files directly in a shard's directory, with their sizes (none when it is
        missing)."""
        if self.remote:
            objects, _ = _remote.list_objects(str(self.at(shard)) + "/", self.options)
            return {name: version.size for name, version in objects.items()}
        out = {}
        try:
            entries = list(os.scandir(self.at(shard)))
        except FileNotFoundError:  # a shard removed by hand: nothing of it to look at
            return out
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                out[entry.name] = entry.stat(follow_symlinks=False).st_size
        return out

    def being_written(self, shard: str, present: Any = None) -> bool:
        """Whether a writer may be writing the shard: locally, a live claim on it; remote,
        a claim object under it (object storage cannot tell a dead writer's). ``present``:
        the shard's files, when listed already."""
        if CLAIM_FILE not in (self.files(shard) if present is None else present):
            return False
        if self.remote:
            return True
        try:
            Claim(self.at(shard)).release()
        except FileExistsError:
            return True
        except FileNotFoundError:
            return False
        return False

    def remove(self, relatives: list[str]) -> None:
        """Removes files (paths relative to the directory), a few at once remote."""
        if not self.remote:
            for relative in relatives:
                Path(self.at(relative)).unlink(missing_ok=True)
            return
        _each(lambda relative: _remote.remove(str(self.at(relative)), self.options), relatives)

    def remove_tree(self, shard: str) -> int:
        """Removes a shard's directory and all it holds; returns the bytes freed."""
        if not self.remote:
            folder = Path(self.at(shard))
            freed = sum(f.stat(follow_symlinks=False).st_size for f in folder.rglob("*")
                        if not f.is_dir())
            shutil.rmtree(folder)
            return freed
        freed, found = 0, []
        pending = [shard]
        while pending:
            prefix = pending.pop()
            entries = _remote.list_dir(str(self.at(prefix)) + "/", self.options)
            pending += [f"{prefix}/{name[:-1]}" for name in entries if name.endswith("/")]
            objects, _ = _remote.list_objects(str(self.at(prefix)) + "/", self.options)
            found += [f"{prefix}/{name}" for name in objects]
            freed += sum(v.size for v in objects.values())
        self.remove(found)
        return freed


def _each(work: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``work(item)`` for every item, a few at once; the first failure is raised."""
    if len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(min(len(items), _AT_ONCE)) as pool:
        return list(pool.map(work, items))


def _latest(root: Root) -> Manifest:
    loaded = manifests.load(root.path)
    if loaded is None:
        raise IncompleteDatasetError(f"{root}: no manifest: write one first with `ffrecord index "
                                     f"{root}` (after every writer of it has finished)")
    return loaded.manifest


def versions(path: Any, storage_options: dict[str, Any] | None = None) -> list[int]:
    """The versions of the dataset at ``path``, oldest first (empty without a manifest)."""
    return sorted(manifests.versions(Root(path, storage_options).path)[0])


# -- appending ------------------------------------------------------------------------------


class Appending:
    """What ``ShardedDatasetWriter(mode="append")`` holds: the directory's claim and the
    version it appends to; ``publish`` makes the next one of the shards it wrote."""

    def __init__(self, root: Root, fields: Mapping[str, Field]) -> None:
        self.root = root.writable()
        self.claim = root.claim()
        try:
            self.base = _latest(root)
            if self.base.kind != "dataset" or not all(self.base.shards):
                raise SpecError(f"{root}: a dataset of one directory (or of plain files) is not "
                                "sharded: it cannot be appended to")
            if self.base.spec != {name: f.spec for name, f in fields.items()}:
                raise SpecError(f"{root}: version {self.base.version} has spec {self.base.spec}; "
                                f"the shards appended would have {dict((n, f.spec) for n, f in fields.items())}")
            remove_orphans(root, set(self.base.shards))
        except BaseException:
            self.claim.release()
            raise
        self.first = max((int(name) for name in self.base.shards), default=-1) + 1

    def publish(self, entries: list[ShardEntry], durable: bool = True) -> None:
        manifests.publish(self.root.path, self.base.successor(self.base.entries() + entries), durable)

    def discard(self, entries: list[ShardEntry]) -> None:
        """Removes shards this appender completed but will not publish."""
        for entry in entries:
            self.root.remove_tree(entry.name)

    def release(self) -> None:
        self.claim.release()


def remove_orphans(root: Root, listed: set[str]) -> tuple[int, int]:
    """Removes the shard directories not in ``listed`` (those of the versions kept: the
    latest holds every shard of the versions before it), locally unless a live writer holds
    one; returns the files and bytes removed. The caller holds the directory's claim."""
    files = freed = 0
    for name in root.shard_names():
        # Remote, a claim left there is a dead writer's: the one who holds the directory's
        # (as whoever calls this does) is the only one who adds shards to a dataset that has
        # a manifest, and object storage cannot tell a live claim from a dead one.
        if name not in listed and (root.remote or not root.being_written(name)):
            files += len(root.files(name))
            freed += root.remove_tree(name)
    return files, freed


def refuse_versioned(directory: Any) -> None:
    """``FileExistsError`` when ``directory`` holds a dataset with a manifest (a new
    dataset is not written over it: ``mode="append"`` grows it)."""
    found, _ = manifests.versions(Root(directory).path)
    if found:
        raise FileExistsError(f"{directory}: holds a dataset (version {max(found)}): append to it "
                              "with mode='append', or write elsewhere")


# -- several writers of one dataset -----------------------------------------------------


def publish_part(root: Root, fields: Mapping[str, Field], start: int, step: int,
                 entries: list[ShardEntry], durable: bool = True) -> None:
    """For one of ``step`` writers of a new dataset (``ShardedDatasetWriter(shardstart=start,
    shardstep=step)``): records the shards it wrote, then, when every writer has recorded
    its own, publishes version 1 of all of them (the last writer to finish does; two
    finishing together publish it once)."""
    record = {"spec": {name: f.spec for name, f in fields.items()}, "shardstart": start,
              "shardstep": step, "shards": [[e.name, e.length, {n: list(v) for n, v in e.files.items()}]
                                             for e in entries]}
    name = f"w{start:06d}of{step:06d}.json"
    body = json.dumps(record).encode()
    if root.remote:
        _remote.put_new(str(root.at(manifests.MANIFEST_DIR, _PARTS, name)), root.options, body)
        found = [n for n in _remote.list_objects(str(root.at(manifests.MANIFEST_DIR, _PARTS)) + "/",
                                                 root.options)[0]]
    else:
        folder = Path(root.at(manifests.MANIFEST_DIR, _PARTS))
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.tmp-", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.replace(tmp, folder / name)
        found = os.listdir(folder)
    expected = {f"w{k:06d}of{step:06d}.json" for k in range(step)}
    if not expected <= set(found):
        return  # a writer still runs: the last one publishes
    records = _each(lambda part: json.loads(_read_small(root, manifests.MANIFEST_DIR, _PARTS, part)),
                    sorted(expected))
    shards = sorted((ShardEntry(n, length, {f: FileVersion(*v) for f, v in files.items()})
                     for record in records for n, length, files in record["shards"]), key=lambda e: int(e.name))
    if any(record["spec"] != records[0]["spec"] for record in records):
        raise SpecError(f"{root}: its writers wrote shards of different specs")
    try:
        manifests.publish(root.path, Manifest.build(1, dict(fields), {}, shards), durable)
    except FileExistsError:
        pass  # another writer, finishing at the same time, published the same shards
    root.remove([f"{manifests.MANIFEST_DIR}/{_PARTS}/{part}" for part in sorted(expected)])
    if not root.remote:
        try:
            os.rmdir(root.at(manifests.MANIFEST_DIR, _PARTS))
        except OSError:  # removed by the other writer publishing, or not empty
            pass


def _read_small(root: Root, *names: str) -> bytes:
    place = root.at(*names)
    if root.remote:
        return place.read_bytes()
    with _paths.open_regular(place) as f:
        return f.read(manifests.MAX_HEAD_BYTES)


# -- indexing a dataset made before manifests ----------------------------------------------


def index(path: Any, *, storage_options: dict[str, Any] | None = None, durable: bool = True) -> int:
    """Writes version 1 of the manifest of the dataset at ``path``, made before manifests
    (or by hand): a dataset directory (``spec.json``), a sharded one (``000000``, …: every
    shard complete, none being written) or a directory of plain ``*.ffr`` parts (``dump``).
    Returns the version published (1). ``FileExistsError`` when it has a manifest already.
    ``durable=False`` skips the fsyncs (a scratch dataset's)."""
    root = Root(path, storage_options).writable()
    claim = root.claim()
    try:
        found, _ = manifests.versions(root.path)
        if found:
            raise FileExistsError(f"{root}: has a manifest already (version {max(found)})")
        manifests.publish(root.path, survey(root), durable)
        return 1
    finally:
        claim.release()


def survey(root: Root) -> Manifest:
    """Version 1 of what the directory holds (see ``index``), its files described."""
    if root.remote:
        entries = _remote.list_dir(root.path.url, root.options)
        plain, parts = SPEC_FILE in entries, any(name.endswith(".ffr") for name in entries)
    else:
        plain, parts = (root.path / SPEC_FILE).is_file(), bool(_paths.dataset_files(root.path))
    if plain:
        fields, length, metadata = read_spec_and_metadata(root.path)
        return Manifest.build(1, fields, metadata, [_shard_entry(root, "", fields, length)])
    shards = root.shard_names()
    if shards:
        return _survey_shards(root, shards)
    if parts:
        return _survey_parts(root)
    raise IncompleteDatasetError(f"{root}: holds no dataset (no {SPEC_FILE}, no shard directory, "
                                 "no *.ffr file)")


def _survey_shards(root: Root, shards: list[str]) -> Manifest:
    for number, name in enumerate(shards):
        if int(name) != number:
            raise IncompleteDatasetError(f"{root}: shard {number} is missing (found {name})")
    busy = [name for name in shards if root.being_written(name)]
    if busy:
        raise IncompleteDatasetError(f"{root}: shard {busy[0]} is being written (a writer's claim "
                                     f"is there): index it when every writer has finished")
    specs = _each(lambda name: read_spec_and_metadata(root.at(name)), shards)
    fields, _, metadata = specs[0]
    for name, (other, _, _) in zip(shards, specs):
        if {n: f.spec for n, f in other.items()} != {n: f.spec for n, f in fields.items()}:
            raise SpecError(f"{root.at(name)}: spec differs from shard {shards[0]}'s")
    entries = _each(lambda item: _shard_entry(root, item[0], fields, item[1][1]), list(zip(shards, specs)))
    return Manifest.build(1, fields, metadata, entries)


def _shard_entry(root: Root, shard: str, fields: Mapping[str, Field], length: int) -> ShardEntry:
    """A complete shard's entry, its files described (one request each, remote)."""
    names = list(fields)
    described = _each(lambda name: manifests.describe(root.at(shard, fields[name].file), root.options), names)
    for name, version in zip(names, described):
        if version.stored not in (length, length + 1):
            raise IncompleteDatasetError(f"{root.at(shard, fields[name].file)}: holds {version.stored} "
                                         f"samples; {SPEC_FILE} says {length}")
    return ShardEntry(shard, length, dict(zip(names, described)))


def _survey_parts(root: Root, local: Any = None) -> Manifest:
    """A directory of plain parts: a dataset of one field, ``bytes``, a part per shard;
    described from their local copies at ``local`` when given (just uploaded)."""
    if local is not None:
        paths = _paths.dataset_files(local)
    elif root.remote:
        paths = _remote.dataset_urls(root.path.url, root.options)
    else:
        paths = _paths.dataset_files(root.path)
    with FileReader(paths, check_data=False, storage_options=root.options) as reader:
        infos = [reader.file_info(k) for k in range(len(paths))]
        stamps = reader.file_stamps
        etags = reader.versions
    files = {str(k): FileVersion(str(path).rsplit("/", 1)[-1], *stamp, etags.get(str(path), {}).get("etag", ""))
             for k, (path, stamp) in enumerate(zip(paths, stamps))}
    if local is not None and root.remote:
        files = manifests.with_etags(files, root.path.url, root.options)
    entries = [ShardEntry("", info.samples, {"bytes": files[str(k)]}) for k, info in enumerate(infos)]
    return Manifest.build(1, parse_spec({"bytes": "bytes"}), {}, entries, kind="files")


def publish_parts(root: Root, local: Any = None, durable: bool = True) -> None:
    """Publishes the next version (the first, without a manifest) of a directory of plain
    parts just written (``dump``): described from their local copies at ``local`` (the
    staging directory of an upload) when given; ``durable`` as for ``FileWriter``."""
    found = _survey_parts(root, local)
    loaded = manifests.load(root.path)
    manifests.publish(root.path, found if loaded is None else loaded.manifest.successor(found.entries()),
                      durable)


# -- adding a field ------------------------------------------------------------------------


def add_field(path: Any, name: str, type: str, values: Iterable[Any] | Callable[[dict], Any], *,
              encoders: Mapping[str, Callable] | None = None,
              decoders: Mapping[str, Callable] | None = None,
              storage_options: dict[str, Any] | None = None, progress: bool = False,
              durable: bool = True) -> int:
    """Adds field ``name`` of type ``type`` (a type string, as in a spec) to the dataset at
    ``path``: one new file per shard, the existing files untouched; publishes and returns
    the next version. ``values`` gives the field's value of each datapoint: an iterable in
    datapoint order (exactly as many values as datapoints), or a function of the datapoint
    (read with ``decoders``, a batch at a time). ``encoders`` as for ``DatasetWriter``.

    A failure (an encoder, too few or too many values, an I/O error) removes the files
    written and publishes nothing, as does a kill (the next writer removes them)."""
    from .versioned import VersionedReader
    from .writer import encode_value

    field = columns.as_columns(parse_spec({name: type}), encoders)[name]  # a fixed size: a column
    encode = codecs.resolve({name: field}, encoders, "encode")[name]
    root = Root(path, storage_options).writable()
    claim = root.claim()
    written: list[str] = []  # relative paths of the files made, removed on failure
    try:
        base = _latest(root)
        if base.kind != "dataset":
            raise SpecError(f"{root}: a dataset of plain files has no fields to add to")
        if name in base.fields:
            raise SpecError(f"{root}: version {base.version} has a field {name!r} already")
        source = _values(root, base, values, decoders, VersionedReader)
        entries = []
        with ProgressBar(base.length, progress, f"add {name}", "datapoint") as bar, \
                tempfile.TemporaryDirectory(prefix="ffrecord-field-") as staging:
            for k, entry in enumerate(base.entries()):
                relative = f"{entry.name}/{field.file}" if entry.name else field.file
                written.append(relative)
                version = _write_field(root, relative, staging, entry.length, field, durable,
                                       (encode_value(field, encode, value, index) for index, value in
                                        source(k, entry.length)))
                entries.append(entry._replace(files={**entry.files, name: version}))
                bar.update(entry.length)
        source(len(base.shards), 0)  # the values must end with the datapoints
        manifests.publish(root.path, base.successor(entries, {**base.fields, name: field}), durable)
        return base.version + 1
    except BaseException:
        root.remove(written)
        raise
    finally:
        claim.release()


def _values(root: Root, base: Manifest, values: Any, decoders: Any, reader_class: type) -> Callable:
    """``source(k, n)``: the values of shard ``k``'s ``n`` datapoints, as (datapoint index,
    value); ``source(shards, 0)`` checks that an iterable has no value left."""
    starts = [0]
    for length in base.lengths.tolist():
        starts.append(starts[-1] + length)
    if callable(values):
        reader = reader_class(root.path, decoders, version=base.version, storage_options=root.options)

        def computed(k: int, n: int) -> Iterable[tuple[int, Any]]:
            if k == len(base.shards):
                reader.close()
                return ()
            return _computed(reader.members[k], values, starts[k], n)
        return computed
    iterator = iter(values)

    def given(k: int, n: int) -> Iterable[tuple[int, Any]]:
        if k == len(base.shards):
            if next(iterator, _END) is not _END:
                raise ValueError(f"{root}: more values than its {base.length} datapoints")
            return ()
        return _taken(iterator, starts[k], n, base.length)
    return given


_END = object()


def _computed(shard: Any, function: Callable, start: int, n: int) -> Iterable[tuple[int, Any]]:
    for at in range(0, n, _BATCH):
        for j, datapoint in enumerate(shard.read(range(at, min(n, at + _BATCH)))):
            yield start + at + j, function(datapoint)


def _taken(iterator: Any, start: int, n: int, total: int) -> Iterable[tuple[int, Any]]:
    for index in range(start, start + n):
        value = next(iterator, _END)
        if value is _END:
            raise ValueError(f"the values ended after {index} of the dataset's {total} datapoints")
        yield index, value


def _write_field(root: Root, relative: str, staging: str, n: int, field: Field, durable: bool,
                 samples: Iterable[bytes]) -> FileVersion:
    """Writes a shard's file of a new field (in place locally, or staged and uploaded);
    returns it as the manifest records it."""
    target = os.path.join(staging, field.file) if root.remote else str(root.at(relative))
    writer = columns.field_writer(target, field, n, durable)
    try:
        for sample in samples:
            writer.write_one(sample)
        writer.close()
    except BaseException as exc:
        clean_up_after(exc, writer.abort)
        raise
    version = manifests.describe(target)
    if not root.remote:
        return version
    url = str(root.at(relative))
    _remote.upload(target, url, root.options)
    os.unlink(target)
    return manifests.with_etags({field.name: version}, url.rsplit("/", 1)[0], root.options)[field.name]


# -- vacuum ----------------------------------------------------------------------------


def vacuum(path: Any, keep: int = 1, *, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Deletes the versions of the dataset at ``path`` but the ``keep`` latest, and every
    file no kept version references: shard directories of no kept version (an appender
    killed part-way left them) and field files in kept shards that none lists (an
    ``add_field`` killed part-way). Nothing else (a shard's ``spec.json``, companion files
    such as a token index) is touched, nor anything while another writer holds the
    directory. Returns ``{"versions": [deleted], "files": n, "bytes": freed}``."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be a positive integer (versions kept), not {keep!r}")
    root = Root(path, storage_options).writable()
    claim = root.claim()
    try:
        found, _ = manifests.versions(root.path)
        if not found:
            _latest(root)  # raises: nothing to vacuum
        numbers = sorted(found)
        kept = [manifests.load(root.path, v).manifest for v in numbers[-keep:]]
        dropped = numbers[:-keep]
        # Versions first: a reader opening a dropped version after this finds it gone, never
        # a version whose files are missing.
        root.remove([f"{manifests.MANIFEST_DIR}/{manifests.version_name(v)}" for v in dropped])
        files, freed = _remove_garbage(root, kept)
        return {"versions": dropped, "files": files, "bytes": freed}
    finally:
        claim.release()


def _remove_garbage(root: Root, kept: list[Manifest]) -> tuple[int, int]:
    shards = {name for m in kept for name in m.shards}
    listed = {m.path(k, name) for m in kept for k in range(len(m.shards)) for name in m.fields}
    files, freed = remove_orphans(root, shards)
    for shard in sorted(shards):
        present = root.files(shard)
        if shard and root.being_written(shard, present):
            continue
        garbage = [f for f in present if _is_garbage(f, shard, listed, root.remote)]
        root.remove([f"{shard}/{f}" if shard else f for f in garbage])
        files += len(garbage)
        freed += sum(present[f] for f in garbage)
    leftovers = _manifest_leftovers(root)  # a publisher's or several writers' remains
    root.remove(leftovers)
    return files + len(leftovers), freed


def _manifest_leftovers(root: Root) -> list[str]:
    """What publishing leaves when killed: a hidden file being written in ``_manifest/``
    (locally), the records of several writers in ``_manifest/parts/``."""
    folder = f"{manifests.MANIFEST_DIR}/{_PARTS}"
    if root.remote:
        objects, _ = _remote.list_objects(str(root.at(folder)) + "/", root.options)
        return [f"{folder}/{name}" for name in objects]
    found = [f"{manifests.MANIFEST_DIR}/{name}" for name in os.listdir(root.at(manifests.MANIFEST_DIR))
             if name.startswith(".")]
    parts = Path(root.at(folder))
    return found + ([f"{folder}/{name}" for name in os.listdir(parts)] if parts.is_dir() else [])


def _is_garbage(name: str, shard: str, listed: set[str], remote: bool) -> bool:
    """A field file no kept version lists, or (locally) a writer's leftover temporary file."""
    relative = f"{shard}/{name}" if shard else name
    if name.endswith(".ffr") and not name.startswith("."):
        return relative not in listed
    return not remote and name.startswith(".") and ".tmp-" in name
