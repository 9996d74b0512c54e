"""Built-in codecs of structured datasets: how a field's values become bytes and back.

An encoder takes a value and returns a bytes-like object (``bytes``, ``bytearray``, a
``memoryview`` or a C-contiguous numpy array). A decoder takes a ``memoryview`` of the
stored bytes (a view into the batch buffer: copy it, e.g. ``bytes(view)``, to keep it past
the value's life) and returns the value. User codecs are plain dicts of such functions keyed
by type name, given to the writer (``encoders``) and the reader (``decoders``); they take
precedence over the built-ins of the same name. Pickle is never a built-in codec.

>>> BUILTIN["int"].encode(-2).hex(), BUILTIN["int"].decode(memoryview(BUILTIN["int"].encode(2**62)))
('feffffffffffffff', 4611686018427387904)
>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> BUILTIN["array"].decode(memoryview(BUILTIN["array"].encode(a))).tolist()
[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
"""

from __future__ import annotations

import importlib
import io
import json
import operator
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .errors import MissingDependencyError, SpecError
from .spec import FIXED_TYPES

Encoder = Callable[[Any], Any]
Decoder = Callable[[memoryview], Any]


@dataclass(frozen=True)
class Codec:
    encode: Encoder
    decode: Decoder
    requires: tuple[str, str] | None = None  # (module to import, package to install)


# ---- bytes, text, numbers --------------------------------------------------------------

def _encode_bytes(value: Any) -> Any:
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(f"a 'bytes' value must be bytes-like, not {type(value).__name__}") from None
    if not view.c_contiguous:
        raise ValueError("a 'bytes' value must be a C-contiguous buffer")
    return value


def _encode_utf8(value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"a 'utf8' value must be str, not {type(value).__name__}")
    return value.encode("utf-8")


_INT = struct.Struct("<q")
_FLOAT = struct.Struct("<d")


def _encode_int(value: Any) -> bytes:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("an 'int' value must be an integer, not bool")
    number = operator.index(value)
    if not -(2**63) <= number < 2**63:
        raise OverflowError(f"an 'int' value must fit in 64 bits (signed), got {number}")
    return _INT.pack(number)


def _decode_int(view: memoryview) -> int:
    return _INT.unpack(view)[0]


def _encode_float(value: Any) -> bytes:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"a 'float' value must be a number, not {type(value).__name__}")
    return _FLOAT.pack(float(value))


def _decode_float(view: memoryview) -> float:
    return _FLOAT.unpack(view)[0]


# ---- arrays ----------------------------------------------------------------------------

# An array is stored as: u32 header length H, H bytes of header text "<dtype.str> <d0>,<d1>,..."
# padded with spaces so that the data starts 16 bytes into the value, then the C-order data.
_ARRAY_HEADER = struct.Struct("<I")
_ARRAY_ALIGN = 16


def _encode_array(value: Any) -> bytes:
    if not isinstance(value, (np.ndarray, np.generic)):
        raise TypeError(f"an 'array' value must be a numpy array, not {type(value).__name__}")
    array = np.asarray(value, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if array.dtype.hasobject or array.dtype.names is not None:
        raise TypeError(f"an 'array' value cannot have dtype {array.dtype}: numeric, bool, "
                        "string and bytes dtypes only (use the 'npz' or 'msgpack' type, or a "
                        "codec of your own)")
    return b"".join((array_header(array.dtype, array.shape), array.reshape(-1).view(np.uint8)))


def array_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """What ``_encode_array`` stores before the data of an array of ``dtype`` and ``shape``.

    >>> a = np.arange(3, dtype=np.uint16)
    >>> BUILTIN["array"].encode(a) == array_header(a.dtype, a.shape) + a.tobytes()
    True
    """
    text = f"{dtype.str} {','.join(map(str, shape))}".encode("ascii")
    pad = -(_ARRAY_HEADER.size + len(text)) % _ARRAY_ALIGN
    return _ARRAY_HEADER.pack(len(text) + pad) + text + b" " * pad


def _decode_array(view: memoryview) -> np.ndarray:
    (size,) = _ARRAY_HEADER.unpack_from(view)
    start = _ARRAY_HEADER.size + size
    dtype_text, _, shape_text = bytes(view[_ARRAY_HEADER.size:start]).decode("ascii").strip().partition(" ")
    shape = tuple(int(d) for d in shape_text.split(",")) if shape_text else ()
    dtype = np.dtype(dtype_text)
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(view, dtype, count, offset=start).reshape(shape)


def array_data_offsets(dtype: Any, counts: np.ndarray) -> np.ndarray:
    """Where the data of 1-D arrays of ``dtype`` with ``counts`` elements starts in their
    stored values (the header's size), for reading elements by byte range.

    >>> a = np.arange(12345, dtype=np.uint16)
    >>> int(array_data_offsets(a.dtype, np.array([a.size]))[0]) == len(_encode_array(a)) - a.nbytes
    True
    """
    digits = 1 + np.searchsorted(_POWERS_OF_TEN, counts, side="right")
    text = len(np.dtype(dtype).str) + 1 + digits
    return -(-(_ARRAY_HEADER.size + text) // _ARRAY_ALIGN) * _ARRAY_ALIGN


_POWERS_OF_TEN = 10 ** np.arange(1, 19, dtype=np.int64)


def array_headers(dtype: Any, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``array_header`` of 1-D arrays of ``dtype`` with ``counts`` elements, all at once:
    each header's size (``array_data_offsets``) and a uint8 matrix whose row ``k`` begins
    with header ``k`` (its size's first bytes; the rest is padding).

    >>> sizes, rows = array_headers(np.dtype(np.uint16), np.array([7, 12345]))
    >>> [bytes(rows[k, :sizes[k]]) for k in range(2)] == [array_header(np.dtype(np.uint16), (c,)) for c in (7, 12345)]
    True
    """
    counts = np.asarray(counts, np.int64)
    sizes = array_data_offsets(dtype, counts)
    prefix = f"{np.dtype(dtype).str} ".encode("ascii")
    rows = np.full((len(counts), int(sizes.max()) if len(counts) else 0), ord(" "), np.uint8)
    if not len(counts):
        return sizes, rows
    rows[:, :_ARRAY_HEADER.size] = (sizes - _ARRAY_HEADER.size).astype("<u4").view(np.uint8).reshape(-1, 4)
    at = _ARRAY_HEADER.size
    rows[:, at:at + len(prefix)] = np.frombuffer(prefix, np.uint8)
    at += len(prefix)
    digits = 1 + np.searchsorted(_POWERS_OF_TEN, counts, side="right")
    for j in range(int(digits.max())):  # the j-th digit of every count that has one
        has = digits > j
        place = 10 ** (digits[has] - 1 - j)
        rows[has, at + j] = ord("0") + (counts[has] // place) % 10
    return sizes, rows


def _encode_npz(value: Any) -> bytes:
    if not isinstance(value, Mapping):
        raise TypeError(f"an 'npz' value must be a dict of arrays, not {type(value).__name__}")
    stream = io.BytesIO()
    np.savez(stream, **value)
    return stream.getvalue()


def _decode_npz(view: memoryview) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(view), allow_pickle=False) as archive:
        return dict(archive)


# ---- structured text and binary ---------------------------------------------------------

def _encode_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _decode_json(view: memoryview) -> Any:
    return json.loads(bytes(view))


def _encode_msgpack(value: Any) -> bytes:
    import msgpack

    return msgpack.packb(value, use_bin_type=True)


def _decode_msgpack(view: memoryview) -> Any:
    import msgpack

    return msgpack.unpackb(view, raw=False)


def _image_encoder(format_: str, **options: Any) -> Encoder:
    def encode(value: Any) -> bytes:
        from PIL import Image

        image = value if isinstance(value, Image.Image) else Image.fromarray(np.asarray(value))
        stream = io.BytesIO()
        image.save(stream, format=format_, **options)
        return stream.getvalue()

    return encode


def _decode_image(view: memoryview) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(view)) as image:
        return np.asarray(image)


_MSGPACK = ("msgpack", "msgpack")
_PILLOW = ("PIL", "Pillow")

BUILTIN: dict[str, Codec] = {
    "bytes": Codec(_encode_bytes, bytes),
    "utf8": Codec(_encode_utf8, lambda view: str(view, "utf-8")),
    "int": Codec(_encode_int, _decode_int),
    "float": Codec(_encode_float, _decode_float),
    "array": Codec(_encode_array, _decode_array),
    "npz": Codec(_encode_npz, _decode_npz),
    "json": Codec(_encode_json, _decode_json),
    "msgpack": Codec(_encode_msgpack, _decode_msgpack, _MSGPACK),
    "jpg": Codec(_image_encoder("JPEG", quality=95), _decode_image, _PILLOW),
    "png": Codec(_image_encoder("PNG"), _decode_image, _PILLOW),
}

# Decoders whose values are 8-byte little-endian numbers: a batch of them is decoded at once.
FIXED_WIDTH = {_decode_int: "<i8", _decode_float: "<f8"}
# The same decoders as ``struct`` format codes (with ``<``) of their 8 bytes (one datapoint's values).
STRUCT_CODES = {_decode_int: "q", _decode_float: "d"}


def resolve(fields: Mapping[str, Any], user: Mapping[str, Callable] | None,
            direction: str) -> dict[str, Callable]:
    """The encoder or decoder (``direction``) of each of ``fields`` (``spec.Field``s).

    A user function of the type's name wins over the built-in one. A type with neither is a
    ``SpecError``; a built-in one whose package is missing a ``MissingDependencyError``.
    """
    user = _check_user_codecs(user, direction)
    chosen = {}
    for field, type_name in ((name, f.type) for name, f in fields.items()):
        if type_name in user:
            chosen[field] = user[type_name]
            continue
        if type_name in FIXED_TYPES:
            from . import columns

            chosen[field] = (columns.encoder if direction == "encode" else columns.decoder)(fields[field])
            continue
        codec = BUILTIN.get(type_name)
        if codec is None:
            kind = "encoders" if direction == "encode" else "decoders"
            raise SpecError(f"field {field!r} has type {type_name!r}, which is not built in "
                            f"(built-in: {', '.join([*BUILTIN, *FIXED_TYPES])}): pass {kind}={{{type_name!r}: "
                            "function}")
        if codec.requires is not None:
            module, package = codec.requires
            try:
                importlib.import_module(module)
            except ImportError:
                raise MissingDependencyError(
                    f"field {field!r} has type {type_name!r}, whose codec needs the {package} "
                    f"package: pip install {package}") from None
        chosen[field] = getattr(codec, direction)
    return chosen


def _check_user_codecs(user: Any, direction: str) -> Mapping[str, Callable]:
    kind = "encoders" if direction == "encode" else "decoders"
    if user is None:
        return {}
    if not isinstance(user, Mapping):
        raise TypeError(f"{kind} must be a dict of type name -> function, not {type(user).__name__}")
    for name, function in user.items():
        if not callable(function):
            raise TypeError(f"{kind}[{name!r}] is not callable")
    return user
