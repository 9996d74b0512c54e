"""Checks of the token ids and block sizes token datasets take as arguments, each error
naming the argument (integers as ``ffrecord._integers`` takes them: never rounded or
wrapped into another value).

>>> token_id(50_256, "separator", np.dtype("<u2"))
50256
>>> token_id(2**64 + 5, "separator", np.dtype("<u2"))
Traceback (most recent call last):
...
ffrecord.tokens.errors.TokenRangeError: separator 18446744073709551621 is not a token id of this dataset: its tokens are uint16, 0 to 65535
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._integers import integer
from .errors import BlockSizeError, TokenRangeError


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
