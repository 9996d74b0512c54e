"""Converting a Granular dataset (the ``granular`` package's on-disk format) to ours: the
``granular`` kind of ``ffrecord.converters`` (see ``ffrecord.converters.granular`` for the
format and how its types map to ours), under the name this module has always offered.
"""

from __future__ import annotations

from .._paths import PathArg


def from_granular(source: PathArg, destination: PathArg, *, compression: str | None = None,
                  verbose: bool = False, workers: int | None = None) -> int:
    """Converts the Granular dataset (plain or sharded) at ``source`` into a new dataset at
    ``destination`` (sharded the same way), as ``convert("granular", ...)`` does;
    ``compression`` (``"lz4"`` or ``"zstd"``) applies to every field but the integers,
    ``verbose`` shows a progress bar. Returns the number of datapoints.

    >>> from_granular("granular_ds", "ffrecord_ds")      # doctest: +SKIP
    1000
    """
    from ..converters import convert

    return convert("granular", source, destination, workers=workers, progress=verbose,
                   compression=compression)
