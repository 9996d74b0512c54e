"""What every converter shares: the ``Source`` interface, the error naming a source file and
record, and ``run``, which writes a source's units as the shards of a new dataset through
the conversion runner (``_runner``: parallel processes, a progress bar, resumable).

A conversion is staged in a hidden directory beside the destination, ``.NAME.converting``:
one complete shard per finished unit, and ``convert.json`` saying what is being converted.
Running the same conversion again after a failure (or a crash) keeps the finished shards
whose source files are unchanged since (the manifest records each unit's ``unit_identity``;
a finished shard is also checked to be a complete dataset of the spec) and converts the
rest; when every unit is done the staging directory is renamed to the destination in one
step, so a dataset appears there only complete.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import _extras
from .._paths import PathArg
from .._progress import ProgressBar
from ..dataset import grow
from ..dataset.errors import CodecError, CorruptDatasetError, IncompleteDatasetError
from ..dataset.reader import DatasetReader
from ..dataset.spec import COMPRESSIONS, parse_spec, read_spec
from ..dataset.writer import DatasetWriter, shard_name
from ._files import identity, read_json
from ._index import Entry
from ._runner import Staging, check_cancelled, refuse_taken, run_tasks

_NOT_COMPRESSED = ("int", "float")  # 8 bytes each: nothing to gain


class SourceError(CorruptDatasetError):
    """A source that cannot be converted as it is: a damaged or truncated file, an index
    that disagrees with its data, a value that is not what its type says. The message names
    the source file and the record."""


def source_error(file: Any, record: Any, what: str) -> SourceError:
    """``SourceError("FILE: record R: WHAT")``, on one line (a library's message may span
    several: the command line prints each error on one)."""
    where = f"{file}" if record is None else f"{file}: record {record}"
    return SourceError(re.sub(r"\s*\n\s*", " ", f"{where}: {what}"))


def require(module: str, package: str) -> Any:
    """``import module``, or a ``MissingDependencyError`` naming the extra to install."""
    return _extras.require(module, "convert", "this converter", package)


def read_index(path: PathArg, name: str, what: str) -> tuple[Path, Entry]:
    """The directory ``path`` and its JSON index file ``name`` (``what`` says what a missing
    one means), parsed, to be read through ``Entry``'s checks."""
    path = Path(os.fsdecode(path))
    return path, Entry(path / name, read_json(path / name, what))


def offset_table(data: bytes, n: int, unit: Any, items: str, block: str, whole: bool) -> np.ndarray:
    """The ``n + 1`` offsets of a ``u32 n | (n + 1) × u32 offsets | records`` block, the
    framing MDS shards and LitData chunks share, checked against ``n`` (what the source's
    index says) and the block's size (``whole``: the records end where the block does).
    ``SourceError``s name the ``unit``, and the ``items`` and ``block`` as the format calls them.

    >>> offset_table(bytes([2, 0, 0, 0, 16, 0, 0, 0, 17, 0, 0, 0, 19, 0, 0, 0, 1, 2, 3]), 2,
    ...              "shard.0", "samples", "shard", whole=True).tolist()
    [16, 17, 19]
    """
    if len(data) < 4 * (n + 2) or int(np.frombuffer(data, "<u4", 1)[0]) != n:
        raise source_error(unit, None, f"index.json says {n} {items}; the {block}'s header disagrees")
    offsets = np.frombuffer(data, "<u4", n + 1, 4).astype(np.int64)
    past_end = offsets[-1] != len(data) if whole else offsets[-1] > len(data)
    if offsets[0] < 4 * (n + 2) or (np.diff(offsets) < 0).any() or past_end:
        raise source_error(unit, None, f"{items[:-1]} offsets run backwards or past the end of the {block}")
    return offsets


def raw(value: Any) -> Any:
    """An encoder storing bytes as they are (images as the source stored them)."""
    return value


def check_image(data: bytes, file: Any, record: Any) -> bytes:
    """``data`` if Pillow reads it as a complete image; a ``SourceError`` naming the file
    and record otherwise. (The format is not held against the field's type: Pillow, which
    decodes ``jpg`` and ``png`` fields, reads either.)"""
    Image = require("PIL.Image", "Pillow")
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except Exception as exc:
        raise source_error(file, record, f"not a readable image: {type(exc).__name__}: {exc}") from None
    return data


class Source:
    """One dataset to convert: its spec, and its data as *units* (a shard file, a chunk of
    an image folder, ...), each converted on its own into one shard of the destination.

    Subclasses set ``spec`` (``{field: type}``), optionally ``encoders`` and ``metadata``,
    in ``__init__``, and implement ``units`` and ``read``. Sources are pickled to worker
    processes: keep their state plain (paths, dicts), open files in ``read``.
    """

    kind = "source"
    spec: dict[str, str]
    encoders: dict[str, Callable] = {}
    metadata: dict[str, Any] = {}

    def units(self) -> list[Any]:
        """The units, in dataset order; each is picklable and describes itself in ``str``."""
        raise NotImplementedError

    def plain(self, units: list[Any]) -> bool:
        """Whether ``units`` make a plain dataset rather than a sharded one: one unit does."""
        return len(units) == 1

    def count(self, unit: Any) -> int | None:
        """The unit's datapoints, when known without reading it (for the bar and the writer)."""
        return None

    def unit_files(self, unit: Any) -> list[Path]:
        """The files the unit is converted from (its index too, where it has one)."""
        return [Path(str(unit))]

    def unit_identity(self, unit: Any) -> str:
        """What the unit's files are now (names, sizes, times, inodes: ``_files.identity``),
        as a digest: a finished unit is kept by a resumed conversion only while this holds."""
        entries = [identity(file, self.path) for file in self.unit_files(unit)]
        return hashlib.sha256(json.dumps(entries).encode()).hexdigest()

    def read(self, unit: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
        """``(record, datapoint)`` pairs of the unit, ``record`` naming it in errors."""
        raise NotImplementedError

    def read_columns(self, unit: Any) -> Iterator[dict[str, Any]] | None:
        """The unit as batches of columns (``DatasetWriter.append_batch``'s), for a source
        that has them (record k of the unit is its datapoint k); None: datapoint by datapoint."""
        return None

    def close(self) -> None:
        """Releases what the source holds (e.g. a downloaded copy); called when ``run`` ends."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self, 'path', '?')!s})"


def run(source: Source, destination: PathArg, *, workers: int | None = None, progress: bool = False,
        compression: str | None = None) -> int:
    """Converts ``source`` into a new dataset at ``destination`` (plain or sharded, as
    ``source.plain`` says); returns the number of datapoints. See the module."""
    if compression is not None and compression not in COMPRESSIONS:
        raise ValueError(f"compression must be None or one of {COMPRESSIONS}, got {compression!r}")
    destination = Path(os.fsdecode(destination)).absolute()
    refuse_taken(destination)
    units = source.units()
    if not units:
        raise IncompleteDatasetError(f"{source.path}: holds no data to convert")
    spec = {name: kind if compression is None or kind.split("[")[0] in _NOT_COMPRESSED
            else f"{kind}:{compression}" for name, kind in source.spec.items()}
    parse_spec(spec)
    names = [shard_name(k) for k in range(len(units))]
    staging = Staging(staging_directory(destination))
    origin = str(getattr(source, "url", None) or source.path)  # a downloaded copy moves
    identities = {name: source.unit_identity(unit) for name, unit in zip(names, units)}
    unchanged = staging.resume({"kind": source.kind, "source": origin, "spec": spec,
                                "metadata": source.metadata,
                                "units": [os.path.relpath(str(unit), source.path) for unit in units]},
                               identities)
    counts = [source.count(unit) for unit in units]
    finished = {k: _finished_length(staging.path / names[k], spec, counts[k])
                for k, name in enumerate(names) if name in unchanged}
    done = {k: length for k, length in finished.items() if length is not None}
    staging.keep_only(names[k] for k in done)  # a unit interrupted part-way starts again
    total = sum(counts) if None not in counts else None
    with ProgressBar(total, progress, f"convert {source.kind}", "datapoint") as bar:
        bar.update(sum(done.values()))
        tasks = [(staging.path / names[k], units[k], counts[k], identities[names[k]])
                 for k in range(len(units)) if k not in done]
        written = run_tasks(_Job(source, spec), tasks, workers or os.cpu_count() or 1, bar)
    plain = source.plain(units)
    grow.index(staging.path / names[0] if plain else staging.path)  # its manifest, moved with it
    staging.publish(destination, names[0] if plain else None)
    return sum(done.values()) + sum(written)


def staging_directory(destination: PathArg) -> Path:
    """Where a conversion to ``destination`` is staged until it is complete."""
    destination = Path(os.fsdecode(destination)).absolute()
    return destination.parent / f".{destination.name}.converting"


def _finished_length(shard: Path, spec: Mapping[str, str], count: int | None) -> int | None:
    """The length of the shard an earlier run finished, or None when it is not a complete
    dataset of ``spec`` with the ``count`` datapoints the source says (damaged since, or
    not what this conversion writes): it is converted again."""
    try:
        fields, length = read_spec(shard)
        with DatasetReader(shard):  # its field files: present, intact headers, the same length
            pass
    except (OSError, ValueError):
        return None
    if fields != parse_spec(spec) or (count is not None and length != count):
        return None
    return length


class _Job:
    """Writes one unit of a source into its shard of the staging directory."""

    def __init__(self, source: Source, spec: Mapping[str, str]) -> None:
        self.source, self.spec = source, dict(spec)

    def __repr__(self) -> str:
        return f"_Job({self.source!r})"

    def write(self, shard: Path, unit: Any, count: int | None, identity: str,
              advance: Callable[[int], Any], cancelled: Callable[[], bool]) -> int:
        source = self.source
        with DatasetWriter(shard, self.spec, source.encoders, length=count,
                           metadata=source.metadata, manifest=False) as writer:
            batches = source.read_columns(unit)
            for columns in batches or ():
                try:
                    written = writer.append_batch(columns)
                except CodecError as exc:
                    raise source_error(unit, exc.index, f"field {exc.field!r}: {exc}") from exc
                except ValueError as exc:  # more than its index says
                    raise source_error(unit, len(writer), str(exc)) from exc
                advance(len(written))
                check_cancelled(len(writer), cancelled)
            for record, datapoint in () if batches is not None else source.read(unit):
                if len(writer) == count:
                    raise source_error(unit, record, f"one record more than the {count} its index says")
                try:
                    writer.append(datapoint)
                except CodecError as exc:
                    raise source_error(unit, record, f"field {exc.field!r}: {exc}") from exc
                advance(1)
                check_cancelled(len(writer), cancelled)
            if count is not None and len(writer) != count:
                raise source_error(unit, None, f"holds {len(writer)} records where its index says {count}")
            if source.unit_identity(unit) != identity:  # the shard is not completed
                raise source_error(unit, None, "changed while it was being converted: run the "
                                               "conversion again")
            return len(writer)
