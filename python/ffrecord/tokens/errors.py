"""The errors of token datasets. Each that concerns one document names it (``.index``: its
number in the dataset being written, or in the input being converted).

>>> issubclass(TokenRangeError, ValueError), issubclass(BlockSizeError, ValueError)
(True, True)
"""

from __future__ import annotations

from ..dataset.errors import DatapointError, DatasetError


class TokenError(DatapointError):
    """A document whose tokens cannot be stored (see the subclasses); nothing of it is
    written."""


class EmptyDocumentError(TokenError):
    """A document with no tokens (its text tokenized to nothing)."""


class TokenRangeError(TokenError):
    """A token id below 0, at or past the vocabulary size, or too large for the dataset's
    token dtype: in a document (``index`` names it), or given as an argument (a
    ``separator`` or ``pad_id``, named in the message; ``index`` is ``None``)."""


class TokenizerError(TokenError):
    """The tokenizer raised (the original exception is the ``__cause__``) or returned
    something other than a flat sequence of integers (floats, nested lists, strings)."""


class BlockSizeError(DatasetError):
    """A block size that cannot be used: not an integer, ``<= 0``, or more tokens than the
    dataset holds."""


class TokenIndexError(DatasetError):
    """A token field that cannot be indexed (not an uncompressed ``array`` field, values
    that are not 1-D ``uint16``/``uint32`` arrays of one dtype), or token counts that do not
    describe its documents. A stored index that does not match its field is not an error:
    it is built again (see ``ffrecord.tokens.binding``)."""
