"""What ``ffrecord verify`` checks in a structured dataset beyond each file's samples: its
``spec.json``, that every field file is there and holds the datapoint count the spec
states, that shards agree, every sequence sample's element table, and, when it has a
manifest, that its latest version reads and that every file it lists is there, as recorded
(those of fields added since the shards' ``spec.json`` are checked sample by sample too).

>>> import tempfile, os
>>> from ffrecord import FileReader
>>> from ffrecord.dataset import DatasetWriter
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"n": "int", "s": "bytes[]"}) as writer:
...     _ = writer.append({"n": 1, "s": [b"a", b"b"]})
>>> found = survey(path)
>>> [os.path.basename(f) for f in found.files], found.problems
(['n.ffr', 's.ffr'], [])
>>> os.remove(os.path.join(path, "n.ffr"))
>>> problems = survey(path).problems  # missing for spec.json, and for the manifest
>>> problems[0].endswith("ds: field 'n': n.ffr is missing"), "listed by version 1 of the manifest" in problems[1]
(True, True)
>>> with FileReader(os.path.join(path, "s.ffr"), check_data=False) as reader:
...     list(table_damage(reader, skip=set()))
[]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _remote
from ..errors import CorruptFileError
from ..reader import FileReader
from . import sequence
from .columns import Layout
from .errors import DatasetError
from .reader import shard_directories
from .spec import read_spec

_CHUNK = 1024  # sequence samples read per call when checking their tables


@dataclass
class Survey:
    """A dataset's field files that are there (to check sample by sample), those of its
    sequence fields (whose tables ``table_damage`` checks), and the damage found in its
    structure, one line each."""

    files: list[str] = field(default_factory=list)
    sequence_files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def survey(path: Any, storage_options: dict[str, Any] | None = None) -> Survey:
    """Checks the structure of the dataset (plain or sharded) at ``path``."""
    from . import dataset_kind

    found = Survey()
    root = _remote.as_path(path, storage_options)
    try:
        shards = [root] if dataset_kind(path, storage_options) == "dataset" else shard_directories(root)
    except DatasetError as exc:
        found.problems.append(str(exc))
        return found
    first_spec = None
    for shard in shards:
        try:
            fields, length = read_spec(shard)
        except (DatasetError, CorruptFileError) as exc:
            found.problems.append(str(exc))
            continue
        spec = {name: f.spec for name, f in fields.items()}
        if first_spec is None:
            first_spec = (shard, spec)
        elif spec != first_spec[1]:
            found.problems.append(f"{shard}: spec {spec} differs from {first_spec[0]}'s {first_spec[1]}")
        for name, f in fields.items():
            file = shard / f.file
            if not file.is_file():
                found.problems.append(f"{shard}: field {name!r}: {f.file} is missing")
                continue
            found.files.append(str(file))
            if f.sequence:
                found.sequence_files.append(str(file))
            problem = _count_problem(file, f, length, storage_options)
            if problem:
                found.problems.append(problem)
    _check_manifest(root, found, storage_options)
    return found


def _check_manifest(root: Any, found: Survey, storage_options: dict[str, Any] | None) -> None:
    """The latest version of the manifest, if any: it reads, and each file it lists is the
    one it recorded."""
    from . import manifest

    try:
        loaded = manifest.load(root)
    except (DatasetError, CorruptFileError, OSError) as exc:
        found.problems.append(str(exc))
        return
    if loaded is None:
        return
    m = loaded.manifest
    listed = set(found.files)
    for k in range(len(m.shards)):
        entry = m.entry(k)
        for name, f in m.fields.items():
            file = root / m.path(k, name)
            recorded = entry.files[name]
            try:
                seen = manifest.describe(file, storage_options)
            except (CorruptFileError, OSError, ValueError) as exc:
                found.problems.append(f"{file}: listed by version {m.version} of the manifest: {exc}")
                continue
            if not recorded.matches(seen.stamp):
                found.problems.append(f"{file}: not the file version {m.version} of the manifest lists "
                                      f"({recorded.mismatch(seen.stamp)})")
            if str(file) not in listed:
                found.files.append(str(file))
                if f.sequence:
                    found.sequence_files.append(str(file))


def _count_problem(file: Any, spec_field: Any, length: int,
                   storage_options: dict[str, Any] | None) -> str | None:
    """What is wrong with the number of samples of a field file (for a column: of blocks,
    and each block's size), or None."""
    try:
        with FileReader(file, check_data=False, storage_options=storage_options) as reader:
            n = reader.n
            sizes = reader.sizes(np.arange(n, dtype=np.uint64)) if spec_field.block is not None else None
    except (CorruptFileError, OSError):
        return None  # the sample-by-sample check reports a file it cannot open
    if spec_field.block is None:
        if n != length:
            return f"{file}: field {spec_field.name!r} holds {n} datapoints; spec.json says {length}"
        return None
    layout = Layout.of(spec_field, length)
    if n != layout.blocks:
        return (f"{file}: field {spec_field.name!r} holds {n} blocks; spec.json says {length} datapoints, "
                f"{spec_field.block} to a block")
    want = np.full(n, layout.block * layout.width, np.uint64)
    if n:
        want[-1] = (length - (n - 1) * layout.block) * layout.width
    bad = np.flatnonzero(sizes != want)
    if len(bad):
        b = int(bad[0])
        return (f"{file}: field {spec_field.name!r}: column block {b} (datapoints {b * layout.block} to "
                f"{min(length, (b + 1) * layout.block) - 1}) holds {int(sizes[b])} bytes, not {int(want[b])}")
    return None


def table_damage(reader: FileReader, skip: set[int]) -> Iterator[str]:
    """A line for each sample of a sequence field's file (opened ``check_data=False``)
    whose count, element table or element CRC-32s are damaged; samples in ``skip`` (already
    reported bad) are passed over."""
    name = reader.fnames[0]
    for start in range(0, reader.n, _CHUNK):
        idx = np.arange(start, min(start + _CHUNK, reader.n), dtype=np.uint64)
        buf, offsets = reader.read_batch(idx)
        view = memoryview(buf)
        bounds = offsets.tolist()
        for k, index in enumerate(range(start, start + len(idx))):
            if index in skip:
                continue
            problem = sequence.damage(view[bounds[k]:bounds[k + 1]])
            if problem is not None:
                yield f"{name}: datapoint {index}: {problem}"
