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
