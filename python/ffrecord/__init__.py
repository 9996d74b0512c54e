"""ffrecord: fast random access to FFRecord files of training samples.

A Go core behind a C ABI, loaded with ctypes on first use (``import ffrecord`` loads no native
code and never imports torch). Files are byte-compatible with HFAiLab's FFRecord.

>>> import os, tempfile, ffrecord
>>> path = os.path.join(tempfile.mkdtemp(), "example.ffr")
>>> with ffrecord.FileWriter(path, 2) as writer:
...     writer.write_one(b"first")
...     writer.write_one(b"second")
>>> with ffrecord.FileReader(path) as reader:
...     [sample.tobytes() for sample in reader.read([1, 0])]
[b'second', b'first']
"""

from __future__ import annotations

from typing import Any

from .errors import (CorruptFileError, FFRecordWarning, ForeignStateError, ObjectChangedError, StateError,
                     UncachedRemoteWarning)
from .fileio import checkFsAlign
from .reader import BadSample, FileInfo, FileReader
from .writer import FileWriter

try:
    from ._version import __version__  # written by the build, next to libffrecord.so
except ImportError:  # a source tree that was never built
    __version__ = "0+unknown"

_LAZY = {"pack_folder": "packed", "PackedFolder": "packed", "unpack_folder": "packed",
         "utils": None}

__all__ = [
    "BadSample",
    "CorruptFileError",
    "FFRecordWarning",
    "FileInfo",
    "FileReader",
    "FileWriter",
    "ForeignStateError",
    "ObjectChangedError",
    "PackedFolder",
    "StateError",
    "UncachedRemoteWarning",
    "__version__",
    "checkFsAlign",
    "pack_folder",
    "unpack_folder",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        module = _LAZY[name]
        value = import_module(f".{name}", __name__) if module is None else getattr(
            import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
