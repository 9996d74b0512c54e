"""LitData optimized datasets (``litdata.optimize`` or its ``Cache``): ``index.json`` and
its chunk files, written with the default ``PyTreeLoader``.

Chunks are read here (``u32 items | (items + 1) × u32 offsets | items``, each item the
leaves' u32 sizes, then the leaves' bytes), checked against the index (each chunk's item
count and, uncompressed, its byte count); leaves are decoded with LitData's own serializers
(``pip install litdata``). Each leaf of the item's tree becomes a field named by its path
(``image``, ``meta.id``; a leaf at a list position ``k`` is ``_k``):

=====================================================  =========================
LitData format                                         field type
=====================================================  =========================
``int`` / ``float`` / ``str`` / ``bytes``               ``int`` / ``float`` / ``utf8`` / ``bytes``
``jpeg``                                               ``jpg`` (bytes as stored)
``numpy``, ``no_header_numpy``, ``tensor``, ``pil`` …   ``array``
``json``                                               ``json``
``pickle`` and anything else                           ``bytes`` (stored bytes: never unpickled)
=====================================================  =========================
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import PathArg
from ._base import Source, check_image, offset_table, raw, read_index, require, source_error

_TYPES = {"int": "int", "float": "float", "str": "utf8", "bytes": "bytes", "jpeg": "jpg",
          "json": "json", "numpy": "array", "no_header_numpy": "array", "tensor": "array",
          "no_header_tensor": "array", "pil": "array"}
_DECODED = ("array", "json")  # decoded by LitData's serializers; the others are read here


def leaf_names(spec: Any, path: tuple[str, ...] = ()) -> list[str]:
    """Field names for the leaves of a LitData tree spec (its JSON form), in leaf order."""
    node = spec[1] if isinstance(spec, list) else spec
    children = node.get("children_spec") or []
    if not children:
        return [".".join(path) or "item"]
    context = json.loads(node["context"]) if isinstance(node.get("context"), str) else None
    keys = [str(k) for k in context] if isinstance(context, list) and len(context) == len(children) \
        else [f"_{k}" for k in range(len(children))]
    keys = [key if key[:1].isalpha() or key[:1] == "_" else f"_{key}" for key in keys]
    return [name for key, child in zip(keys, children) for name in leaf_names(child, path + (key,))]


class LitDataSource(Source):
    """``LitDataSource("optimized/")``: the chunks listed in ``optimized/index.json``."""

    kind = "litdata"

    def __init__(self, path: PathArg) -> None:
        require("litdata", "litdata")
        self.path, document = read_index(path, "index.json", "not a LitData optimized dataset")
        index = self.path / "index.json"
        try:
            config, self.chunks = document["config"], document["chunks"]
            self.formats = config["data_format"]
            names = leaf_names(json.loads(config["data_spec"]))
        except (ValueError, KeyError, TypeError) as exc:  # data_spec is JSON text too
            raise source_error(index, None, f"not a LitData index: {exc}") from None
        if config.get("encryption"):
            raise source_error(index, None, "encrypted chunks cannot be converted")
        if config.get("item_loader", "PyTreeLoader") != "PyTreeLoader":
            raise source_error(index, None, f"chunks of the {config['item_loader']} cannot be converted")
        if len(names) != len(self.formats):
            raise source_error(index, None, f"{len(names)} leaves in data_spec, {len(self.formats)} formats")
        self.compression = config.get("compression")
        self.spec = {name: _TYPES.get(fmt.split(":")[0], "bytes") for name, fmt in zip(names, self.formats)}
        self.encoders = {"jpg": raw}
        self.metadata = {"source": "litdata", "data_format": self.formats}

    def units(self) -> list[str]:
        return [str(self.path / chunk["filename"]) for chunk in self.chunks if chunk["chunk_size"]]

    def _chunk(self, unit: str) -> dict[str, Any]:
        return next(chunk for chunk in self.chunks if chunk["filename"] == Path(unit).name)

    def count(self, unit: str) -> int:
        return self._chunk(unit)["chunk_size"]

    def read(self, unit: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        chunk = self._chunk(unit)
        data = Path(unit).read_bytes()
        if self.compression:
            from litdata.streaming.compression import _COMPRESSORS

            try:
                data = _COMPRESSORS[self.compression.split(":")[0]].decompress(data)
            except Exception as exc:
                raise source_error(unit, None, f"cannot be decompressed: {type(exc).__name__}: {exc}") from None
        elif chunk.get("chunk_bytes") is not None and chunk["chunk_bytes"] != len(data):
            raise source_error(unit, None, f"index.json says the chunk has {chunk['chunk_bytes']:,} bytes; "
                                           f"it has {len(data):,}")
        n = chunk["chunk_size"]
        offsets = offset_table(data, n, unit, "items", "chunk", whole=False)
        decoders = self._decoders()
        for k in range(n):
            yield k, self._item(unit, k, data[offsets[k]:offsets[k + 1]], decoders)

    def _decoders(self) -> list[Any]:
        """LitData's deserializer of each leaf that is decoded (None for the others)."""
        from litdata.streaming.serializers import _get_serializers

        serializers = _get_serializers(None)
        out = []
        for fmt, kind in zip(self.formats, self.spec.values()):
            if kind not in _DECODED:
                out.append(None)
                continue
            serializer = copy.deepcopy(serializers[fmt.split(":")[0]])
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
        item = {}
        for (name, kind), size, decoder in zip(self.spec.items(), sizes, decoders):
            value, at = data[at:at + size], at + size
            try:
                item[name] = self._value(kind, value, decoder, unit, k)
            except (ValueError, TypeError, RuntimeError) as exc:
                raise source_error(unit, k, f"leaf {name!r} cannot be decoded: {type(exc).__name__}: {exc}") from None
        return item

    @staticmethod
    def _value(kind: str, value: bytes, decoder: Any, unit: str, k: int) -> Any:
        if kind == "jpg":
            return check_image(value, unit, k)
        if kind == "int":
            return int(np.frombuffer(value, "<i8")[0])
        if kind == "float":
            return float(np.frombuffer(value, "<f8")[0])
        if kind == "utf8":
            return value.decode("utf-8")
        if kind == "bytes":
            return value
        decoded = decoder.deserialize(value)
        if kind == "array":
            decoded = decoded.numpy() if hasattr(decoded, "numpy") else np.asarray(decoded)
        return decoded
