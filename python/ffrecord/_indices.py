"""Normalising sample indices: anything integer-like to a contiguous ``uint64`` array.

Accepted: Python and numpy integers, sequences of them, numpy arrays, and objects that
convert like arrays (torch tensors, via ``__array__``/``__index__``, without importing torch).
Negative indices count from the end. Booleans, floats and strings are ``TypeError``.
Indices past the end are left for the library to reject (``IndexError`` with its message).

>>> import numpy as np
>>> index_array([0, -1, np.int32(2)], n=10).tolist()
[0, 9, 2]
>>> one_index(-2, n=10)
8
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

_EMPTY = np.empty(0, np.uint64)
_INT64, _UINT64 = np.dtype(np.int64), np.dtype(np.uint64)


def one_index(index: Any, n: int) -> int:
    """One index as an ``int`` in ``[0, n)`` (negative counts from the end)."""
    if isinstance(index, (bool, np.bool_)):
        raise TypeError(f"sample index must be an integer, not {type(index).__name__}")
    try:
        value = operator.index(index)
    except TypeError:
        raise TypeError(
            f"sample index must be an integer, not {type(index).__name__}"
        ) from None
    if not -n <= value < n:
        raise IndexError(f"sample index {value} out of range for {n} samples")
    return value + n if value < 0 else value


def unchecked_indices(indices: Any) -> np.ndarray | None:
    """A contiguous 1-D ``int64`` array (a shuffled order's slice: the commonest batch) as
    ``uint64`` without looking at its values, else None. Only for a library call that checks
    every index before it reads anything, and that is made again through ``index_array``
    when it refuses one: a negative index (counted from the end) is then past any end.
    ``index_array`` costs 3.2 µs on such a batch (its minimum alone 1.3 µs), this 0.6 µs.

    >>> unchecked_indices(np.array([3, -1])).tolist(), unchecked_indices([3])
    ([3, 18446744073709551615], None)
    """
    if (type(indices) is np.ndarray and indices.dtype is _INT64 and indices.ndim == 1
            and indices.flags.c_contiguous):
        return indices.view(_UINT64)
    return None


def index_array(indices: Any, n: int) -> np.ndarray:
    """Indices as a contiguous ``uint64`` array (a view of the input when it already is one)."""
    if isinstance(indices, np.ndarray):
        arr = indices
    elif isinstance(indices, (str, bytes, bytearray)) or not (
        hasattr(indices, "__len__") or hasattr(indices, "__array__")
    ):
        raise TypeError(
            f"indices must be a sequence or array of integers, not {type(indices).__name__}"
            " (use read_one for a single index)"
        )
    elif len(indices) == 0:
        return _EMPTY
    else:
        try:
            arr = np.asarray(indices)
        except ValueError as exc:  # ragged nesting
            raise TypeError(f"indices must be a flat sequence of integers: {exc}") from None
    if arr.ndim != 1:
        if arr.ndim == 0:
            raise TypeError("indices must be a sequence of integers (use read_one for one)")
        raise ValueError(f"indices must be one-dimensional, got shape {arr.shape}")
    kind = arr.dtype.kind
    if arr.dtype == np.int64 and type(indices) is list and min(indices) >= 0:
        return arr.view(np.uint64)  # a sampler's batch: the list's min is cheaper than the array's
    if kind == "u":
        return np.ascontiguousarray(arr, dtype=np.uint64)
    if kind == "i":
        return _from_signed(arr, n)
    if kind == "O":
        return _from_signed(np.array([one_index(i, n) for i in arr], dtype=np.int64), n)
    if arr.size == 0:
        return _EMPTY
    raise TypeError(f"indices must be integers, not {arr.dtype} values")


def _from_signed(arr: np.ndarray, n: int) -> np.ndarray:
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size and arr.min() < 0:
        arr = np.where(arr < 0, arr + n, arr)
        if arr.min() < 0:
            raise IndexError(f"sample index {int(arr.min()) - n} out of range for {n} samples")
    return arr.view(np.uint64)
