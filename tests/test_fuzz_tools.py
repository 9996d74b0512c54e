"""Deterministic mutation fuzzing of the Python-side parsers: the packed-folder index (a pickled
``OrderedDict`` tree read by a restricted unpickler) and the TFRecord / OFRecord readers.

Valid inputs are mutated with a seeded generator (bit flips, interesting values written over
length fields, truncations, insertions, splices at byte and at pickle-opcode boundaries).
Every case must end within its deadline with a result or a typed error (``ValueError``,
``CorruptFileError``, ``OSError``), and whatever it writes must stay inside its target.
A failure names the case number; rerun it with ``FUZZ_CASE=<n>``.
"""

from __future__ import annotations

import gzip
import os
import pickle
import pickletools
import random
import shutil
import struct
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Iterator, List, Sequence

import pytest

from ffrecord import CorruptFileError, FileReader, PackedFolder, convert
from ffrecord.packed import MAGIC, load_index, unpack_folder
from ffr_helpers import deadline, write_dataset
from tools_support import crc32c_bitwise, masked, ofrecord_frame, tfrecord_frame

CASE_SECONDS = 2.0
TYPED_ERRORS = (ValueError, OSError)  # CorruptFileError is a ValueError
INTERESTING = [0, 1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1,
               2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1]


def selected_cases(count: int) -> range:
    """All ``count`` cases, or only ``$FUZZ_CASE`` when reproducing one."""
    only = os.environ.get("FUZZ_CASE")
    return range(int(only), int(only) + 1) if only else range(count)


class Mutator:
    """Seeded mutations of valid inputs.

    ``fields(data)`` gives the offsets of ``(offset, size)`` length fields worth overwriting
    with boundary values; ``boundaries(data)`` the offsets where a unit (a record, a pickle
    opcode) starts, for splices that keep the surrounding structure.
    """

    def __init__(self, seeds: Sequence[bytes], fields: Callable[[bytes], List[tuple]],
                 boundaries: Callable[[bytes], List[int]]) -> None:
        self.seeds = list(seeds)
        self.fields = [fields(s) for s in self.seeds]
        self.boundaries = [boundaries(s) for s in self.seeds]

    def case(self, number: int) -> bytes:
        rng = random.Random(number)
        k = rng.randrange(len(self.seeds))
        data = bytearray(self.seeds[k])
        for _ in range(rng.choice((1, 1, 2, 3))):
            data = self._mutate(rng, data, k)
        return bytes(data)

    def _mutate(self, rng: random.Random, data: bytearray, k: int) -> bytearray:
        op = rng.randrange(7)
        if not data:
            return bytearray(rng.randbytes(rng.randrange(1, 16)))
        if op == 0:  # bit flips
            for _ in range(rng.randrange(1, 5)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif op == 1 and self.fields[k]:  # a length field set to a boundary value
            offset, size = rng.choice(self.fields[k])
            if offset + size <= len(data):
                value = rng.choice(INTERESTING + [len(data), len(data) - offset, rng.randrange(64)])
                data[offset:offset + size] = (value % 2 ** (8 * size)).to_bytes(size, "little")
        elif op == 2:  # truncation
            del data[rng.randrange(len(data)):]
        elif op == 3:  # random bytes inserted
            at = rng.randrange(len(data) + 1)
            data[at:at] = rng.randbytes(rng.randrange(1, 9))
        elif op == 4:  # a range deleted
            at = rng.randrange(len(data))
            del data[at:at + rng.randrange(1, 17)]
        elif op == 5:  # a unit copied to another unit boundary (splice within the input)
            cuts = [b for b in self.boundaries[k] if b < len(data)] or [0]
            start = rng.choice(cuts)
            piece = data[start:start + rng.randrange(1, 24)]
            at = rng.choice(cuts)
            data[at:at] = piece
        else:  # splice with another seed
            other = rng.choice(self.seeds)
            cut = rng.randrange(len(data) + 1)
            data = data[:cut] + other[rng.randrange(len(other) + 1):]
        return data


def call_typed(number: int, call: Callable[[], object], allowed=TYPED_ERRORS) -> object:
    """``call()``'s result, or its typed error; anything else, or a hang, fails the case."""
    try:
        with deadline(CASE_SECONDS):
            return call()
    except allowed as exc:
        return exc
    except BaseException as exc:  # noqa: BLE001 - reported with the case number
        raise AssertionError(f"case {number}: {type(exc).__name__}: {exc}") from exc


@pytest.fixture
def scratch(tmp_path) -> Iterator[Path]:
    """A directory in memory when /dev/shm exists: rewriting a file on a busy disk costs
    milliseconds, thousands of times."""
    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="ffrecord-fuzz-", dir="/dev/shm"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def everything_under(root: Path) -> set:
    return {p.relative_to(root) for p in root.rglob("*")}


# ---- the packed-folder index -------------------------------------------------------------

def index_trees() -> List[OrderedDict]:
    nested = OrderedDict([("a.txt", 0), ("sub", OrderedDict([("b", 1), ("deep", OrderedDict(
        [("c", 2)]))])), ("empty", OrderedDict()), ("z", 3)])
    wide = OrderedDict((f"f{i:03d}", i) for i in range(40))
    return [nested, wide, OrderedDict(), OrderedDict(only=0)]


def pickle_units(body: bytes) -> List[int]:
    """Opcode start offsets of a (valid seed) pickle."""
    return [pos for _, _, pos in pickletools.genops(body)]


def pickle_fields(body: bytes) -> List[tuple]:
    """Fixed-size opcode arguments, worth a boundary value: string lengths, memo indices,
    small ints, frame sizes."""
    return [(pos + 1, op.arg.n) for op, _, pos in pickletools.genops(body)
            if op.arg is not None and op.arg.n in (1, 2, 4, 8)]


def index_case(mutator: Mutator, number: int) -> bytes:
    """A mutated index record. Every other protocol-4 case gets its frame size fixed, or
    nearly every edit would only break the framing."""
    body = bytearray(mutator.case(number))
    if number % 2 and body[:3] == b"\x80\x04\x95" and len(body) >= 11:
        body[3:11] = (len(body) - 11).to_bytes(8, "little")
    return MAGIC + bytes(body)


INDEX_BODIES = [pickle.dumps(tree, protocol=p) for tree in index_trees() for p in (2, 4)]
INDEX_FILES = 40  # every seed's indices fit


def check_tree(tree: OrderedDict, nfiles: int) -> None:
    """What load_index promises of a tree it returns, checked independently."""
    seen_dirs, seen_files, stack = {id(tree)}, set(), [tree]
    while stack:
        node = stack.pop()
        assert type(node) is OrderedDict
        for name, child in node.items():
            assert type(name) is str and name not in ("", ".", "..") and "/" not in name
            assert "\0" not in name
            if type(child) is OrderedDict:
                assert id(child) not in seen_dirs
                seen_dirs.add(id(child))
                stack.append(child)
            else:
                assert type(child) is int and 0 <= child < nfiles and child not in seen_files
                seen_files.add(child)


def test_fuzz_the_index_decoder():
    mutator = Mutator(INDEX_BODIES, pickle_fields, pickle_units)
    outcomes = {"tree": 0, "error": 0}
    for number in selected_cases(4000):
        meta = index_case(mutator, number)
        result = call_typed(number, lambda: load_index(meta, INDEX_FILES),
                            allowed=CorruptFileError)
        if isinstance(result, CorruptFileError):
            outcomes["error"] += 1
        else:
            check_tree(result, INDEX_FILES)
            outcomes["tree"] += 1
    # both outcomes are reached often, so the mutations test more than the magic check
    assert min(outcomes.values()) > (100 if len(selected_cases(2)) > 1 else 0), outcomes


HOSTILE_NAMES = ["a", "b", "sub", "..", ".", "", "a/b", "/abs", "x\0y", " ", "é", "n" * 255,
                 "n" * 256, "out", "case.ffr"]


def random_tree(rng: random.Random, depth: int = 0, shared: OrderedDict | None = None) -> object:
    """A tree built to hit the index checks and the unpacker: hostile names, indices in and
    out of range, repeated indices, non-tree values and shared sub-trees."""
    tree: OrderedDict = OrderedDict()
    for _ in range(rng.randrange(5)):
        roll = rng.random()
        if roll < 0.45:
            value: object = rng.randrange(-1, INDEX_FILES + 2)
        elif roll < 0.75 and depth < 4:
            value = random_tree(rng, depth + 1, shared)
            shared = shared or value
        elif roll < 0.85 and shared is not None:
            value = shared
        else:
            value = rng.choice(["3", None, 1.5, True, b"x", [1], {"a": 1}])
        tree[rng.choice(HOSTILE_NAMES) if rng.random() < 0.3 else f"e{rng.randrange(50)}"] = value
    return tree


@pytest.mark.filterwarnings("ignore::ffrecord.FFRecordWarning")
def test_fuzz_packed_files_and_unpacking(scratch):
    """Whole packed files (mutated bytes anywhere, a mutated index or a generated hostile
    tree) through PackedFolder and unpack_folder: typed errors only, and nothing written
    outside the target."""
    mutator = Mutator(INDEX_BODIES, pickle_fields, pickle_units)
    samples = [b"file %d" % i for i in range(INDEX_FILES)]
    whole = write_dataset(scratch / "seed.ffr", [*samples, MAGIC + INDEX_BODIES[0]]).read_bytes()
    whole_mutator = Mutator([whole], lambda d: [(4, 8), *[(12 + 4 * 41 + 8 * i, 8)
                                                         for i in range(41)]],
                            lambda d: list(range(0, len(d), 12)))
    sandbox = scratch / "sandbox"
    sandbox.mkdir()
    (sandbox / "sentinel").write_bytes(b"keep")
    path, out = sandbox / "case.ffr", sandbox / "out"
    before = everything_under(sandbox)
    for number in selected_cases(300):
        if number % 3 == 0:
            path.write_bytes(whole_mutator.case(number))
        else:
            meta = (index_case(mutator, number) if number % 3 == 1 else
                    MAGIC + pickle.dumps(random_tree(random.Random(number)), protocol=4))
            write_dataset(path, [*samples, meta])

        def unpack() -> int:
            with PackedFolder(path) as packed:
                listed = packed.list(recursive=True)
            count = unpack_folder(path, out)
            written = {str(p) for p in everything_under(out)}
            assert written == set(listed), f"case {number}: unpacked {written} != {listed}"
            return count

        call_typed(number, unpack)
        assert everything_under(sandbox) - {Path("case.ffr")} - {
            p for p in everything_under(sandbox) if p.parts[0] == "out"} == before - {
            Path("case.ffr")}, f"case {number} wrote outside its target"
        assert (sandbox / "sentinel").read_bytes() == b"keep"
        if out.exists():
            for p in sorted(out.rglob("*"), reverse=True):
                p.rmdir() if p.is_dir() else p.unlink()
            out.rmdir()


# ---- TFRecord and OFRecord ----------------------------------------------------------------

def tfrecord_fields(data: bytes) -> List[tuple]:
    return [(offset, 8) for offset in framed_units(data, 12, 4)]


def framed_units(data: bytes, header: int, trailer: int) -> List[int]:
    """Record start offsets of a valid seed with an 8-byte little-endian length first."""
    starts, pos = [], 0
    while pos + header <= len(data):
        starts.append(pos)
        pos += header + struct.unpack_from("<Q", data, pos)[0] + trailer
    return starts


RECORDS = [b"", b"a", b"hello record", bytes(range(256)) * 3, b"\x00" * 1000]
TF_SEED = b"".join(tfrecord_frame(r) for r in RECORDS)
OF_SEED = b"".join(ofrecord_frame(r) for r in RECORDS)


def with_fixed_length_crcs(data: bytes, number: int) -> bytes:
    """Half the cases get each record's length checksum recomputed where a header still
    parses, so that mutated lengths get past the first check into the payload logic."""
    if number % 2:
        return data
    fixed, pos = bytearray(data), 0
    for _ in range(64):
        if pos + 12 > len(fixed):
            break
        length = bytes(fixed[pos:pos + 8])
        fixed[pos + 8:pos + 12] = struct.pack("<I", masked(crc32c_bitwise(length)))
        pos += 16 + int.from_bytes(length, "little")
    return bytes(fixed)


def convert_cases(count: int) -> Iterator[tuple]:
    """(case number, kind, file bytes, reader) for TFRecord, gzip TFRecord and OFRecord."""
    tf = Mutator([TF_SEED], tfrecord_fields, lambda d: framed_units(d, 12, 4))
    of = Mutator([OF_SEED], lambda d: [(o, 8) for o in framed_units(d, 8, 0)],
                 lambda d: framed_units(d, 8, 0))
    for number in selected_cases(count):
        kind = ("tfrecord", "gzip", "ofrecord")[number % 3]
        if kind == "ofrecord":
            yield number, kind, of.case(number), convert.read_ofrecord
            continue
        data = with_fixed_length_crcs(tf.case(number), number // 3)
        if kind == "gzip":
            data = gzip.compress(data, mtime=0)
            if number % 2:  # damage the compressed stream itself too
                data = Mutator([data], lambda d: [], lambda d: [0]).case(number)
        verify = number % 5 != 0
        yield number, kind, data, lambda p, v=verify: convert.read_tfrecord(p, verify=v)


def test_fuzz_record_readers(scratch):
    path = scratch / "input"
    outcomes = {"records": 0, "error": 0}
    for number, kind, data, read in convert_cases(3000):
        path.write_bytes(data)
        result = call_typed(number, lambda: list(read(path)))
        if isinstance(result, list):
            assert all(isinstance(r, bytes) for r in result)
            outcomes["records"] += 1
        else:
            assert str(path) in str(result) or kind == "gzip", f"case {number}: {result}"
            outcomes["error"] += 1
    assert min(outcomes.values()) > (100 if len(selected_cases(2)) > 1 else 0), outcomes


def test_fuzz_conversions_write_all_or_nothing(scratch):
    src, out = scratch / "part-0", scratch / "out.ffr"
    for number, kind, data, read in convert_cases(150):
        src.write_bytes(data)
        expected = call_typed(number, lambda: list(read(src)))
        if kind == "ofrecord":
            result = call_typed(number, lambda: convert.ofrecord_to_ffr(src, out))
        else:
            result = call_typed(number, lambda: convert.tfrecord_to_ffr(
                src, out, verify=(number % 5 != 0), compression="lz4" if number % 2 else None))
        if isinstance(expected, list):
            assert result == len(expected), f"case {number}"
            with FileReader(out) as reader:
                assert [s.tobytes() for s in reader.read(range(reader.n))] == expected
            out.unlink()
        else:
            assert type(result) is type(expected), f"case {number}: {result!r} vs {expected!r}"
        assert sorted(os.listdir(scratch)) == ["part-0"], f"case {number} left files behind"
