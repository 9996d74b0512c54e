"""What a reader says about its files rather than its samples: how each file is stored, its
own offset and checksum tables (as the reference's ``get_offsets``/``get_checksums``), the
chunks of consecutive samples the cache and chunk-aware orders share, and I/O counters.
"""

from __future__ import annotations

import ctypes
import operator
from typing import NamedTuple

import numpy as np

from . import _counters as counters
from . import _lib
from .errors import E_SHORTBUF

_METADATA = {_lib.METADATA_INTACT: "intact", _lib.METADATA_LEGACY: "legacy",
             _lib.METADATA_DAMAGED: "damaged"}
_COMPRESSION_NAMES = {_lib.COMPRESS_NONE: "none", _lib.COMPRESS_LZ4: "lz4", _lib.COMPRESS_ZSTD: "zstd"}
_READ_FROM = {_lib.READ_LOCAL: "local", _lib.READ_REMOTE: "remote", _lib.READ_CACHED: "cached"}


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
    #: ``"local"``, ``"remote"`` (range requests in every process and epoch) or ``"cached"``
    #: (remote, through the node's chunk cache: ``cache_dir``)
    read_from: str = "local"


class FileStamp(NamedTuple):
    """What one file of a dataset holds, as a reader opened it (``FileReader.file_stamp``)
    and as a dataset's manifest records it: its size, the sample count its header stores
    and the CRC-32 the header stores of its sample tables (which hold every sample's CRC-32;
    0 in an old writer's file). A file replaced by other data has another stamp; telling
    them apart costs no read."""

    file_bytes: int
    stored_samples: int
    header_checksum: int


class FileDescription:
    """``FileReader``'s account of its files (a mixin: it needs ``fnames`` and ``_live``)."""

    fnames: list[str]
    _stamps: list[FileStamp]  # each file's stamp, read at open

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

    def stats(self) -> dict[str, int | float]:
        """Counters since open: ``requests`` sent to object storage (retries included),
        ``bytes_fetched`` (what the store sent), ``retries``, chunk-cache ``cache_hits``,
        ``cache_misses``, ``evictions``, ``bypassed`` (chunks read uncached for want of
        room), ``prefetched`` (chunks downloaded ahead), ``bytes_delivered`` (the stored
        bytes of the samples read), and ``fetched_per_delivered``, the ratio of the two
        byte counts: what reading costs in traffic (about 1 without a cache, or in a cold
        epoch; near 0 when the cache serves). All 0 for local files.

        >>> r.stats()["fetched_per_delivered"]           # doctest: +SKIP
        1.02
        """
        dll, handle = self._live()
        values = np.zeros(_lib.STAT_FIELDS, dtype=np.int64)
        _lib.check(dll.ffr_reader_stats(handle, values.ctypes.data, len(values)))
        return counters.with_ratio(dict(zip(_lib.STAT_NAMES, (int(v) for v in values))))

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

    @property
    def file_stamps(self) -> list[FileStamp]:
        """The stamp of each file, in order (see ``file_stamp``)."""
        return list(self._stamps)

    def file_stamp(self, k: int = 0) -> FileStamp:
        """The stamp of file ``k`` as this reader opened it (see ``FileStamp``), without a
        read: the same file, or a copy of it, has the same stamp; a replaced one another.

        >>> r.file_stamp()                              # doctest: +SKIP
        FileStamp(file_bytes=4412, stored_samples=25, header_checksum=2781476043)
        """
        return self._stamps[self._file_index(k)]

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
            file_bytes=f[_lib.INFO_FILE_BYTES], metadata=_METADATA[f[_lib.INFO_METADATA]],
            read_from=_READ_FROM[f[_lib.INFO_READ_FROM]])
