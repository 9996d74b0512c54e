"""Rendering figures for people."""

from __future__ import annotations

import math


def human(x: float | None) -> str:
    """A short rendering of a figure.

    Example:
        >>> human(1234567), human(0.000012), human(None)
        ('1.23M', '1.2e-05', '-')
    """
    if x is None or not math.isfinite(x):
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2g}"
