"""Checking every sample of a reader's range: one path, the library's verification a page
of bad samples at a time, behind ``FileReader.bad_samples``; ``verify`` and ``validate``
are spellings of it.

Bad samples are rare: a verification call first has room for ``_VERIFY_PAGE`` of them (and
``_VERIFY_TEXT`` bytes of their messages); each call that stops early for want of room
doubles it, up to ``_VERIFY_GROWTH`` times.
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from . import _lib
from ._progress import ProgressBar
from .errors import E_CHECKSUM, E_CORRUPT, CorruptFileError

_PROGRESS_CHUNK = 1 << 16  # samples checked between two updates of a progress bar
_VERIFY_PAGE = 256
_VERIFY_TEXT = 64 << 10
_VERIFY_GROWTH = 64
_REASONS = {E_CHECKSUM: "checksum", E_CORRUPT: "corrupt"}


class BadSample(NamedTuple):
    """A damaged sample found by ``FileReader.bad_samples``."""

    index: int  #: in the dataset
    reason: str  #: ``"checksum"`` (its bytes do not match their CRC-32) or ``"corrupt"``
    message: str  #: the library's account of it, naming the file and the sample


class Verification:
    """``FileReader``'s checks of its samples (a mixin: it needs ``n`` and ``_live``)."""

    n: int

    def bad_samples(self, start: int = 0, count: int | None = None, *,
                    progress: bool = False) -> Iterator[BadSample]:
        """Checks every sample in ``[start, start+count)`` (its place in its file, its CRC-32
        and, compressed, that it decodes), whatever ``check_data`` is, and the metadata of
        every file the range touches; yields a ``BadSample`` for each bad one, in order, with
        the library's account of it. Damaged metadata raises ``CorruptFileError`` once every
        sample has been checked. ``progress`` shows a bar (rate, ETA) on stderr.

        >>> [(b.index, b.reason) for b in r.bad_samples()]   # doctest: +SKIP
        [(2, 'checksum')]
        """
        start, end = self._range(start, count)
        step = _PROGRESS_CHUNK if progress else end - start
        page, text_len = _VERIFY_PAGE, _VERIFY_TEXT
        nbad, next_ = ctypes.c_uint64(), ctypes.c_uint64()
        damaged_metadata: Exception | None = None
        with ProgressBar(end - start, progress, "verify") as bar:
            while True:
                stop = min(end, start + step)
                indices, reasons = np.empty(page, np.uint64), np.empty(page, np.int32)
                text = ctypes.create_string_buffer(text_len)
                dll, handle = self._live()
                status = dll.ffr_reader_verify(
                    handle, start, stop - start, indices.ctypes.data, reasons.ctypes.data, page,
                    text, text_len, ctypes.byref(nbad), ctypes.byref(next_))
                if status in (E_CHECKSUM, E_CORRUPT):
                    damaged_metadata = damaged_metadata or _lib.error_for(status)
                else:
                    _lib.check(status)
                k = nbad.value
                messages = text.raw.split(b"\0", k)[:k]
                for index, reason, message in zip(indices[:k].tolist(), reasons[:k].tolist(),
                                                  messages):
                    yield BadSample(index, _REASONS.get(reason, "corrupt"),
                                    message.decode("utf-8", "replace"))
                bar.update(next_.value - start)
                if next_.value >= end:
                    break
                if next_.value < stop and page < _VERIFY_PAGE * _VERIFY_GROWTH:  # out of room
                    page, text_len = 2 * page, 2 * text_len
                start = next_.value
        if damaged_metadata is not None:
            raise damaged_metadata

    def verify(self, start: int = 0, count: int | None = None, *,
               progress: bool = False) -> list[int]:
        """The dataset indices of the bad samples in ``[start, start+count)``: what
        ``bad_samples`` finds, without the messages. ``CorruptFileError`` when a file's
        metadata is damaged. ``progress`` shows a bar (rate, ETA) on stderr.

        >>> r.verify(progress=True)                     # doctest: +SKIP
        []
        """
        return [bad.index for bad in self.bad_samples(start, count, progress=progress)]

    def validate(self) -> None:
        """Raises ``CorruptFileError`` naming the file and sample of the first bad sample
        (and how many there are), after checking the whole dataset.

        >>> r.validate()                                # doctest: +SKIP
        """
        first, total = None, 0
        for bad in self.bad_samples():
            first = first or bad
            total += 1
        if first is not None:
            more = f" ({total} bad samples in all)" if total > 1 else ""
            raise CorruptFileError(first.message + more)

    def _range(self, start: int, count: int | None) -> tuple[int, int]:
        """``[start, end)`` from a start (negative counts from the end) and a count; the
        library judges the range, once it is sure to fit its 64-bit arguments."""
        start = operator.index(start)
        start = start + self.n if start < 0 else start
        count = self.n - start if count is None else operator.index(count)
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if not 0 <= start < 2**64 or count >= 2**64 - start:
            raise IndexError(f"range [{start}, {start}+{count}) is beyond the dataset of "
                             f"{self.n} samples")
        return start, start + count
