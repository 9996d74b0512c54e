"""Members of a mixture named by path (``Mixture.from_paths``): each opens when first read,
as a ``VersionedReader`` (from its manifest, or surveyed when it has none), whose shards'
files are held in the process-wide table of ``ffrecord.dataset.open_files``. A member
never opened holds nothing but its path; one opened holds its manifest, no file.

>>> import tempfile, os
>>> from ffrecord.dataset import DatasetWriter
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"n": "int"}) as writer:
...     for k in range(4):
...         _ = writer.append({"n": k})
>>> member = PathMember(path, {}, length=3)
>>> member.is_open, len(member), member[2], member.is_open
(False, 3, {'n': 2}, True)
"""

from __future__ import annotations

import operator
import threading
from contextlib import ExitStack
from typing import Any

import numpy as np

from .errors import MixtureError, SpecError
from .joined import Part
from .reader import Readable


class SameSpec:
    """The fields shared by the members of one mixture: the first member to open records
    its field names, and each member opening later must have the same (``SpecError``
    naming both)."""

    def __init__(self) -> None:
        self.fields: list[str] | None = None
        self.where: str | None = None
        self._lock = threading.Lock()

    def check(self, where: Any, spec: dict[str, str]) -> None:
        with self._lock:
            if self.fields is None:
                self.fields, self.where = sorted(spec), str(where)
                return
        if sorted(spec) != self.fields:
            raise SpecError(f"{where}: fields {sorted(spec)} differ from {self.fields} of {self.where}: "
                            "mixed datasets must have the same fields")

    def __getstate__(self) -> dict[str, Any]:
        return {"fields": self.fields, "where": self.where}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()
        self.fields, self.where = state["fields"], state["where"]


class PathMember(Readable):
    """The dataset at ``path`` opened with ``options`` (as ``open_version`` takes them) when
    first read, reading its first ``length`` datapoints (``None``: open it now, for its
    length); ``version`` pins a version. ``same``: the ``SameSpec`` of its mixture."""

    def __init__(self, path: Any, options: dict[str, Any], length: int | None = None,
                 version: int | None = None, same: SameSpec | None = None) -> None:
        self.path, self.options, self.version, self._same = path, dict(options), version, same
        self._pin: Any = None  # what a copy opens again: the version this one opened
        self._reader: Any = None
        self._closed = False
        self._lock = threading.Lock()
        self._given = length is not None  # else measured: opened now, and its digest recorded
        if length is not None:
            length = operator.index(length)
            if length < 0:
                raise MixtureError(f"{path}: lengths= must not be negative, got {length}")
        self._length = length if length is not None else len(self._open())

    @property
    def is_open(self) -> bool:
        return self._reader is not None

    @property
    def directory(self) -> Any:
        return self.path

    def _open(self) -> Any:
        reader = self._reader
        if reader is not None:
            return reader
        from .versioned import open_version

        with self._lock:
            if self._closed:
                raise ValueError(f"I/O operation on closed dataset {self.path}")
            if self._reader is None:
                reader = open_version(self.path, version=self.version, pin=self._pin, **self.options)
                try:
                    if self._given and len(reader) < self._length:
                        raise MixtureError(f"{self.path}: holds {len(reader)} datapoints (version "
                                           f"{reader.version}), lengths= says {self._length}")
                    if self._same is not None:
                        self._same.check(self.path, reader.spec)
                except BaseException:
                    reader.close()
                    raise
                self._pin = reader.pin
                self._reader = reader
        return self._reader

    def data_id(self) -> str:
        """What identifies the data read, for loader states: the digest of the version
        opened for this member's length; "" for a member given its length (the state then
        knows it by name and length: nothing is opened to say more)."""
        return "" if self._given else self._open().digest()

    def __len__(self) -> int:
        return self._length

    @property
    def spec(self) -> dict[str, str]:
        return self._open().spec

    @property
    def decoders(self) -> Any:
        """The decoders it opens with (``open_version``'s option), None for the built-in ones."""
        return self.options.get("decoders")

    @property
    def fields(self) -> dict[str, Any]:
        return self._open().fields

    @property
    def metadata(self) -> dict[str, Any]:
        return self._open().metadata

    @property
    def files(self) -> list[str]:
        return self._open().files

    @property
    def size(self) -> int:
        return self._open().size

    def read(self, indices: Any, mask: Any = None) -> list[dict[str, Any]]:
        return self._open().read(self._indices(indices), mask)

    def __getitems__(self, indices: Any) -> list[dict[str, Any]]:
        return self._open().__getitems__(self._indices(indices))

    def __getitem__(self, key: Any) -> Any:
        if type(key) is int and 0 <= key < self._length:  # one datapoint: the reader's fast path
            return self._open()[key]
        return super().__getitem__(key)

    def _leaves(self, idx: np.ndarray, held: ExitStack) -> list[Part] | None:
        return self._open()._leaves(idx, held)  # idx in range: a mixture's map routed it here

    def _single_leaf(self, held: ExitStack) -> Any:
        return self._open()._single_leaf(held)  # its first datapoints: those the map routes here

    def read_columns(self, indices: Any, mask: Any = None) -> dict[str, Any]:
        return self._open().read_columns(self._indices(indices), mask)

    def available(self, index: int) -> dict[str, int | bool]:
        return self._open().available(int(self._indices([index])[0]))

    def element_counts(self, name: str, indices: Any = None) -> np.ndarray:
        return self._open().element_counts(name, np.arange(self._length) if indices is None else self._indices(indices))

    def prefetch(self, indices: Any, mask: Any = None) -> int:
        return self._open().prefetch(self._indices(indices), mask)

    def file_readers(self) -> list[Any]:
        reader = self._reader
        return [] if reader is None else reader.file_readers()

    def stats(self) -> dict[str, int | float]:
        reader = self._reader
        return super().stats() if reader is None else reader.stats()

    def close(self) -> None:
        """Closes the member's files; reads after raise ``ValueError``."""
        with self._lock:
            self._closed = True
            reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles by path, options and length, with the version opened (if any): the copy
        opens when first read, that same version."""
        return _restore, (self.path, self.options, self._length, self._given, self.version, self._same, self._pin)

    def __repr__(self) -> str:
        state = "open" if self.is_open else "not open"
        return f"PathMember({str(self.path)!r}, {state}) n={self._length}"


def _restore(path: Any, options: dict[str, Any], length: int, given: bool, version: int | None,
             same: SameSpec | None, pin: Any) -> PathMember:
    member = PathMember(path, options, length, version, same)
    member._given, member._pin = given, pin
    return member
