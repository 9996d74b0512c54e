"""``durable=False``: the same files, without the fsyncs at close."""

from __future__ import annotations

import pytest

from ffrecord import FileReader, FileWriter
from ffrecord.dataset import DatasetReader, DatasetWriter
from ffrecord.utils import dump


@pytest.mark.parametrize("n", [5, None])
def test_volatile_file_is_byte_for_byte_the_durable_one(tmp_path, n):
    samples = [bytes([k]) * (k * 7000) for k in range(5)]
    for durable in (True, False):
        with FileWriter(tmp_path / f"{durable}.ffr", n, durable=durable) as writer:
            assert writer.durable is durable
            for sample in samples:
                writer.write_one(sample)
    assert (tmp_path / "False.ffr").read_bytes() == (tmp_path / "True.ffr").read_bytes()
    with FileReader(tmp_path / "False.ffr") as reader:
        assert [bytes(s) for s in reader.read(range(5))] == samples


def test_dump_and_dataset_writer_take_durable(tmp_path):
    dump([b"x" * k for k in range(10)], tmp_path / "parts", 2, durable=False)
    with FileReader(tmp_path / "parts") as reader:
        assert [len(s) for s in reader.read(range(10))] == list(range(10))
    with DatasetWriter(tmp_path / "ds", {"label": "int", "image": "bytes"}, durable=False) as writer:
        writer.append({"label": 4, "image": b"abc"})
    assert DatasetReader(tmp_path / "ds")[0] == {"label": 4, "image": b"abc"}


def test_every_writer_made_for_a_user_passes_durable_down(tmp_path, monkeypatch):
    """ShardedDatasetWriter, TokenWriter and write_iterable make their FileWriters with the
    durability asked for (the default stays durable)."""
    from ffrecord.converters.records import write_iterable
    from ffrecord.dataset import ShardedDatasetReader, ShardedDatasetWriter
    from ffrecord.tokens import TokenWriter

    made = []
    original = FileWriter.__init__

    def spy(self, *args, **kwargs):
        made.append(kwargs.get("durable", True))
        original(self, *args, **kwargs)

    monkeypatch.setattr(FileWriter, "__init__", spy)
    for durable in (False, True):
        made.clear()
        with ShardedDatasetWriter(tmp_path / f"sharded{durable}", {"n": "int"}, shardlen=2,
                                  durable=durable) as writer:
            for k in range(3):
                writer.append({"n": k})
        with TokenWriter(tmp_path / f"tokens{durable}", 100, durable=durable) as tokens:
            tokens.append([1, 2, 3])
        assert write_iterable([b"a", b"bc"], tmp_path / f"{durable}.ffr", durable=durable) == 2
        assert made and set(made) == {durable}
        assert [d["n"] for d in ShardedDatasetReader(tmp_path / f"sharded{durable}")] == [0, 1, 2]
