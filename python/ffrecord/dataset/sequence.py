"""The stored form of a sequence value: an element table, then the elements.

A sample of a sequence field is::

    offset   size      field
    0        8         count, u64
    8        20·count  element table: per element, offset u64, length u64, CRC-32 u32
    8+20·count ...     the elements' bytes, back to back

(little-endian; an element's offset counts from the start of the sample). The table has a
fixed size per element, so the part describing elements ``[a, b)`` is found without reading
the rest, and with it the elements' bytes: a range of elements costs two ranged reads of
just those bytes. The CRC-32 (IEEE, zlib's) of each element is checked whenever the element
is read alone, since the file's own checksum covers only whole samples.

>>> sample = pack([b"ab", b"", b"cde"])
>>> count(memoryview(sample)), len(sample) == HEADER + 3 * ENTRY.itemsize + 5
(3, True)
>>> table = entries(memoryview(sample), 3)
>>> [bytes(sample[o:o + n]) for o, n in zip(table["offset"], table["length"])]
[b'ab', b'', b'cde']
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

HEADER = 8  # the u64 element count
ENTRY = np.dtype([("offset", "<u8"), ("length", "<u8"), ("crc", "<u4")])  # 20 bytes, packed


def pack(elements: list[Any]) -> bytes:
    """The sample storing ``elements`` (bytes-like objects)."""
    views = [memoryview(e).cast("B") if not isinstance(e, bytes) else e for e in elements]
    table = np.empty(len(views), ENTRY)
    lengths = np.fromiter(map(len, views), np.uint64, len(views))
    table["length"] = lengths
    table["offset"] = HEADER + ENTRY.itemsize * len(views) + np.cumsum(lengths) - lengths
    table["crc"] = np.fromiter((zlib.crc32(v) for v in views), np.uint32, len(views))
    return b"".join([np.uint64(len(views)).tobytes(), table.tobytes(), *views])


def count(sample: memoryview) -> int:
    """The element count at the start of a sample (or of the first ``HEADER`` bytes)."""
    return int.from_bytes(sample[:HEADER], "little")


def entries(sample: memoryview, n: int) -> np.ndarray:
    """The element table of a whole sample holding ``n`` elements."""
    return np.frombuffer(sample, ENTRY, n, offset=HEADER)


def table_bytes(start: int, stop: int) -> tuple[int, int]:
    """``(offset, length)`` in a sample of the table entries of elements ``[start, stop)``."""
    return HEADER + ENTRY.itemsize * start, ENTRY.itemsize * (stop - start)
