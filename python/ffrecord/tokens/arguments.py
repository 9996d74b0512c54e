"""Checks of the numbers token datasets take as arguments: each error names the argument.
Integers are what ``operator.index`` takes (Python and numpy integers), never ``bool``, a
float or a string, so that nothing is rounded or wrapped into another value.

>>> token_id(50_256, "separator", np.dtype("<u2"))
50256
>>> token_id(2**64 + 5, "separator", np.dtype("<u2"))
Traceback (most recent call last):
...
ffrecord.tokens.errors.TokenRangeError: separator 18446744073709551621 is not a token id of this dataset: its tokens are uint16, 0 to 65535
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .errors import BlockSizeError, TokenRangeError


def integer(value: Any, name: str) -> int:
    """``value`` as an ``int``; ``TypeError`` naming ``name`` when it is not an integer."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} {value!r:.40}") from None


def at_least(value: Any, name: str, low: int = 1) -> int:
    """``value``, an integer ``>= low`` (``ValueError``/``TypeError`` naming ``name``):
    counts and sizes at least 1, seeds and worker counts at least 0."""
    number = integer(value, name)
    if number < low:
        raise ValueError(f"{name} must be at least {low}, got {number}")
    return number


def token_id(value: Any, name: str, dtype: np.dtype) -> int:
    """``value``, a token id the dataset's token ``dtype`` holds (``TokenRangeError``
    naming ``name`` when outside it, ``TypeError`` when not an integer)."""
    number = integer(value, name)
    high = int(np.iinfo(dtype).max)
    if not 0 <= number <= high:
        raise TokenRangeError(f"{name} {number} is not a token id of this dataset: its tokens are "
                              f"{dtype.name}, 0 to {high}")
    return number


def block_size(value: Any, available: int, what: str) -> int:
    """A block size of at least 1 and at most ``available`` tokens (``BlockSizeError``;
    ``what`` says what the dataset holds)."""
    try:
        size = integer(value, "block_size")
    except TypeError as exc:
        raise BlockSizeError(str(exc)) from None
    if size <= 0:
        raise BlockSizeError(f"block_size must be positive, got {size}")
    if size > available:
        raise BlockSizeError(f"block_size {size} is larger than the dataset: {what}")
    return size
