"""The errors of structured datasets: each names the field and, where one applies, the
datapoint.

All are ``ValueError`` subclasses except the two that are something else by nature: a
sequence range past the end is an ``IndexError`` and a missing optional package an
``ImportError``. Damaged files raise ``ffrecord.CorruptFileError`` (also a ``ValueError``).
"""

from __future__ import annotations

from ..errors import CorruptFileError


class DatasetError(ValueError):
    """Base class of the errors below that are ``ValueError``s."""


class SpecError(DatasetError):
    """A spec that cannot be used: a bad field name, an unknown type or compression, a
    type without an encoder (writing) or decoder (reading), shards whose specs differ."""


class UnsupportedVersionError(DatasetError):
    """The dataset's ``spec.json`` was written by a newer format version than this library
    reads."""


class IncompleteDatasetError(DatasetError):
    """The directory holds no complete dataset: no ``spec.json`` (the writer never finished,
    or it is not a dataset), or a field file is missing."""


class DatasetChangedError(DatasetError):
    """A copy of a reader (unpickled, e.g. in a loader worker) found the dataset changed
    since its original opened it: another ``spec.json`` (fields, length, metadata), other
    shards, or a field file replaced. The copy never reads the new data with the old spec:
    reopen the dataset to read what is there now."""


class CorruptDatasetError(CorruptFileError):
    """A field file disagrees with ``spec.json`` (another datapoint count) or a sequence's
    element table is damaged (bad bounds, an element CRC-32 that does not match)."""


class DatapointError(DatasetError):
    """A datapoint that cannot be written: not a dict, a field missing or unexpected, a
    sequence field given something that is not a list. ``field`` and ``index`` say where."""

    def __init__(self, message: str, *, field: str | None = None, index: int | None = None):
        super().__init__(message)
        self.field = field
        self.index = index


class CodecError(DatapointError):
    """An encoder or decoder raised (the original exception is the ``__cause__``) or
    returned something other than bytes."""


class MixtureError(DatasetError):
    """A mixture that cannot be built as asked: weights negative, not finite or all 0 (at
    the start or at a schedule's step), schedule positions that do not increase, a count
    of weights, lengths or names that is not one per member, a member holding fewer
    datapoints than ``lengths=`` says, or a member with a weight that has none."""


class MaskError(DatasetError):
    """A mask that cannot be applied: an unknown field, a range on a field that is not a
    sequence, a range with a negative start or a step below 1."""


class SequenceRangeError(IndexError):
    """A mask's range ends past the end of a datapoint's sequence."""


class MissingDependencyError(ImportError):
    """A built-in codec needs a package that is not installed (``msgpack``, ``Pillow``)."""
