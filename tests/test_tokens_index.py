"""A token index is bound to the token field it was built from: a dataset rewritten in
place, an index damaged in any way, of another format, planted by another user or not a
file at all is never used; the blocks always equal the documents concatenated (a numpy
model of them), and the index is built again and saved in its place. And the numbers
token datasets take (token ids, windows, seeds, counts) are checked, naming the argument.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from ffrecord import FileReader
from ffrecord.dataset import DatasetReader, DatasetWriter
from ffrecord.errors import FFRecordWarning
from ffrecord.tokens import (BlockSizeError, PackedBlocks, TokenBlocks, TokenIndex, TokenRangeError,
                             TokenWriter, convert_text, byte_tokenizer, load_index, pack)
from ffrecord.tokens.binding import FORMAT, field_source
from remote_fixtures import bucket, s3_endpoint  # noqa: F401 - fixtures

NOBODY = 65534


def documents(count: int, seed: int, dtype: type = np.uint16, high: int = 40) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 1000, rng.integers(1, high)).astype(dtype) for _ in range(count)]


def write_plain(path: Path, docs: list[np.ndarray]) -> Path:
    """A token dataset written without a TokenWriter: no index until one is built."""
    with DatasetWriter(path, {"tokens": "array"}) as writer:
        for doc in docs:
            writer.append({"tokens": doc})
    return path


def write_tokens(path: Path, docs: list[np.ndarray]) -> Path:
    with TokenWriter(path, vocab_size=1000) as writer:
        for doc in docs:
            writer.append(doc)
    return path


def rewrite_in_place(path: Path, docs: list[np.ndarray]) -> None:
    """The dataset's files replaced by another's, its index left behind."""
    for name in ("spec.json", "tokens.ffr"):
        os.unlink(path / name)
    shutil.rmtree(path / "_manifest")
    write_plain(path, docs)


def assert_blocks_match(path: Path, docs: list[np.ndarray], block_size: int = 7) -> None:
    flat = np.concatenate(docs).astype(np.int64)
    blocks = TokenBlocks(path, block_size=block_size)
    count = (len(flat) - 1) // block_size
    assert len(blocks) == count
    expected = np.stack([flat[i * block_size:i * block_size + block_size + 1] for i in range(count)])
    assert (blocks.read(np.arange(count)) == expected).all()


def opened_quietly(path: Path) -> TokenIndex:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_index(path)


def stored_header(path: Path) -> dict:
    with FileReader(path / "tokens.index") as file:
        return json.loads(file.read_one(0).tobytes())


# ---- rewritten in place ---------------------------------------------------------------------

@pytest.mark.parametrize("write_first", [write_plain, write_tokens])
def test_a_dataset_rewritten_in_place_gets_its_index_rebuilt(tmp_path: Path, write_first) -> None:
    """The issue's case: 20 documents, then 20 others, then 32 others:
    each open sees the field file it reads, never the index of the one before."""
    path = write_first(tmp_path / "d", documents(20, 1))
    assert_blocks_match(path, documents(20, 1))
    for docs in (documents(20, 3), documents(32, 2)):
        rewrite_in_place(path, docs)
        change = "built from another tokens.ffr" if len(docs) == 20 else "not the 264 of the 32 documents"
        with pytest.warns(FFRecordWarning, match=change):
            assert_blocks_match(path, docs)
        opened_quietly(path)  # saved in its place, bound to the new field file
        assert stored_header(path)["source"]["samples"] == len(docs)


def test_same_sizes_in_another_dtype_are_another_source(tmp_path: Path) -> None:
    """uint16 documents of 4 and 6 tokens take the bytes of uint32 ones of 2 and 3: only the
    header tables (each sample's CRC-32) tell the rewrite apart."""
    narrow = [np.arange(4, dtype=np.uint16), np.arange(6, dtype=np.uint16) + 10]
    wide = [np.array([70_000, 70_001], np.uint32), np.array([5, 6, 7], np.uint32)]
    path = write_tokens(tmp_path / "d", narrow)
    assert_blocks_match(path, narrow, block_size=3)
    rewrite_in_place(path, wide)
    with DatasetReader(path) as reader:
        assert field_source(reader.field_reader("tokens")).sizes.tolist() == [24, 28]
    with pytest.warns(FFRecordWarning):
        assert_blocks_match(path, wide, block_size=3)
    assert opened_quietly(path).dtype == np.uint32


def test_a_token_writer_binds_its_index(tmp_path: Path) -> None:
    docs = documents(50, 4)
    path = write_tokens(tmp_path / "d", docs)
    header = stored_header(path)
    assert header["format"] == FORMAT and header["documents"] == 50 and header["field"] == "tokens"
    assert header["source"]["file"] == "tokens.ffr" and header["source"]["samples"] == 50
    index = opened_quietly(path)
    assert index.starts.tolist() == [0, *np.cumsum([len(d) for d in docs]).tolist()]
    stats = convert_text([{"text": "ab"}, {"text": "cde"}], tmp_path / "c", byte_tokenizer, 256,
                         shard_docs=1, workers=0, progress=False)
    assert stats["shards"] == 2 and opened_quietly(tmp_path / "c" / "000001").tokens == 3


# ---- damaged, foreign or not a file ---------------------------------------------------------

def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(size: int):
    def damage(index: Path, dataset: Path) -> None:
        data = index.read_bytes()
        index.write_bytes(data[:size if size >= 0 else len(data) + size])
    return damage


def _replace_with(make):
    def damage(index: Path, dataset: Path) -> None:
        index.unlink()
        make(index, dataset)
    return damage


def _crafted(header_change=None, starts_change=None, samples=None):
    """An index with valid CRC-32s whose contents lie."""
    def damage(index: Path, dataset: Path) -> None:
        with FileReader(index) as file:
            header, starts = (file.read_one(k).tobytes() for k in (0, 1))
        header = json.loads(header)
        starts = np.frombuffer(starts, "<i8").copy()
        if header_change:
            header_change(header)
        if starts_change:
            starts_change(starts)
        from ffrecord import FileWriter
        parts = samples(header, starts) if samples else [json.dumps(header).encode(), starts.tobytes()]
        with FileWriter(index, len(parts)) as writer:
            for part in parts:
                writer.write_one(part)
    return damage


def _other_dataset_index(index: Path, dataset: Path) -> None:
    other = write_tokens(dataset.parent / "other", documents(12, 9))
    index.write_bytes((other / "tokens.index").read_bytes())


def _shift_tokens(starts: np.ndarray) -> None:
    starts[1] += 1  # document 0 one token longer, document 1 one shorter: the total unchanged


DAMAGES = {
    "empty": _truncate(0),
    "header only": _truncate(20),
    "one byte short": _truncate(-1),
    "half": _truncate(-200),
    "a byte more": lambda index, dataset: index.write_bytes(index.read_bytes() + b"\0"),
    "1 GiB sparse": lambda index, dataset: os.truncate(index, 1 << 30),
    "a FIFO": _replace_with(lambda index, dataset: os.mkfifo(index)),
    "a link to /dev/zero": _replace_with(lambda index, dataset: os.symlink("/dev/zero", index)),
    "a link to a valid index": _replace_with(
        lambda index, dataset: os.symlink(write_tokens(dataset.parent / "twin", documents(40, 5)) /
                                          "tokens.index", index)),
    "a directory": _replace_with(lambda index, dataset: index.mkdir()),
    "another dataset's index": _other_dataset_index,
    "format 1": _crafted(lambda h: [h.pop("format"), h.pop("source")]),
    "another field": _crafted(lambda h: h.update(field="text")),
    "a dtype of int64": _crafted(lambda h: h.update(dtype="<i8")),
    "a source of other samples": _crafted(lambda h: h["source"].update(samples=39)),
    "a count that disagrees": _crafted(lambda h: h.update(tokens=h["tokens"] + 1)),
    "starts that disagree with the sizes": _crafted(starts_change=_shift_tokens),
    "starts going down": _crafted(starts_change=lambda s: s.__setitem__(slice(2, 4), s[2:4][::-1])),
    "no JSON": _crafted(samples=lambda h, s: [b"\xff not json", s.tobytes()]),
    "a JSON list": _crafted(samples=lambda h, s: [b"[1, 2]", s.tobytes()]),
    "three samples": _crafted(samples=lambda h, s: [json.dumps(h).encode(), s.tobytes(), b""]),
    "a huge header": _crafted(samples=lambda h, s: [b" " * (1 << 17), s.tobytes()]),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_bad_index_is_dropped_and_built_again(tmp_path: Path, damage: str) -> None:
    docs = documents(40, 6)
    path = write_tokens(tmp_path / "d", docs)
    DAMAGES[damage](path / "tokens.index", path)
    with pytest.warns(FFRecordWarning, match="tokens.index: not used"):
        assert_blocks_match(path, docs)
        packed = PackedBlocks(path, block_size=16)
    assert sorted(np.concatenate(list(packed.read_dict(range(len(packed)))["input_ids"])).tolist()) \
        == sorted(np.concatenate(docs + [np.zeros(len(packed) * 16 - sum(map(len, docs)), int)]).tolist())
    if damage != "a directory":  # in its place: a regular file bound to the field
        assert (path / "tokens.index").is_file() and not (path / "tokens.index").is_symlink()
        assert opened_quietly(path).documents == 40


def test_a_count_that_wraps_around_is_seen(tmp_path: Path) -> None:
    """uint32 counts 2**62 too large take, times 4, the bytes of the true ones modulo 2**64
    (but a longer array header)."""
    docs = [np.array([70_000, 1, 2], np.uint32), np.array([3, 4], np.uint32)]
    path = tmp_path / "wide"
    with TokenWriter(path, vocab_size=1 << 20) as writer:
        for doc in docs:
            writer.append(doc)
    _crafted(lambda h: h.update(tokens=h["tokens"] + 2**62),
             lambda s: s.__setitem__(slice(1, None), s[1:] + 2**62))(path / "tokens.index", path)
    with pytest.warns(FFRecordWarning, match="document 0 holds 28 bytes"):
        assert_blocks_match(path, docs, block_size=2)


def test_any_flipped_byte_of_an_index_is_seen(tmp_path: Path) -> None:
    docs = documents(10, 7)
    path = write_tokens(tmp_path / "d", docs)
    index = path / "tokens.index"
    good = index.read_bytes()
    expected = opened_quietly(path).starts
    for at in range(len(good)):
        index.write_bytes(good)
        _flip(index, at)
        with pytest.warns(FFRecordWarning, match="not used"):
            assert (load_index(path).starts == expected).all(), at


def test_an_index_planted_by_another_user_is_not_used(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("planting a file as another user takes root (as CI runs)")
    docs = documents(30, 8)
    path = write_tokens(tmp_path / "d", docs)
    os.chown(path / "tokens.index", NOBODY, NOBODY)
    with pytest.warns(FFRecordWarning, match=f"owned by user {NOBODY}"):
        assert_blocks_match(path, docs)
    assert (path / "tokens.index").stat().st_uid == 0  # replaced by the reader's own
    os.chown(path / "tokens.ffr", NOBODY, NOBODY)
    os.chown(path / "tokens.index", NOBODY, NOBODY)
    opened_quietly(path)  # the dataset owner's index is used


def test_a_stale_index_over_s3_is_rebuilt_in_memory(bucket, tmp_path: Path) -> None:  # noqa: F811
    client, name, options = bucket
    docs = documents(30, 10)
    url = f"s3://{name}/tok/"
    with TokenWriter(url, vocab_size=1000, storage_options=options) as writer:
        for doc in docs:
            writer.append(doc)
    other = write_tokens(tmp_path / "other", documents(30, 11))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the index the writer uploaded is used
        blocks = TokenBlocks(url, block_size=5, storage_options=options)
    flat = np.concatenate(docs).astype(np.int64)
    assert (blocks.read([3])[0] == flat[15:21]).all()
    client.put_object(Bucket=name, Key="tok/tokens.index", Body=(other / "tokens.index").read_bytes())
    with pytest.warns(FFRecordWarning, match="built from another"):
        blocks = TokenBlocks(url, block_size=5, storage_options=options)
    assert (blocks.read(np.arange(len(blocks)))[:, 0] == flat[:len(blocks) * 5:5]).all()


# ---- the numbers token datasets take --------------------------------------------------------

@pytest.mark.parametrize("name,value,error,match", [
    ("separator", 2**64 + 5, TokenRangeError, "separator 18446744073709551621 is not a token id"),
    ("separator", 2**63, TokenRangeError, "uint16, 0 to 65535"),
    ("separator", 65_536, TokenRangeError, "separator 65536"),
    ("separator", -1, TokenRangeError, "separator -1"),
    ("separator", True, TypeError, "separator must be an integer"),
    ("separator", 3.0, TypeError, "separator must be an integer"),
    ("pad_id", 2**63, TokenRangeError, "pad_id 9223372036854775808"),
    ("pad_id", -5, TokenRangeError, "pad_id -5"),
    ("pad_id", "0", TypeError, "pad_id must be an integer"),
    ("window", 0, ValueError, "window must be >= 1"),
    ("window", 1.5, TypeError, "window must be an integer"),
    ("window", float("nan"), TypeError, "window must be an integer"),
    ("seed", -1, ValueError, "seed must be >= 0"),
    ("seed", 0.5, TypeError, "seed must be an integer"),
    ("seed", None, TypeError, "seed must be an integer"),
    ("block_size", 2**64, BlockSizeError, "larger than the dataset"),
    ("block_size", float("inf"), BlockSizeError, "block_size must be an integer"),
])
def test_token_arguments_are_checked(tmp_path: Path, name: str, value, error, match: str) -> None:
    path = write_tokens(tmp_path / "d", documents(20, 12))
    kind = TokenBlocks if name == "separator" else PackedBlocks
    arguments = {"block_size": 4, name: value}
    with pytest.raises(error, match=match):
        kind(path, **arguments)
    assert issubclass(error, (ValueError, TypeError))


def test_token_ids_up_to_the_dtype_are_taken(tmp_path: Path) -> None:
    docs = documents(20, 13)
    path = write_tokens(tmp_path / "d", docs)
    flat = np.concatenate([np.append(d, 65_535) for d in docs]).astype(np.int64)
    assert (TokenBlocks(path, block_size=4, separator=np.uint16(65_535)).read([0])[0] == flat[:5]).all()
    packed = PackedBlocks(path, block_size=64, pad_id=65_535, method="first_fit")
    assert packed.read_dict([len(packed) - 1])["input_ids"].max() == 65_535
    wide = tmp_path / "wide"
    with TokenWriter(wide, vocab_size=1 << 20) as writer:
        writer.append([1, 2, 3, 4, 5])
    assert TokenBlocks(wide, block_size=5, separator=2**32 - 1).read([0])[0].tolist() == [1, 2, 3, 4, 5, 2**32 - 1]
    with pytest.raises(TokenRangeError, match="uint32, 0 to 4294967295"):
        TokenBlocks(wide, block_size=2, separator=2**32)


@pytest.mark.parametrize("call,error,match", [
    (lambda: pack([3, 4], 0), ValueError, "capacity must be >= 1"),
    (lambda: pack([3, 4], 2.5), TypeError, "capacity must be an integer"),
    (lambda: pack([3, -4], 4), ValueError, "document 1 has -4"),
    (lambda: pack(np.array([2**63], np.uint64), 4), ValueError, "document 0"),
    (lambda: pack([1.5, 2.0], 4), ValueError, "lengths must be a 1-D sequence of integers"),
    (lambda: pack([3], 4, window=True), TypeError, "window must be an integer"),
    (lambda: pack([3], 4, method="best"), ValueError, "method must be one of"),
])
def test_pack_checks_its_arguments(call, error, match: str) -> None:
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("option,value,error,match", [
    ("shard_docs", 0, ValueError, "shard_docs must be >= 1"),
    ("shard_docs", 2.5, TypeError, "shard_docs must be an integer"),
    ("shard_docs", float("nan"), TypeError, "shard_docs must be an integer"),
    ("workers", -1, ValueError, "workers must be >= 0"),
    ("workers", 1.5, TypeError, "workers must be an integer"),
])
def test_convert_text_checks_its_numbers(tmp_path: Path, option: str, value, error, match: str) -> None:
    with pytest.raises(error, match=match):
        convert_text([{"text": "a"}], tmp_path / "out", byte_tokenizer, 256, progress=False,
                     **{"workers": 0, option: value})
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
