"""``convert_text``: text documents to a token dataset, tokenized in parallel processes,
resumable after a failure (staged as every conversion is: ``converters._runner.Staging``).

The output is a sharded token dataset (``000000``, ``000001``, ... of ``shard_docs``
documents each, every shard with its token index) that ``TokenBlocks`` and
``PackedBlocks`` read. It is written in ``DEST.partial`` and renamed to ``DEST`` when
complete, so ``DEST`` exists only whole. After a failure (a bad document, a crash, an
interrupt), the same call again keeps the complete shards of ``DEST.partial`` and goes on
from the first document not in them. A shard is kept only while the documents it was made
from are still the source's: each shard's record in the staging manifest is a digest of its
documents (text and kept fields), compared with the source's documents at that place when
resuming, so a source fixed after a bad document resumes, and one changed before it is
converted again from the first changed shard.

>>> import tempfile, os, json
>>> folder = tempfile.mkdtemp()
>>> src = os.path.join(folder, "docs.jsonl")
>>> with open(src, "w") as f:
...     for text in ("one doc", "another one", "a third"):
...         _ = f.write(json.dumps({"text": text}) + "\\n")
>>> stats = convert_text(src, os.path.join(folder, "tokens"), byte_tokenizer, vocab_size=256,
...                      workers=0, progress=False)
>>> stats["documents"], stats["tokens"]
(3, 25)
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import pickle
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .. import _remote
from .._paths import PathArg
from .._progress import ProgressBar
from ..converters._runner import Staging, refuse_taken
from ..dataset.writer import shard_name
from .._integers import at_least
from . import sources
from .errors import TokenError, TokenizerError
from .index import dtype_for_vocab
from .writer import TokenWriter, as_tokens

PARTIAL = ".partial"
_BATCH_DOCS = 256


def byte_tokenizer(text: str) -> np.ndarray:
    """UTF-8 bytes as token ids (a vocabulary of 256): a tokenizer that needs nothing.

    >>> byte_tokenizer("hé").tolist()
    [104, 195, 169]
    """
    return np.frombuffer(text.encode("utf-8"), np.uint8)


def convert_text(source: Any, dest: PathArg, tokenizer: Callable[[str], Any], vocab_size: int, *,
                 text_field: str = "text", keep: Iterable[str] = (), shard_docs: int = 100_000,
                 workers: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Tokenizes the documents of ``source`` into the token dataset ``dest``.

    ``source``: a ``.jsonl`` or ``.parquet`` file or a list of them, a Hugging Face
    ``datasets.Dataset``, or any iterable of dicts; each document's text is its
    ``text_field``, and the fields named in ``keep`` are stored beside the tokens (as
    ``json`` values). ``tokenizer`` maps a text to a sequence of token ids below
    ``vocab_size`` (it must be picklable, e.g. a module-level function, for ``workers``).
    ``workers`` processes tokenize (default: the CPU count; 0: this process).

    A document that tokenizes to nothing, to ids outside ``[0, vocab_size)``, or to
    non-integers, or whose tokenization raises, stops the conversion with a ``TokenError``
    naming the document (its number in the source); the complete shards stay in
    ``DEST.partial`` for the call to resume once the cause is fixed.

    Returns ``{"documents", "tokens", "shards", "resumed_documents"}``.
    """
    shard_docs = at_least(shard_docs, "shard_docs", 1)
    dtype = dtype_for_vocab(vocab_size)
    keep = list(keep)
    if _remote.is_url(os.fsdecode(dest)):
        raise ValueError(f"{dest}: convert_text writes a local directory (upload it afterwards, or "
                         "write to s3:// with TokenWriter)")
    workers = (os.cpu_count() or 1) if workers is None else at_least(workers, "workers")
    if workers > 0:
        try:
            pickle.dumps(tokenizer)
        except Exception as exc:
            raise TypeError(f"the tokenizer goes to {workers} worker processes, so it must be picklable "
                            f"(a module-level function), or pass workers=0: {exc}") from None
    dest = Path(os.fsdecode(dest))
    refuse_taken(dest)
    staging = Staging(dest.with_name(dest.name + PARTIAL))
    state = {"source": sources.describe(source), "text_field": text_field, "keep": keep,
             "shard_docs": shard_docs, "vocab_size": int(vocab_size),
             "tokenizer": f"{getattr(tokenizer, '__module__', '?')}.{getattr(tokenizer, '__qualname__', type(tokenizer).__qualname__)}"}
    done_shards = _resume(staging, state, source, text_field, keep, shard_docs)
    skip = done_shards * shard_docs
    total = sources.count(source)
    documents = tokens = 0
    with ProgressBar(total, progress, desc="convert text", unit="doc") as bar:
        bar.update(skip)
        shard, writer, digest = done_shards, None, _ShardDigest()
        try:
            for first, (arrays, error), extras in _tokenized(source, text_field, keep, skip, tokenizer,
                                                             dtype, vocab_size, workers):
                for k, array in enumerate(arrays):
                    if writer is None:
                        writer = TokenWriter(staging.path / shard_name(shard), vocab_size,
                                             spec=dict.fromkeys(keep, "json"))
                    writer.append_checked(array, extras[k][1])
                    digest.add(extras[k][0])
                    documents += 1
                    tokens += len(array)
                    if len(writer) == shard_docs:
                        writer.close()
                        staging.record(shard_name(shard), digest.hexdigest())
                        writer, shard, digest = None, shard + 1, _ShardDigest()
                bar.update(len(arrays))
                if error is not None:  # the full shards before it stay, for resuming
                    raise error
            if writer is not None:
                writer.close()
                staging.record(shard_name(shard), digest.hexdigest())
                writer, shard = None, shard + 1
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
    if shard == 0:
        staging.discard()
        raise ValueError(f"{sources.describe(source)}: no documents to convert")
    staging.publish(dest)
    return {"documents": skip + documents, "tokens": tokens, "shards": shard, "resumed_documents": skip}


def _resume(staging: Staging, state: dict[str, Any], source: Any, text_field: str, keep: list[str],
            shard_docs: int) -> int:
    """The number of complete shards an earlier run left in ``staging`` that were made from
    the documents the source holds at their place now (a new conversion is started when
    there is none); the shards after the first changed one, and what an interrupted run
    left part-way, are removed."""
    complete = 0
    while staging.complete(shard_name(complete)):
        complete += 1
    now = _source_digests(source, text_field, keep, shard_docs, complete)
    unchanged = staging.resume(state, now)
    done = 0
    while shard_name(done) in unchanged:
        done += 1
    staging.keep_only(map(shard_name, range(done)))
    return done


class _ShardDigest:
    """A digest of a shard's documents, one document's digest after another."""

    def __init__(self) -> None:
        self._hash = hashlib.blake2b(digest_size=16)

    def add(self, document: bytes) -> None:
        self._hash.update(document)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _document_digest(text: Any, extras: dict[str, Any]) -> bytes:
    """What identifies a document: its text and kept fields (as the shard stores them)."""
    encoded = json.dumps([text, extras], sort_keys=True, default=repr).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(encoded, digest_size=16).digest()


def _source_digests(source: Any, text_field: str, keep: list[str], shard_docs: int, shards: int) -> dict[str, str]:
    """The digests of the first ``shards`` shards' documents as the source holds them now
    (fewer when it ends sooner): reading them costs far less than tokenizing them again."""
    digests: dict[str, str] = {}
    if shards == 0:
        return digests
    digest, in_shard = _ShardDigest(), 0
    for batch in sources.batches(source, text_field, keep, _BATCH_DOCS):
        for record in batch:
            digest.add(_document_digest(record.get(text_field), {name: record.get(name) for name in keep}))
            in_shard += 1
            if in_shard == shard_docs:
                digests[shard_name(len(digests))] = digest.hexdigest()
                if len(digests) == shards:
                    return digests
                digest, in_shard = _ShardDigest(), 0
    return digests


def _tokenized(source: Any, text_field: str, keep: list[str], skip: int, tokenizer: Callable,
               dtype: np.dtype, vocab_size: int, workers: int) -> Iterator[tuple[int, list, list]]:
    """``(first document number, (token arrays, error), documents)`` per batch, in order:
    the arrays of the documents before the batch's first bad one, and its error; and per
    document of the batch, its digest and its kept fields."""
    def jobs() -> Iterator[tuple[int, list[str], list[dict]]]:
        first = skip
        for batch in sources.batches(source, text_field, keep, _BATCH_DOCS, skip):
            texts, extras = [], []
            for k, record in enumerate(batch):
                if text_field not in record:
                    raise TokenizerError(f"document {first + k} has no field {text_field!r} "
                                         f"(fields: {', '.join(map(str, record))})", index=first + k)
                texts.append(record[text_field])
                kept = {name: record.get(name) for name in keep}
                extras.append((_document_digest(record[text_field], kept), kept))
            yield first, texts, extras
            first += len(batch)

    if workers <= 0:
        for first, texts, extras in jobs():
            yield first, _unpack(_tokenize_batch(first, texts, tokenizer, dtype, vocab_size)), extras
        return
    context = multiprocessing.get_context("spawn")  # never fork a process running the Go core
    with context.Pool(workers, _init_worker, (tokenizer, dtype, vocab_size)) as pool:
        pending = jobs()
        extras_of: dict[int, list[tuple[bytes, dict]]] = {}

        def texts_only() -> Iterator[tuple[int, list[str]]]:
            for first, texts, extras in pending:
                extras_of[first] = extras
                yield first, texts

        for first, result in pool.imap(_worker_batch, texts_only()):
            yield first, _unpack(result), extras_of.pop(first)


_worker: tuple[Callable, np.dtype, int] | None = None


def _init_worker(tokenizer: Callable, dtype: np.dtype, vocab_size: int) -> None:
    global _worker
    _worker = (tokenizer, dtype, vocab_size)


def _worker_batch(job: tuple[int, list[str]]) -> tuple[int, Any]:
    first, texts = job
    return first, _tokenize_batch(first, texts, *_worker)


def _tokenize_batch(first: int, texts: list[str], tokenizer: Callable, dtype: np.dtype,
                    vocab_size: int) -> tuple[np.ndarray, np.ndarray, tuple | None]:
    """The tokens of the batch's documents up to its first bad one, back to back, their
    lengths, and that document's error as ``(class name, message, document)`` or ``None``
    (exceptions cross processes badly)."""
    arrays, error = [], None
    for k, text in enumerate(texts):
        index = first + k
        try:
            if not isinstance(text, str):
                raise TokenizerError(f"document {index}: the text is {type(text).__name__}, not str",
                                     index=index)
            try:
                value = tokenizer(text)
            except Exception as exc:
                raise TokenizerError(f"document {index}: the tokenizer raised {type(exc).__name__}: {exc}",
                                     index=index) from exc
            arrays.append(as_tokens(value, dtype, vocab_size, index))
        except TokenError as exc:
            error = type(exc).__name__, str(exc), index
            break
    lengths = np.fromiter(map(len, arrays), np.int64, len(arrays))
    return np.concatenate(arrays) if arrays else np.empty(0, dtype), lengths, error


def _unpack(result: tuple[np.ndarray, np.ndarray, tuple | None]) -> tuple[list[np.ndarray], TokenError | None]:
    flat, lengths, error = result
    if error is not None:
        from . import errors

        name, message, index = error
        error = getattr(errors, name)(message, index=index)
    return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else [], error
