"""LitData optimized datasets (``litdata.optimize`` or its ``Cache``): ``index.json`` and
its chunk files, written with the default ``PyTreeLoader``.

Chunks are read here, checked against the index (each chunk's item count and byte count),
in each layout LitData writes: items (``u32 items | (items + 1) × u32 offsets | items``,
each item the leaves' u32 sizes, then the leaves' bytes), whole-chunk compressed
(``compression_level="chunk"``), in zstd frames (``"batch"``, LitData 0.2.76's default for
``compression="zstd"``) or per item (``"sample"``); and the rows of dict items that LitData
(0.2.76 on) keeps as an Arrow table after the items, which are then read from the table as
LitData reads them. Leaves are decoded with LitData's own serializers (``pip install
litdata``). Each leaf of the item's tree becomes a field named by its path (``image``,
``meta.id``; a leaf at a list position ``k``, or under a key that does not start with a
letter, gets a ``_``: ``_k``); a key that LitData's ``config.types`` lists beyond the
first item's (some items have it) becomes a ``json`` field, ``null`` where absent, as does a
leaf ``config.types`` marks optional. Two leaves whose names would be one
(``{"a": {"b": 1}, "a.b": 2}``) are an error naming both: their values would replace each
other. A row holding a key that no field takes is an error naming it, never dropped.

=====================================================  =========================
LitData format                                         field type
=====================================================  =========================
``int`` / ``float`` / ``str``, ``text`` / ``bytes``     ``int`` / ``float`` / ``utf8`` / ``bytes``
``jpeg``                                               ``jpg`` (bytes as stored)
``numpy``, ``no_header_numpy``, ``tensor``, ``pil`` …   ``array``
``json``, ``bool``                                     ``json``
``pickle`` and anything else                           ``bytes`` (stored bytes: never unpickled)
=====================================================  =========================
"""

from __future__ import annotations

import copy
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import PathArg
from ._base import Source, check_image, offset_table, raw, read_index, require, source_error
from ._files import inflate, read_file
from ._index import Entry, unique

_TYPES = {"int": "int", "float": "float", "str": "utf8", "text": "utf8", "bytes": "bytes", "jpeg": "jpg",
          "json": "json", "bool": "json", "numpy": "array", "no_header_numpy": "array", "tensor": "array",
          "no_header_tensor": "array", "pil": "array"}
_DECODED = ("array", "json")  # decoded by LitData's serializers; the others are read here
_FOOTER = b"LDARW01\0"  # ends a chunk whose rows follow the items as an Arrow table
_FRAMED = b"LDFZ01\0\0"  # starts a chunk of zstd frames (compression_level="batch")
_LEVELS = ("chunk", "batch", "sample")
_LEAF = None  # a covered path's end in ``_Tree``


def leaf_paths(spec: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of each leaf of a LitData tree spec (its JSON form), in leaf order: dict keys
    (``str``) and list positions (``int``) from the root.

    >>> leaf_paths([1, {"type": "builtins.dict", "context": '["a", "b"]', "children_spec": [
    ...     {"children_spec": []}, {"type": "builtins.list", "context": "null",
    ...     "children_spec": [{"children_spec": []}, {"children_spec": []}]}]}])
    [('a',), ('b', 0), ('b', 1)]
    """
    node = spec[1] if isinstance(spec, list) else spec
    if not isinstance(node, dict):
        raise ValueError(f"a tree node is not an object: {node!r:.60}")
    children = node.get("children_spec") or []
    if not children:
        return [path]
    context = json.loads(node["context"]) if isinstance(node.get("context"), str) else None
    keys = [str(key) for key in context] if isinstance(context, list) and len(context) == len(children) \
        else list(range(len(children)))
    return [leaf for key, child in zip(keys, children) for leaf in leaf_paths(child, path + (key,))]


def field_name(path: tuple[Any, ...]) -> str:
    """The field a leaf at ``path`` becomes: its keys joined with ``.``, a list position or a
    key not starting with a letter given a ``_``; ``item`` for a leaf at the root.

    >>> field_name(("meta", "id")), field_name(("frames", 0)), field_name(("2d",)), field_name(())
    ('meta.id', 'frames._0', '_2d', 'item')
    """
    parts = [f"_{key}" if isinstance(key, int) or not (key[:1].isalpha() or key[:1] == "_") else key
             for key in path]
    return ".".join(parts) or "item"


def _shown(path: tuple[Any, ...]) -> str:
    return "".join(f"[{key!r}]" for key in path) or "the item"


class LitDataSource(Source):
    """``LitDataSource("optimized/")``: the chunks listed in ``optimized/index.json``."""

    kind = "litdata"

    def __init__(self, path: PathArg) -> None:
        require("litdata", "litdata")
        self.path, index = read_index(path, "index.json", "not a LitData optimized dataset")
        config = index["config"]
        self._refuse_unsupported(config)
        self.formats = config["data_format"].texts()
        try:
            self.paths = leaf_paths(json.loads(config["data_spec"].of(str)))
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # data_spec is JSON text too
            raise config["data_spec"].error(f"not a LitData tree spec: {exc}") from None
        if len(self.paths) != len(self.formats):
            raise config.error(f"{len(self.paths)} leaves in data_spec, {len(self.formats)} data_format entries")
        self.compression = config.get("compression") and config["compression"].of(str)
        level = config.get("compression_level")
        self.level = "chunk" if level is None else level.of(str)
        if self.level not in _LEVELS:
            raise level.error(f"unknown compression_level {self.level!r:.40}")
        types = config.get("types")
        types = types.value if types is not None and isinstance(types.value, dict) else {}
        self.extras = [key for key in types if not any(p[:1] == (key,) for p in self.paths)]
        names = [field_name(p) for p in self.paths] + [field_name((key,)) for key in self.extras]
        _refuse_collisions(config, self.paths + [(key,) for key in self.extras], names)
        kinds = ["json" if _optional(types, p) else _TYPES.get(fmt.split(":")[0], "bytes")
                 for p, fmt in zip(self.paths, self.formats)] + ["json"] * len(self.extras)
        self.spec = dict(zip(names, kinds))
        self.tree = _tree(self.paths + [(key,) for key in self.extras])
        entries = index["chunks"].items()
        self.chunks = {entry["filename"].relative_path(): {
            "size": entry["chunk_size"].count(),
            "bytes": None if entry.get("chunk_bytes") is None else entry["chunk_bytes"].count()}
            for entry in entries}
        unique([entry["filename"] for entry in entries], [entry["filename"].value for entry in entries], "chunk")
        self.encoders = {"jpg": raw}
        self.metadata = {"source": "litdata", "data_format": self.formats}

    @staticmethod
    def _refuse_unsupported(config: Entry) -> None:
        if config.get("encryption") is not None and config["encryption"].value:
            raise config["encryption"].error("encrypted chunks cannot be converted")
        loader = config.get("item_loader")
        if loader is not None and loader.of(str) != "PyTreeLoader":
            raise loader.error(f"chunks of the {loader.value} cannot be converted")
        kind = config.get("format")
        if kind is not None and kind.value == "mds":
            raise kind.error("an index over MDS shards: convert the dataset with the mds kind")

    def units(self) -> list[str]:
        return [str(self.path / name) for name, chunk in self.chunks.items() if chunk["size"]]

    def _chunk(self, unit: str) -> dict[str, Any]:
        return self.chunks[os.path.relpath(unit, self.path)]

    def count(self, unit: str) -> int:
        return self._chunk(unit)["size"]

    def unit_files(self, unit: str) -> list[Path]:
        return [self.path / "index.json", Path(unit)]

    def read(self, unit: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        chunk = self._chunk(unit)
        data = read_file(unit)
        if self.compression and self.level == "chunk" and not data.endswith(_FOOTER):
            if chunk["bytes"] is None:
                raise source_error(unit, None, "index.json gives no chunk_bytes: a compressed chunk of "
                                               "unknown size is not decompressed")
            data = inflate(self.compression, data, chunk["bytes"], unit)
        if chunk["bytes"] is not None and chunk["bytes"] != len(data):
            raise source_error(unit, None, f"index.json says the chunk has {chunk['bytes']:,} bytes; "
                                           f"it has {len(data):,}")
        n = chunk["size"]
        if data.endswith(_FOOTER):
            offset_table(data, n, unit, "items", "chunk", whole=False)
            rows = _footer_rows(data, n, unit)
            for k, row in enumerate(rows):
                yield k, self._row(unit, k, row)
            return
        decoders = self._decoders()
        for k, item in enumerate(self._items(unit, data, n)):
            yield k, self._item(unit, k, item, decoders)

    def _items(self, unit: str, data: bytes, n: int) -> Iterator[bytes]:
        """The bytes of each of the chunk's ``n`` items, however the chunk lays them out."""
        if data.startswith(_FRAMED):
            yield from _framed_items(data, n, unit, self.compression)
            return
        offsets = offset_table(data, n, unit, "items", "chunk", whole=False)
        inflate_item = _sample_inflater(self.compression) if self.level == "sample" else None
        for k in range(n):
            item = data[offsets[k]:offsets[k + 1]]
            if inflate_item is not None:
                try:
                    item = inflate_item(item)
                except Exception as exc:
                    raise source_error(unit, k, f"cannot be decompressed: {type(exc).__name__}: {exc}") from None
            yield item

    def _decoders(self) -> list[Any]:
        """LitData's deserializer of each leaf that is decoded (None for the others)."""
        from litdata.streaming.serializers import _get_serializers

        serializers = _get_serializers(None)
        out = []
        for fmt, kind in zip(self.formats, self.spec.values()):
            name = fmt.split(":")[0]
            if kind not in _DECODED or name not in serializers:
                out.append(None)
                continue
            serializer = copy.deepcopy(serializers[name])
            if ":" in fmt:
                serializer.setup(fmt)
            out.append(serializer)
        return out

    def _item(self, unit: str, k: int, data: bytes, decoders: list[Any]) -> dict[str, Any]:
        m = len(self.formats)
        if len(data) < 4 * m:
            raise source_error(unit, k, "an item shorter than its size header")
        sizes = np.frombuffer(data, "<u4", m).tolist()
        at = 4 * m
        if at + sum(sizes) != len(data):
            raise source_error(unit, k, "leaf sizes do not add up to the item's size")
        item = dict.fromkeys(self.spec)  # the extras: absent from items
        for (name, kind), fmt, size, decoder in zip(self.spec.items(), self.formats, sizes, decoders):
            value, at = data[at:at + size], at + size
            try:
                item[name] = _value(kind, fmt.split(":")[0], value, decoder, unit, k)
            except (ValueError, TypeError, RuntimeError, IndexError, struct.error) as exc:
                raise source_error(unit, k, f"leaf {name!r} cannot be decoded: {type(exc).__name__}: {exc}") from None
        return item

    def _row(self, unit: str, k: int, row: Any) -> dict[str, Any]:
        """The datapoint of one row of a chunk's Arrow table: each field's value at its path
        (None where the row lacks it); an error for anything in the row no field takes."""
        if not isinstance(row, dict):
            raise source_error(unit, k, f"a row that is not an object: {row!r:.60}")
        left = _uncovered(row, self.tree)
        if left is not None:
            raise source_error(unit, k, f"holds {_shown(left)}, which the index's data_spec and types "
                                        "lack: converting would drop it")
        return {name: _at(row, path) for name, path in
                zip(self.spec, self.paths + [(key,) for key in self.extras])}


def _value(kind: str, fmt: str, value: bytes, decoder: Any, unit: str, k: int) -> Any:
    if kind == "jpg":
        return check_image(value, unit, k)
    if kind == "int" or (kind == "json" and fmt == "int"):
        return struct.unpack("<q", value)[0]
    if kind == "float" or (kind == "json" and fmt == "float"):
        return struct.unpack("<d", value)[0]
    if kind == "utf8" or (kind == "json" and fmt in ("str", "text")):
        return value.decode("utf-8")
    if kind == "bytes" or decoder is None:
        return value
    decoded = decoder.deserialize(value)
    if kind == "array":
        return decoded.numpy() if hasattr(decoded, "numpy") else np.asarray(decoded)
    return decoded.item() if isinstance(decoded, np.generic) else decoded


def _refuse_collisions(config: Entry, paths: list[tuple[Any, ...]], names: list[str]) -> None:
    seen: dict[str, tuple[Any, ...]] = {}
    for path, name in zip(paths, names):
        if name in seen:
            raise config.error(f"leaves {_shown(seen[name])} and {_shown(path)} would both become field "
                               f"{name!r}: their values would replace each other")
        seen[name] = path


def _optional(types: dict[str, Any], path: tuple[Any, ...]) -> bool:
    """Whether LitData's ``config.types`` marks the leaf at ``path``, or a struct above it,
    optional (some items lack it)."""
    node: Any = {"type": "struct", "fields": types}
    for key in path:
        fields = node.get("fields") if isinstance(node, dict) and node.get("type") == "struct" else None
        node = fields.get(key) if isinstance(fields, dict) else None
        if isinstance(node, dict) and node.get("optional"):
            return True
    return False


def _tree(paths: list[tuple[Any, ...]]) -> dict[Any, Any]:
    """The paths as nested dicts, each path's end ``_LEAF``."""
    tree: dict[Any, Any] = {}
    for path in paths:
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
        if path:
            node[path[-1]] = _LEAF
    return tree


def _uncovered(value: Any, tree: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """The path of something in ``value`` that no leaf of ``tree`` takes (a key the index
    does not know, or an object where it expects a leaf's parent), or None."""
    if tree is _LEAF or value is None:
        return None
    if not isinstance(value, (dict, list)):
        return path
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        if key not in tree:
            if item is not None:
                return path + (key,)
            continue
        left = _uncovered(item, tree[key], path + (key,))
        if left is not None:
            return left
    return None


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and key < len(value):
            value = value[key]
        else:
            return None
    return value


def _footer_rows(data: bytes, n: int, unit: str) -> list[Any]:
    """The rows of the Arrow table that ends the chunk (``... | IPC | u32 size | LDARW01\\0``)."""
    import pyarrow as pa

    size = struct.unpack_from("<I", data, len(data) - 12)[0] if len(data) >= 12 else 0
    start = len(data) - 12 - size
    if size == 0 or start < 4:
        raise source_error(unit, None, "its Arrow table's size runs past the start of the chunk")
    ipc = pa.py_buffer(memoryview(data)[start:start + size])
    try:
        reader = pa.ipc.open_file(ipc) if data[start:start + 6] == b"ARROW1" else pa.ipc.open_stream(ipc)
        rows = reader.read_all().to_pylist()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise source_error(unit, None, f"its Arrow table cannot be read: {type(exc).__name__}: {exc}") from None
    if len(rows) != n:
        raise source_error(unit, None, f"index.json says {n} items; the chunk's Arrow table has {len(rows)} rows")
    return rows


def _framed_items(data: bytes, n: int, unit: str, compression: str | None) -> Iterator[bytes]:
    """The items of a chunk in zstd frames (LitData's ``compression_level="batch"``)."""
    from litdata.streaming.framed_zstd import inflate_frame, make_zstd_codec, parse_framed_header

    try:
        header = parse_framed_header(data)
    except (RuntimeError, ValueError, struct.error) as exc:
        raise source_error(unit, None, f"damaged zstd frame table: {exc}") from None
    if header.num_items != n:
        raise source_error(unit, None, f"index.json says {n} items; the chunk's frame table says {header.num_items}")
    codec = make_zstd_codec(compression)
    offsets = header.offsets
    if any(b < a for a, b in zip(offsets, offsets[1:])):
        raise source_error(unit, None, "item offsets run backwards")
    k = 0
    for index, frame in enumerate(header.frames):
        if frame.first_item != k or k + frame.n_items > n:
            raise source_error(unit, k, "the zstd frames do not cover the items in order")
        base = offsets[k]
        if offsets[k + frame.n_items] - base != frame.uncompressed_len:  # checked before it sizes a buffer
            raise source_error(unit, k, "a zstd frame's size disagrees with its items' offsets")
        try:
            payload = bytes(inflate_frame(data, header, index, codec))
        except Exception as exc:
            raise source_error(unit, k, f"cannot be decompressed: {type(exc).__name__}: {exc}") from None
        for j in range(k, k + frame.n_items):
            yield payload[offsets[j] - base:offsets[j + 1] - base]
        k += frame.n_items
    if k != n:
        raise source_error(unit, k, f"the zstd frames hold {k} of the {n} items")


def _sample_inflater(compression: str | None) -> Any:
    """Decompresses one item of a chunk compressed item by item (``"sample"``)."""
    from litdata.streaming.framed_zstd import make_zstd_codec

    codec = make_zstd_codec(compression)
    return lambda item: bytes(codec.decompress(bytes(item)))
