"""``FileReader``: random access to the samples of one or more FFRecord files.

>>> import tempfile, os
>>> from ffrecord import FileReader, FileWriter
>>> path = os.path.join(tempfile.mkdtemp(), "demo.ffr")
>>> with FileWriter(path, 3) as w:
...     for payload in (b"a", b"bb", b"ccc"):
...         w.write_one(payload)
>>> with FileReader(path) as r:
...     [s.tobytes() for s in r.read([2, 0, -2])]
[b'ccc', b'a', b'bb']
"""

from __future__ import annotations

import ctypes
import operator
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _lib, _remote
from ._batch import BatchReads
from ._buffers import offsets, output_view, split, split_batch
from ._file_info import FileDescription, FileInfo
from ._handle import ReaderHandle, check_same_files
from ._indices import index_array, one_index, unchecked_indices
from ._paths import PathArg
from ._single import SampleReads
from ._timing import timed_read
from ._verification import BadSample, Verification
from .errors import E_SHORTBUF, FFRecordWarning, ObjectChangedError

__all__ = ["BadSample", "FileInfo", "FileReader", "reopen", "split_batch"]


class FileReader(ReaderHandle, Verification, FileDescription):
    """Reads samples by index from a file, a list of files, or a directory of ``*.ffr``.

    The files are read as one dataset, in the order given (a directory's files sorted by
    name). ``check_data`` verifies the metadata checksum at open and every sample's CRC-32 on
    read; ``direct`` reads sample data with ``O_DIRECT`` (bypassing the page cache).

    A path may be a URL: ``s3://bucket/key.ffr``, ``s3://bucket/prefix/`` (its ``*.ffr``
    objects sorted by key), ``http(s)://…`` or ``file://…``. Remote samples are fetched by
    concurrent range requests in the core; ``storage_options`` (``endpoint_url``,
    ``region``, ``profile``, ``anonymous``, ``virtual_hosted``, ``concurrency``,
    ``timeout``, ``retries``, ``cache_dir``, ``cache_limit``, ``chunk_size``) configure
    that access, the ``AWS_*`` environment and config files supplying what is not given
    (see docs/object-storage.md). ``cache_dir=`` (or ``FFRECORD_CACHE_DIR``) keeps a
    node-local cache of remote data, shared by every process of the node: chunks of
    ``chunk_size`` bytes of consecutive samples (``chunk_bounds``), each downloaded with
    one request, at most ``cache_limit`` bytes of them (or ``FFRECORD_CACHE_LIMIT``; the
    least recently used are evicted). The directory must be the user's and writable by
    nobody else (``PermissionError`` otherwise: others could plant what it serves).
    ``stats()`` counts requests, bytes and cache hits.

    ``descriptors=False`` asks that local files hold no file descriptor once opened and
    checked, so that a process can keep thousands of files open under a small
    ``RLIMIT_NOFILE`` (a mixture of many datasets, a file per field) without closing and
    reopening them. Every local file is mapped whole already: its samples are then copied
    from the mapping, as fast, and a file replaced by rename goes on reading as opened (one
    truncated since raises ``CorruptFileError``). It is a request: files read with ``direct``,
    files past the bytes a reader maps for sample data (a large dataset is read with
    system calls) keep theirs, and remote files hold none. ``descriptors_held`` says how many
    a reader holds.

    >>> r = FileReader(path, descriptors=False)        # doctest: +SKIP
    >>> r.descriptors_held, r.read_one(1).tobytes()     # doctest: +SKIP
    (0, b'bb')

    A reader is safe to use from many threads at once, survives ``fork()`` (the child
    reopens the files by path on first use) and pickles by ``(fnames, check_data, direct,
    storage_options, descriptors)``.
    A copy in another process (a forked child, or an unpickled one) with ``check_data`` does
    not read the headers again of files that this reader checked and that have not changed
    since (same device, inode, size, modification and change times).

    >>> r = FileReader(path, check_data=True)          # doctest: +SKIP
    >>> len(r), r.read_one(0).tobytes()                 # doctest: +SKIP
    (3, b'a')
    """

    def __init__(self, fname: PathArg | Sequence[PathArg], check_data: bool = True, *,
                 direct: bool = False, storage_options: dict[str, Any] | None = None,
                 cache_dir: PathArg | None = None, cache_limit: int | None = None,
                 chunk_size: int | None = None, descriptors: bool = True) -> None:
        options = _remote.with_cache(storage_options, cache_dir, cache_limit, chunk_size)
        self._init(fname, check_data, direct, (), options, descriptors)

    def _init(self, fname: PathArg | Sequence[PathArg], check_data: bool, direct: bool,
              vouched: tuple[int, ...], storage_options: dict[str, Any] | None = None,
              descriptors: bool = True) -> None:
        self._batches = BatchReads()
        self._single = SampleReads(1)
        self._span_bytes = 0.0  # bytes per sample of the last span read (read_span's guess)
        for message in self._open_files(_paths_of(fname), check_data, direct, vouched,
                                        storage_options, descriptors):
            warnings.warn(message, FFRecordWarning, stacklevel=2)

    # -- reading ----------------------------------------------------------------------

    @timed_read
    def read(self, indices: Any) -> list[np.ndarray]:
        """Reads a batch: one zero-copy ``uint8`` array per index, all views of one buffer.

        >>> [s.tobytes() for s in r.read([0, 2])]      # doctest: +SKIP
        [b'a', b'ccc']
        """
        idx = unchecked_indices(indices)
        if idx is not None:
            try:
                buf, sizes, common = self._read(idx, None)
            except IndexError:  # an index from the end, or one out of range: index_array says which
                idx = None
        if idx is None:
            buf, sizes, common = self._read(index_array(indices, self.n), None)
        return split(buf, len(sizes), common, sizes)

    def read_one(self, index: Any) -> np.ndarray:
        """Reads one sample as a ``uint8`` array.

        >>> r.read_one(-1).tobytes()                    # doctest: +SKIP
        b'ccc'
        """
        n = self.n
        if type(index) is not int or not 0 <= index < n:
            index = one_index(index, n)
        return np.frombuffer(self._single.copy(index, self), np.uint8)

    def prefetch(self, indices: Any) -> int:
        """Starts bringing the samples at ``indices`` into the page cache and returns at once,
        so that reading them later does not wait for the disk (a loader worker prefetches
        its next batch while the current one is processed). Returns the number of reads
        queued: 0 when the samples seem cached already, with ``direct=True`` (which bypasses
        the page cache) or while earlier prefetches still run. A hint: it raises only for
        an index out of range or a closed reader.

        >>> r.prefetch([7, 3]); r.read([7, 3])            # doctest: +SKIP
        """
        idx = index_array(indices, self.n)
        if not len(idx):
            return 0
        dll, handle = self._live()
        queued = ctypes.c_uint64()
        _lib.check(dll.ffr_reader_prefetch(handle, idx.ctypes.data, len(idx), ctypes.byref(queued)))
        return queued.value

    @timed_read
    def read_batch(self, indices: Any, out: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Reads a batch back to back into one buffer, with no per-sample objects.

        Returns ``(buffer, offsets)``: sample ``k`` is ``buffer[offsets[k]:offsets[k+1]]``.
        ``out``, when given, is a writable C-contiguous buffer to read into (``ValueError``
        when too small), or a function that returns one given the batch's size in bytes
        (it may be asked twice when the reader's guess of that size was wrong); the
        returned buffer is then a ``uint8`` view of its beginning.

        >>> buf, offsets = r.read_batch([1, 2])        # doctest: +SKIP
        >>> buf.tobytes(), offsets.tolist()             # doctest: +SKIP
        (b'bbccc', [0, 2, 5])
        """
        buf, sizes, _ = self._read(index_array(indices, self.n), out)
        return buf, offsets(sizes)

    @timed_read
    def read_ranges(self, ranges: Any, out: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Reads byte ranges of samples back to back into one buffer, in one call.

        ``ranges`` holds ``(index, offset, length)`` rows (a list of triples or an ``(n, 3)``
        integer array; a negative index counts from the end): ``length`` bytes of sample
        ``index`` from byte ``offset``, counted in the bytes ``read`` returns. Returns
        ``(buffer, offsets)`` like ``read_batch``: range ``k`` is
        ``buffer[offsets[k]:offsets[k+1]]``. Only the bytes asked for are read from an
        uncompressed sample (a compressed one is read and decompressed whole).

        With ``check_data``, a range covering a whole sample is CRC-checked; a partial range
        cannot be (the CRC covers the whole sample). ``IndexError`` names the sample and the
        range when a range ends past its sample's end; nothing is read then.

        >>> buf, offsets = r.read_ranges([(2, 1, 2), (0, 0, 1)])  # doctest: +SKIP
        >>> buf.tobytes(), offsets.tolist()                        # doctest: +SKIP
        (b'cca', [0, 2, 3])
        """
        triples = _range_array(ranges, self.n)
        lengths = triples[:, 2]
        edges = offsets(lengths)
        total = int(edges[-1])
        buf = np.empty(total, np.uint8) if out is None else output_view(out, total)
        if len(triples):
            dll, handle = self._live()
            status = dll.ffr_reader_read_ranges(handle, triples.ctypes.data, len(triples),
                                                buf.ctypes.data, total)
            if status:
                _lib.raise_status(status)
        return buf, edges

    @timed_read
    def read_span(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Reads samples ``start, ..., stop - 1`` back to back into one buffer, as
        ``read_batch(range(start, stop))`` returns them, for less: samples are stored back
        to back, so the run's part in each uncompressed local file is read by one system
        call and checked (``check_data``) sample by sample in the library, with no work per
        sample here. The buffer and offsets are an Arrow binary array's data and offsets.
        ``IndexError`` when the run is not within ``[0, len]``, ``TypeError`` for bounds that
        are not integers.

        >>> buf, offsets = r.read_span(1, 3)           # doctest: +SKIP
        >>> buf.tobytes(), offsets.tolist()             # doctest: +SKIP
        (b'bbccc', [0, 2, 5])
        """
        start, stop = operator.index(start), operator.index(stop)
        if not 0 <= start <= stop <= self.n:
            raise IndexError(f"samples [{start}, {stop}) are not within a dataset of {self.n}")
        count = stop - start
        edges = np.zeros(count + 1, np.uint64)
        if not count:
            return np.empty(0, np.uint8), edges.view(np.int64)
        dll, handle = self._live()
        # A buffer for the bytes per sample the last span had (and a little more): right, the
        # span takes one call; short, the call fills the offsets and the second one reads.
        per_sample = self._span_bytes
        buf = np.empty(int(per_sample * count * 33 / 32) + 64 if per_sample else 0, np.uint8)
        status = dll.ffr_reader_read_span(handle, start, count, buf.ctypes.data if buf.nbytes else None,
                                          buf.nbytes, edges.ctypes.data)
        if status == E_SHORTBUF:
            buf = np.empty(int(edges[-1]), np.uint8)
            status = dll.ffr_reader_read_span(handle, start, count, buf.ctypes.data, buf.nbytes, edges.ctypes.data)
        if status:
            _lib.raise_status(status)
        total = int(edges[-1])
        self._span_bytes = total / count
        return buf[:total], edges.view(np.int64)

    def sizes(self, indices: Any) -> np.ndarray:
        """The size in bytes of each sample, as ``uint64``.

        >>> r.sizes([0, 1, 2]).tolist()                 # doctest: +SKIP
        [1, 2, 3]
        """
        idx = index_array(indices, self.n)
        sizes = np.empty(len(idx), np.uint64)
        if len(idx):
            dll, handle = self._live()
            _lib.check(dll.ffr_reader_sizes(handle, idx.ctypes.data, len(idx), sizes.ctypes.data))
        return sizes

    def _read(self, idx: np.ndarray, out: Any) -> tuple[np.ndarray, np.ndarray, int]:
        """Reads ``idx`` into one buffer: the buffer, the sizes, and the common sample size
        (-1 when the sizes differ)."""
        dll, handle = self._live()
        return self._batches.read(dll, handle, idx, out)

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Closes the files; later reads raise ``ValueError``. Closing twice is a no-op."""
        if not self._closed:
            self._batches.forget_buffers()
        super().close()

    def __len__(self) -> int:
        return self.n

    def __enter__(self) -> FileReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return _unpickle, (type(self), self.fnames, self.check_data, self.direct,
                           self.vouched_files, _remote.pinned(self.storage_options, self._versions),
                           self.file_stamps, self.descriptors)

    def __repr__(self) -> str:
        names = self.fnames if len(self.fnames) <= 3 else [*self.fnames[:2], "...", self.fnames[-1]]
        shown = repr(names[0]) if len(self.fnames) == 1 else repr(names)
        state = ", closed" if self._closed else ""
        return (f"{type(self).__name__}({shown}, check_data={self.check_data}"
                f"{', direct=True' if self.direct else ''}"
                f"{'' if self.descriptors else ', descriptors=False'}) n={self.n}{state}")


def _range_array(ranges: Any, n: int) -> np.ndarray:
    """``(index, offset, length)`` rows as a C-contiguous ``(k, 3)`` ``uint64`` array."""
    arr = ranges if isinstance(ranges, np.ndarray) else np.asarray(ranges)
    if arr.size == 0:
        return np.empty((0, 3), np.uint64)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"ranges must be (index, offset, length) triples, got shape {arr.shape}")
    if arr.dtype == np.uint64:
        return np.ascontiguousarray(arr)
    if arr.dtype.kind != "i":
        raise TypeError(f"ranges must be integers, not {arr.dtype} values")
    if (arr[:, 1:] < 0).any():
        raise ValueError("range offsets and lengths must be >= 0")
    triples = np.array(arr, np.int64)  # a copy: the indices are rewritten below
    triples[:, 0] = index_array(triples[:, 0], n).view(np.int64)
    return triples.view(np.uint64)


def _paths_of(fname: Any) -> list[str]:
    if isinstance(fname, (str, bytes, os.PathLike)):
        return [os.fsdecode(fname)]
    if isinstance(fname, (list, tuple)):
        paths = []
        for item in fname:
            if not isinstance(item, (str, bytes, os.PathLike)):
                raise TypeError(f"file names must be str or os.PathLike, not {type(item).__name__}")
            paths.append(os.fsdecode(item))
        return paths
    raise TypeError(f"fname must be a path or a list of paths, not {type(fname).__name__}")


def _unpickle(cls: type[FileReader], fnames: list[str], check_data: bool, direct: bool,
              vouched: tuple[int, ...], storage_options: dict[str, Any] | None,
              stamps: list[tuple[int, int]], descriptors: bool = True) -> FileReader:
    return reopen(fnames, check_data, vouched, direct=direct, cls=cls,
                  storage_options=storage_options, stamps=stamps, descriptors=descriptors)


@timed_read  # a loader worker opening its copy of a dataset's files reads them
def reopen(fname: PathArg | Sequence[PathArg], check_data: bool, vouched: tuple[int, ...],
           *, direct: bool = False, cls: type[FileReader] = FileReader,
           storage_options: dict[str, Any] | None = None,
           stamps: Sequence[tuple[int, int]] | None = None, descriptors: bool = True) -> FileReader:
    """``FileReader(fname, check_data, direct=direct, descriptors=descriptors)`` that skips checking again the files
    another reader vouches for (its ``vouched_files``) while they are unchanged. Given the
    ``file_stamps`` of the reader it copies, it raises ``ObjectChangedError`` for a file
    replaced since that reader opened it, rather than read another file.

    >>> copy = reopen(r.fnames, True, r.vouched_files, stamps=r.file_stamps)   # doctest: +SKIP
    """
    reader = cls.__new__(cls)
    reader._init(fname, check_data, direct, tuple(vouched), storage_options, descriptors)
    if stamps is not None:
        try:
            check_same_files(reader.fnames, stamps, reader.file_stamps)
        except ObjectChangedError:
            reader.close()
            raise
    return reader
