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
import json
import operator
import os
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import _lib, _paths, _remote
from ._paths import PathArg
from ._indices import index_array, one_index
from ._single import SampleReads
from .errors import E_CHECKSUM, E_CORRUPT, E_SHORTBUF, CorruptFileError, FFRecordWarning
# Fixed-size samples are common: once a batch of at least _MIN_FIXED_EVIDENCE samples all had
# one size, later batches are read into a buffer of that size times k in one call, without the
# sizes call first (a wrong guess costs one retry, then guessing stops for good).
_MIN_FIXED_EVIDENCE = 8
_MAX_GUESS = 256 << 20
_SIZE_UNKNOWN, _SIZES_VARY = -1, -2
# Bad samples are rare: a verification call first has room for _VERIFY_PAGE of them (and
# _VERIFY_TEXT bytes of their messages); each full page doubles the room, up to 64 times.
_PROGRESS_CHUNK = 1 << 16  # samples verified between two updates of a progress bar
_VERIFY_PAGE = 256
_VERIFY_TEXT = 64 << 10
_VERIFY_GROWTH = 64
_REASONS = {E_CHECKSUM: "checksum", E_CORRUPT: "corrupt"}
_METADATA = {_lib.METADATA_INTACT: "intact", _lib.METADATA_LEGACY: "legacy",
             _lib.METADATA_DAMAGED: "damaged"}
_COMPRESSION_NAMES = {_lib.COMPRESS_NONE: "none", _lib.COMPRESS_LZ4: "lz4", _lib.COMPRESS_ZSTD: "zstd"}


class BadSample(NamedTuple):
    """A damaged sample found by ``FileReader.bad_samples``."""

    index: int  #: in the dataset
    reason: str  #: ``"checksum"`` (its bytes do not match their CRC-32) or ``"corrupt"``
    message: str  #: the library's account of it, naming the file and the sample


class FileInfo(NamedTuple):
    """How one file of a dataset is stored, from ``FileReader.file_info``."""

    path: str
    samples: int  #: samples a reader shows
    stored_samples: int  #: samples in the header, an extension record included
    compression: str  #: ``"none"``, ``"lz4"`` or ``"zstd"``
    header_bytes: int
    data_bytes: int  #: sample data as stored (compressed, the extension record included)
    file_bytes: int
    metadata: str  #: ``"intact"``, ``"legacy"`` (checksum 0, old writer) or ``"damaged"``
# Batch buffers are recycled (see _BufferPool) up to this size; larger ones are allocated per call.
_MAX_POOLED = 256 << 20
_POOL_SLOTS = 4


class FileReader:
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
    least recently used are evicted). ``stats()`` counts requests, bytes and cache hits.

    A reader is safe to use from many threads at once, survives ``fork()`` (the child
    reopens the files by path on first use) and pickles by ``(fnames, check_data, direct,
    storage_options)``.
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
                 chunk_size: int | None = None) -> None:
        options = _remote.with_cache(storage_options, cache_dir, cache_limit, chunk_size)
        self._init(fname, check_data, direct, (), options)

    def _init(self, fname: PathArg | Sequence[PathArg], check_data: bool, direct: bool,
              verified: tuple[int, ...], storage_options: dict[str, Any] | None = None) -> None:
        self.check_data = bool(check_data)
        self.direct = bool(direct)
        self.storage_options, self._versions = unpinned(storage_options)
        _remote.encode_options(self.storage_options)  # a bad option fails before any open
        self._closed = True  # until the open succeeds, so __del__ has nothing to do
        self._reopen_lock = threading.Lock()
        self._verified = verified
        lib, self._handle = self._open(_paths_of(fname))
        self._generation = lib.generation
        self._closed = False
        self.n: int = self._query_u64(lib.dll.ffr_reader_len)
        self.fnames: list[str] = self._names(lib.dll)
        self._fixed_size = _SIZE_UNKNOWN
        self._pools = threading.local()
        self._single = SampleReads(1)
        for message in self._warnings(lib.dll):
            warnings.warn(message, FFRecordWarning, stacklevel=2)

    # -- reading ----------------------------------------------------------------------

    def read(self, indices: Any) -> list[np.ndarray]:
        """Reads a batch: one zero-copy ``uint8`` array per index, all views of one buffer.

        >>> [s.tobytes() for s in r.read([0, 2])]      # doctest: +SKIP
        [b'a', b'ccc']
        """
        buf, sizes, common = self._read(index_array(indices, self.n), None)
        return _split(buf, len(sizes), common, sizes)

    def read_one(self, index: Any) -> np.ndarray:
        """Reads one sample as a ``uint8`` array.

        >>> r.read_one(-1).tobytes()                    # doctest: +SKIP
        b'ccc'
        """
        buf, sizes = self._single.read(one_index(index, self.n), (self,))
        return np.frombuffer(buf, np.uint8, sizes[0])

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
        return buf, _offsets(sizes)

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
        offsets = _offsets(lengths)
        total = int(offsets[-1])
        buf = np.empty(total, np.uint8) if out is None else _output_view(out, total)
        if len(triples):
            dll, handle = self._live()
            status = dll.ffr_reader_read_ranges(handle, triples.ctypes.data, len(triples),
                                                buf.ctypes.data, total)
            if status:
                _lib.raise_status(status)
        return buf, offsets

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
        """Reads ``idx`` into one buffer (``out``: None, a buffer, or a function giving one
        for a byte count); returns it, the sizes, and the common sample size (-1 when the
        sizes differ)."""
        dll, handle = self._live()
        k = len(idx)
        sizes = np.empty(k, np.uint64)
        if k == 0:
            return np.empty(0, np.uint8), sizes, -1
        # Each ``.ctypes.data`` costs about a microsecond: take every address once.
        idx_addr, sizes_addr = idx.ctypes.data, sizes.ctypes.data
        if out is not None and not callable(out):  # one call: it fails, sizing, when too small
            return self._read_into(dll, handle, idx_addr, sizes, sizes_addr, _writable_bytes(out))
        allocate = self._new_buffer if out is None else _allocator(out)
        if 0 <= self._fixed_size * k <= _MAX_GUESS:
            done = self._read_fixed_size(dll, handle, idx_addr, sizes, sizes_addr, allocate)
            if done is not None:
                return done
        else:
            status = dll.ffr_reader_sizes(handle, idx_addr, k, sizes_addr)
            if status:
                _lib.raise_status(status)
        buf = allocate(int(sizes.sum()))
        return self._read_into(dll, handle, idx_addr, sizes, sizes_addr, buf)

    def _read_into(self, dll: ctypes.CDLL, handle: int, idx_addr: int, sizes: np.ndarray,
                   sizes_addr: int, buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        k = len(sizes)
        status = dll.ffr_reader_read_batch(handle, idx_addr, k, buf.ctypes.data, buf.nbytes,
                                           sizes_addr)
        total = int(sizes.sum())
        if status == E_SHORTBUF:
            raise ValueError(f"out holds {buf.nbytes} bytes; the batch needs {total}")
        if status:
            _lib.raise_status(status)
        buf = buf[:total]
        common = int(sizes[0])
        if not (sizes == common).all():
            return buf, sizes, -1
        if k >= _MIN_FIXED_EVIDENCE and self._fixed_size == _SIZE_UNKNOWN:
            self._fixed_size = common
        return buf, sizes, common

    def _read_fixed_size(self, dll: ctypes.CDLL, handle: int, idx_addr: int, sizes: np.ndarray,
                         sizes_addr: int, allocate: Any) -> tuple[np.ndarray, np.ndarray, int] | None:
        """One call, no sizes call, into a buffer sized for samples of the learnt size.
        ``None`` when it was too small: ``sizes`` is filled and nothing was read."""
        fixed, k = self._fixed_size, len(sizes)
        buf = allocate(fixed * k)
        status = dll.ffr_reader_read_batch(handle, idx_addr, k, buf.ctypes.data, fixed * k,
                                           sizes_addr)
        if status == 0 and (sizes == fixed).all():
            return buf[: fixed * k], sizes, fixed
        if status not in (0, E_SHORTBUF):
            _lib.raise_status(status)
        self._fixed_size = _SIZES_VARY  # guessed wrong once: size every batch from now on
        return (buf[: int(sizes.sum())], sizes, -1) if status == 0 else None

    def _new_buffer(self, nbytes: int) -> np.ndarray:
        """A ``uint8`` array of ``nbytes`` for one batch: recycled memory when this thread
        has a buffer that nothing refers to any more (already faulted in: a fresh buffer
        pays a page fault per 4 KiB, as much as reading warm data costs)."""
        pool = getattr(self._pools, "pool", None)
        if pool is None:
            pool = self._pools.pool = _BufferPool()
        return pool.take(nbytes)

    # -- checking ---------------------------------------------------------------------

    def chunk_bounds(self, chunk_size: int) -> np.ndarray:
        """The first sample of each chunk, then ``len(self)``: chunk ``k`` holds samples
        ``[b[k], b[k + 1])``. A chunk is a run of consecutive samples of one file; a new one
        starts when the next sample would push its stored bytes over ``chunk_size`` (a
        larger sample is a chunk of its own). The core's rule, shared by the cache and by
        chunk-aware orders.

        >>> r.chunk_bounds(64 << 20)                     # doctest: +SKIP
        array([   0, 4096, 8192, 8200])
        """
        if int(chunk_size) <= 0:
            raise ValueError(f"chunk_size must be positive, not {chunk_size}")
        dll, handle = self._live()
        needed = ctypes.c_uint64()
        bounds = np.empty(64, dtype=np.uint64)
        for _ in range(2):
            status = dll.ffr_reader_chunk_bounds(handle, int(chunk_size), bounds.ctypes.data,
                                                 len(bounds), ctypes.byref(needed))
            if status != E_SHORTBUF:
                break
            bounds = np.empty(needed.value, dtype=np.uint64)
        _lib.check(status)
        return bounds[:needed.value].astype(np.int64)

    def stats(self) -> dict[str, int]:
        """Counters since open: ``requests`` sent to object storage (retries included),
        ``bytes_fetched``, ``retries``, chunk-cache ``cache_hits``, ``cache_misses``,
        ``evictions``, ``bypassed`` (chunks read uncached for want of room) and
        ``prefetched`` (chunks downloaded ahead). All 0 for local files.

        >>> r.stats()["requests"]                        # doctest: +SKIP
        21
        """
        dll, handle = self._live()
        values = np.zeros(_lib.STAT_FIELDS, dtype=np.int64)
        _lib.check(dll.ffr_reader_stats(handle, values.ctypes.data, len(values)))
        return dict(zip(_lib.STAT_NAMES, (int(v) for v in values)))

    def bad_samples(self, start: int = 0, count: int | None = None) -> Iterator[BadSample]:
        """Checks every sample in ``[start, start+count)`` (its place in its file, its CRC-32
        and, compressed, that it decodes), whatever ``check_data`` is, and the metadata of
        every file the range touches; yields a ``BadSample`` for each bad one, in order, with
        the library's account of it. Damaged metadata raises ``CorruptFileError`` once every
        sample has been checked.

        >>> [(b.index, b.reason) for b in r.bad_samples()]   # doctest: +SKIP
        [(2, 'checksum')]
        """
        for indices, reasons, messages in self._verify_pages(start, count, _VERIFY_TEXT):
            for index, reason, message in zip(indices, reasons, messages):
                yield BadSample(index, _REASONS.get(reason, "corrupt"), message)

    def verify(self, start: int = 0, count: int | None = None, *, progress: bool = False) -> list[int]:
        """The dataset indices of the bad samples in ``[start, start+count)``: what
        ``bad_samples`` finds, without the messages. ``CorruptFileError`` when a file's
        metadata is damaged. ``progress`` shows a bar (rate, ETA) on stderr.

        >>> r.verify(progress=True)                     # doctest: +SKIP
        []
        """
        if not progress:
            return [i for indices, _, _ in self._verify_pages(start, count, 0) for i in indices]
        from ._progress import ProgressBar

        start, end = self._range(start, count)
        bad: list[int] = []
        with ProgressBar(end - start, True, "verify") as bar:
            for at in range(start, end, _PROGRESS_CHUNK):
                n = min(_PROGRESS_CHUNK, end - at)
                bad += [i for indices, _, _ in self._verify_pages(at, n, 0) for i in indices]
                bar.update(n)
        return bad

    def validate(self) -> None:
        """Raises ``CorruptFileError`` naming the file and sample of the first bad sample
        (and how many there are), after checking the whole dataset.

        >>> r.validate()                                # doctest: +SKIP
        """
        first, total = None, 0
        for bad in self.bad_samples():
            first = first or bad
            total += 1
        if first is not None:
            more = f" ({total} bad samples in all)" if total > 1 else ""
            raise CorruptFileError(first.message + more)

    def _verify_pages(self, start: int, count: int | None,
                      text_len: int) -> Iterator[tuple[list[int], list[int], list[str]]]:
        """The library's verification a page at a time: bad indices, their reasons (status
        codes) and, with ``text_len`` > 0, their messages. A damaged-metadata error is raised
        after the last page."""
        start, end = self._range(start, count)
        page = _VERIFY_PAGE
        nbad, next_ = ctypes.c_uint64(), ctypes.c_uint64()
        damaged_metadata: Exception | None = None
        while True:
            indices, reasons = np.empty(page, np.uint64), np.empty(page, np.int32)
            text = ctypes.create_string_buffer(text_len) if text_len else None
            dll, handle = self._live()
            status = dll.ffr_reader_verify(
                handle, start, end - start, indices.ctypes.data, reasons.ctypes.data, page,
                text, text_len, ctypes.byref(nbad), ctypes.byref(next_))
            if status in (E_CHECKSUM, E_CORRUPT):
                damaged_metadata = damaged_metadata or _lib.error_for(status)
            else:
                _lib.check(status)
            k = nbad.value
            messages = ([m.decode("utf-8", "replace") for m in text.raw.split(b"\0", k)[:k]]
                        if text is not None else [""] * k)
            yield indices[:k].tolist(), reasons[:k].tolist(), messages
            if next_.value >= end:
                break
            start = next_.value
            if page < _VERIFY_PAGE * _VERIFY_GROWTH:  # a full page: bad samples are not rare
                page, text_len = 2 * page, 2 * text_len
        if damaged_metadata is not None:
            raise damaged_metadata

    def _range(self, start: int, count: int | None) -> tuple[int, int]:
        """``[start, end)`` from a start (negative counts from the end) and a count; the
        library judges the range, once it is sure to fit its 64-bit arguments."""
        start = operator.index(start)
        start = start + self.n if start < 0 else start
        count = self.n - start if count is None else operator.index(count)
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if not 0 <= start < 2**64 or count >= 2**64 - start:
            raise IndexError(f"range [{start}, {start}+{count}) is beyond the dataset of "
                             f"{self.n} samples")
        return start, start + count

    def get_offsets(self, file_index: int) -> np.ndarray:
        """Where each stored sample of file ``file_index`` begins, then the file size (int64,
        one more entry than the file stores samples), as the reference's ``get_offsets``.

        The file's own table, read from its header: a compressed file shows its stored
        (compressed) samples and its extension record.

        >>> r.get_offsets(0)[:3]                        # doctest: +SKIP
        array([312, 340, 371])
        """
        return self._file_header(file_index)[0]

    def get_checksums(self, file_index: int) -> np.ndarray:
        """The stored CRC-32 of each sample of file ``file_index`` (uint32), as the reference's
        ``get_checksums``; one per entry of ``get_offsets`` but the last."""
        return self._file_header(file_index)[1]

    def _file_header(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = self._file_index(k)
        stored = self.file_info(k).stored_samples
        offsets = np.empty(stored + 1, np.uint64)
        checksums = np.empty(stored, np.uint32)
        dll, handle = self._live()
        _lib.check(dll.ffr_reader_file_header(handle, k, offsets.ctypes.data, checksums.ctypes.data,
                                              stored))
        return offsets.view(np.int64), checksums

    def _file_index(self, k: int) -> int:
        k = operator.index(k)
        k = k + len(self.fnames) if k < 0 else k
        if not 0 <= k < len(self.fnames):
            raise IndexError(f"file {k} out of range for {len(self.fnames)} files")
        return k

    def file_info(self, k: int = 0) -> FileInfo:
        """How file ``k`` of the dataset is stored (sample counts, sizes, compression and
        what its metadata checksum says). The first call for a file checks its metadata.

        >>> r.file_info().metadata                      # doctest: +SKIP
        'intact'
        """
        k = self._file_index(k)
        fields = np.zeros(_lib.INFO_FIELDS, np.uint64)
        dll, handle = self._live()
        _lib.check(dll.ffr_reader_file_info(handle, k, fields.ctypes.data, len(fields)))
        f = fields.tolist()
        return FileInfo(
            path=self.fnames[k], samples=f[_lib.INFO_SAMPLES],
            stored_samples=f[_lib.INFO_STORED],
            compression=_COMPRESSION_NAMES.get(f[_lib.INFO_COMPRESSION], "unknown"),
            header_bytes=f[_lib.INFO_HEADER_BYTES], data_bytes=f[_lib.INFO_DATA_BYTES],
            file_bytes=f[_lib.INFO_FILE_BYTES], metadata=_METADATA[f[_lib.INFO_METADATA]])

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Closes the files; later reads raise ``ValueError``. Closing twice is a no-op."""
        if self._closed:
            return
        self._closed = True
        self._pools = threading.local()  # frees the recycled buffers (those still in use live on)
        generation, self._generation = self._generation, -1  # makes _live() refuse
        lib = _lib.loaded()
        if lib is not None and lib.generation == generation:
            _lib.check(lib.dll.ffr_reader_close(self._handle))

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return self.n

    def __enter__(self) -> FileReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a destructor must not raise
            pass

    @property
    def verified_files(self) -> tuple[int, ...]:
        """Identities of the files whose headers this reader checked (empty without
        ``check_data``), as the core's opaque words: handed to ``reopen`` in another process,
        they spare it checking again the files that have not changed."""
        return self._verified

    @property
    def versions(self) -> dict[str, Any]:
        """The size and ETag of each remote file as this reader opened it, by URL: a copy
        of the reader (after ``fork()`` or unpickling) reads those versions, and opens them
        without a request; an object replaced since raises ``ObjectChangedError``."""
        return dict(self._versions)

    def __reduce__(self) -> tuple[Any, ...]:
        return _unpickle, (type(self), self.fnames, self.check_data, self.direct,
                           self.verified_files, pinned(self.storage_options, self._versions))

    def __repr__(self) -> str:
        names = self.fnames if len(self.fnames) <= 3 else [*self.fnames[:2], "...", self.fnames[-1]]
        shown = repr(names[0]) if len(self.fnames) == 1 else repr(names)
        state = ", closed" if self._closed else ""
        return (f"{type(self).__name__}({shown}, check_data={self.check_data}"
                f"{', direct=True' if self.direct else ''}) n={self.n}{state}")

    # -- handles ----------------------------------------------------------------------

    def _live(self) -> tuple[ctypes.CDLL, int]:
        """The library and this reader's handle in it, reopening after a fork."""
        lib = _lib.current()
        if lib.generation == self._generation:
            return lib.dll, self._handle
        return self._reopen(lib)

    def _reopen(self, lib: _lib.Library) -> tuple[ctypes.CDLL, int]:
        if not self._reopen_lock.acquire(timeout=60):
            raise RuntimeError(f"{self!r}: timed out waiting for another thread to reopen it")
        try:
            if self._closed:
                raise ValueError(f"I/O operation on closed {type(self).__name__}")
            if self._generation != lib.generation:  # first thread here after the fork
                _, handle = self._open(self.fnames)
                self._handle, self._generation = handle, lib.generation
            return lib.dll, self._handle
        finally:
            self._reopen_lock.release()

    def _open(self, paths: list[str]) -> tuple[_lib.Library, int]:
        """Opens paths, vouching for the files this reader's copies checked already, and
        records which files the new handle checked in turn."""
        lib = _lib.current()
        encoded = (ctypes.c_char_p * len(paths))(*map(_paths.encode, paths))
        flags = (_lib.CHECK_DATA if self.check_data else 0) | (_lib.DIRECT if self.direct else 0)
        handle = ctypes.c_int64()
        if any(map(_remote.is_url, paths)):  # remote files: the versions opened first, pinned
            _lib.check(lib.dll.ffr_reader_open_options(
                encoded, len(paths), flags,
                _remote.encode_options(pinned(self.storage_options, self._versions)),
                ctypes.byref(handle)))
            self._versions = json.loads(_lib.copy_text(lib.dll.ffr_reader_versions, handle.value))
            return lib, handle.value
        ids = (ctypes.c_uint64 * len(self._verified))(*self._verified)
        _lib.check(lib.dll.ffr_reader_open_verified(encoded, len(paths), flags, ids,
                                                    len(self._verified), ctypes.byref(handle)))
        if self.check_data:
            self._verified = self._identities(lib.dll, handle.value)
        return lib, handle.value

    @staticmethod
    def _identities(dll: ctypes.CDLL, handle: int) -> tuple[int, ...]:
        """The identities of the files the reader behind handle checked, as ABI words."""
        needed = ctypes.c_uint64()
        status = dll.ffr_reader_verified(handle, None, 0, ctypes.byref(needed))
        if status != E_SHORTBUF:
            _lib.check(status)
        words = (ctypes.c_uint64 * needed.value)()
        _lib.check(dll.ffr_reader_verified(handle, words, needed.value, ctypes.byref(needed)))
        return tuple(words)

    def _query_u64(self, func: Any) -> int:
        value = ctypes.c_uint64()
        _lib.check(func(self._handle, ctypes.byref(value)))
        return value.value

    def _names(self, dll: ctypes.CDLL) -> list[str]:
        nfiles = self._query_u64(dll.ffr_reader_nfiles)
        return [os.fsdecode(_lib.copy_text(dll.ffr_reader_fname, self._handle, i))
                for i in range(nfiles)]

    def _warnings(self, dll: ctypes.CDLL) -> list[str]:
        text = _lib.copy_text(dll.ffr_reader_warnings, self._handle).decode("utf-8", "replace")
        return [line for line in text.splitlines() if line]


class _BufferPool:
    """A few batch buffers of one thread, each reused only while nothing else refers to it.

    Every array ``read`` hands out is a view of its buffer, and so is anything made from
    one (views, ``memoryview``, ``np.frombuffer``, ``torch.from_numpy``): each holds a
    reference to the buffer, directly or through the objects it was made from. A buffer
    whose reference count is down to the pool's own is therefore seen by no one, and a
    sample that someone keeps never changes. The count is compared with the count taken
    the same way right after the buffer was made. Without a global interpreter lock the
    counts are not exact, and every batch gets a fresh buffer.
    """

    enabled = getattr(sys, "_is_gil_enabled", lambda: True)()

    def __init__(self) -> None:
        self._buffers: list[np.ndarray] = []
        self._baseline = 0

    def take(self, nbytes: int) -> np.ndarray:
        if not self.enabled or nbytes > _MAX_POOLED:
            return np.empty(nbytes, np.uint8)
        fitting = smaller = None
        for slot in range(len(self._buffers)):
            if self._refs(slot) > self._baseline:
                continue
            if self._buffers[slot].nbytes >= nbytes:
                fitting = slot
                break
            smaller = slot
        if fitting is None:
            fitting = self._add(nbytes, smaller)
            if fitting is None:  # every slot in use: this batch's buffer is not kept
                return np.empty(nbytes, np.uint8)
        return self._buffers[fitting][:nbytes]

    def _add(self, nbytes: int, replace: int | None) -> int | None:
        """Makes a buffer of at least ``nbytes`` in slot ``replace`` or a new slot."""
        if replace is None and len(self._buffers) >= _POOL_SLOTS:
            return None
        # a power of two: batches of variable-size samples reuse it as they vary
        capacity = min(max(4096, 1 << max(nbytes - 1, 0).bit_length()), _MAX_POOLED)
        if replace is None:
            self._buffers.append(np.empty(capacity, np.uint8))
            replace = len(self._buffers) - 1
        else:
            self._buffers[replace] = np.empty(capacity, np.uint8)
        self._baseline = self._refs(replace)
        return replace

    def _refs(self, slot: int) -> int:
        return sys.getrefcount(self._buffers[slot])


def _split(buf: np.ndarray, k: int, common: int, sizes: np.ndarray) -> list[np.ndarray]:
    """The ``k`` samples of a batch buffer; ``common`` is their one size, or -1."""
    if common >= 0:  # one size: the rows of a 2-D view are the cheapest views to make
        return list(buf[: k * common].reshape(k, common))
    edges = _offsets(sizes).tolist()
    return [buf[start:end] for start, end in zip(edges, edges[1:])]


def split_batch(buffer: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    """The samples of ``read_batch``'s ``(buffer, offsets)``, as ``read`` returns them.

    >>> split_batch(np.frombuffer(b"abbccc", np.uint8), np.array([0, 1, 3, 6]))[2].tobytes()
    b'ccc'
    """
    sizes = np.diff(offsets)
    k = len(sizes)
    common = int(sizes[0]) if k and (sizes == sizes[0]).all() else -1
    return _split(buffer, k, common, sizes)


def _offsets(sizes: np.ndarray) -> np.ndarray:
    """Start offsets of back-to-back samples, plus the end: ``int64``, ``len(sizes) + 1``."""
    offsets = np.empty(len(sizes) + 1, np.int64)
    offsets[0] = 0
    np.cumsum(sizes.view(np.int64), out=offsets[1:])
    return offsets


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


def _writable_bytes(out: Any) -> np.ndarray:
    """The whole of ``out`` as a ``uint8`` array; ValueError unless writable and contiguous."""
    view = memoryview(out)
    if view.readonly or not view.c_contiguous:
        raise ValueError("out must be a writable C-contiguous buffer")
    return np.frombuffer(view, np.uint8, count=view.nbytes)


def _output_view(out: Any, total: int) -> np.ndarray:
    """The first ``total`` bytes of ``out``; ValueError when it holds fewer."""
    buf = _writable_bytes(out)
    if buf.nbytes < total:
        raise ValueError(f"out holds {buf.nbytes} bytes; the batch needs {total}")
    return buf[:total]


def _allocator(make: Any) -> Any:
    """``make(nbytes)``'s buffer as ``uint8``, checked to be writable and big enough."""

    def allocate(nbytes: int) -> np.ndarray:
        buf = _writable_bytes(make(nbytes))
        if buf.nbytes < nbytes:
            raise ValueError(f"out({nbytes}) returned a buffer of {buf.nbytes} bytes")
        return buf

    return allocate


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


def _unpickle(cls: type[FileReader], fnames: list[str], check_data: bool,
              direct: bool, verified: tuple[int, ...] = (),
              storage_options: dict[str, Any] | None = None) -> FileReader:
    return reopen(fnames, check_data, verified, direct=direct, cls=cls,
                  storage_options=storage_options)


def reopen(fname: PathArg | Sequence[PathArg], check_data: bool, verified: tuple[int, ...],
           *, direct: bool = False, cls: type[FileReader] = FileReader,
           storage_options: dict[str, Any] | None = None) -> FileReader:
    """``FileReader(fname, check_data, direct=direct)`` that skips checking again the files
    another reader vouches for (its ``verified_files``) while they are unchanged.

    >>> copy = reopen(r.fnames, True, r.verified_files)   # doctest: +SKIP
    """
    reader = cls.__new__(cls)
    reader._init(fname, check_data, direct, tuple(verified), storage_options)
    return reader
