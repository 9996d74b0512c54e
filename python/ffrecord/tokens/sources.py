"""Documents to convert, from JSONL files, Parquet files, a Hugging Face
``datasets.Dataset`` or any iterable of dicts: batches of records (dicts holding the
text field and any fields kept).

>>> list(batches([{"text": "a"}, {"text": "b"}, {"text": "c"}], "text", (), size=2, skip=1))
[[{'text': 'b'}, {'text': 'c'}]]
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

Record = dict


def _kind(source: Any) -> str:
    if _is_path(source):
        name = os.fspath(source)
        if name.endswith(".parquet"):
            return "parquet"
        if name.endswith((".jsonl", ".json", ".ndjson")):
            return "jsonl"
        raise ValueError(f"{name}: a text source is a .jsonl (.json, .ndjson) or .parquet file")
    if type(source).__module__.split(".")[0] == "datasets":
        return "hf"
    return "iterable"


def _is_path(item: Any) -> bool:
    return isinstance(item, (str, os.PathLike))


def _files(source: Any) -> list[Any]:
    """The sources one after another: a list of paths, else ``source`` alone."""
    if isinstance(source, (list, tuple)) and source and all(map(_is_path, source)):
        return list(source)
    return [source]


def describe(source: Any) -> str:
    """A stable description of the source, to recognise it when resuming."""
    if all(map(_is_path, _files(source))):
        return json.dumps([os.path.abspath(os.fspath(f)) for f in _files(source)])
    return f"{type(source).__module__}.{type(source).__qualname__} of {count(source)} documents"


def count(source: Any) -> int | None:
    """The number of documents, when known without parsing them (JSONL lines are counted)."""
    total = 0
    for item in _files(source):
        kind = _kind(item)
        if kind == "parquet":
            total += _parquet().ParquetFile(item).metadata.num_rows
        elif kind == "jsonl":
            with open(item, "rb") as f:
                total += sum(1 for line in f if line.strip())
        elif hasattr(item, "__len__"):
            total += len(item)
        else:
            return None
    return total


def _parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError('reading Parquet needs pyarrow: pip install "ffrecord[tokens]"') from None
    return pq


def _records(item: Any, columns: list[str], skip: int) -> Iterator[Record]:
    kind = _kind(item)
    if kind == "jsonl":
        with open(item, "rb") as f:
            lines = (line for line in f if line.strip())
            for number, line in enumerate(itertools.islice(lines, skip, None), skip):
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise ValueError(f"{item}: document {number} is not JSON: {exc}") from None
                if not isinstance(record, dict):
                    raise ValueError(f"{item}: document {number} is not a JSON object")
                yield record
    elif kind == "parquet":
        file = _parquet().ParquetFile(item)
        seen = 0
        for batch in file.iter_batches(columns=columns, batch_size=1024):
            if seen + batch.num_rows <= skip:
                seen += batch.num_rows
                continue
            rows = batch.to_pylist()[max(skip - seen, 0):]
            seen += batch.num_rows
            yield from rows
    elif kind == "hf":
        for at in range(skip, len(item), 1024):
            chunk = item[at:at + 1024]
            yield from (dict(zip(chunk, values)) for values in zip(*chunk.values()))
    else:
        yield from itertools.islice(item, skip, None)


def records(source: Any, columns: list[str], skip: int = 0) -> Iterator[Record]:
    """Every record of ``source`` from the ``skip``-th on (one file after another)."""
    for item in _files(source):
        size = count(item) if skip else None
        if size is not None and skip >= size:
            skip -= size
            continue
        yield from _records(item, columns, skip)
        skip = 0


def batches(source: Any, text_field: str, keep: Iterable[str], size: int, skip: int = 0) -> Iterator[list[Record]]:
    """``records`` in lists of ``size``."""
    iterator = records(source, [text_field, *keep], skip)
    while True:
        chunk = list(itertools.islice(iterator, size))
        if not chunk:
            return
        yield chunk
