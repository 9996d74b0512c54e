"""Pack a directory tree into one FFRecord file and read files back by path.

The layout is the reference implementation's, so packed files move freely between the two:
every regular file of the tree is one sample, in depth-first order with the entries of each
directory sorted by name, and one more, last sample holds the index: the magic bytes
``b"piouhjgbr"`` followed by a pickled ``collections.OrderedDict`` mapping each name to its
sample index (a file) or to a nested ``OrderedDict`` (a directory).

The index is a pickle, and unpickling untrusted data can run arbitrary code. It is therefore
read with a restricted unpickler that can build ``OrderedDict`` objects and nothing else, and
the resulting tree is checked (names, types, index range) before it is used.

Example:
    >>> import ffrecord, pathlib, tempfile
    >>> src = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (src / "a.txt").write_bytes(b"hello")
    >>> out = str(src.parent / (src.name + ".ffr"))
    >>> ffrecord.pack_folder(src, out)
    1
    >>> with ffrecord.PackedFolder(out) as packed:
    ...     packed.list(), packed.read_one("a.txt").tobytes()
    (['a.txt'], b'hello')
"""

from __future__ import annotations

import io
import os
import pickle
from collections import OrderedDict
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator, List, Optional, Union

import numpy as np

from ._progress import progress
from .errors import CorruptFileError
from .reader import FileReader
from .writer import FileWriter

__all__ = ["MAGIC", "PackedFolder", "pack_folder", "unpack_folder", "load_index"]

#: First bytes of the index record that ends every packed file.
MAGIC = b"piouhjgbr"

# The reference pickles the index with Python's default protocol of its time (4). Pinning it
# keeps our files byte-identical to the reference's whatever the running Python's default is.
_PICKLE_PROTOCOL = 4

_ALLOWED_GLOBALS = frozenset({("collections", "OrderedDict")})

PathLike = Union[str, "os.PathLike[str]"]


class _IndexUnpickler(pickle.Unpickler):
    """An unpickler that can only build ``collections.OrderedDict`` (plus plain literals)."""

    def find_class(self, module: str, name: str):  # noqa: D102 - documented in the class
        if (module, name) in _ALLOWED_GLOBALS:
            return OrderedDict
        raise pickle.UnpicklingError(
            f"packed-folder index refers to {module}.{name}; only collections.OrderedDict "
            "is allowed, so it was refused (nothing was executed)"
        )


def load_index(meta: bytes, nfiles: int, source: str = "<index>") -> "OrderedDict":
    """Decodes and checks an index record (magic + pickled tree) of a packed file.

    Raises:
        CorruptFileError: the record is not an index, uses anything but ``OrderedDict``, or
            describes an impossible tree (bad names, indices outside ``[0, nfiles)``).

    Example:
        >>> meta = MAGIC + pickle.dumps(OrderedDict(a=0), protocol=4)
        >>> load_index(meta, nfiles=1)["a"]
        0
    """
    meta = bytes(meta)
    if len(meta) <= len(MAGIC) or not meta.startswith(MAGIC):
        raise CorruptFileError(f"{source} is not a packed folder (no index record at its end)")
    try:
        tree = _IndexUnpickler(io.BytesIO(meta[len(MAGIC):])).load()
    except CorruptFileError:
        raise
    except Exception as exc:  # any malformed pickle is a damaged index
        raise CorruptFileError(f"{source}: unreadable packed-folder index: {exc}") from exc
    try:
        _check_tree(tree, nfiles, source, PurePosixPath())
    except RecursionError as exc:
        raise CorruptFileError(f"{source}: packed-folder index is nested too deeply") from exc
    return tree


def _check_tree(tree: object, nfiles: int, source: str, where: PurePosixPath) -> None:
    if not isinstance(tree, OrderedDict):
        raise CorruptFileError(f"{source}: index entry {str(where)!r} is not a directory")
    for name, child in tree.items():
        # Names become paths when unpacking: anything that could climb out is refused.
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name:
            raise CorruptFileError(
                f"{source}: index holds an invalid name {name!r} in {str(where)!r}")
        if isinstance(child, OrderedDict):
            _check_tree(child, nfiles, source, where / name)
        elif type(child) is not int or not 0 <= child < nfiles:
            raise CorruptFileError(
                f"{source}: index entry {str(where / name)!r} points to {child!r}, "
                f"not to one of the {nfiles} files"
            )


class PackedFolder:
    """Read-only view of a file written by :func:`pack_folder`.

    Paths are ``/``-separated and relative to the packed folder's root (``"sub/a.json"``).
    Reading a missing path raises ``FileNotFoundError``, reading a directory
    ``IsADirectoryError``.

    Args:
        ffr_file: the packed ``.ffr`` file.
        check_data: verify each file's CRC-32 when reading it (the index is always checked).

    Example:
        >>> packed = PackedFolder("data.ffr")                       # doctest: +SKIP
        >>> packed.list("sub", recursive=True)                      # doctest: +SKIP
        ['a.json', 'deeper', 'deeper/z.txt', 'empty.dat']
        >>> packed.read_one("sub/a.json").tobytes()                 # doctest: +SKIP
        b'{"a": 1}'
    """

    def __init__(self, ffr_file: PathLike, check_data: bool = True) -> None:
        self.ffr_file = os.fspath(ffr_file)
        self.reader = FileReader(self.ffr_file, check_data)
        try:
            if self.reader.n == 0:
                raise CorruptFileError(f"{self.ffr_file} is not a packed folder (it is empty)")
            meta = self.reader.read_one(self.reader.n - 1)
            self.structure = load_index(meta, self.reader.n - 1, self.ffr_file)
        except BaseException:
            self.reader.close()
            raise

    def __repr__(self) -> str:
        return f"PackedFolder({self.ffr_file!r}, files={self.num_files()})"

    def __enter__(self) -> "PackedFolder":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __contains__(self, path: PathLike) -> bool:
        return self.exists(path)

    def close(self) -> None:
        """Closes the underlying reader."""
        self.reader.close()

    def num_files(self) -> int:
        """Number of files packed (the index record is not counted)."""
        return self.reader.n - 1

    def read_one(self, path: PathLike) -> np.ndarray:
        """Returns the bytes of one file as a uint8 array."""
        return self.reader.read_one(self._file_index(path))

    def read(self, paths: Iterable[PathLike]) -> List[np.ndarray]:
        """Returns the bytes of several files, in the order given, in one batched read."""
        if isinstance(paths, (str, bytes, os.PathLike)):
            raise TypeError("read() takes a list of paths; use read_one() for a single path")
        return self.reader.read([self._file_index(p) for p in paths])

    def exists(self, path: PathLike) -> bool:
        """True when ``path`` is a packed file or directory (``""`` is the root)."""
        return self._lookup(path) is not None

    def is_file(self, path: PathLike) -> bool:
        """True when ``path`` is a packed file."""
        return isinstance(self._lookup(path), int)

    def is_dir(self, path: PathLike) -> bool:
        """True when ``path`` is a packed directory."""
        return isinstance(self._lookup(path), OrderedDict)

    def list(
        self,
        path: Optional[PathLike] = None,
        list_file: bool = True,
        list_dir: bool = True,
        recursive: bool = False,
    ) -> List[str]:
        """Names in directory ``path`` (the root by default), in packing order.

        With ``recursive``, entries below sub-directories follow their directory, as
        ``/``-joined paths relative to ``path``.
        """
        node = self.structure if path is None else self._lookup(path)
        if node is None:
            raise FileNotFoundError(f"{path} does not exist in {self.ffr_file}")
        if not isinstance(node, OrderedDict):
            raise NotADirectoryError(f"{path} is a file, not a directory, in {self.ffr_file}")
        return list(_walk(node, PurePosixPath(), list_file, list_dir, recursive))

    def items(self) -> Iterator[tuple]:
        """Yields ``(relative path, sample index)`` for every packed file, in packing order."""
        return _files(self.structure, PurePosixPath())

    def _lookup(self, path: PathLike) -> Union[int, "OrderedDict", None]:
        node: Union[int, OrderedDict] = self.structure
        for part in PurePosixPath(os.fspath(path)).parts:
            if not isinstance(node, OrderedDict) or part not in node:
                return None
            node = node[part]
        return node

    def _file_index(self, path: PathLike) -> int:
        node = self._lookup(path)
        if node is None:
            raise FileNotFoundError(f"{path} does not exist in {self.ffr_file}")
        if not isinstance(node, int):
            raise IsADirectoryError(f"{path} is a directory, not a file, in {self.ffr_file}")
        return node


def _walk(node: "OrderedDict", prefix: PurePosixPath, list_file: bool, list_dir: bool,
          recursive: bool) -> Iterator[str]:
    for name, child in node.items():
        is_dir = isinstance(child, OrderedDict)
        if (list_dir if is_dir else list_file):
            yield str(prefix / name)
        if is_dir and recursive:
            yield from _walk(child, prefix / name, list_file, list_dir, recursive)


def _files(node: "OrderedDict", prefix: PurePosixPath) -> Iterator[tuple]:
    for name, child in node.items():
        if isinstance(child, OrderedDict):
            yield from _files(child, prefix / name)
        else:
            yield str(prefix / name), child


def _scan(folder: Path, counter: int = 0) -> tuple:
    """Builds the index of ``folder``: (tree, number of files, their paths in sample order)."""
    tree: OrderedDict = OrderedDict()
    paths: List[Path] = []
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        if child.is_dir():
            subtree, counter, subpaths = _scan(child, counter)
            tree[child.name] = subtree
            paths += subpaths
        elif child.is_file():
            tree[child.name] = counter
            paths.append(child)
            counter += 1
        else:
            # Sockets, FIFOs and dangling links have no content to pack (a FIFO would block).
            raise ValueError(f"cannot pack {child}: not a regular file or directory")
    return tree, counter, paths


def pack_folder(folder: PathLike, out_file: PathLike, verbose: bool = False) -> int:
    """Packs every file below ``folder`` into the single FFRecord file ``out_file``.

    Returns the number of files packed.

    The output is byte-identical to the reference implementation's for the same tree, and
    appears only when complete (a failure leaves nothing at ``out_file``).

    Args:
        folder: the directory to pack (symbolic links are followed).
        out_file: the file to write.
        verbose: show a progress bar.

    Example:
        >>> pack_folder("images/", "images.ffr", verbose=True)     # doctest: +SKIP
    """
    root = Path(folder)
    if not root.is_dir():
        raise NotADirectoryError(f"{folder} is not a directory")
    tree, nfiles, paths = _scan(root)
    meta = MAGIC + pickle.dumps(tree, protocol=_PICKLE_PROTOCOL)
    with FileWriter(out_file, nfiles + 1) as writer:
        for path in progress(paths, verbose, "pack", unit="file"):
            writer.write_one(path.read_bytes())
        writer.write_one(meta)
    return nfiles


def unpack_folder(ffr_file: PathLike, out_dir: PathLike, verbose: bool = False) -> int:
    """Writes every file of a packed FFRecord file below ``out_dir``; returns how many.

    Empty directories of the packed tree are recreated too. Existing files are overwritten.

    Example:
        >>> unpack_folder("images.ffr", "restored/")                # doctest: +SKIP
        1281167
    """
    out = Path(out_dir)
    with PackedFolder(ffr_file) as packed:
        for rel in packed.list(recursive=True, list_file=False):
            (out / rel).mkdir(parents=True, exist_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        entries = list(packed.items())
        for rel, index in progress(entries, verbose, "unpack", unit="file"):
            (out / rel).write_bytes(packed.reader.read_one(index))
        return len(entries)

