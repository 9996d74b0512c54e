"""How converters touch a source's files: only regular files are opened, without blocking (a
FIFO would wait for a writer forever, a device such as ``/dev/zero`` never ends); a file is
read by its real size; an index is bounded; and each file's *identity* (size, modification
and change times, inode) says whether it changed since a conversion started, which is what a
resumed conversion keeps its finished units by.

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> _ = (root / "a.tar").write_bytes(b"x"); os.mkfifo(root / "b.tar")
>>> files_of(root, "*.tar")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: .../b.tar: not a regular file but a FIFO
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from .._paths import PathArg, check_regular, open_regular

#: The largest index (``index.json``, ``state.json``, ...) read: a million shards' entries fit.
MAX_INDEX_BYTES = 256 << 20
#: Data whose size a source claims is read in pieces this large (decompressed data, a tar
#: member): memory grows only with what is really there.
PIECE = 64 << 20
#: Arrow's streaming codecs, by the names MDS and LitData give their algorithms.
_STREAMS = {"zstd": "zstd", "gz": "gzip", "bz2": "bz2", "br": "brotli"}


def read_file(path: PathArg) -> bytes:
    """The bytes of the regular file ``path`` (``ValueError`` for anything else, at once)."""
    with open_regular(path, buffering=0) as f:
        return f.read()


def read_json(path: PathArg, what: str) -> Any:
    """The JSON document in the file ``path``, at most ``MAX_INDEX_BYTES``: ``FileNotFoundError``
    saying ``what`` a missing one means, ``SourceError`` naming it when it is not JSON."""
    from ._base import source_error

    path = Path(os.fsdecode(path))
    try:
        f = open_regular(path, buffering=0)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file ({what})") from None
    with f:  # read by its size (a read sized by the bound would allocate it all)
        raw = f.read(min(os.fstat(f.fileno()).st_size, MAX_INDEX_BYTES) + 1)
    if len(raw) > MAX_INDEX_BYTES:
        raise source_error(path, None, f"larger than {MAX_INDEX_BYTES >> 20} MiB: not an index")
    try:
        return json.loads(raw)
    except RecursionError:
        raise source_error(path, None, "nested too deep to be an index") from None
    except ValueError as exc:  # UnicodeDecodeError too
        raise source_error(path, None, f"not JSON: {exc}") from None


def inflate(algorithm: str, data: bytes, size: int, file: Any) -> bytes:
    """``data`` decompressed by ``algorithm`` (as MDS and LitData name theirs: ``zstd``,
    ``gz``, ``bz2``, ``br``, ``snappy``, each optionally ``:LEVEL``), which its index says
    holds ``size`` bytes: a ``SourceError`` naming ``file`` when it holds another number (a
    decompression bomb is stopped once it has given ``size + 1`` bytes), when it cannot be
    decompressed, or for an algorithm of another name.

    >>> import zlib
    >>> inflate("gz", zlib.compress(bytes(10**6), wbits=31), 1000, "shard.mds.gz")
    Traceback (most recent call last):
    ...
    ffrecord.converters._base.SourceError: shard.mds.gz: decompresses to more than the 1,000 bytes its index says
    """
    from ._base import SourceError, source_error

    name = algorithm.split(":")[0]
    too_large = source_error(file, None, f"decompresses to more than the {size:,} bytes its index says")
    try:
        if name == "snappy":  # one block, its length first: checked before anything is sized by it
            import snappy

            if _varint(data) > size:
                raise too_large
            out = snappy.decompress(data)
        elif name in _STREAMS:
            out = _inflate_stream(_STREAMS[name], data, size)
        else:
            raise source_error(file, None, f"unknown compression {algorithm!r:.40}")
    except SourceError:
        raise
    except Exception as exc:  # each codec's own errors
        raise source_error(file, None, f"cannot be decompressed ({algorithm}): {type(exc).__name__}: {exc}") from None
    if len(out) > size:
        raise too_large
    if len(out) < size:
        raise source_error(file, None, f"decompresses to {len(out):,} bytes; its index says {size:,}")
    return out


def _inflate_stream(codec: str, data: bytes, size: int) -> bytes:
    """At most ``size + 1`` bytes of ``data`` decompressed by Arrow's streaming ``codec``."""
    import pyarrow as pa

    stream = pa.CompressedInputStream(pa.BufferReader(data), codec)
    pieces, total = [], 0
    while total <= size:
        piece = stream.read(min(PIECE, size + 1 - total))
        if not piece:
            break
        pieces.append(piece)
        total += len(piece)
    return b"".join(pieces)


def _varint(data: bytes) -> int:
    """The unsigned LEB128 number ``data`` starts with (a snappy block's length)."""
    value = 0
    for k, byte in enumerate(data[:10]):
        value |= (byte & 0x7F) << (7 * k)
        if byte < 0x80:
            return value
    raise ValueError("no length at the start of the block")


def files_of(path: PathArg, pattern: str) -> tuple[Path, list[Path]]:
    """``path`` and the files it stands for: itself, or a directory's files matching the
    glob ``pattern`` (the source format's files, sub-directories included with ``**``), in
    name order; hidden ones (``.NAME``, e.g. a download in progress) are left out, as the
    core leaves them out of a dataset, and directories matching the pattern (Spark's
    ``out.parquet/``) are looked into, not read. Anything else that matches (a FIFO, a
    device, a link to one) is a ``ValueError``: skipping it would drop its data silently."""
    path = Path(os.fsdecode(path))
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if not path.is_dir():
        check_regular(os.stat(path).st_mode, path)
        return path, [path]
    files = []
    for file in sorted(path.glob(pattern)):
        if any(part.startswith(".") for part in file.relative_to(path).parts):
            continue
        mode = os.stat(file).st_mode
        if not stat.S_ISDIR(mode):
            check_regular(mode, file)
            files.append(file)
    return path, files


def regular_file(path: PathArg) -> Path:
    """``path``, checked to be a regular file (``ValueError`` else), for a library that opens
    it by name (pyarrow, ArrayRecord): a FIFO would block it."""
    check_regular(os.stat(path).st_mode, path)
    return Path(os.fsdecode(path))


def identity(path: PathArg, root: PathArg) -> list[Any]:
    """What says that the file ``path`` is still the one it was: its name under ``root``, and
    its size, modification and change times and inode (a rewrite changes the times, a
    replacement the inode; ``touch`` or ``chmod`` changes the change time, and only costs the
    unit's conversion again)."""
    st = os.stat(path)
    return [os.path.relpath(path, root), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
