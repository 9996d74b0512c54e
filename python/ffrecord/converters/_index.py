"""A source's JSON index (``index.json`` of MDS and LitData, ``state.json`` of Hugging Face,
Granular's ``spec.json``), checked as it is read: every value taken from it is of the type
the format says, and every file name it gives stays inside the source's directory. What does
not hold is a ``SourceError`` naming the index file and the key.

>>> entry = Entry("index.json", {"shards": [{"samples": -1, "basename": "../etc/passwd"}]})
>>> entry["shards"].items()[0]["samples"].count()
Traceback (most recent call last):
...
ffrecord.converters._base.SourceError: index.json: shards[0].samples: expected a count (an integer, 0 or more), got -1
>>> entry["shards"].items()[0]["basename"].relative_path()
Traceback (most recent call last):
...
ffrecord.converters._base.SourceError: index.json: shards[0].basename: '../etc/passwd' is not a file name inside the dataset's directory
>>> entry["version"]
Traceback (most recent call last):
...
ffrecord.converters._base.SourceError: index.json: version: missing
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

_WHAT = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
         bool: "true or false", type(None): "null"}


class Entry:
    """One value of the index ``file``, at the key path ``where`` (``shards[3].raw_data``)."""

    def __init__(self, file: Any, value: Any, where: str = "") -> None:
        self.file, self.value, self.where = file, value, where

    def __repr__(self) -> str:
        return f"Entry({str(self.file)!r}, {self.where or '<root>'})"

    def error(self, what: str) -> Exception:
        """A ``SourceError`` naming the file and this key, saying ``what``."""
        from ._base import source_error

        return source_error(self.file, None, f"{self.where or 'the document'}: {what}")

    def _path(self, key: Any) -> str:
        if isinstance(key, int):
            return f"{self.where}[{key}]"
        return f"{self.where}.{key}" if self.where else str(key)

    def __getitem__(self, key: str) -> "Entry":
        """The member ``key`` of this object; an error when it is missing."""
        found = self.get(key, missing=True)
        if found is None:
            raise Entry(self.file, None, self._path(key)).error("missing")
        return found

    def get(self, key: str, missing: bool = False) -> "Entry | None":
        """The member ``key`` of this object, or None when it is absent or null (``missing``:
        only when absent)."""
        document = self.of(dict)
        if key not in document or (document[key] is None and not missing):
            return None
        return Entry(self.file, document[key], self._path(key))

    def items(self) -> list["Entry"]:
        """The elements of this list."""
        return [Entry(self.file, value, self._path(k)) for k, value in enumerate(self.of(list))]

    def of(self, *types: type) -> Any:
        """The value, if it is of one of ``types`` (``bool`` is not an ``int`` here)."""
        if not isinstance(self.value, types) or (isinstance(self.value, bool) and bool not in types):
            raise self.error(f"expected {' or '.join(_WHAT.get(t, t.__name__) for t in types)}, "
                             f"got {self.value!r:.80}")
        return self.value

    def count(self) -> int:
        """The value, an integer 0 or more."""
        if not isinstance(self.value, int) or isinstance(self.value, bool) or self.value < 0:
            raise self.error(f"expected a count (an integer, 0 or more), got {self.value!r:.80}")
        return self.value

    def texts(self) -> list[str]:
        """The value, a list of strings."""
        return [item.of(str) for item in self.items()]

    def relative_path(self) -> str:
        """The value, a relative file name that stays inside the dataset's directory (``a.bin``,
        ``sub/a.bin``; not ``../a.bin``, ``/etc/a.bin`` or ``sub/../../a.bin``)."""
        name = self.of(str)
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or "\0" in name or "\\" in name or \
                any(part in ("..", ".") for part in parts) or name != "/".join(parts):
            raise self.error(f"{name!r:.80} is not a file name inside the dataset's directory")
        return name


def unique(entries: list[Entry], names: list[str], what: str) -> None:
    """An error naming the second of ``entries`` whose name in ``names`` repeats an earlier
    one (two units reading one file would convert its data twice)."""
    seen: dict[str, Entry] = {}
    for entry, name in zip(entries, names):
        if name in seen:
            raise entry.error(f"{what} {name!r} is listed twice (also at {seen[name].where})")
        seen[name] = entry
