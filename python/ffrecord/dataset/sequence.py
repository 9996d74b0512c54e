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


def capacity(sizes: Any) -> Any:
    """The most elements whose table fits in a sample of ``sizes`` bytes (an ``int``, or an
    array giving ``int64``s), -1 for a sample too short to hold even the count: a stored
    count above it is damage."""
    if isinstance(sizes, int):
        return (sizes - HEADER) // ENTRY.itemsize if sizes >= HEADER else -1
    sizes = np.asarray(sizes, np.uint64)
    short = sizes < HEADER
    room = (np.where(short, HEADER, sizes) - np.uint64(HEADER)) // np.uint64(ENTRY.itemsize)
    return np.where(short, -1, room.astype(np.int64))


def table_end(counts: Any) -> Any:
    """Where the elements of a sample holding ``counts`` elements start."""
    return HEADER + ENTRY.itemsize * counts


def layout_damage(offsets: np.ndarray, lengths: np.ndarray, ends_of_tables: Any, sizes: Any,
                  firsts: np.ndarray | None = None) -> tuple[int, str] | None:
    """Where the first table entry that misplaces its element is (its position) and what is
    wrong, or ``None``. The entries are of ascending elements, in order; an element lies
    after its sample's table (``ends_of_tables``) and inside the sample (``sizes`` bytes),
    and after the one before it (they are stored back to back): so a damaged table cannot
    make a read ask for more bytes than the sample holds.

    The entries of several samples may be given back to back, ``ends_of_tables`` and
    ``sizes`` then holding each entry's sample's, and ``firsts`` marking the first entry of
    each sample (not compared with the entry before it). All the checks are vectorised."""
    ends = offsets + lengths
    for bad, what in ((offsets < ends_of_tables, "the element table points into itself"),
                      ((ends < offsets) | (ends > sizes),
                       "the element table points past the end of the sample")):
        if bad.any():
            return int(np.argmax(bad)), what
    overlap = offsets[1:] < ends[:-1]
    if firsts is not None:
        overlap &= ~firsts[1:]
    if overlap.any():
        return int(np.argmax(overlap)) + 1, "the element table's elements overlap or are out of order"
    return None


def fitting_count(sample: memoryview) -> int | None:
    """The element count of a whole sample, or ``None`` when the sample cannot hold it or
    its table (damage)."""
    n = count(sample) if len(sample) >= HEADER else None
    return n if n is not None and n <= capacity(len(sample)) else None


def count_damage(size: int) -> str:
    """Says that a sample of ``size`` bytes does not hold the element count it states."""
    return f"the element count does not fit a sample of {size} bytes"


def damage(sample: memoryview) -> str | None:
    """What is wrong with a stored sequence sample (its count, its table, the CRC-32 of
    each element), or ``None`` when it is intact.

    >>> sample = bytearray(pack([b"ab", b"cd"]))
    >>> damage(memoryview(sample)) is None
    True
    >>> sample[-1] ^= 1
    >>> damage(memoryview(sample))
    'element 1: CRC-32 mismatch'
    """
    n = fitting_count(sample)
    if n is None:
        return count_damage(len(sample))
    table = entries(sample, n)
    found = layout_damage(table["offset"], table["length"], table_end(n), len(sample))
    if found is not None:
        return found[1]
    for k, (offset, length, crc) in enumerate(table.tolist()):
        if zlib.crc32(sample[offset:offset + length]) != crc:
            return f"element {k}: CRC-32 mismatch"
    return None


def table_bytes(start: int, stop: int) -> tuple[int, int]:
    """``(offset, length)`` in a sample of the table entries of elements ``[start, stop)``."""
    return HEADER + ENTRY.itemsize * start, ENTRY.itemsize * (stop - start)


def stepped_runs(firsts: np.ndarray, stops: np.ndarray, step: int) -> tuple[np.ndarray, ...]:
    """Elements ``range(firsts[j], stops[j], step)`` of sequences ``j`` whose table entries
    ``[firsts[j], stops[j])`` lie back to back: ``(positions, owners, numbers, per)``, the
    place of each picked entry among them, its sequence, its element number, and how many
    each sequence gives.

    >>> [a.tolist() for a in stepped_runs(np.array([1, 0]), np.array([6, 2]), 2)]
    [[0, 2, 4, 5], [0, 0, 0, 1], [1, 3, 5, 0], [3, 1]]
    """
    runs = stops - firsts
    per = -(-runs // step)
    owners = np.repeat(np.arange(len(runs)), per)
    rank = np.arange(len(owners)) - np.repeat(np.cumsum(per) - per, per)
    return np.repeat(np.cumsum(runs) - runs, per) + rank * step, owners, firsts[owners] + rank * step, per
