"""Optional tqdm progress bars on stderr; tqdm is imported only when a bar is shown.

>>> list(progress([1, 2], enabled=False, desc="demo"))
[1, 2]
>>> with ProgressBar(3, enabled=False) as bar:
...     bar.update(2)
>>> bar.count
2
"""

from __future__ import annotations

import sys
from typing import Iterable, Optional, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], enabled: bool, desc: str, unit: str = "sample",
             total: Optional[int] = None) -> Iterable[T]:
    """``items`` itself, or wrapped in a bar that advances as they are consumed."""
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc=desc, unit=unit, file=sys.stderr)


class ProgressBar:
    """A bar advanced by hand (``update``); counts even when not shown."""

    def __init__(self, total: int, enabled: bool, desc: str = "dump",
                 unit: str = "sample") -> None:
        self.bar, self.count = None, 0
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=unit, desc=desc, file=sys.stderr)

    def update(self, k: int) -> None:
        self.count += k
        if self.bar is not None and k:
            self.bar.update(k)

    def __repr__(self) -> str:
        return f"ProgressBar(count={self.count}, shown={self.bar is not None})"

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc_info) -> None:
        if self.bar is not None:
            self.bar.close()
