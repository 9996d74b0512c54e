"""Converters of other dataset formats into structured datasets (``ffrecord.dataset``), with
fields and types preserved: ``convert(KIND, SOURCE, DESTINATION)``, or on the command line
``ffrecord convert KIND SOURCE DESTINATION``.

=============== ======================================================================
kind            source
=============== ======================================================================
``imagefolder`` ``ROOT/CLASS/IMAGE`` → ``{image, label, path}``, class names in metadata
``mds``         a MosaicML Streaming (MDS) directory (``index.json`` and its shards), or s3://
``litdata``     a LitData optimized dataset (``index.json`` and its chunks)
``webdataset``  WebDataset ``.tar`` shards: keys grouped per sample, extensions become fields
``parquet``     a Parquet file or a directory of them
``hf``          a Hugging Face ``datasets.Dataset`` saved with ``save_to_disk``
``arrayrecord`` ArrayRecord files: each record becomes a ``record`` field of bytes
``granular``    a Granular dataset, plain or sharded (sharded the same way)
=============== ======================================================================

Each source is read in *units* (its shard files, row groups, chunks of images) converted in
parallel processes, each into one shard of the result (a plain dataset when there is one
unit). A failed conversion is resumed by running it again: finished units are kept while
their source files are unchanged (``_base``). The result appears at the destination only
when complete. Only regular files are read (a FIFO or device is refused at once), and an
index is checked key by key (``_index``): a malformed source is a ``SourceError`` naming the
file and key, record, field or member, never a bare Python error. Each source module documents how its
types map to ours; the sources' packages come with ``pip install "ffrecord[convert]"``.

Record files (TFRecord, OFRecord) convert to one plain ``.ffr`` file instead, each record one
sample unchanged: ``ffrecord.converters.records`` (public as ``ffrecord.convert``), which
holds the one framing helper for length-prefixed records.

>>> import os, tempfile
>>> from PIL import Image
>>> from ffrecord.dataset import open_dataset
>>> root = tempfile.mkdtemp()
>>> for label in ("cat", "dog"):
...     os.makedirs(f"{root}/photos/{label}")
...     Image.new("RGB", (4, 3)).save(f"{root}/photos/{label}/0.png")
>>> convert("imagefolder", f"{root}/photos", f"{root}/photos.ffds")
2
>>> with open_dataset(f"{root}/photos.ffds") as ds:
...     ds[1]["label"], ds[1]["path"], ds[1]["image"].shape, ds.metadata["classes"]
(1, 'dog/0.png', (3, 4, 3), ['cat', 'dog'])
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from .. import _remote
from .._paths import PathArg
from ._base import Source, SourceError, run

__all__ = ["KINDS", "Source", "SourceError", "convert", "open_source"]

# kind -> (module, class): imported only when that kind is converted
KINDS = {
    "imagefolder": ("imagefolder", "ImageFolderSource"),
    "mds": ("mds", "MDSSource"),
    "litdata": ("litdata", "LitDataSource"),
    "webdataset": ("webdataset", "WebDatasetSource"),
    "parquet": ("arrow", "ParquetSource"),
    "hf": ("arrow", "HuggingFaceSource"),
    "arrayrecord": ("arrayrecord", "ArrayRecordSource"),
    "granular": ("granular", "GranularSource"),
}


def open_source(kind: str, source: PathArg, storage_options: dict[str, Any] | None = None) -> Source:
    """The ``Source`` of ``kind`` reading ``source`` (``storage_options``: for an ``s3://``
    source, which the ``mds`` kind takes)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    module, name = KINDS[kind]
    cls = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    if storage_options is not None or _remote.is_url(os.fsdecode(source)):
        if kind != "mds":
            raise ValueError(f"the {kind} converter reads local sources only (mds also takes s3://)")
        return cls(source, storage_options)
    return cls(source)


def convert(kind: str, source: PathArg, destination: PathArg, *, workers: int | None = None,
            progress: bool = False, compression: str | None = None,
            storage_options: dict[str, Any] | None = None) -> int:
    """Converts ``source`` (of ``kind``, see the module) into a new dataset at
    ``destination``; returns its number of datapoints.

    ``workers`` processes convert units in parallel (default: one per CPU); ``progress``
    shows a bar with rate and ETA on stderr; ``compression`` (``"lz4"`` or ``"zstd"``)
    applies to every field but numbers; ``storage_options`` as for ``DatasetReader``, for an
    ``s3://`` source. Raises ``SourceError`` (a ``CorruptFileError``)
    naming the source file and record for data that cannot be converted, and
    ``FileExistsError`` when ``destination`` is taken.
    """
    opened = open_source(kind, source, storage_options)
    try:
        return run(opened, destination, workers=workers, progress=progress, compression=compression)
    finally:
        opened.close()
