"""Structured datasets on FFRecord files: typed fields, masked reads, seekable sequences,
shards written by many processes, and weighted mixtures.

A datapoint is a dict with one value per field of a *spec* (``{field: type string}``, see
``ffrecord.dataset.spec``). Each field is stored in a base-format FFRecord file of its own,
so a read that selects some fields touches only their files, and a sequence field (type
``T[]``) stores an element table so that any range of its elements is read alone. The
on-disk layout is specified in ``docs/structured-datasets.md``.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "ds")
>>> with DatasetWriter(path, {"label": "int", "caption": "utf8:zstd"}) as writer:
...     for k in range(3):
...         _ = writer.append({"label": k, "caption": f"image {k}"})
>>> with DatasetReader(path) as reader:
...     reader[1], reader.read([2, 0], mask={"label": True})
({'label': 1, 'caption': 'image 1'}, [{'label': 2}, {'label': 0}])
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import _remote
from .codecs import BUILTIN as BUILTIN_CODECS
from .errors import (CodecError, CorruptDatasetError, DatapointError, DatasetChangedError,
                     DatasetError, IncompleteDatasetError, MaskError, MissingDependencyError,
                     MixtureError, SequenceRangeError, SpecError, UnsupportedVersionError)
from .arrow_import import from_arrow
from .grow import add_field, index, vacuum, versions
from .mixture import Mixture
from .open_files import max_mapped_files, max_open_files, set_max_mapped_files, set_max_open_files
from .reader import DatasetReader, Readable, ShardedDatasetReader
from .spec import SPEC_FILE
from .versioned import NoManifestError, VersionedReader
from .writer import DatasetWriter, ShardedDatasetWriter
from . import views  # noqa: F401,E402 - with the package: a reader's first reader[...] would pay its import

__all__ = [
    "BUILTIN_CODECS", "CodecError", "CorruptDatasetError", "DatapointError", "DatasetChangedError",
    "DatasetError",
    "DatasetReader", "DatasetWriter", "IncompleteDatasetError", "MaskError",
    "MissingDependencyError", "Mixture", "MixtureError", "Readable", "SequenceRangeError",
    "ShardedDatasetReader", "ShardedDatasetWriter", "SpecError", "UnsupportedVersionError",
    "VersionedReader", "add_field", "dataset_kind", "from_arrow", "index", "max_mapped_files", "max_open_files", "open_dataset",
    "set_max_mapped_files", "set_max_open_files", "vacuum", "versions",
]


def dataset_kind(path: Any, storage_options: dict[str, Any] | None = None) -> str | None:
    """``"dataset"`` for a directory (or ``s3://`` prefix) holding a dataset (its
    ``spec.json``), ``"sharded"`` for one whose first shard ``000000`` does, else ``None``."""
    text = os.fsdecode(_remote.local_path(path))
    if _remote.is_url(text):
        if text[:5].lower() != "s3://":
            return None  # an HTTP URL names one file: there is nothing to list
        entries = _remote.list_dir(text, storage_options)
        if SPEC_FILE in entries:
            return "dataset"
        if "000000/" in entries and SPEC_FILE in _remote.list_dir(_remote.join(text, "000000"),
                                                                   storage_options):
            return "sharded"
        return None
    folder = Path(text)
    if (folder / SPEC_FILE).is_file():
        return "dataset"
    if (folder / "000000" / SPEC_FILE).is_file():
        return "sharded"
    return None


def open_dataset(path: Any, decoders: Any = None, *, version: int | None = None,
                 **options: Any) -> Readable:
    """The dataset at ``path``: from its manifest when it has one (a ``VersionedReader`` of
    version ``version``, by default the latest: one small read to open, whatever the
    number of shards), else a ``DatasetReader`` or ``ShardedDatasetReader``, whichever it
    holds (``version`` needs a manifest). ``options`` as for those readers."""
    try:
        return VersionedReader(path, decoders, version=version, **options)
    except NoManifestError:
        if version is not None:
            raise
    kind = dataset_kind(path, options.get("storage_options"))
    if kind == "sharded":
        return ShardedDatasetReader(path, decoders, **options)
    return DatasetReader(path, decoders, **options)
