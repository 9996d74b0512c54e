"""Token streams for language-model training: tokenized documents stored as a structured
dataset with a cumulative token index, read as fixed-length blocks (``TokenBlocks``:
concatenate, then split) or as packed documents (``PackedBlocks``), and converted from
text (``convert_text``). See ``docs/tokens.md``.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "docs")
>>> with TokenWriter(path, vocab_size=256) as writer:
...     for text in ("hello", "world!"):
...         _ = writer.append(list(text.encode()))
>>> TokenBlocks(path, block_size=4).read([1]).tolist()
[[111, 119, 111, 114, 108]]
"""

from __future__ import annotations

from .blocks import IGNORE_INDEX, PackedBlocks, TokenBlocks
from .convert import byte_tokenizer, convert_text
from .errors import (BlockSizeError, EmptyDocumentError, TokenError, TokenIndexError, TokenizerError,
                     TokenRangeError)
from .index import TokenIndex, build_index, dtype_for_vocab, load_index
from .packing import PackPlan, pack
from .stream import TokenStream
from .writer import TokenWriter

__all__ = [
    "IGNORE_INDEX", "BlockSizeError", "EmptyDocumentError", "PackPlan", "PackedBlocks",
    "TokenBlocks", "TokenError", "TokenIndex", "TokenIndexError", "TokenRangeError",
    "TokenStream", "TokenWriter", "TokenizerError", "build_index", "byte_tokenizer",
    "convert_text", "dtype_for_vocab", "load_index", "pack",
]
