"""Token datasets (``ffrecord.tokens``): storage with a token index, concat-then-split
blocks, packing, loader output, conversion from text, bad inputs, and s3:// reads.

Every expected value comes from a plain-Python model of the same documents (the tokens
concatenated with numpy), never from the code under test.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ffrecord.dataset import DatasetReader, DatasetWriter
from ffrecord.tokens import (BlockSizeError, EmptyDocumentError, PackedBlocks, TokenBlocks,
                             TokenIndexError, TokenizerError, TokenRangeError, TokenWriter,
                             byte_tokenizer, convert_text, load_index, pack)
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

torch = pytest.importorskip("torch")


# ---- tokenizers made here (module level: spawned workers import them) -----------------

def word_tokenizer(text: str) -> list[int]:
    """Words to ids by a fixed hash: a vocabulary of 70,000 (stored as uint32)."""
    return [sum(map(ord, word)) * 31 % 70_000 for word in text.split()]


def failing_tokenizer(text: str) -> list[int]:
    if "poison" in text:
        raise RuntimeError("cannot tokenize poison")
    return list(text.encode())


def float_tokenizer(text: str) -> list[float]:
    return [float(b) for b in text.encode()]


def random_documents(count: int, seed: int, low: int = 1, high: int = 40, vocab: int = 1000) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, rng.integers(low, high)) for _ in range(count)]


def write_docs(path: Path, docs: list[np.ndarray], vocab: int = 1000) -> Path:
    with TokenWriter(path, vocab_size=vocab) as writer:
        for doc in docs:
            writer.append(doc)
    return path


def write_sharded(path: Path, docs: list[np.ndarray], shard_docs: int) -> Path:
    for shard, at in enumerate(range(0, len(docs), shard_docs)):
        write_docs(path / f"{shard:06d}", docs[at:at + shard_docs])
    return path


def stream_of(docs: list[np.ndarray], separator: int | None) -> np.ndarray:
    parts = [np.append(d, separator) if separator is not None else d for d in docs]
    return np.concatenate(parts).astype(np.int64)


# ---- storage and the index -----------------------------------------------------------

def test_writer_stores_arrays_and_index(tmp_path: Path) -> None:
    docs = random_documents(50, 1)
    write_docs(tmp_path / "d", docs)
    assert sorted(os.listdir(tmp_path / "d")) == ["_manifest", "spec.json", "tokens.ffr", "tokens.index"]
    reader = DatasetReader(tmp_path / "d")
    assert [d["tokens"].dtype for d in reader.read([0, 49])] == [np.uint16, np.uint16]
    assert all((reader[k]["tokens"] == docs[k]).all() for k in range(50))
    index = load_index(tmp_path / "d")
    assert index.starts.tolist() == [0, *np.cumsum([len(d) for d in docs]).tolist()]
    big = write_docs(tmp_path / "big", [np.array([69_999, 0])], vocab=70_000)
    assert DatasetReader(big)[0]["tokens"].dtype == np.uint32


def test_index_built_once_for_a_plain_array_dataset(tmp_path: Path) -> None:
    docs = random_documents(30, 2) + [np.arange(120_000, dtype=np.uint16) % 1000]
    with DatasetWriter(tmp_path / "plain", {"tokens": "array", "lang": "utf8"}) as writer:
        for doc in docs:
            writer.append({"tokens": doc.astype(np.uint16), "lang": "en"})
    assert not (tmp_path / "plain" / "tokens.index").exists()
    blocks = TokenBlocks(tmp_path / "plain", block_size=64)
    assert (tmp_path / "plain" / "tokens.index").exists()  # cached for the next open
    flat = stream_of(docs, None)
    assert (blocks.read([3])[0] == flat[192:257]).all()
    assert load_index(tmp_path / "plain").starts[-1] == len(flat)

    with DatasetWriter(tmp_path / "mixed", {"tokens": "array"}) as writer:
        writer.append({"tokens": np.arange(5, dtype=np.uint16)})
        writer.append({"tokens": np.arange(5, dtype=np.int64)})
    with pytest.raises(TokenIndexError, match="document 1"):
        TokenBlocks(tmp_path / "mixed", block_size=2)


# ---- concat-then-split ---------------------------------------------------------------

@pytest.mark.parametrize("separator", [None, 999])
@pytest.mark.parametrize("block_size", [1, 7, 64])
def test_blocks_equal_the_concatenation(tmp_path: Path, separator: int | None, block_size: int) -> None:
    docs = random_documents(120, 3)
    path = write_sharded(tmp_path / "s", docs, shard_docs=50)
    flat = stream_of(docs, separator)
    blocks = TokenBlocks(path, block_size=block_size, separator=separator)
    assert len(blocks) == (len(flat) - 1) // block_size
    order = np.random.default_rng(0).permutation(len(blocks))
    for at in range(0, len(order), 37):
        batch = order[at:at + 37]
        got = blocks.read(batch)
        assert got.dtype == np.int64
        want = np.stack([flat[i * block_size:i * block_size + block_size + 1] for i in batch])
        assert (got == want).all()
    last = blocks[len(blocks) - 1]
    assert (last == flat[(len(blocks) - 1) * block_size:len(blocks) * block_size + 1]).all()


def test_blocks_of_wide_tokens_and_bad_block_indices(tmp_path: Path) -> None:
    """uint32 ids are widened whole; a block past the end is an IndexError naming it, and
    the core is never handed an array of the wrong kind."""
    docs = random_documents(30, 5, vocab=1 << 20)
    path = write_docs(tmp_path / "wide", docs, vocab=1 << 20)
    flat = stream_of(docs, 7)
    blocks = TokenBlocks(path, block_size=5, separator=7)
    assert blocks.stream.dtype == np.uint32 and flat.max() > 1 << 16
    got = blocks.read([len(blocks) - 1, 0, -1])
    assert (got[0] == flat[(len(blocks) - 1) * 5:len(blocks) * 5 + 1]).all() and (got[1] == flat[:6]).all()
    assert (got[2] == got[0]).all()
    with pytest.raises(IndexError, match=f"block {len(blocks)} out of range for {len(blocks)} blocks"):
        blocks.read([0, len(blocks)])
    with pytest.raises(ValueError, match="int64"):
        blocks._windows.read(np.zeros(1, np.uint64), 5, 6, np.zeros(6, np.int32))
    with pytest.raises(ValueError, match="uint64"):
        blocks._windows.read(np.zeros(1, np.int64), 5, 6, np.zeros(6, np.int64))


def test_block_dict_marks_documents(tmp_path: Path) -> None:
    docs = random_documents(40, 4, high=12)
    path = write_docs(tmp_path / "d", docs)
    doc_of = np.concatenate([np.full(len(d) + 1, k) for k, d in enumerate(docs)])
    pos_in_doc = np.concatenate([np.arange(len(d) + 1) for d in docs])
    blocks = TokenBlocks(path, block_size=16, separator=0, as_dict=True)
    flat = stream_of(docs, 0)
    for i in range(len(blocks)):
        out = blocks.read_dict([i])
        span = slice(i * 16, i * 16 + 16)
        assert (out["input_ids"][0] == flat[span]).all()
        assert (out["labels"][0] == flat[i * 16 + 1:i * 16 + 17]).all()
        owners = doc_of[span]
        segments = np.unique(owners, return_inverse=True)[1] + 1
        assert (out["segment_ids"][0] == segments).all()
        first = pos_in_doc[span] - np.where(owners == owners[0], pos_in_doc[i * 16], 0)
        assert (out["positions"][0] == first).all()


def test_block_size_errors(tmp_path: Path) -> None:
    path = write_docs(tmp_path / "d", [np.arange(10)])
    for bad in (0, -3):
        with pytest.raises(BlockSizeError, match="positive"):
            TokenBlocks(path, block_size=bad)
    with pytest.raises(BlockSizeError, match="larger than the dataset"):
        TokenBlocks(path, block_size=10)  # 10 tokens hold no block of 10 + 1
    assert len(TokenBlocks(path, block_size=9)) == 1
    with pytest.raises(BlockSizeError, match="larger than the dataset"):
        PackedBlocks(path, block_size=11)
    for bad in (2.5, True, "8"):
        with pytest.raises(BlockSizeError):
            TokenBlocks(path, block_size=bad)
    with pytest.raises(IndexError):
        TokenBlocks(path, block_size=3).read([3])
    with pytest.raises(ValueError, match="separator"):
        TokenBlocks(path, block_size=3, separator=-1)


# ---- packing -------------------------------------------------------------------------

@pytest.mark.parametrize("method,window", [("first_fit", None), ("best_fit", None), ("best_fit", 16)])
def test_packed_blocks_hold_every_token_once(tmp_path: Path, method: str, window: int | None) -> None:
    docs = random_documents(80, 5, high=70)
    path = write_docs(tmp_path / "d", docs)
    packed = PackedBlocks(path, block_size=32, method=method, window=window, seed=3, pad_id=0)
    out = packed.read_dict(np.arange(len(packed)))
    seen = []
    for row in range(len(packed)):
        seg, pos, ids, labels = (out[k][row] for k in ("segment_ids", "positions", "input_ids", "labels"))
        real = seg > 0
        assert (np.diff(seg[real]) >= 0).all() and not real[np.argmin(real):].any() if not real.all() else True
        assert (ids[~real] == 0).all() and (labels[~real] == -100).all()
        for s in np.unique(seg[real]):
            piece = ids[seg == s]
            assert (pos[seg == s] == np.arange(len(piece))).all()
            assert (labels[seg == s][:-1] == piece[1:]).all() and labels[seg == s][-1] == -100
            seen.append(piece)
    # every document's tokens, split at most into pieces in order, appear exactly once
    assert sorted(np.concatenate(seen).tolist()) == sorted(np.concatenate(docs).tolist())
    assert abs(packed.padding_fraction - (1 - sum(map(len, docs)) / (len(packed) * 32))) < 1e-12
    again = PackedBlocks(path, block_size=32, method=method, window=window, seed=3)
    assert (again.read(np.arange(len(again))) == out["input_ids"]).all()


def test_windowed_best_fit_pads_within_a_point_of_ffd() -> None:
    lengths = np.random.default_rng(6).integers(50, 5000, 4000)
    ffd = pack(lengths, 2048, "first_fit").padding_fraction
    windowed = pack(lengths, 2048, "best_fit", window=1000, seed=1).padding_fraction
    assert windowed - ffd < 0.01, (windowed, ffd)
    plan = pack(lengths, 2048, "best_fit", window=1000, seed=1)
    per_doc = np.bincount(plan.doc, weights=plan.count, minlength=len(lengths))
    assert (per_doc == lengths).all() and (np.add.reduceat(plan.count, plan.ptr[:-1]) <= 2048).all()


# ---- bad documents -------------------------------------------------------------------

def test_writer_refuses_bad_documents_and_stays_usable(tmp_path: Path) -> None:
    with TokenWriter(tmp_path / "d", vocab_size=300) as writer:
        writer.append([1, 2])
        cases = [([1, 300], TokenRangeError, "300"), ([-1], TokenRangeError, "-1"),
                 ([], EmptyDocumentError, "document 1"), ([1.5, 2.0], TokenizerError, "float"),
                 ([[1, 2]], TokenizerError, "2-D"), ("abc", TokenizerError, "0-D")]
        for value, error, text in cases:
            with pytest.raises(error, match=text) as info:
                writer.append(value)
            assert info.value.index == 1
        writer.append([3])
    assert [d["tokens"].tolist() for d in DatasetReader(tmp_path / "d")] == [[1, 2], [3]]
    with pytest.raises(TokenRangeError):
        TokenWriter(tmp_path / "e", vocab_size=70_000).append([70_000])


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t, "src": f"s{k}"}) + "\n" for k, t in enumerate(texts)))
    return path


TEXTS = [f"document {k} " + "lorem ipsum dolor " * (k % 7 + 1) for k in range(40)]


@pytest.mark.parametrize("tokenizer,error,text", [
    (failing_tokenizer, TokenizerError, "document 23: the tokenizer raised RuntimeError"),
    (float_tokenizer, TokenizerError, "document 0: .*float"),
])
def test_convert_names_the_bad_document(tmp_path: Path, tokenizer, error, text) -> None:
    texts = list(TEXTS)
    texts[23] = "poison"
    with pytest.raises(error, match=text):
        convert_text(write_jsonl(tmp_path / "in.jsonl", texts), tmp_path / "out", tokenizer, 256,
                     workers=0, shard_docs=10, progress=False)
    assert not (tmp_path / "out").exists()


def test_convert_resumes_after_a_failure(tmp_path: Path) -> None:
    texts = list(TEXTS)
    texts[23] = ""
    source = write_jsonl(tmp_path / "in.jsonl", texts)
    with pytest.raises(EmptyDocumentError, match="document 23") as info:
        convert_text(source, tmp_path / "out", byte_tokenizer, 256, workers=2, shard_docs=10,
                     progress=False)
    assert info.value.index == 23 and not (tmp_path / "out").exists()
    assert sorted(os.listdir(tmp_path / "out.partial")) == ["000000", "000001", "convert.json"]
    with pytest.raises(TypeError, match="picklable"):
        convert_text(source, tmp_path / "out", lambda text: [1], 256, workers=2, shard_docs=10)
    with pytest.raises(ValueError, match="other settings"):
        convert_text(source, tmp_path / "out", byte_tokenizer, 256, workers=0, shard_docs=5)
    texts[23] = "fixed"
    write_jsonl(source, texts)
    stats = convert_text(source, tmp_path / "out", byte_tokenizer, 256, workers=0, shard_docs=10,
                         progress=False, keep=())
    assert stats["resumed_documents"] == 20 and stats["documents"] == 40 and stats["shards"] == 4
    blocks = TokenBlocks(tmp_path / "out", block_size=8)
    assert blocks.tokens == sum(len(t.encode()) for t in texts)
    assert (blocks.read([0])[0] == list(texts[0].encode()[:9])).all()


def test_convert_does_not_resume_shards_whose_documents_changed(tmp_path: Path) -> None:
    texts = list(TEXTS)
    texts[23] = ""
    source = write_jsonl(tmp_path / "in.jsonl", texts)
    with pytest.raises(EmptyDocumentError):
        convert_text(source, tmp_path / "out", byte_tokenizer, 256, workers=0, shard_docs=10, progress=False)
    texts[23], texts[14] = "fixed", "rewritten since the first run"  # shard 1 changed, shard 0 not
    write_jsonl(source, texts)
    stats = convert_text(source, tmp_path / "out", byte_tokenizer, 256, workers=0, shard_docs=10,
                         progress=False)
    assert stats["resumed_documents"] == 10 and stats["documents"] == 40
    blocks = TokenBlocks(tmp_path / "out", block_size=8)
    assert blocks.tokens == sum(len(t.encode()) for t in texts)
    stream = np.concatenate([blocks.read([k])[0][:8] for k in range(blocks.tokens // 8)])
    want = np.frombuffer("".join(texts).encode(), np.uint8)[:len(stream)]
    assert (stream == want).all()


def test_convert_from_parquet_hf_and_iterables_agree(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    datasets = pytest.importorskip("datasets")
    table = pa.table({"text": TEXTS, "src": [f"s{k}" for k in range(len(TEXTS))]})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=7)
    sources = {"parquet": tmp_path / "in.parquet", "hf": datasets.Dataset.from_dict(table.to_pydict()),
               "jsonl": write_jsonl(tmp_path / "in.jsonl", TEXTS),
               "dicts": [{"text": t, "src": f"s{k}"} for k, t in enumerate(TEXTS)]}
    want = stream_of([np.array(word_tokenizer(t)) for t in TEXTS], None)
    for name, source in sources.items():
        convert_text(source, tmp_path / name, word_tokenizer, 70_000, keep=["src"], workers=0,
                     shard_docs=16, progress=False)
        blocks = TokenBlocks(tmp_path / name, block_size=len(want) - 1)
        assert (blocks.read([0])[0] == want).all(), name
        assert DatasetReader(tmp_path / name / "000002")[0]["src"] == "s32"


def test_cli_convert_text(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    proc = subprocess.run([sys.executable, "-m", "ffrecord", "convert", "text", str(source),
                           str(tmp_path / "out"), "--workers", "0", "--shard-docs", "25"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "40 documents" in proc.stdout
    assert len(TokenBlocks(tmp_path / "out", block_size=100)) > 0
    bad = subprocess.run([sys.executable, "-m", "ffrecord", "convert", "text", str(source),
                          str(tmp_path / "out2"), "--tokenizer", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "MODULE:FUNCTION" in bad.stderr


# ---- the DataLoader, pickling, s3 ----------------------------------------------------

def test_dataloader_workers_shuffle_and_resume(tmp_path: Path) -> None:
    from ffrecord.torch import DataLoader

    docs = random_documents(200, 7)
    path = write_sharded(tmp_path / "s", docs, shard_docs=64)
    blocks = TokenBlocks(path, block_size=16, separator=1, as_dict=True)
    clone = pickle.loads(pickle.dumps(blocks))
    assert len(clone) == len(blocks) and (clone.read([5]) == blocks.read([5])).all()
    options = dict(batch_size=8, shuffle=True, seed=4, num_workers=2, timeout=60)
    full = list(DataLoader(blocks, **options))
    assert all(b["input_ids"].dtype == torch.int64 and b["input_ids"].shape[1] == 16 for b in full)
    firsts = sorted(int(b) for batch in full for b in batch["input_ids"][:, 0])
    flat = stream_of(docs, 1)
    assert firsts == sorted(int(flat[i * 16]) for i in range(len(blocks)))
    jumped = DataLoader(blocks, **options)
    jumped.set_step(3)
    assert all((a["labels"] == b["labels"]).all() for a, b in zip(list(jumped), full[3:]))
    plain = TokenBlocks(path, block_size=16)
    stock = list(torch.utils.data.DataLoader(plain, batch_size=8))  # torch's own collate
    assert stock[1].shape == (8, 17) and (stock[1].numpy() == plain.read(range(8, 16))).all()
    assert [len(b) for b in plain[[2, 0]]] == [17, 17] and (plain[[2, 0]][1] == plain[0]).all()
    packed = PackedBlocks(path, block_size=16)
    batch = next(iter(DataLoader(packed, batch_size=4, num_workers=0)))
    assert set(batch) == {"input_ids", "labels", "segment_ids", "positions"}
    assert (batch["input_ids"].numpy() == packed.read_dict(range(4))["input_ids"]).all()


def test_blocks_over_s3(bucket, tmp_path: Path) -> None:  # noqa: F811 - fixture
    client, name, options = bucket
    docs = random_documents(60, 8)
    with TokenWriter(f"s3://{name}/tok/", vocab_size=1000, storage_options=options) as writer:
        for doc in docs:
            writer.append(doc)
    blocks = TokenBlocks(f"s3://{name}/tok/", block_size=10, storage_options=options)
    flat = stream_of(docs, None)
    assert (blocks.read([4, 0])[0] == flat[40:51]).all()
    again = pickle.loads(pickle.dumps(blocks))
    assert (again.read([len(blocks) - 1]) == blocks.read([-1])).all()


def test_docstring_examples_run() -> None:
    import doctest

    from ffrecord import tokens
    from ffrecord.tokens import (arguments, binding, blocks, convert, errors, index, packing, sources, stream,
                                 writer)
    from ffrecord.torch import collate

    for module in (tokens, arguments, binding, blocks, convert, errors, index, packing, sources, stream, writer,
                   collate):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
