"""Property: for random specs (every built-in value codec and a user one, plain and sequence
fields, no compression, LZ4 or Zstandard), random datapoints and random masks, what a
structured dataset reads equals what was written, by every way of reading it.

Seeded loops (no hypothesis): each case prints its seed on failure and reruns alone with
``FFRECORD_PROPERTY_SEED=<seed>``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffrecord.dataset import (DatasetReader, DatasetWriter, SequenceRangeError,
                              ShardedDatasetReader, ShardedDatasetWriter)

CASES = 40
TYPES = ("bytes", "utf8", "int", "float", "array", "json", "msgpack", "npz", "rev")
# The user codec: stores the bytes reversed, so that a read without its decoder is wrong.
USER_ENCODERS = {"rev": lambda value: bytes(value)[::-1]}
USER_DECODERS = {"rev": lambda view: bytes(view)[::-1]}


def _blob(rng: random.Random) -> bytes:
    size = rng.choice([0, 1, 7, 8, 9, rng.randrange(2000), rng.randrange(70_000)])
    return rng.randbytes(size) if rng.random() < 0.5 else bytes([rng.randrange(4)]) * size


def _value(rng: random.Random, kind: str) -> Any:
    if kind in ("bytes", "rev"):
        return _blob(rng)
    if kind == "utf8":
        return "".join(rng.choice("aé中😀 \n\0") for _ in range(rng.randrange(40)))
    if kind == "int":
        return rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randrange(-10**12, 10**12)])
    if kind == "float":
        return rng.choice([0.0, -0.0, 1e308, float("inf"), rng.uniform(-1e6, 1e6)])
    if kind == "array":
        shape = tuple(rng.randrange(4) for _ in range(rng.randrange(3)))
        dtype = rng.choice([np.uint8, np.int64, np.float32, np.bool_])
        return np.asarray(np.random.default_rng(rng.randrange(2**32)).integers(0, 9, shape), dtype)
    if kind in ("json", "msgpack"):
        return {"k": rng.randrange(100), "s": "x" * rng.randrange(5), "l": [rng.random(), None, True]}
    if kind == "npz":
        return {"a": np.arange(rng.randrange(5), dtype=np.int32)}
    raise AssertionError(kind)


def _spec(rng: random.Random) -> dict[str, str]:
    spec = {}
    for k in range(rng.randrange(1, 5)):
        kind = rng.choice(TYPES)
        sequence = "[]" if rng.random() < 0.5 else ""
        compression = rng.choice(["", ":lz4", ":zstd"])
        spec[f"f{k}"] = kind + sequence + compression
    return spec


def _datapoint(rng: random.Random, spec: dict[str, str]) -> dict[str, Any]:
    point = {}
    for name, text in spec.items():
        kind = text.split(":")[0].removesuffix("[]")
        if "[]" in text:
            point[name] = [_value(rng, kind) for _ in range(rng.choice([0, 1, 2, rng.randrange(12)]))]
        else:
            point[name] = _value(rng, kind)
    return point


def _mask(rng: random.Random, spec: dict[str, str], points: list[dict]) -> tuple[Any, dict]:
    """A random mask, and what it selects of each field: None (whole) or a slice."""
    if rng.random() < 0.2:
        return None, dict.fromkeys(spec)
    if rng.random() < 0.2:
        names = rng.sample(list(spec), rng.randrange(len(spec) + 1))
        return names, dict.fromkeys(names)
    mask, chosen = {}, {}
    for name, text in spec.items():
        pick = rng.random()
        if pick < 0.25:
            mask[name] = False
        elif "[]" not in text or pick < 0.5:
            mask[name] = chosen[name] = True
            chosen[name] = None
        else:
            shortest = min(len(p[name]) for p in points)
            step = rng.choice([1, 1, 2, 3])
            if rng.random() < 0.5:  # open-ended: may start past the end (then selects none)
                mask[name] = chosen[name] = slice(rng.randrange(shortest + 2), None, step)
            else:  # an explicit stop must not pass any selected datapoint's end
                start = rng.randrange(shortest + 1)
                stop = rng.randrange(start, shortest + 1)
                mask[name] = range(start, stop, step)
                chosen[name] = slice(start, stop, step)
    return mask, chosen


def _expected(point: dict, chosen: dict) -> dict:
    return {name: point[name] if part is None else point[name][part] for name, part in chosen.items()}


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, np.ndarray):
        return isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape \
            and np.array_equal(got, want)
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, float):
        return isinstance(got, float) and (got == want and str(got) == str(want))
    return type(got) is type(want) and got == want


def _seeds() -> list[int]:
    fixed = os.environ.get("FFRECORD_PROPERTY_SEED")
    return [int(fixed)] if fixed else list(range(CASES))


@pytest.mark.parametrize("seed", _seeds())
def test_read_equals_written(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    spec = _spec(rng)
    points = [_datapoint(rng, spec) for _ in range(rng.randrange(1, 24))]
    n = len(points)
    sharded = rng.random() < 0.3
    path = tmp_path / "ds"
    if sharded:
        shardlen = rng.randrange(1, n + 1)
        with ShardedDatasetWriter(path, spec, USER_ENCODERS, shardlen=shardlen,
                                  length=rng.choice([None, n])) as writer:
            for point in points:
                writer.append(point)
    else:
        with DatasetWriter(path, spec, USER_ENCODERS, length=rng.choice([None, n])) as writer:
            for point in points:
                writer.append(point)
    options = {"check_data": rng.random() < 0.7,
               "cache_keys": rng.sample(list(spec), rng.randrange(len(spec) + 1))}
    opened = (ShardedDatasetReader(path, USER_DECODERS, **options) if sharded
              else DatasetReader(path, USER_DECODERS, **options))
    with opened as reader:
        assert len(reader) == n
        everything = reader.read(range(n))
        assert all(_same(got, want) for got, want in zip(everything, points)), seed
        for _ in range(6):
            indices = [rng.randrange(-n, n) for _ in range(rng.randrange(1, 8))]
            mask, chosen = _mask(rng, spec, [points[i] for i in indices])
            want = [_expected(points[i], chosen) for i in indices]
            assert _same(reader.read(indices, mask), want), (seed, indices, mask)
            assert _same(reader[indices[0], mask], want[0]), (seed, indices[0], mask)
        for name, text in spec.items():
            if "[]" in text:
                counts = [len(p[name]) for p in points]
                assert [reader.available(i)[name] for i in range(n)] == counts
                if not sharded:
                    assert reader.element_counts(name).tolist() == counts
                longest = max(counts)
                with pytest.raises(SequenceRangeError):
                    reader.read(range(n), {name: range(0, longest + 1)})
