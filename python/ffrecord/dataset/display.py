"""Datapoints shown as one line of JSON (``ffrecord cat DATASET i``): numbers, text and JSON
values as they are, binary values summarised by their length and first bytes, arrays by
dtype, shape and first values, long sequences by their first elements and a count.

>>> import numpy as np
>>> print(format_datapoint({"label": 3, "image": b"\\x89PNG\\r\\n" + bytes(100),
...                         "boxes": np.zeros((2, 4), np.float32), "tags": list(range(20))}))
... # doctest: +NORMALIZE_WHITESPACE
{"label": 3, "image": {"bytes": 106, "hex": "89504e470d0a00000000000000000000", "text": ".PNG............"},
 "boxes": {"array": "float32", "shape": [2, 4], "values": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]},
 "tags": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, "(4 more)"]}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Callable

import numpy as np

from .codecs import BUILTIN

# Types whose built-in decoders give values worth showing as they are (or as arrays); any
# other type (bytes, images, npz, a user's own) is shown as its stored bytes.
_SHOWN_DECODED = ("int", "float", "utf8", "json", "msgpack", "array")
HEAD_BYTES = 16
HEAD_ELEMENTS = 16


def display_decoders(types: Iterable[str]) -> dict[str, Callable]:
    """A decoder for each type name in ``types`` that needs no user codec and no optional
    package: the built-in one for values shown as they are, ``bytes`` for the rest."""
    chosen: dict[str, Callable] = {}
    for name in types:
        codec = BUILTIN.get(name) if name in _SHOWN_DECODED else None
        chosen[name] = codec.decode if codec is not None and _available(codec) else bytes
    return chosen


def _available(codec: Any) -> bool:
    if codec.requires is None:
        return True
    import importlib.util

    return importlib.util.find_spec(codec.requires[0]) is not None


def display_value(value: Any) -> Any:
    """``value`` as something ``json.dumps`` takes, binary parts summarised."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        view = memoryview(value).cast("B")
        head = view[:HEAD_BYTES].tobytes()
        return {"bytes": view.nbytes, "hex": head.hex(),
                "text": "".join(chr(b) if 32 <= b < 127 else "." for b in head)}
    if isinstance(value, np.ndarray):
        return {"array": str(value.dtype), "shape": list(value.shape),
                "values": [display_value(v) for v in value.reshape(-1)[:8].tolist()]}
    if isinstance(value, np.generic):
        return display_value(value.item())
    if isinstance(value, Mapping):
        return {str(k): display_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        shown = [display_value(v) for v in value[:HEAD_ELEMENTS]]
        if len(value) > HEAD_ELEMENTS:
            shown.append(f"({len(value) - HEAD_ELEMENTS} more)")
        return shown
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def format_datapoint(datapoint: Mapping[str, Any]) -> str:
    """One datapoint as one line of JSON (see ``display_value``)."""
    return json.dumps(display_value(datapoint), ensure_ascii=False)
