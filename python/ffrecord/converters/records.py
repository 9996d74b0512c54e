"""Record files (TFRecord, OFRecord) and Python iterables converted into one plain FFRecord
file: the framing helper every length-prefixed record format reads through (``_Framing``:
header, payload, trailer and their checks), its two framings, and the writer of an iterable.
``ffrecord.convert`` re-exports these, with ``folder_to_ffr``.

Every converter writes one ``.ffr`` file whose samples are the input records in order
(input files in the order given; a directory stands for its files in natural order, so
``part-2`` comes before ``part-10``). The output appears only when complete.

* TFRecord: each record is ``u64 length | u32 masked CRC-32C of the length | data |
  u32 masked CRC-32C of the data`` (little-endian). Both checksums are verified unless
  ``verify=False``; a damaged or cut record raises :class:`ffrecord.CorruptFileError` naming
  the file, the record index and its byte offset. Whole-file gzip (TensorFlow's
  ``compression_type="GZIP"``) is detected and read transparently.
* OFRecord (OneFlow): ``part-N`` files of ``i64 length | serialized record`` entries.

Example:
    >>> from ffrecord.converters.records import tfrecord_to_ffr
    >>> tfrecord_to_ffr(["train-0.tfrecord", "train-1.tfrecord"], "train.ffr")  # doctest: +SKIP
    50000
"""

from __future__ import annotations

import gzip
import os
import re
import struct
import zlib
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Union

from .. import _paths
from .._lib import crc32c
from .._paths import PathLike
from .._progress import progress
from ..errors import CorruptFileError
from ..writer import FileWriter
from ._files import PIECE

__all__ = [
    "crc32c",
    "masked_crc32c",
    "read_tfrecord",
    "read_ofrecord",
    "write_iterable",
    "tfrecord_to_ffr",
    "ofrecord_to_ffr",
]

Inputs = Union[PathLike, Sequence[PathLike]]

_GZIP_MAGIC = b"\x1f\x8b"
_MASK_DELTA = 0xA282EAD8  # TFRecord's checksum masking constant


def masked_crc32c(data) -> int:
    """TFRecord's masked CRC-32C: the CRC rotated right by 15 bits plus a constant.

    >>> hex(masked_crc32c(b""))
    '0xa282ead8'
    """
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


@dataclass(frozen=True)
class _Framing:
    """How one record format frames its records; the checks raise ``CorruptFileError``."""

    name: str
    header: struct.Struct
    trailer_size: int
    check_header: Callable[[Path, int, int, bytes], None]
    check_data: Callable[[Path, int, int, bytes, bytes], None]

    def length(self, path: Path, index: int, offset: int, header: bytes) -> int:
        self.check_header(path, index, offset, header)
        length = self.header.unpack(header)[0]
        if length < 0:
            raise CorruptFileError(f"{path}: record {index} (byte {offset}): "
                                   f"negative length {length}")
        return length


def _check_tf_length(path: Path, index: int, offset: int, header: bytes) -> None:
    _expect_crc(path, index, offset, "length", _TF_HEADER.unpack(header)[1], header[:8])


def _check_tf_data(path: Path, index: int, offset: int, data: bytes, trailer: bytes) -> None:
    _expect_crc(path, index, offset, "data", struct.unpack("<I", trailer)[0], data)


def _expect_crc(path: Path, index: int, offset: int, what: str, stored: int,
                covered: bytes) -> None:
    computed = masked_crc32c(covered)
    if computed != stored:
        raise CorruptFileError(
            f"{path}: record {index} (byte {offset}): {what} checksum mismatch: "
            f"stored 0x{stored:08x}, computed 0x{computed:08x}"
        )


def _no_check(*_args) -> None:
    pass


_TF_HEADER = struct.Struct("<QI")
_TFRECORD = _Framing("TFRecord", _TF_HEADER, 4, _check_tf_length, _check_tf_data)
_TFRECORD_UNVERIFIED = _Framing("TFRecord", _TF_HEADER, 4, _no_check, _no_check)
_OFRECORD = _Framing("OFRecord", struct.Struct("<q"), 0, _no_check, _no_check)


def _records(path: Path, framing: _Framing) -> Iterator[bytes]:
    with _paths.open_regular(path, buffering=1 << 20) as raw:
        if raw.peek(2)[:2] == _GZIP_MAGIC:
            yield from _framed(path, framing, gzip.GzipFile(fileobj=raw), gzipped=True)
        else:
            yield from _framed(path, framing, raw, gzipped=False)


def _framed(path: Path, framing: _Framing, stream, gzipped: bool) -> Iterator[bytes]:
    index = offset = 0

    def read(size: int) -> bytes:
        pieces, left = [], size
        try:
            while left:
                piece = stream.read(min(left, PIECE))  # a corrupt length allocates nothing
                if not piece:
                    break
                pieces.append(piece)
                left -= len(piece)
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            if not gzipped:
                raise
            raise CorruptFileError(f"{path}: record {index} (byte {offset} of the "
                                   f"uncompressed stream): damaged gzip data: {exc}") from exc
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    while True:
        header = read(framing.header.size)
        if not header:
            return
        if len(header) < framing.header.size:
            raise _truncated(path, index, offset, framing, "header")
        length = framing.length(path, index, offset, header)
        data = read(length)
        trailer = read(framing.trailer_size)
        if len(data) < length or len(trailer) < framing.trailer_size:
            raise _truncated(path, index, offset, framing, f"{length}-byte payload")
        framing.check_data(path, index, offset, data, trailer)
        yield data
        index += 1
        offset += framing.header.size + length + framing.trailer_size


def _truncated(path: Path, index: int, offset: int, framing: _Framing,
               what: str) -> CorruptFileError:
    return CorruptFileError(f"{path}: record {index} (byte {offset}): {framing.name} "
                            f"file ends inside the record's {what} (truncated file?)")


def read_tfrecord(path: PathLike, *, verify: bool = True) -> Iterator[bytes]:
    """Yields the records of one TFRecord file (plain or gzip), checking both CRCs.

    Example:
        >>> for record in read_tfrecord("train-0.tfrecord"):       # doctest: +SKIP
        ...     example = tf.train.Example.FromString(record)
    """
    return _records(Path(path), _TFRECORD if verify else _TFRECORD_UNVERIFIED)


def read_ofrecord(path: PathLike) -> Iterator[bytes]:
    """Yields the serialized records of one OFRecord ``part-N`` file.

    Example:
        >>> sum(1 for _ in read_ofrecord("ofrecord/train/part-0"))  # doctest: +SKIP
        1251
    """
    return _records(Path(path), _OFRECORD)


def _natural_key(path: Path) -> list:
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", path.name)]


def _expand(inputs: Inputs, accept: Callable[[Path], bool]) -> List[Path]:
    """Input paths with each directory replaced by its accepted files in natural order."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    files: List[Path] = []
    for item in (Path(_paths.fspath(i)) for i in inputs):
        if item.is_dir():
            found = sorted((p for p in item.iterdir() if p.is_file() and accept(p)),
                           key=_natural_key)
            if not found:
                raise FileNotFoundError(f"{item} holds no input files")
            files += found
        else:
            # Refused before anything is written (a FIFO would block, a device never end);
            # the open checks again.
            _paths.check_regular(item.stat().st_mode, item)
            files.append(item)
    if not files:
        raise ValueError("no input files given")
    return files


def _visible(path: Path) -> bool:
    return not path.name.startswith((".", "_"))


def _ofrecord_part(path: Path) -> bool:
    return path.name.startswith("part-")


def write_iterable(samples: Iterable, out: PathLike, *, n: Optional[int] = None,
                   compression: Optional[str] = None, verbose: bool = False,
                   durable: bool = True) -> int:
    """Writes every bytes-like item of ``samples`` to ``out``; returns the number written.

    ``n`` (or ``len(samples)`` when it has one) lets the writer lay the file out directly;
    without it the samples are staged and the header is written at the end, which costs one
    more pass over the data on disk. Nothing is left at ``out`` if anything fails.
    ``durable=False`` skips the fsyncs (scratch output: see ``FileWriter``).

    Example:
        >>> write_iterable((str(i).encode() for i in range(1000)), "numbers.ffr")  # doctest: +SKIP
        1000
    """
    if n is None and hasattr(samples, "__len__"):
        n = len(samples)
    samples = progress(samples, verbose, f"write {os.fspath(out)}", total=n)
    with FileWriter(out, n, compression=compression, durable=durable) as writer:
        for sample in samples:
            writer.write_one(sample)
        return writer.count


def tfrecord_to_ffr(inputs: Inputs, out: PathLike, *, verify: bool = True,
                    compression: Optional[str] = None, verbose: bool = False) -> int:
    """Converts TFRecord files (or directories of them) into one ffr file; returns the count.

    Files whose names start with ``.`` or ``_`` (e.g. ``_SUCCESS``) are skipped in
    directories. Each record's bytes become one sample, unchanged.
    """
    files = _expand(inputs, _visible)
    records = chain.from_iterable(read_tfrecord(p, verify=verify) for p in files)
    return write_iterable(records, out, compression=compression, verbose=verbose)


def ofrecord_to_ffr(inputs: Inputs, out: PathLike, *, compression: Optional[str] = None,
                    verbose: bool = False) -> int:
    """Converts OFRecord ``part-N`` files (or their directory) into one ffr file."""
    files = _expand(inputs, _ofrecord_part)
    records = chain.from_iterable(map(read_ofrecord, files))
    return write_iterable(records, out, compression=compression, verbose=verbose)

