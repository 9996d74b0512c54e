"""Integer arguments, checked: what ``operator.index`` takes (Python and numpy integers),
never ``bool``, a float or a string, so that nothing is rounded or wrapped into another
value; each error names the argument.

>>> at_least(3, "window", 1)
3
>>> at_least(1.5, "window", 1)
Traceback (most recent call last):
...
TypeError: window must be an integer, got 1.5
"""

from __future__ import annotations

import operator
from typing import Any


def integer(value: Any, name: str) -> int:
    """``value`` as an ``int``; ``TypeError`` naming ``name`` when it is not an integer."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r:.80}") from None


def at_least(value: Any, name: str, minimum: int = 0) -> int:
    """``value``, an integer ``>= minimum`` (``ValueError``/``TypeError`` naming ``name``)."""
    value = integer(value, name)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value
