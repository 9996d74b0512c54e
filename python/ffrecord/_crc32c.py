"""CRC-32C (Castagnoli), the checksum of TFRecord framing, without a compiled dependency.

A byte-at-a-time table loop in Python runs at about 6 MB/s. Large buffers go through numpy
instead: the buffer is cut into ``K`` lanes of ``_LANE`` bytes whose CRC registers advance
together, one vectorised table step per byte column, and the lane registers are then folded
into one with the linear "append _LANE zero bytes" operator (a CRC register is linear over
GF(2), so that operator is four 256-entry tables): about 18 MB/s at 64 KiB, 65 MB/s at
1 MiB, 150 MB/s at 8 MiB (the byte loop wins below 32 KiB). When a compiled
CRC-32C package (``google-crc32c`` or ``crc32c``) is installed it is used instead.

>>> hex(crc32c(b"123456789"))
'0xe3069283'
>>> crc32c(bytes(range(256)) * 100) == _crc32c_bytewise(bytes(range(256)) * 100)
True
"""

from __future__ import annotations

from typing import Callable, List, Optional

import numpy as np

__all__ = ["crc32c", "masked_crc32c"]

_POLY = 0x82F63B78  # Castagnoli polynomial, bit-reversed
_MASK_DELTA = 0xA282EAD8  # TFRecord's checksum masking constant
_LANE = 512  # bytes per lane: the fold tables are built once for this length
_MIN_VECTOR = 64 * _LANE  # below 32 KiB the plain loop beats numpy's per-column cost


def _table() -> List[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _table()
_TABLE_NP = np.array(_TABLE, dtype=np.uint32)


def _advance(register: int, data) -> int:
    """The raw register after feeding ``data`` (no initial value, no final xor)."""
    table = _TABLE
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


def _crc32c_bytewise(data: bytes) -> int:
    return _advance(0xFFFFFFFF, data) ^ 0xFFFFFFFF


def _zero_feed_tables() -> np.ndarray:
    """tables[b][v] = register (v << 8b) after _LANE zero bytes: the fold operator."""
    registers = (np.arange(256, dtype=np.uint32)[None, :]
                 << (8 * np.arange(4, dtype=np.uint32))[:, None]).ravel()
    for _ in range(_LANE):
        registers = _TABLE_NP[registers & 0xFF] ^ (registers >> 8)
    return registers.reshape(4, 256)


_fold_tables: Optional[List[List[int]]] = None


def _crc32c_lanes(data: bytes) -> int:
    global _fold_tables
    if _fold_tables is None:
        _fold_tables = _zero_feed_tables().tolist()
    lanes = len(data) // _LANE
    block = np.frombuffer(data, dtype=np.uint8, count=lanes * _LANE).reshape(lanes, _LANE)
    registers = np.zeros(lanes, dtype=np.uint32)
    registers[0] = 0xFFFFFFFF  # the initial value enters through the first lane only
    columns = np.ascontiguousarray(block.T)
    for column in columns:
        registers = _TABLE_NP[(registers ^ column) & 0xFF] ^ (registers >> 8)
    t0, t1, t2, t3 = _fold_tables
    total = 0
    for lane in registers.tolist():
        total = (t0[total & 0xFF] ^ t1[(total >> 8) & 0xFF] ^ t2[(total >> 16) & 0xFF]
                 ^ t3[total >> 24] ^ lane)
    return _advance(total, memoryview(data)[lanes * _LANE:]) ^ 0xFFFFFFFF


def _crc32c_python(data: bytes) -> int:
    return _crc32c_lanes(data) if len(data) >= _MIN_VECTOR else _crc32c_bytewise(data)


def _compiled() -> Optional[Callable[[bytes], int]]:
    try:
        import google_crc32c

        if google_crc32c.implementation == "c":
            return google_crc32c.value
    except ImportError:
        pass
    try:
        import crc32c as crc32c_package

        return crc32c_package.crc32c
    except ImportError:
        return None


_implementation: Callable[[bytes], int] = _compiled() or _crc32c_python


def crc32c(data) -> int:
    """CRC-32C of a bytes-like object."""
    return _implementation(bytes(data))


def masked_crc32c(data) -> int:
    """TFRecord's masked CRC-32C: the CRC rotated right by 15 bits plus a constant.

    >>> hex(masked_crc32c(b""))
    '0xa282ead8'
    """
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
