"""``DatasetReader[i]`` of a dataset of plain fields (one file each, no sequence field):
one native call reads the datapoint's samples back to back into a reused buffer (see
``ffrecord._single``), and its values come out of that buffer.

The values whose decoder is a built-in one that unpacks (``bytes``, ``int``, ``float``)
come out in one ``struct`` unpack: a ``bytes`` value is copied straight from the buffer, a
number unpacked from its 8 bytes, with no view, slice or decoder call per field; the other
decoders are given a ``memoryview`` of their bytes, as in batched reads. The layout of the
last sizes seen is kept (datapoints of one dataset mostly have the same sizes); other sizes
cost a new ``Struct`` (0.3 µs). Measured here, 16 KiB ``bytes`` + ``int``, warm: the
Python work around the native call went from 2.9 µs to 2.0 µs a datapoint (the copy of
the 16 KiB value, 0.4 µs, included).

>>> import tempfile, os
>>> from ffrecord.dataset import DatasetReader, DatasetWriter
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"image": "bytes", "label": "int"}) as writer:
...     _ = writer.append({"image": b"\\x89PNG", "label": 7})
>>> DatasetReader(path)[0]
{'image': b'\\x89PNG', 'label': 7}
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Sequence

from .._single import SampleReads
from . import codecs

# The struct format code of each built-in decoder whose values unpack from the buffer as
# they are: a ``bytes`` value of any size, an 8-byte little-endian number.
_CODES: dict[Callable, str] = {bytes: "s", **codecs.STRUCT_CODES}


def dict_maker(names: Sequence[str]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """A function ``values -> {names[0]: values[0], names[1]: values[1], ...}``: a dict
    display compiled once for these names, as ``collections.namedtuple`` compiles its class.
    It builds a two-field dict in 0.11 µs where ``dict(zip(names, values))`` takes 0.33 µs
    (which asks the zip object for a ``keys`` attribute, then iterates it). The source holds
    only generated identifiers: the names are values in its namespace, never code.

    >>> dict_maker(["image", "label"])((b"\\x89PNG", 7))
    {'image': b'\\x89PNG', 'label': 7}
    """
    keys = {f"k{j}": name for j, name in enumerate(names)}
    display = ", ".join(f"k{j}: values[{j}]" for j in range(len(keys)))
    return eval(f"lambda values: {{{display}}}", keys)


class FieldDecodeFailed(Exception):
    """A decoder raised (its exception is ``__cause__``) while decoding ``field``."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class DatapointReads(SampleReads):
    """Reads datapoint ``i`` of ``readers`` (open ``FileReader`` objects, one per field, in
    the order of ``names``), decoded by ``decoders`` into a dict."""

    def __init__(self, readers: Sequence, names: Sequence[str], decoders: Sequence[Callable]) -> None:
        super().__init__(len(readers))
        self._readers = list(readers)
        self._names = tuple(names)
        self._as_dict = dict_maker(self._names)
        self._decoders = tuple(decoders)
        self._codes = tuple(_CODES.get(decode) for decode in self._decoders)
        # The layout of the last sizes seen, replaced whole so that threads read a consistent
        # one: (sizes, Struct.unpack_from for them, the fields decoded from views).
        self._layout: tuple = ((), None, ())

    def read(self, index: int) -> dict[str, Any]:
        """Datapoint ``index`` (already in ``[0, n)``); ``FieldDecodeFailed`` from a decoder
        that raised."""
        kit, sizes = self.lend(index, self._readers)
        known, unpack, viewed = self._layout
        if sizes != known:
            known, unpack, viewed = self._layout = self._layout_of(sizes)
        out = self._as_dict(unpack(kit[0]))
        if viewed:
            view = memoryview(kit[0])
            try:
                for name, decode, at, size in viewed:
                    out[name] = decode(view[at:at + size])
            except Exception as exc:
                raise FieldDecodeFailed(name) from exc
            del view
        self.give_back(kit)  # unless a decoder kept a view of the buffer
        return out

    def _layout_of(self, sizes: tuple[int, ...]) -> tuple:
        """The layout of values of these sizes: a ``Struct`` that unpacks every value it can
        (a ``bytes`` value, an 8-byte number) and puts ``b""`` in the place of the others,
        which their decoders then replace, given views: ``(name, decoder, offset, size)``."""
        parts, viewed, at = ["<"], [], 0
        for name, decode, code, size in zip(self._names, self._decoders, self._codes, sizes):
            if code == "s":
                parts.append(f"{size}s")
            elif code is not None and size == 8:
                parts.append(code)
            else:  # a number of another size fails in its decoder, as in batched reads
                parts.append(f"{size}x0s")
                viewed.append((name, decode, at, size))
            at += size
        return sizes, struct.Struct("".join(parts)).unpack_from, tuple(viewed)
