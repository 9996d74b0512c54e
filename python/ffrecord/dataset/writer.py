"""Writers of structured datasets: ``DatasetWriter`` (one directory) and
``ShardedDatasetWriter`` (one sub-directory per shard, shards written by many processes)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from .. import _remote
from .._progress import ProgressBar
from ..errors import clean_up_after
from ..writer import ClosesOrAborts, FileWriter
from . import bulk, codecs, columns, grow, sequence
from . import manifest as manifests
from .claim import Claim, RemoteClaim
from .errors import CodecError, DatapointError
from .spec import SPEC_FILE, Field, completed_meanwhile, parse_spec, sync_directory, write_spec

class DatasetWriter(ClosesOrAborts):
    """Writes datapoints (dicts with one value per field of ``spec``) to ``directory``.

    Each field goes to its own FFRecord file, ``<field>.ffr``; ``spec.json`` is written
    last, atomically, by ``close()``: until then, and forever after a failure or an
    ``abort()``, the directory holds no dataset a reader accepts (field files appear only
    complete, and are removed again if the dataset cannot be finished). ``directory`` must
    not hold a dataset already; it is created if needed.

    The writer claims ``directory`` when it is made (see ``ffrecord.dataset.claim``): a
    second writer on it, in any process, raises ``FileExistsError`` until this one is closed
    or aborted (or its process dies). A failure or ``abort()`` removes only what this writer
    made, and ``close()`` never replaces a ``spec.json`` that appeared meanwhile.

    ``encoders`` maps type names to functions ``value -> bytes-like`` (see
    ``ffrecord.dataset.codecs``). Every field of a datapoint is encoded before any is
    written, so a failing encoder leaves the dataset as it was; the writer stays usable. An
    encoder may return the same buffer each time: its output is copied.

    ``length``, when known, is the exact number of datapoints to be written (more is a
    ``ValueError`` at ``append``, fewer at ``close``): each field file is then written in
    place. Without it, a first ``append_batch`` of a megabyte or more of a field is written
    in place as if it were the last, and smaller appends are kept in memory (256 MiB for all
    the writers of a process) and written at ``close``; data past that bound, or appended
    after a first bulk batch, is copied behind the header at ``close`` (one more pass over
    it on disk).

    ``close()`` publishes version 1 of the dataset's manifest (``_manifest/``, see
    ``ffrecord.dataset.manifest``) after ``spec.json``: ``open_dataset`` then opens the
    dataset with one read. ``manifest=False`` leaves it out, for a directory that is a shard
    of a larger dataset whose manifest lists it (``ShardedDatasetWriter``, converters).

    ``metadata`` (a JSON-serialisable dict, e.g. class names) is stored in ``spec.json`` and
    read back as ``reader.metadata``; ``progress=True`` shows a bar (rate, and with
    ``length`` an ETA) on stderr. ``durable=False`` skips the fsync of each field file at ``close()`` (scratch datasets:
    see ``FileWriter``); ``spec.json`` is still written atomically.

    ``directory`` may be an ``s3://bucket/prefix/`` URL (with ``storage_options`` as for
    ``FileWriter``): the dataset is then written to a local staging directory and uploaded
    by ``close()``, the field files first and ``spec.json`` last, so the prefix never holds
    a dataset a reader accepts before all its files are there; only while the writer's claim
    on the prefix is still its own, and ``spec.json`` by a conditional PUT, so that a dataset
    completed meanwhile is never replaced (``FileExistsError``). A failed upload deletes the
    objects already uploaded; an exception in the ``with`` block or ``abort()`` uploads
    nothing.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "ds")
    >>> with DatasetWriter(path, {"text": "utf8", "tokens": "int[]"}) as writer:
    ...     writer.append({"text": "hi", "tokens": [7, 8]})
    0
    >>> len(writer), sorted(os.listdir(path))
    (1, ['_manifest', 'spec.json', 'text.ffr', 'tokens.ffr'])
    """

    def __init__(self, directory: Any, spec: Mapping[str, str],
                 encoders: Mapping[str, Callable] | None = None, *, length: int | None = None,
                 storage_options: dict[str, Any] | None = None,
                 metadata: Mapping[str, Any] | None = None, progress: bool = False,
                 durable: bool = True, block_bytes: int = columns.BLOCK_BYTES, manifest: bool = True) -> None:
        self.entry: manifests.ShardEntry | None = None  # what close() wrote, for a manifest
        self.durable = bool(durable)
        self._publishes = bool(manifest)
        self._spec_made: os.stat_result | None = None  # the spec.json close() wrote
        self._uploaded: list[str] = []  # what close() uploaded and published (spec.json first)
        self._writers: dict[str, FileWriter | columns.ColumnWriter] = {}
        self._placed: dict[str, os.stat_result] = {}  # field files this writer moved into place
        self._staging: str | None = None
        self._claim: Claim | RemoteClaim | None = None
        self._created = self._finished = self._discarded = False
        self._bar = ProgressBar(length, progress, "write", "datapoint")  # rate and ETA on stderr
        self.metadata = dict(metadata or {})  # stored in spec.json, read as reader.metadata
        json.dumps(self.metadata)  # not JSON-serialisable: fail before anything is written
        self.storage_options = storage_options
        location = os.fsdecode(_remote.local_path(directory))
        self.url = location if _remote.is_url(location) else None
        self._fields = columns.as_columns(parse_spec(spec), encoders, block_bytes)
        self._encoders = codecs.resolve(self._fields, encoders, "encode")
        if self.url is not None:
            _remote.check_writable(self.url)
            self._claim = RemoteClaim(self.url, storage_options)
            try:  # checked after claiming, so that no writer can complete one in between
                if SPEC_FILE in _remote.list_dir(self.url, storage_options):
                    raise FileExistsError(f"{self.url}: already holds a dataset ({SPEC_FILE})")
            except BaseException:
                self._claim.release()
                raise
            self._staging = tempfile.mkdtemp(prefix="ffrecord-upload-")
            location = os.path.join(self._staging, "dataset")
        self.directory = Path(location)
        self._expected = length
        self._attached: list[str] = []
        self._length = 0
        self._size = 0
        self._closed = False
        try:
            self._claim_directory()
            for name, field in self._fields.items():
                self._writers[name] = columns.field_writer(self.directory / field.file, field, length,
                                                           durable)
        except BaseException as exc:
            clean_up_after(exc, self.abort)
            raise

    def _claim_directory(self) -> None:
        """Creates the directory if needed and claims it; ``FileExistsError`` when another
        writer holds it or it holds a dataset (checked after claiming, so that no writer
        can complete one in between)."""
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.directory.mkdir()
            self._created = True
        except FileExistsError:
            pass
        if self._staging is None:  # a staging directory is private already
            self._claim = Claim(self.directory)
        if os.path.lexists(self.directory / SPEC_FILE):
            raise FileExistsError(f"{self.directory}: already holds a dataset ({SPEC_FILE})")
        if self._publishes and manifests.versions(self.directory)[0]:
            raise FileExistsError(f"{self.directory}: already holds a dataset (versions in "
                                  f"{manifests.MANIFEST_DIR}/)")

    @property
    def spec(self) -> dict[str, str]:
        """``{field: type string}``, as given (normalised)."""
        return {name: field.spec for name, field in self._fields.items()}

    @property
    def size(self) -> int:
        """Bytes of encoded values appended so far (sequence element tables included)."""
        return self._size

    def __len__(self) -> int:
        return self._length

    def append(self, datapoint: Mapping[str, Any]) -> int:
        """Appends one datapoint; returns its index. Raises ``DatapointError`` (a field
        missing or unexpected) or ``CodecError`` (an encoder failed) naming the field and
        the datapoint, having written nothing. An I/O error while writing loses the dataset
        (the writer is aborted and the error raised)."""
        if self._closed:
            raise ValueError(f"I/O operation on closed {type(self).__name__}")
        index = self._length
        if index == self._expected:
            raise ValueError(f"{self.directory}: the dataset was created for length={self._expected} "
                             f"datapoints; datapoint {index} is one too many")
        samples = self._encode(datapoint, index)
        try:
            for name, sample in samples.items():
                self._writers[name].write_one(sample)
        except BaseException as exc:
            clean_up_after(exc, self.abort)
            raise
        self._size += sum(map(len, samples.values()))
        self._length += 1
        self._bar.update(1)
        return index

    def append_batch(self, columns: Any) -> range:
        """Appends a batch of datapoints given as columns: ``{field: values}`` with values of
        the same length for every field of the spec (numpy arrays, Arrow arrays, torch
        tensors, lists; or an Arrow table), written with one native call per field (see
        ``ffrecord.dataset.bulk``). Returns the batch's indices. Every field is encoded
        before any is written: a bad value raises ``CodecError`` or ``DatapointError``
        naming the field and the datapoint, and writes nothing."""
        if self._closed:
            raise ValueError(f"I/O operation on closed {type(self).__name__}")
        given, n = bulk.batch_columns(columns, self._fields)
        return self._append_encoded(bulk.encode(self._fields, self._encoders, given, n, self._length), n)

    def _append_encoded(self, encoded: dict[str, bulk.Encoded], n: int) -> range:
        """Writes ``n`` datapoints encoded by ``bulk.encode``."""
        first = self._length
        if self._expected is not None and first + n > self._expected:
            raise ValueError(f"{self.directory}: the dataset was created for length={self._expected} "
                             f"datapoints; {n} more after {first} are too many")
        try:
            for name, part in encoded.items():
                part.write(self._writers[name])
        except BaseException:
            self.abort()
            raise
        self._size += sum(part.nbytes for part in encoded.values())
        self._length += n
        self._bar.update(n)
        return range(first, first + n)

    def _encode(self, datapoint: Any, index: int) -> dict[str, bytes]:
        if not isinstance(datapoint, Mapping):
            raise DatapointError(f"datapoint {index} must be a dict, not {type(datapoint).__name__}",
                                 index=index)
        missing = [name for name in self._fields if name not in datapoint]
        if missing:
            raise DatapointError(f"datapoint {index} lacks field {missing[0]!r}"
                                 f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}",
                                 field=missing[0], index=index)
        if len(datapoint) != len(self._fields):
            extra = next(key for key in datapoint if key not in self._fields)
            raise DatapointError(f"datapoint {index} has field {extra!r}, which is not in the spec "
                                 f"({', '.join(self._fields)})", field=extra, index=index)
        return {name: encode_value(field, self._encoders[name], datapoint[name], index)
                for name, field in self._fields.items()}

    def attach(self, name: str) -> Path:
        """The path of a companion file ``name`` (not a field: e.g. an index over one) that
        the caller writes before ``close()``: it is uploaded with the field files, before
        ``spec.json``, and removed with them when the dataset is discarded."""
        if name == SPEC_FILE or name in (field.file for field in self._fields.values()):
            raise ValueError(f"{name!r} is a file of the dataset itself")
        self._attached.append(name)
        return self.directory / name

    def close(self) -> None:
        """Completes the field files, then writes ``spec.json`` (for a URL: uploads them,
        ``spec.json`` last). On any failure nothing is left that looks like a dataset (the
        field files already in place, or uploaded, are removed)."""
        if self._closed:
            return
        self._closed = True
        self._bar.__exit__()
        try:
            if self._expected is not None and self._length != self._expected:
                raise ValueError(f"{self.directory}: closed after {self._length} datapoints; the "
                                 f"dataset was created for length={self._expected}")
            # Each close fsyncs its file; the library releases the GIL, so they overlap.
            with ThreadPoolExecutor(len(self._writers)) as pool:
                for future in [pool.submit(self._place, name) for name in self._writers]:
                    future.result()
            write_spec(self.directory, self._fields, self._length, self.metadata)
            self._spec_made = os.stat(self.directory / SPEC_FILE)
            name = (self.url.rstrip("/").rsplit("/", 1)[-1] if self.url else self.directory.name)
            self.entry = manifests.ShardEntry(name, self._length, self._described())
            if self.url is not None:
                self._upload()
                self.entry = self.entry._replace(files=manifests.with_etags(
                    self.entry.files, self.url, self.storage_options))
            if self._publishes:
                self._publish_manifest()
        except BaseException as exc:
            clean_up_after(exc, self._discard)
            raise
        self._finished = True
        self._release()

    def _described(self) -> dict[str, manifests.FileVersion]:
        """Each field's file as a manifest records it."""
        return {name: manifests.describe(self.directory / field.file) for name, field in self._fields.items()}

    def _publish_manifest(self) -> None:
        """Publishes version 1 of the dataset's manifest: one shard, this directory."""
        root = _remote.as_path(self.url or self.directory, self.storage_options)
        first = manifests.Manifest.build(1, self._fields, self.metadata, [self.entry._replace(name="")])
        manifests.publish(root, first, self.durable)

    def _place(self, name: str) -> None:
        """Closes one field's writer (moving its file into place) and notes what it made."""
        self._writers[name].close()
        self._placed[name] = os.stat(self.directory / self._fields[name].file)

    def _upload(self) -> None:
        """Uploads the field files and companions, then publishes ``spec.json`` by a
        conditional PUT: only while this writer's claim is its own, never over a dataset
        completed meanwhile (``FileExistsError``, as locally). When publishing fails, what
        this writer uploaded is deleted again."""
        self._claim.check()
        if SPEC_FILE in _remote.list_dir(self.url, self.storage_options):
            raise completed_meanwhile(self.url)
        names = [field.file for field in self._fields.values()] + self._attached
        uploaded = [_remote.join(self.url, name) for name in names]
        _remote.upload_all([(str(self.directory / name), url) for name, url in zip(names, uploaded)],
                           self.storage_options)
        spec_url, spec = _remote.join(self.url, SPEC_FILE), (self.directory / SPEC_FILE).read_bytes()
        try:
            _remote.put_new(spec_url, self.storage_options, spec)
        except FileExistsError:
            error = completed_meanwhile(self.url)
            clean_up_after(error, lambda: _remote.remove_all(uploaded, self.storage_options))
            raise error from None
        except BaseException as exc:  # a spec.json of ours may have arrived: removed if so
            clean_up_after(exc, lambda: _remote.remove_if_holds(spec_url, self.storage_options, spec))
            clean_up_after(exc, lambda: _remote.remove_all(uploaded, self.storage_options))
            raise
        self._uploaded = [spec_url, *uploaded]

    def abort(self) -> None:
        """Discards everything written; a directory this writer created is removed when
        nothing else is in it. After a successful ``close()``, does nothing."""
        self._closed = True
        self._bar.__exit__()
        if not self._finished:
            self._discard()

    def _discard(self) -> None:
        """Removes what this writer made, and nothing else: its unfinished files, the field
        files it moved into place (if they are still the ones it made), its claim. Once:
        a later call (an ``abort()`` after a failure that discarded) does nothing."""
        if self._discarded:
            return
        self._discarded = True
        try:
            for name, writer in self._writers.items():
                if name in self._placed:  # moved into place by a close that then failed
                    _remove_if_same(self.directory / self._fields[name].file, self._placed[name])
                else:
                    writer.abort()
            for name in self._attached:  # written by the caller while this writer held the claim
                (self.directory / name).unlink(missing_ok=True)
            if self._spec_made is not None:  # the manifest could not be published after it
                _remove_if_same(self.directory / SPEC_FILE, self._spec_made)
            if self._uploaded:  # published, but the manifest could not be after it
                _remote.remove_all(self._uploaded, self.storage_options)
            if self._staging is None and self._claim is not None:
                sync_directory(self.directory)
        finally:  # the claim is given up whatever failed above
            self._release()

    def _release(self) -> None:
        """Gives up the claim, then removes the directory if this writer made it and it is
        empty (a staging directory: whole)."""
        if self._claim is not None:
            self._claim.release()
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
        elif self._created and not self._finished:
            try:
                self.directory.rmdir()
            except OSError:  # not empty: another writer's, or the user's, files
                pass

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url or str(self.directory)!r}, {self.spec}) n={self._length}"


def encode_value(field: Field, encode: Callable, value: Any, index: int) -> bytes:
    """``value`` of ``field`` in datapoint ``index`` encoded by ``encode`` (each element of a
    sequence, then the sequence packed); ``DatapointError`` or ``CodecError`` naming them."""
    if not field.sequence:
        return _checked(encode, value, field, index, None)
    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping)) or not hasattr(value, "__len__"):
        raise DatapointError(
            f"datapoint {index}, field {field.name!r} ({field.spec}): a sequence field takes a "
            f"list of elements, not {type(value).__name__}", field=field.name, index=index)
    return sequence.pack([_checked(encode, element, field, index, k)
                          for k, element in enumerate(value)])


def _checked(encode: Callable, value: Any, field: Field, index: int, element: int | None) -> bytes:
    """``encode(value)`` as ``bytes``, with any failure (or a result that is not bytes-like)
    raised as a ``CodecError`` naming the field, datapoint and element. A buffer is copied:
    it is kept until every field is encoded, and an encoder may reuse it."""
    try:
        encoded = encode(value)
    except Exception as exc:
        raise _codec_error(f"encoder failed: {type(exc).__name__}: {exc}", field, index, element) from exc
    if isinstance(encoded, bytes):
        return encoded
    try:
        view = memoryview(encoded)
    except TypeError:
        raise _codec_error(f"encoder returned {type(encoded).__name__}, not bytes", field, index,
                           element) from None
    if not view.c_contiguous:
        raise _codec_error("encoder returned a non-contiguous buffer", field, index, element)
    return view.tobytes()


def _codec_error(what: str, field: Field, index: int, element: int | None) -> CodecError:
    where = f"datapoint {index}, field {field.name!r} ({field.spec})"
    if element is not None:
        where += f", element {element}"
    return CodecError(f"{where}: {what}", field=field.name, index=index)


def shard_name(number: int) -> str:
    return f"{number:06d}"


def _remove_if_same(path: Path, made: os.stat_result) -> None:
    """Removes ``path`` if it is still the file ``made`` describes."""
    try:
        if os.path.samestat(os.stat(path, follow_symlinks=False), made):
            path.unlink()
    except FileNotFoundError:
        pass


class ShardedDatasetWriter(ClosesOrAborts):
    """Writes a dataset as shards: sub-directories ``000000``, ``000001``, ... of
    ``directory``, each a dataset of its own holding ``shardlen`` datapoints (the last one
    fewer). This writer writes shards ``shardstart``, ``shardstart + shardstep``, ...: with
    ``shardstart=i, shardstep=N``, N processes write disjoint shards of one dataset in
    parallel. Every shard is complete (its ``spec.json`` written) as soon as it is full.
    ``length``, when known, is the number of datapoints of the whole dataset (all writers
    together): each shard's count follows, and shards are written in place (see
    ``DatasetWriter``).

    ``close()`` publishes version 1 of the dataset's manifest (``_manifest/``): with
    several writers, the last of them to close does, once every one has closed. A
    directory holding a dataset with a manifest is refused (``FileExistsError``).

    ``mode="append"`` grows the dataset with a manifest at ``directory`` instead: the shards
    written follow its existing ones, and ``close()`` publishes the next version (readers
    opened before keep reading theirs). One appender at a time (a second one, or any other
    writer of the directory, gets ``FileExistsError`` naming the holder); ``spec`` must be
    the dataset's, ``length`` counts the datapoints appended, ``shardstart``/``shardstep``
    stay 0 and 1. ``abort()``, or an exception in the ``with`` block, publishes nothing and
    removes the shards written; shards left by an appender that was killed are removed by
    the next writer to claim the directory (see ``ffrecord.dataset.grow``).

    ``directory`` may be an ``s3://bucket/prefix/`` URL (with ``storage_options``): each
    shard is staged locally and uploaded, all or nothing, when it is complete (see
    ``DatasetWriter``), so the staging disk holds one shard at a time. ``durable=False``
    skips the fsyncs of every shard's field files (scratch datasets: see ``DatasetWriter``).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "sharded")
    >>> with ShardedDatasetWriter(path, {"n": "int"}, shardlen=2) as writer:
    ...     for k in range(5):
    ...         _ = writer.append({"n": k})
    >>> sorted(os.listdir(path)), writer.shards
    (['000000', '000001', '000002', '_manifest'], 3)
    """

    def __init__(self, directory: Any, spec: Mapping[str, str],
                 encoders: Mapping[str, Callable] | None = None, shardlen: int | None = None,
                 shardstart: int = 0, shardstep: int = 1, *, length: int | None = None,
                 storage_options: dict[str, Any] | None = None, durable: bool = True,
                 block_bytes: int = columns.BLOCK_BYTES, mode: str = "w") -> None:
        if mode not in ("w", "append"):
            raise ValueError(f"mode must be 'w' (a new dataset) or 'append', not {mode!r}")
        if mode == "append" and (shardstart, shardstep) != (0, 1):
            raise ValueError("one appender at a time: mode='append' takes no shardstart/shardstep")
        if shardlen is not None and shardlen < 1:
            raise ValueError(f"shardlen must be at least 1, got {shardlen}")
        if shardstart < 0 or shardstep < 1:
            raise ValueError(f"need shardstart >= 0 and shardstep >= 1, got {shardstart}, {shardstep}")
        if shardlen is None and (shardstart, shardstep) != (0, 1):
            raise ValueError("several writers (shardstart, shardstep) need a shardlen")
        self.directory = _remote.as_path(directory, storage_options)
        if _remote.is_url(str(self.directory)):
            _remote.check_writable(str(self.directory))
        self.storage_options = storage_options
        self.durable = bool(durable)
        self._fields = columns.as_columns(parse_spec(spec), encoders, block_bytes)
        self._resolved = codecs.resolve(self._fields, encoders, "encode")  # fails now, not at an append
        self._encoders = encoders
        self.block_bytes = block_bytes
        self.shardlen = shardlen
        self.length = length
        self._next_shard = shardstart
        self.shardstart, self.shardstep = shardstart, shardstep
        self._writer: DatasetWriter | None = None
        self._done_shards = self._done_length = self._done_size = 0
        self._closed = False
        self.mode = mode
        self._entries: list[manifests.ShardEntry] = []  # the shards this writer completed
        if isinstance(self.directory, Path) and mode == "w":
            self.directory.mkdir(parents=True, exist_ok=True)
        root = grow.Root(self.directory)
        self._appending: grow.Appending | None = None
        if mode == "append":
            self._appending = grow.Appending(root, self._fields)
            self._next_shard = self._appending.first
        else:
            grow.refuse_versioned(self.directory)
        self._first = self._next_shard - shardstart  # the number of this writer set's first shard

    @property
    def spec(self) -> dict[str, str]:
        return {name: field.spec for name, field in self._fields.items()}

    @property
    def shards(self) -> int:
        """Shards written or being written by this writer."""
        return self._done_shards + (self._writer is not None)

    @property
    def size(self) -> int:
        return self._done_size + (self._writer.size if self._writer else 0)

    def __len__(self) -> int:
        return self._done_length + (len(self._writer) if self._writer else 0)

    def append(self, datapoint: Mapping[str, Any]) -> int:
        """Appends one datapoint to the current shard; returns its index among the datapoints
        of this writer."""
        writer = self._current()
        index = len(self)
        writer.append(datapoint)
        if len(writer) in (self.shardlen, writer._expected):
            self._finish_shard()
        return index

    def append_batch(self, columns: Any) -> range:
        """Appends a batch given as columns (see ``DatasetWriter.append_batch``), cut at the
        shards' ends; every field is encoded before anything is written. Returns the
        batch's indices among the datapoints of this writer."""
        if self._closed:
            raise ValueError(f"I/O operation on closed {type(self).__name__}")
        given, n = bulk.batch_columns(columns, self._fields)
        first = len(self)
        encoded = bulk.encode(self._fields, self._resolved, given, n, first)
        at = 0
        while at < n:
            writer = self._current()
            room = min([n, *(end - len(writer) for end in (self.shardlen, writer._expected) if end is not None)])
            take = min(n - at, room)
            writer._append_encoded({name: part[at:at + take] for name, part in encoded.items()}, take)
            at += take
            if len(writer) in (self.shardlen, writer._expected):
                self._finish_shard()
        return range(first, first + n)

    def _current(self) -> DatasetWriter:
        """The writer of the shard being filled, made when none is."""
        if self._closed:
            raise ValueError(f"I/O operation on closed {type(self).__name__}")
        if self._writer is None:
            try:
                self._writer = DatasetWriter(self.directory / shard_name(self._next_shard), self.spec,
                                             self._encoders, length=self._shard_length(self._next_shard),
                                             storage_options=self.storage_options,
                                             durable=self.durable, block_bytes=self.block_bytes,
                                             manifest=False)
            except FileExistsError as exc:
                raise FileExistsError(f"{exc}: shard {self._next_shard} is another writer's (do two "
                                      "writers have overlapping shardstart/shardstep?)") from None
        return self._writer

    def _shard_length(self, number: int) -> int | None:
        """How many datapoints shard ``number`` holds, when the total is known."""
        if self.length is None:
            return None
        if self.shardlen is None:
            return self.length
        count = min(self.shardlen, self.length - (number - self._first) * self.shardlen)
        if count <= 0:
            raise ValueError(f"a dataset of length={self.length} in shards of {self.shardlen} has no "
                             f"shard {number}: more datapoints than length")
        return count

    def _finish_shard(self) -> None:
        writer, self._writer = self._writer, None
        writer.close()
        self._entries.append(writer.entry)
        self._done_shards += 1
        self._done_length += len(writer)
        self._done_size += writer.size
        self._next_shard += self.shardstep

    def close(self) -> None:
        """Completes the current shard, then publishes the manifest's version (see the
        class)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._writer is not None:
                self._finish_shard()
            self._publish()
        except BaseException:
            if self._appending is not None:
                self._appending.discard(self._entries)
            raise
        finally:
            if self._appending is not None:
                self._appending.release()

    def _publish(self) -> None:
        root = grow.Root(self.directory)
        if self._appending is not None:
            if self._entries:  # nothing appended: no new version
                self._appending.publish(self._entries, self.durable)
        elif self.shardstep == 1:
            if self._entries:
                manifests.publish(root.path, manifests.Manifest.build(1, self._fields, {}, self._entries),
                                  self.durable)
        else:
            grow.publish_part(root, self._fields, self.shardstart, self.shardstep, self._entries, self.durable)

    def abort(self) -> None:
        """Discards the current shard; completed shards stay (appending: are removed)."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
        if self._appending is not None:
            try:
                self._appending.discard(self._entries)
            finally:
                self._appending.release()

