"""``VersionedReader``: one version of a dataset, opened from its manifest (what
``open_dataset`` returns for a dataset that has one).

Opening reads the manifest and nothing else: no shard's file is touched until a read needs
it, whatever the shard count. A shard is opened (its field files' headers read, through the
chunk cache when remote) when a read first touches it, the shards of one batch at once; its
files are held in the process-wide table of ``ffrecord.dataset.open_files``, which bounds
the files all datasets hold. A shard's files are checked against what the manifest records
of them (size, sample count, metadata checksum; remote, their ETag): a file replaced since
the version was published raises ``ObjectChangedError``, never returns its data.

A reader reads the version it was opened on for its whole life, whatever is appended or
added meanwhile; a pickled copy (a loader worker) opens the same version again.

>>> import tempfile, os
>>> from ffrecord.dataset import ShardedDatasetWriter, open_dataset
>>> path = os.path.join(tempfile.mkdtemp(), "sharded")
>>> with ShardedDatasetWriter(path, {"n": "int"}, shardlen=2) as writer:
...     for k in range(5):
...         _ = writer.append({"n": k})
>>> reader = open_dataset(path)
>>> reader.version, reader.shards, reader.stats()["open_files"], reader[4]
(1, 3, 0, {'n': 4})
"""

from __future__ import annotations

import bisect
import errno
import itertools
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any, Callable

import numpy as np

from .. import _remote
from .._indices import one_index
from ..errors import ObjectChangedError
from ..reader import FileReader
from . import manifest as manifests
from .errors import IncompleteDatasetError
from .joined import Part
from .manifest import Manifest
from .open_files import READERS
from .reader import DatasetReader, Readable, ShardedDatasetReader, _OPENS_AT_ONCE, check_count
from .spec import Field

_OWNERS = itertools.count(1)


class NoManifestError(IncompleteDatasetError):
    """The dataset has no manifest (it opens shard by shard, as before manifests)."""


class ShardSource:
    """What opens the shards of one version: shared by a ``VersionedReader`` and its
    members, and referring to neither (so that a reader no one holds is collected)."""

    def __init__(self, root: Any, manifest: Manifest, decoders: Mapping[str, Callable] | None,
                 cache_keys: tuple, check_data: bool, storage_options: dict[str, Any] | None,
                 surveyed: bool = False, descriptors: bool = True) -> None:
        self.root, self.manifest, self.surveyed = root, manifest, surveyed
        self.decoders, self.cache_keys, self.check_data = decoders, cache_keys, check_data
        self.descriptors = descriptors
        self.storage_options = storage_options
        self.remote = isinstance(root, _remote.RemotePath)
        self._start()

    def _start(self) -> None:
        self.owner = next(_OWNERS)  # its readers' keys in the process-wide table
        self.opened = 0
        self.closed = False
        self.closed_stats: dict[str, int] = {}  # counters of the shards' readers closed since

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("owner", "opened", "closed", "closed_stats")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start()  # a copy in another process: keys of its own, never another source's

    def directory(self, k: int) -> Any:
        name = self.manifest.shards[k]
        return self.root / name if name else self.root

    def open(self, k: int) -> tuple[ShardReader, int]:
        if self.closed:
            raise ValueError(f"I/O operation on closed dataset {self.root}")
        reader = ShardReader(self, k)
        self.opened += 1
        return reader, len(self.manifest.fields), reader.files_with_descriptors()

    def leased(self, k: int):
        return READERS.leased((self.owner, k), lambda: self.open(k))

    def lease(self, k: int) -> Any:
        """Shard ``k``'s reader, held until ``READERS.release`` (a datapoint's read: without
        the context manager's cost)."""
        return READERS.lease((self.owner, k), lambda: self.open(k))

    def leased_many(self, ks: list[int]):
        return READERS.leased_many([(self.owner, k) for k in ks], lambda key: self.open(key[1]))


class ShardReader(DatasetReader):
    """Shard ``k`` of a version: a ``DatasetReader`` whose spec and files come from the
    manifest, each file checked against it as it opens."""

    def __init__(self, source: ShardSource, k: int) -> None:
        self._source, self._entry = source, source.manifest.entry(k)
        pins = {} if not source.remote else {
            str(source.directory(k) / f.name): {"size": f.size, "etag": f.etag}
            for f in self._entry.files.values() if f.etag}
        super().__init__(source.directory(k), source.decoders, source.cache_keys,
                         check_data=source.check_data,
                         storage_options=_remote.pinned(source.storage_options, pins))

    def _read_spec(self) -> tuple[dict[str, Field], int, dict[str, Any]]:
        manifest = self._source.manifest
        return manifest.fields, self._entry.length, manifest.metadata

    def _open_remembered_fields(self) -> dict:
        return {}  # the manifest named the files: nothing to guess

    def _open_field(self, field: Field, early: dict) -> FileReader:
        version = self._entry.files[field.name]
        path = self.directory / version.name
        reader = FileReader(path, self.check_data, storage_options=_remote.pinned(self.storage_options, self._pins),
                            descriptors=self._source.descriptors)
        try:
            stamp = reader.file_stamp(0)
            if not version.matches(stamp):
                found = version.mismatch(stamp)
                listed = (f"version {self._source.manifest.version} of the dataset lists" if not
                          self._source.surveyed else "the dataset held when the reader opened it")
                raise ObjectChangedError(
                    errno.ESTALE, f"{path}: field {field.name!r} is not the file {listed} ({found}): "
                                  "it was replaced since")
            check_count(path, field, reader.n, self._length, "the manifest")
        except BaseException:
            reader.close()
            raise
        return reader

    @property
    def files(self) -> list[str]:
        return [str(self.directory / f.name) for f in self._entry.files.values()]

    def files_with_descriptors(self) -> int:
        """Its files that the bound on open files counts (see ``open_files``): those holding
        a descriptor, and every remote one (its header held in memory)."""
        if self._remote:
            return len(self._readers)
        return sum(min(1, reader.descriptors_held) for reader in self._readers.values())

    def stats(self) -> dict[str, int]:
        """The field files' counters (``FileReader.stats``) added up."""
        total: dict[str, int] = {}
        for reader in [*self._readers.values(), *([self._joint] if self._joint else [])]:
            for name, value in reader.stats().items():
                total[name] = total.get(name, 0) + value
        return total

    def close(self) -> None:
        if self._readers and not next(iter(self._readers.values())).closed:
            for name, value in self.stats().items():
                self._source.closed_stats[name] = self._source.closed_stats.get(name, 0) + value
        super().close()


class LazyShard(Readable):
    """Shard ``k`` of a ``VersionedReader`` (its ``members``): a dataset of its own whose
    files open when it is first read, held in the process-wide table."""

    def __init__(self, source: ShardSource, k: int) -> None:
        self._source, self.number = source, k

    def __len__(self) -> int:
        return int(self._source.manifest.lengths[self.number])

    @property
    def spec(self) -> dict[str, str]:
        return self._source.manifest.spec

    @property
    def fields(self) -> dict[str, Field]:
        return dict(self._source.manifest.fields)

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._source.manifest.metadata)

    @property
    def directory(self) -> Any:
        return self._source.directory(self.number)

    @property
    def storage_options(self) -> dict[str, Any] | None:
        return self._source.storage_options

    @property
    def files(self) -> list[str]:
        manifest = self._source.manifest
        return [str(self._source.root / manifest.path(self.number, name)) for name in manifest.fields]

    @property
    def size(self) -> int:
        return sum(int(columns["sizes"][self.number]) for columns in self._source.manifest.files.values())

    def read(self, indices: Any, mask: Any = None) -> list[dict[str, Any]]:
        with self._source.leased(self.number) as reader:
            return reader.read(indices, mask)

    def __getitems__(self, indices: Any) -> list[dict[str, Any]]:
        with self._source.leased(self.number) as reader:
            return reader.__getitems__(indices)

    def _leaves(self, idx: np.ndarray, held: ExitStack) -> list[Part] | None:
        return self._single_leaf(held)._leaves(idx, held)

    def _single_leaf(self, held: ExitStack) -> Any:
        held.callback(READERS.release, lease := self._source.lease(self.number))
        return lease.reader

    def __getitem__(self, key: Any) -> Any:
        lease = self._source.lease(self.number)
        try:
            return lease.reader[key]
        finally:
            READERS.release(lease)

    def available(self, index: int) -> dict[str, int | bool]:
        with self._source.leased(self.number) as reader:
            return reader.available(index)

    def element_counts(self, name: str, indices: Any = None) -> np.ndarray:
        with self._source.leased(self.number) as reader:
            return reader.element_counts(name, indices)

    def prefetch(self, indices: Any, mask: Any = None) -> int:
        with self._source.leased(self.number) as reader:
            return reader.prefetch(indices, mask)

    def chunk_bounds(self, chunk_size: int) -> np.ndarray:
        """The chunks of the shard's largest field (``ffrecord.order.chunk_bounds``)."""
        from ..order import chunk_bounds

        with self._source.leased(self.number) as reader:
            return chunk_bounds(reader, chunk_size)

    def field_reader(self, name: str) -> FileReader:
        """The ``FileReader`` of one field's file, which stays open (out of the table's
        bound) until the dataset is closed."""
        return READERS.pin((self._source.owner, self.number), lambda: self._source.open(self.number)).field_reader(name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r}, {self.spec}) n={len(self)}"


class _Members(Sequence):
    """The members of a ``VersionedReader``, made as they are asked for."""

    def __init__(self, source: ShardSource, numbers: range) -> None:
        self._source, self._numbers = source, numbers
        self._made: dict[int, LazyShard] = {}

    def __len__(self) -> int:
        return len(self._numbers)

    def __getitem__(self, m: Any) -> Any:
        shard = self._made.get(m)
        if shard is not None:
            return shard
        if isinstance(m, slice):
            return [self[k] for k in range(len(self))[m]]
        m = range(len(self))[m]
        return self._made.setdefault(m, LazyShard(self._source, self._numbers[m]))


class VersionedReader(ShardedDatasetReader):
    """Version ``version`` (default: the latest) of the dataset at ``directory``, read from
    its manifest; with ``shardstart``/``shardstep``, only those shards (e.g. one process's
    share). Options as for ``DatasetReader``. ``NoManifestError`` when the dataset has no
    manifest, ``FileNotFoundError`` for a version it does not have (any more).

    ``members`` are the shards (see ``ShardedDatasetReader``), ``version`` the version read,
    ``stats()`` the requests of the open and of the shards' files. A dataset of one shard
    offers ``fields``, ``field_reader`` and ``element_counts`` as a ``DatasetReader`` does.
    """

    def __init__(self, directory: Any, decoders: Mapping[str, Callable] | None = None,
                 shardstart: int = 0, shardstep: int = 1, cache_keys: Any = (), *,
                 version: int | None = None, check_data: bool = True,
                 storage_options: dict[str, Any] | None = None, cache_dir: Any = None,
                 cache_limit: int | None = None, chunk_size: int | None = None,
                 descriptors: bool = True) -> None:
        storage_options = _remote.with_cache(storage_options, cache_dir, cache_limit, chunk_size)
        self._open(directory, decoders, shardstart, shardstep, cache_keys, version, check_data,
                   storage_options, None, descriptors=descriptors)

    def _open(self, directory: Any, decoders: Mapping[str, Callable] | None, shardstart: int,
              shardstep: int, cache_keys: Any, version: int | None, check_data: bool,
              storage_options: dict[str, Any] | None, identity: tuple | None,
              surveyed: Manifest | None = None, *, descriptors: bool = True) -> None:
        """Opens the manifest (``identity``: the file a copy of this reader opened, see
        ``manifest.load``; ``surveyed``: a dataset without one, as ``grow.survey`` found
        it) and sets the reader up."""
        if shardstart < 0 or shardstep < 1:
            raise ValueError(f"need shardstart >= 0 and shardstep >= 1, got {shardstart}, {shardstep}")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
            raise ValueError(f"version must be a positive integer, not {version!r}")
        self.storage_options = _remote.unpinned(storage_options)[0]
        self.directory = _remote.as_path(directory, self.storage_options)
        self.decoders, self.cache_keys, self.check_data = decoders, tuple(cache_keys), bool(check_data)
        self.shardstart, self.shardstep = shardstart, shardstep
        self._surveyed = surveyed
        loaded = manifests.load(self.directory, version, identity) if surveyed is None else \
            manifests.Loaded(surveyed, (), 0)
        if loaded is None:
            raise NoManifestError(f"{self.directory}: no manifest ({manifests.MANIFEST_DIR}/): "
                                  "`ffrecord index` writes one")
        self.manifest, self._identity, self._open_requests = loaded
        self.descriptors = bool(descriptors)
        self._source = ShardSource(self.directory, self.manifest, decoders, self.cache_keys,
                                   self.check_data, self.storage_options, surveyed is not None, self.descriptors)
        numbers = range(len(self.manifest.shards))[shardstart::shardstep]
        if not numbers:
            raise IncompleteDatasetError(f"{self.directory}: no shard {shardstart} among "
                                         f"{len(self.manifest.shards)} shard(s) of version {self.version}")
        self.members = _Members(self._source, numbers)
        lengths = self.manifest.lengths[numbers.start:numbers.stop:numbers.step]
        self._ends = np.cumsum(lengths)
        self._starts = self._ends - lengths
        self._shard_ends = self._ends.tolist() or [0]
        self._finalizer = weakref.finalize(self, READERS.drop, self._source.owner)

    @property
    def version(self) -> int | None:
        """The version of the dataset this reader reads (None for a dataset without a
        manifest, read as ``open_version`` surveyed it)."""
        return None if self._surveyed is not None else self.manifest.version

    @property
    def pin(self) -> tuple[int, tuple] | Manifest:
        """What opens this same version again (``open_version(pin=...)``): its number and
        its manifest's identity, or the surveyed manifest of a dataset without one."""
        return self._surveyed if self._surveyed is not None else (self.version, self._identity)

    def digest(self) -> str:
        """What the version holds, as ``Manifest.digest`` says it (loader states compare
        it: no file is opened for it)."""
        return self.manifest.digest()

    def earlier_length(self, version: int, digest: str) -> int:
        """How many of this reader's first datapoints are version ``version`` of its dataset,
        which must hold ``digest`` (``Manifest.digest``) and be a version this one grew from
        (shards appended, fields added: see ``Manifest.grown_from``); its datapoints are
        then this reader's first ones, unchanged. A loader state taken on that version
        finishes its epoch over them (``ffrecord.torch.DataLoader.load_state_dict``).
        ``ValueError`` saying why for any other version, one vacuumed included."""
        if version == self.version and digest == self.digest():
            return len(self)
        if self._surveyed is not None or self.version is None or not 1 <= version < self.version:
            raise ValueError(f"{self.directory}: version {version} is not one that version {self.version} grew from")
        try:
            older = manifests.load(self.directory, version).manifest
        except FileNotFoundError:
            raise ValueError(f"{self.directory}: version {version} is gone (vacuumed)") from None
        if older.digest() != digest:
            raise ValueError(f"{self.directory}: version {version} holds other data ({older.digest()}, not {digest})")
        why = self.manifest.grown_from(older)
        if why is not None:
            raise ValueError(f"{self.directory}: {why}")
        numbers = range(len(older.shards))[self.shardstart::self.shardstep]
        return int(older.lengths[numbers.start:numbers.stop:numbers.step].sum())

    @property
    def spec(self) -> dict[str, str]:
        return self.manifest.spec

    @property
    def fields(self) -> dict[str, Field]:
        return dict(self.manifest.fields)

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self.manifest.metadata)

    def __len__(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    @property
    def files(self) -> list[str]:
        return [path for k in range(len(self.members)) for path in self.members[k].files]

    @property
    def size(self) -> int:
        return sum(self.members[k].size for k in range(len(self.members)))

    @property
    def versions(self) -> dict[str, Any]:
        """The size and ETag of each remote field file, as the manifest records them."""
        return {path: {"size": f.size, "etag": f.etag}
                for k in range(len(self.members)) for f, path in self._shard_files(k) if f.etag}

    def _shard_files(self, m: int) -> list[tuple[Any, str]]:
        shard = self.members[m]
        entry = self.manifest.entry(shard.number)
        return [(entry.files[name], path) for name, path in zip(self.manifest.fields, shard.files)]

    def file_readers(self) -> list[FileReader]:
        """The readers of the files of the shards open now (those the process-wide table
        holds for this dataset)."""
        return [r for reader, _ in READERS.readers_of(self._source.owner) for r in reader.file_readers()]

    def stats(self) -> dict[str, int]:
        """``open_requests`` (the requests opening the manifest took), ``shards_opened``
        (shard opens, reopens after the table closed one included), ``open_files`` (files
        this reader holds now), and the counters of ``FileReader.stats`` of every shard
        opened, added up."""
        total = dict(self._source.closed_stats)
        held = READERS.readers_of(self._source.owner)
        for reader, _ in held:
            for name, value in reader.stats().items():
                total[name] = total.get(name, 0) + value
        return {"open_requests": self._open_requests, "shards_opened": self._source.opened,
                "open_files": sum(files for _, files in held), **total}

    def __getitem__(self, key: Any) -> Any:
        if type(key) is not int:
            return super().__getitem__(key)
        ends = self._shard_ends
        index = key if 0 <= key < ends[-1] else one_index(key, ends[-1])
        m = bisect.bisect_right(ends, index) if len(ends) > 1 else 0  # scalar: no numpy call
        return self.members[m][index - (ends[m - 1] if m else 0)]

    def _gathered(self, indices: Any, fetch: Callable[[Readable, np.ndarray], list],
                  single: Callable[[Readable, int], Any] | None = None) -> list[Any]:
        """``Routed._gathered``, the shards of a remote batch opened and read at once."""
        idx = self._indices(indices)
        if not self._source.remote or not len(idx):
            return super()._gathered(idx, fetch, single)
        member, local = self._route(idx)
        touched = np.unique(member).tolist()
        if len(touched) == 1:
            return super()._gathered(idx, fetch, single)
        out: list[Any] = [None] * len(idx)
        group = max(1, READERS.limit // max(1, len(self.manifest.fields)))
        for at in range(0, len(touched), group):
            part = touched[at:at + group]
            with self._source.leased_many([self.members[m].number for m in part]):
                wheres = [np.flatnonzero(member == m) for m in part]
                with ThreadPoolExecutor(min(len(part), _OPENS_AT_ONCE)) as pool:
                    values = list(pool.map(lambda m, where: fetch(self.members[m], local[where]), part, wheres))
            for where, got in zip(wheres, values):
                for pos, value in zip(where.tolist(), got):
                    out[pos] = value
        return out

    def _leaves(self, idx: np.ndarray, held: ExitStack) -> list[Part] | None:
        if self._source.remote:  # its own path plans the requests of a batch's shards together
            return None
        if len(self.members) == 1:
            return self.members[0]._leaves(idx, held)
        return super()._leaves(idx, held)

    def _single_leaf(self, held: ExitStack) -> Any:
        return None if self._source.remote or len(self.members) != 1 else self.members[0]._single_leaf(held)

    def element_counts(self, name: str, indices: Any = None) -> np.ndarray:
        """The element count of sequence field ``name`` in each datapoint of ``indices``
        (all by default), shard by shard."""
        idx = np.arange(len(self)) if indices is None else self._indices(indices)
        out = np.empty(len(idx), np.int64)
        member, local = self._route(idx)
        for m in np.unique(member).tolist():
            where = np.flatnonzero(member == m)
            out[where] = self.members[m].element_counts(name, local[where])
        return out

    def prefetch(self, indices: Any, mask: Any = None) -> int:
        """``DatasetReader.prefetch`` of each shard the indices fall in."""
        idx = self._indices(indices)
        member, local = self._route(idx)
        return sum(self.members[m].prefetch(local[member == m], mask) for m in np.unique(member).tolist())

    def field_reader(self, name: str) -> FileReader:
        """The ``FileReader`` of one field's file, for a dataset of one shard (see
        ``LazyShard.field_reader``); a sharded one has a file per shard: see ``members``."""
        if len(self.members) != 1:
            raise TypeError(f"{self.directory} has {len(self.members)} shards, each with its own file of "
                            f"field {name!r}: use members[k].field_reader({name!r})")
        return self.members[0].field_reader(name)

    def close(self) -> None:
        """Closes the files of its shards; reads after raise ``ValueError``."""
        self._source.closed = True
        self._finalizer()

    def __reduce__(self) -> tuple[Any, ...]:
        return _reopen_versioned, (str(self.directory), self.decoders, self.shardstart, self.shardstep,
                                   self.cache_keys, self.check_data, self.manifest.version, self.storage_options,
                                   self._identity, self._surveyed, self.descriptors)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({str(self.directory)!r}, version={self.version}, "
                f"shards={self.shards}) n={len(self)}")


def _reopen_versioned(directory: str, decoders: Any, shardstart: int, shardstep: int,
                      cache_keys: tuple, check_data: bool, version: int,
                      storage_options: dict[str, Any] | None, identity: tuple,
                      surveyed: Manifest | None = None, descriptors: bool = True) -> VersionedReader:
    """A copy of a reader in another process: the same version, its manifest's file checked
    to be the one the original opened (a surveyed dataset's files are checked against what
    the survey found as its shards open)."""
    reader = VersionedReader.__new__(VersionedReader)
    reader._open(directory, decoders, shardstart, shardstep, cache_keys, version, check_data,
                 storage_options, identity, surveyed, descriptors=descriptors)
    return reader


def open_version(directory: Any, *, version: int | None = None, pin: Any = None,
                 decoders: Mapping[str, Callable] | None = None, cache_keys: Any = (),
                 check_data: bool = True, storage_options: dict[str, Any] | None = None,
                 cache_dir: Any = None, cache_limit: int | None = None,
                 chunk_size: int | None = None, descriptors: bool = True) -> VersionedReader:
    """The dataset at ``directory`` as a ``VersionedReader``, which holds no file until a
    read touches a shard: version ``version`` (default: the latest) of its manifest, or
    what a reader's ``pin`` names (the same version again, ``ObjectChangedError`` when its
    manifest was replaced). A dataset without a manifest (and no ``version``) is surveyed:
    its ``spec.json`` files and each field file's header are read now (as ``ffrecord
    index`` would, writing nothing), and its files checked against that as they open."""
    storage_options = _remote.with_cache(storage_options, cache_dir, cache_limit, chunk_size)
    reader = VersionedReader.__new__(VersionedReader)
    if isinstance(pin, Manifest):
        reader._open(directory, decoders, 0, 1, cache_keys, None, check_data, storage_options, None, pin,
                     descriptors=descriptors)
        return reader
    if pin is not None:
        version, identity = pin
        reader._open(directory, decoders, 0, 1, cache_keys, version, check_data, storage_options, identity,
                     descriptors=descriptors)
        return reader
    try:
        reader._open(directory, decoders, 0, 1, cache_keys, version, check_data, storage_options, None,
                     descriptors=descriptors)
    except NoManifestError:
        if version is not None:
            raise
        from .grow import Root, survey

        surveyed = survey(Root(directory, _remote.unpinned(storage_options)[0]))
        reader._open(directory, decoders, 0, 1, cache_keys, None, check_data, storage_options, None, surveyed,
                     descriptors=descriptors)
    return reader
