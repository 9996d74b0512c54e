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
    with f:
        raw = f.read(MAX_INDEX_BYTES + 1)
    if len(raw) > MAX_INDEX_BYTES:
        raise source_error(path, None, f"larger than {MAX_INDEX_BYTES >> 20} MiB: not an index")
    try:
        return json.loads(raw)
    except RecursionError:
        raise source_error(path, None, "nested too deep to be an index") from None
    except ValueError as exc:  # UnicodeDecodeError too
        raise source_error(path, None, f"not JSON: {exc}") from None


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
