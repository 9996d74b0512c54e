"""How a datapoint's values look to a person, in two views:

- one line of JSON per datapoint (``ffrecord cat DATASET i``: ``format_datapoint``): numbers,
  text and JSON values as they are, binary values summarised by their length and first bytes,
  arrays by dtype, shape and first values, long sequences by their first elements and a count;
- one summary per value (``ffrecord show`` as text, ``ffrecord view`` as JSON for the page:
  ``summarize``, ``summarize_datapoints``), bounded whatever the value: a sequence by its
  first ``SHOWN_ELEMENTS`` elements, text by its first ``TEXT_LIMIT`` characters, each with
  the count of what is left out (``"more"``, shown as "… N more"); a value that cannot be
  read or decoded by its error, in its place.

Both read through the same decoders (``display_decoders``): values worth showing decoded
are decoded by the built-in codecs, every other one is kept as it is stored, so that an
image is described by its stored format and size without decoding its pixels, and served
as it is stored. ``stored_decoders`` keeps every value as stored (``info``, ``cat --field``).

>>> import numpy as np
>>> print(format_datapoint({"label": 3, "image": b"\\x89PNG\\r\\n" + bytes(100),
...                         "boxes": np.zeros((2, 4), np.float32), "tags": list(range(20))}))
... # doctest: +NORMALIZE_WHITESPACE
{"label": 3, "image": {"bytes": 106, "hex": "89504e470d0a00000000000000000000", "text": ".PNG............"},
 "boxes": {"array": "float32", "shape": [2, 4], "values": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]},
 "tags": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, "(4 more)"]}
>>> summary = summarize(np.arange(6, dtype=np.int16).reshape(2, 3), "array")
>>> summary["kind"], summary["dtype"], summary["shape"], summary["min"], summary["max"]
('array', 'int16', [2, 3], 0, 5)
>>> as_text(summary)
'array int16 (2, 3)  min 0  max 5'
>>> as_text(summarize("a caption", "utf8"))
"'a caption'"
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable

import numpy as np

from ..errors import CorruptFileError
from .codecs import BUILTIN
from .errors import DatasetError
from .columns import value_dtype
from .spec import parse_spec

# Types whose built-in decoders give values worth showing as they are (or as arrays); any
# other type (bytes, images, a user's own) is shown from its stored bytes.
_SHOWN_DECODED = ("int", "float", "utf8", "json", "msgpack", "array", "npz")
HEAD_BYTES = 16
HEAD_ELEMENTS = 16
SHOWN_ELEMENTS = 8  # elements of a sequence (arrays of an npz value) in a summary
TEXT_LIMIT = 2000  # characters of text (or of a JSON value written out) in a summary
HEX_BYTES = 64  # bytes of a binary value a summary shows


def head(values: Sequence, limit: int) -> tuple[Sequence, int]:
    """The first ``limit`` of ``values`` and how many more there are: how every view cuts
    a long value.

    >>> head("abcdef", 4), head([1, 2], 4)
    (('abcd', 2), ([1, 2], 0))
    """
    return values[:limit], max(0, len(values) - limit)


def display_decoders(types: Iterable[str]) -> dict[str, Callable]:
    """A decoder for each type name in ``types`` that needs no user codec and no optional
    package: the built-in one for values shown decoded, ``bytes`` (as stored) for the rest.

    >>> display_decoders(["int", "jpg", "my_type"])["jpg"]
    <class 'bytes'>
    """
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
        first = view[:HEAD_BYTES].tobytes()
        return {"bytes": view.nbytes, "hex": first.hex(),
                "text": "".join(chr(b) if 32 <= b < 127 else "." for b in first)}
    if isinstance(value, np.ndarray):
        return {"array": str(value.dtype), "shape": list(value.shape),
                "values": [display_value(v) for v in value.reshape(-1)[:8].tolist()]}
    if isinstance(value, np.generic):
        return display_value(value.item())
    if isinstance(value, Mapping):
        return {str(k): display_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        first, more = head(value, HEAD_ELEMENTS)
        return [display_value(v) for v in first] + ([f"({more} more)"] if more else [])
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def format_datapoint(datapoint: Mapping[str, Any]) -> str:
    """One datapoint as one line of JSON (see ``display_value``)."""
    return json.dumps(display_value(datapoint), ensure_ascii=False)


_MAGIC = {b"\xff\xd8\xff": "JPEG", b"\x89PNG\r\n\x1a\n": "PNG", b"GIF8": "GIF", b"RIFF": "WEBP"}


def stored_decoders(types: Iterable[str]) -> dict[str, Callable]:
    """A decoder for each type name in ``types`` keeping values as they are stored."""
    return dict.fromkeys(types, bytes)


def spec_types(spec: Mapping[str, str]) -> list[str]:
    """The type names of the fields of ``spec`` (``"jpg[]:zstd"`` is of type ``jpg``).

    >>> spec_types({"image": "jpg[]:zstd", "label": "int"})
    ['jpg', 'int']
    """
    return [field.type for field in parse_spec(spec).values()]


def image_format(data: bytes) -> str | None:
    """``"JPEG"``, ``"PNG"``, ... when ``data`` starts like an image file, else ``None``."""
    for magic, name in _MAGIC.items():
        if bytes(data[:len(magic)]) == magic:
            return name
    return None


def summarize(value: Any, kind: str) -> dict[str, Any]:
    """A JSON-able summary of one value of a field of type ``kind`` (``"utf8"``, ``"jpg[]"``...),
    of bounded size (see the module)."""
    base = kind.split(":")[0]
    if base.endswith("[]"):
        first, more = head(value, SHOWN_ELEMENTS)
        return {"kind": "sequence", "count": len(value), "items": [summarize(v, base[:-2]) for v in first],
                "more": more}
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        fmt = image_format(data)
        if fmt is not None:
            return {"kind": "image", "format": fmt, "bytes": len(data), **_image_size(data)}
        try:
            return {**_text(data.decode("utf-8")), "bytes": len(data)}
        except UnicodeDecodeError:
            return {"kind": "bytes", "bytes": len(data), "hex": data[:HEX_BYTES].hex()}
    if isinstance(value, str):
        return {**_text(value), "length": len(value)}
    if isinstance(value, (bool, int, float)):
        return {"kind": "number", "value": value}
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, dict) and value and all(isinstance(v, np.ndarray) for v in value.values()):
        first, more = head(list(value.items()), SHOWN_ELEMENTS)
        return {"kind": "arrays", "arrays": {k: _array(v) for k, v in first}, "more": more}
    return {**_text(json.dumps(value, default=repr, ensure_ascii=False)), "kind": "json"}


def _text(text: str) -> dict[str, Any]:
    first, more = head(text, TEXT_LIMIT)
    return {"kind": "text", "text": first, "more": more}


def error_summary(exc: BaseException) -> dict[str, Any]:
    """The summary standing for a value that could not be read or decoded."""
    return {"kind": "error", "error": f"{type(exc).__name__}: {exc}"}


def summarize_datapoints(dataset: Any, indices: Sequence[int], names: Sequence[str] | None,
                         spec: Mapping[str, str]) -> list[dict[str, dict[str, Any]]]:
    """``{field: summary}`` for each of ``indices`` of ``dataset`` (a reader opened with
    ``display_decoders``), the fields ``names`` (``None``: all). A value that cannot be read
    or decoded (a damaged sample, a decoder's error) is summarised by its error and the
    others are read one by one, so one bad value hides nothing else."""
    try:
        datapoints = dataset.read(list(indices), None if names is None else list(names))
    except (DatasetError, CorruptFileError):
        return [{name: _summarize_one(dataset, index, name, spec[name]) for name in names or spec}
                for index in indices]
    return [{name: summarize(value, spec[name]) for name, value in datapoint.items()}
            for datapoint in datapoints]


def _summarize_one(dataset: Any, index: int, name: str, kind: str) -> dict[str, Any]:
    try:
        value = dataset.read([index], [name])[0][name]
    except (DatasetError, CorruptFileError) as exc:
        return error_summary(exc)
    return summarize(value, kind)


def _array(array: np.ndarray) -> dict[str, Any]:
    summary: dict[str, Any] = {"kind": "array", "dtype": str(array.dtype), "shape": list(array.shape)}
    if array.size and (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        summary["min"], summary["max"] = array.min().item(), array.max().item()
    return summary


def _image_size(data: bytes) -> dict[str, Any]:
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            return {"width": image.width, "height": image.height, "mode": image.mode}
    except Exception:  # no Pillow, or a damaged image: the format is all we can tell
        return {}


def as_text(summary: Mapping[str, Any]) -> str:
    """One line (a few for a sequence) describing a summary, for the terminal."""
    kind = summary["kind"]
    more = f"… {summary['more']:,} more" if summary.get("more") else ""
    if kind == "sequence":
        items = "".join(f"\n  [{k}] {as_text(item)}" for k, item in enumerate(summary["items"]))
        return f"{summary['count']} element(s)" + items + (f"\n  {more}" if more else "")
    if kind == "image":
        size = f" {summary['width']}x{summary['height']} {summary['mode']}" if "width" in summary else ""
        return f"image {summary['format']}{size}, {summary['bytes']:,} bytes"
    if kind == "text":
        return repr(summary["text"]) + (f" {more} characters" if more else "")
    if kind == "number":
        return repr(summary["value"])
    if kind == "array":
        shape = "(" + ", ".join(map(str, summary["shape"])) + ("," if len(summary["shape"]) == 1 else "") + ")"
        bounds = f"  min {summary['min']}  max {summary['max']}" if "min" in summary else ""
        return f"array {summary['dtype']} {shape}{bounds}"
    if kind == "arrays":
        return "; ".join(f"{name}: {as_text(a)}" for name, a in summary["arrays"].items()) + (
            f"; {more}" if more else "")
    if kind == "bytes":
        return f"{summary['bytes']:,} bytes: {summary['hex']}{'…' if summary['bytes'] > HEX_BYTES else ''}"
    if kind == "error":
        return f"unreadable: {summary['error']}"
    return summary["text"] + (f" {more} characters" if more else "")


def size_stats(sizes: np.ndarray, bins: int = 20) -> dict[str, Any]:
    """Min, median, max, mean and a histogram (``bins`` equal-width bins) of sizes in bytes."""
    if not len(sizes):
        return {"count": 0}
    counts, edges = np.histogram(sizes, bins=bins)
    return {"count": int(len(sizes)), "min": int(sizes.min()), "median": float(np.median(sizes)),
            "max": int(sizes.max()), "mean": float(sizes.mean()),
            "histogram": {"counts": counts.tolist(), "edges": edges.tolist()}}


def field_sizes(dataset: Any, name: str) -> np.ndarray:
    """The stored size in bytes of field ``name`` in every datapoint (read from the indexes
    of the field files, not the data) of a ``DatasetReader`` or ``ShardedDatasetReader``."""
    members = getattr(dataset, "members", [dataset])
    parts = []
    for member in members:
        field = member.fields[name]
        if field.block is not None:  # a column: every value its type's size
            parts.append(np.full(len(member), value_dtype(field).itemsize, np.int64))
            continue
        reader = member.field_reader(name)
        parts.append(np.asarray(reader.sizes(np.arange(len(member), dtype=np.uint64)), np.int64))
    return np.concatenate(parts) if parts else np.empty(0, np.int64)
