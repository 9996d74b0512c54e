"""Pack a directory tree into one FFRecord file and read files back by path.

The layout is the reference implementation's, so packed files move freely between the two:
every regular file of the tree is one sample, in depth-first order with the entries of each
directory sorted by name, and one more, last sample holds the index: the magic bytes
``b"piouhjgbr"`` followed by a pickled ``collections.OrderedDict`` mapping each name to its
sample index (a file) or to a nested ``OrderedDict`` (a directory).

The index is a pickle, and unpickling untrusted data can run arbitrary code. It is therefore
read with a restricted unpickler that can build ``OrderedDict`` objects and nothing else, and
the resulting tree is checked (names, types, index range, no shared sub-trees) before it is
used. Unpacking never follows a symbolic link below the target directory.

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

import contextlib
import errno
import io
import os
import pickle
import secrets
import stat
from collections import OrderedDict
from itertools import chain
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator, List, Optional, Union

import numpy as np

from . import _paths
from ._paths import PathLike
from ._progress import ProgressBar
from .converters.records import write_iterable
from .errors import CorruptFileError
from .reader import FileReader

__all__ = ["MAGIC", "PackedFolder", "pack_folder", "unpack_folder", "load_index"]

#: First bytes of the index record that ends every packed file.
MAGIC = b"piouhjgbr"

# The reference pickles the index with Python's default protocol of its time (4). Pinning it
# keeps our files byte-identical to the reference's whatever the running Python's default is.
_PICKLE_PROTOCOL = 4

_ALLOWED_GLOBALS = frozenset({("collections", "OrderedDict")})



# The pure-Python unpickler, not the C one: the C one sizes its memo by the largest index a
# PUT opcode names, so that a 9-byte pickle naming index 2**30 allocates and clears 16 GiB.
# This one keeps its memo in a dict. It is slower (3.5 s against 0.8 s for the index of
# 1.28 million files), which only the largest packs notice, once, at open.
class _IndexUnpickler(pickle._Unpickler):  # type: ignore[name-defined]
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

    The work is bounded by the size of ``meta``: every directory of the tree must be a
    distinct object (a pickle can name one object many times, and a tree of shared
    sub-trees is exponentially larger than its pickle) and every file a distinct index.

    Raises:
        CorruptFileError: the record is not an index, uses anything but ``OrderedDict``, or
            describes an impossible tree (bad names, indices outside ``[0, nfiles)``, a
            sub-tree or a file index reached twice).

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
    except Exception as exc:  # any malformed pickle is a damaged index
        raise CorruptFileError(f"{source}: unreadable packed-folder index: {exc}") from exc
    _check_tree(tree, nfiles, source)
    return tree


def _check_tree(tree: object, nfiles: int, source: str) -> None:
    if type(tree) is not OrderedDict:
        raise CorruptFileError(f"{source}: the packed-folder index is not a directory tree")
    dirs = {id(tree)}
    files = bytearray(nfiles)
    # _walk descends into a directory only after its entry was checked here.
    for parent, name, child in _walk(tree, recursive=True):
        # Names become paths when unpacking: anything that could climb out is refused.
        if type(name) is not str or name in ("", ".", "..") or "/" in name or "\0" in name:
            raise CorruptFileError(
                f"{source}: index holds an invalid name {name!r} in {str(parent)!r}")
        if type(child) is OrderedDict:
            if id(child) in dirs:
                raise CorruptFileError(
                    f"{source}: index directory {str(parent / name)!r} is a sub-tree seen "
                    "before (shared or cyclic): not a tree of a real folder")
            dirs.add(id(child))
        elif type(child) is not int or not 0 <= child < nfiles:
            raise CorruptFileError(
                f"{source}: index entry {str(parent / name)!r} points to {child!r}, "
                f"not to one of the {nfiles} files"
            )
        elif files[child]:
            raise CorruptFileError(
                f"{source}: index entry {str(parent / name)!r} points to file {child}, "
                "which another entry names too")
        else:
            files[child] = 1


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

    def read_one(self, fname: PathLike) -> np.ndarray:
        """Returns the bytes of packed file ``fname`` as a uint8 array."""
        return self.reader.read_one(self._file_index(fname))

    def read(self, fnames: Iterable[PathLike]) -> List[np.ndarray]:
        """Returns the bytes of several files, in the order given, in one batched read."""
        if isinstance(fnames, (str, bytes, os.PathLike)):
            raise TypeError("read() takes a list of paths; use read_one() for a single path")
        return self.reader.read([self._file_index(p) for p in fnames])

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
        return [str(parent / name) for parent, name, child in _walk(node, recursive)
                if (list_dir if type(child) is OrderedDict else list_file)]

    def items(self) -> Iterator[tuple]:
        """Yields ``(relative path, sample index)`` for every packed file, in packing order."""
        return ((str(parent / name), child) for parent, name, child in _walk(self.structure)
                if type(child) is int)

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


def _walk(tree: "OrderedDict", recursive: bool = True) -> Iterator[tuple]:
    """Yields ``(parent path, name, entry)`` for the entries of ``tree``, depth first, each
    directory before its contents; without recursion only those of ``tree`` itself.

    It iterates (no recursion limit on depth) and enters a directory only when asked for
    the next entry after it, so the caller may stop at any entry before its contents.
    """
    stack = [(PurePosixPath(), iter(tree.items()))]
    while stack:
        parent, entries = stack[-1]
        for name, child in entries:
            yield parent, name, child
            if recursive and type(child) is OrderedDict:
                stack.append((parent / name, iter(child.items())))
                break
        else:
            stack.pop()


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
    root, out_file = Path(_paths.fspath(folder)), _paths.fspath(out_file)
    if not root.is_dir():
        raise NotADirectoryError(f"{folder} is not a directory")
    tree, nfiles, paths = _scan(root)
    meta = MAGIC + pickle.dumps(tree, protocol=_PICKLE_PROTOCOL)
    write_iterable(chain(map(_contents, paths), [meta]), out_file, n=nfiles + 1, verbose=verbose)
    return nfiles


def _contents(path: Path) -> bytes:
    with _paths.open_regular(path) as f:  # it may have become a FIFO since the scan
        return f.read()


def unpack_folder(ffr_file: PathLike, out_dir: PathLike, verbose: bool = False) -> int:
    """Writes every file of a packed FFRecord file below ``out_dir``; returns how many.

    Empty directories of the packed tree are recreated too. An existing file is replaced
    (each file appears complete, by a rename); a symbolic link in the way is refused with
    ``FileExistsError`` rather than followed, wherever it points, so nothing outside
    ``out_dir`` is ever written (``out_dir`` itself may be a link). A file where the tree
    has a directory raises ``NotADirectoryError``, a directory where it has a file
    ``IsADirectoryError``.

    Example:
        >>> unpack_folder("images.ffr", "restored/")                # doctest: +SKIP
        1281167
    """
    out = Path(_paths.fspath(out_dir))
    with PackedFolder(ffr_file) as packed, \
            ProgressBar(packed.num_files(), verbose, "unpack", unit="file") as bar:
        out.mkdir(parents=True, exist_ok=True)
        # dirs[k] is the open directory at depth k of the entry being extracted: every name
        # is resolved relative to its directory's descriptor and never through a link.
        dirs = [os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
        try:
            for parent, name, child in _walk(packed.structure):
                while len(dirs) > len(parent.parts) + 1:
                    os.close(dirs.pop())
                shown = out / parent / name
                if type(child) is OrderedDict:
                    dirs.append(_enter_directory(dirs[-1], name, shown))
                else:
                    _replace_file(dirs[-1], name, shown, packed.reader.read_one(child))
                    bar.update(1)
        finally:
            for fd in dirs:
                os.close(fd)
        return bar.count


_NO_LINKS = "unpacking never writes through a symbolic link"


def _existing(dir_fd: int, name: str) -> Optional[os.stat_result]:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def _enter_directory(dir_fd: int, name: str, shown: Path) -> int:
    """Opens (making it first if needed) the directory ``name`` in ``dir_fd``, not a link."""
    found = _existing(dir_fd, name)
    if found is None:
        try:
            os.mkdir(name, dir_fd=dir_fd)
        except FileExistsError:  # made meanwhile: O_NOFOLLOW below still refuses a link
            pass
    elif stat.S_ISLNK(found.st_mode):
        raise FileExistsError(errno.EEXIST, f"a symbolic link is in the way; {_NO_LINKS}",
                              str(shown))
    elif not stat.S_ISDIR(found.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "a file is in the way of a packed directory",
                                 str(shown))
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                   dir_fd=dir_fd)


def _replace_file(dir_fd: int, name: str, shown: Path, data: np.ndarray) -> None:
    """Writes ``data`` to a new file in ``dir_fd`` and renames it to ``name``: the file is
    complete or absent, and a link at ``name`` is never followed."""
    found = _existing(dir_fd, name)
    if found is not None and stat.S_ISLNK(found.st_mode):
        raise FileExistsError(errno.EEXIST, f"a symbolic link is in the way; {_NO_LINKS}",
                              str(shown))
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise IsADirectoryError(errno.EISDIR, "a directory is in the way of a packed file",
                                str(shown))
    temp = f".ffrecord-unpack-{secrets.token_hex(8)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):  # keep the error that matters
            os.unlink(temp, dir_fd=dir_fd)
        raise
