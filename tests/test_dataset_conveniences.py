"""Slices, index arrays, columns, views; progress bars; Arrow / HF / Parquet export; missing
extras named; ``ffrecord show`` and ``ffrecord info``'s per-field sizes."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from ffrecord.dataset import DatasetReader, DatasetWriter
from ffrecord.dataset.views import View

N = 40


def _png(k: int) -> np.ndarray:
    return np.full((2 + k % 3, 3, 3), k, np.uint8)


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "ds"
    spec = {"label": "int", "caption": "utf8", "vec": "array", "image": "png", "frames": "png[]"}
    with DatasetWriter(path, spec, metadata={"classes": ["a", "b"]}) as writer:
        for k in range(N):
            writer.append({"label": k, "caption": f"caption {k}", "vec": np.arange(k % 5, dtype=np.float32),
                           "image": _png(k), "frames": [_png(k + j) for j in range(k % 3)]})
    return path


def test_slices_index_arrays_and_columns(dataset):
    with DatasetReader(dataset) as ds:
        assert [d["label"] for d in ds[10:20]] == list(range(10, 20))
        assert [d["label"] for d in ds[-3:]] == [37, 38, 39]
        assert [d["label"] for d in ds[[3, 1]]] == [3, 1]
        assert [d["label"] for d in ds[np.array([5, 0, 5])]] == [5, 0, 5]
        assert ds[2:4, ["caption"]] == [{"caption": "caption 2"}, {"caption": "caption 3"}]
        assert ds["label"].tolist() == list(range(N)) and ds["label"].dtype == np.int64
        assert ds["caption"][7] == "caption 7"
        with pytest.raises(KeyError, match="no field 'nope'"):
            ds["nope"]
        with pytest.raises(IndexError):
            ds[[0, N]]
        assert ds.metadata == {"classes": ["a", "b"]}


def test_select_shard_split_are_datasets_that_pickle(dataset):
    with DatasetReader(dataset) as ds:
        chosen = ds.select([9, 2, 2])
        assert len(chosen) == 3 and chosen["label"].tolist() == [9, 2, 2] and chosen[-1]["label"] == 2
        parts = [ds.shard(3, k) for k in range(3)]
        assert [len(p) for p in parts] == [14, 13, 13]
        assert np.concatenate([p["label"] for p in parts]).tolist() == list(range(N))
        assert ds.shard(3, 1, contiguous=False)["label"].tolist() == list(range(1, N, 3))
        split = ds.train_test_split(test_size=0.25, seed=7)
        again = ds.train_test_split(test_size=0.25, seed=7)
        assert len(split["test"]) == 10 and (split["test"]["label"] == again["test"]["label"]).all()
        assert sorted([*split["train"]["label"], *split["test"]["label"]]) == list(range(N))
        view = pickle.loads(pickle.dumps(split["train"]))
        assert isinstance(view, View) and (view["label"] == split["train"]["label"]).all()
        assert view.available(0)["frames"] == len(view[0]["frames"])
        nested = split["train"].select([1, 0])
        assert (nested["label"] == split["train"]["label"][1::-1]).all()


def test_views_resume_exactly_in_the_dataloader(dataset):
    from ffrecord.torch import DataLoader, StructuredDataset

    with DatasetReader(dataset) as ds:
        view = ds.train_test_split(test_size=8, seed=1)["train"]
        source = StructuredDataset(view, mask=["label"])
        loader = DataLoader(source, batch_size=4, shuffle=True, seed=3, collate_fn=list)
        full = [[d["label"] for d in batch] for batch in loader]
        resumed = DataLoader(source, batch_size=4, shuffle=True, seed=3, collate_fn=list)
        resumed.set_step(3)
        assert [[d["label"] for d in batch] for batch in resumed] == full[3:]


def test_progress_bars(tmp_path, capfd):
    from ffrecord import FileReader
    from ffrecord.utils import dump

    with DatasetWriter(tmp_path / "ds", {"n": "int"}, length=5, progress=True) as writer:
        for k in range(5):
            writer.append({"n": k})
    dump([b"x"] * 5, tmp_path / "x.ffr", 1, progress=True)
    with FileReader(tmp_path / "x.ffr") as reader:
        assert reader.verify(progress=True) == []
    err = capfd.readouterr().err
    assert "write: 100%" in err and "5/5" in err and "datapoint/s" in err
    assert "dump: 100%" in err and "verify: 100%" in err


def test_arrow_hf_and_parquet_export(dataset, tmp_path):
    import pyarrow.parquet as pq

    with DatasetReader(dataset) as ds:
        table = ds.to_arrow()
        assert table.num_rows == N and table.column("label").to_pylist() == list(range(N))
        image = table.column("image")[5].as_py()
        assert Image.open(io.BytesIO(image)).format == "PNG"  # the stored file, not pixels
        assert (np.asarray(Image.open(io.BytesIO(image))) == _png(5)).all()
        assert table.column("vec")[3].as_py() == [0.0, 1.0, 2.0]
        assert len(table.column("frames")[2].as_py()) == 2
        assert ds.to_parquet(tmp_path / "out.parquet", mask=["label", "caption"]) == N
        assert pq.read_table(tmp_path / "out.parquet").to_pydict() == \
            {"label": list(range(N)), "caption": [f"caption {k}" for k in range(N)]}
        hf = ds.select(range(4)).to_hf(mask=["caption"])
        assert len(hf) == 4 and hf[3]["caption"] == "caption 3"


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_missing_extras_name_what_to_install():
    hide = ("import sys\nclass Hide:\n def find_spec(self, name, path=None, target=None):\n"
            "  if name.split('.')[0] in ('torch', 'pyarrow', 'ray'):\n   raise ImportError(name)\n"
            "sys.meta_path.insert(0, Hide())\n")
    torch = _python(hide + "import ffrecord.torch")
    assert 'ffrecord.torch needs torch: pip install "ffrecord[torch]"' in torch.stderr
    ray = _python(hide + "import ffrecord.ray")
    assert 'ffrecord.ray needs pyarrow: pip install "ffrecord[ray]"' in ray.stderr


def _cli(capsys, *args) -> tuple[int, str]:
    from ffrecord.cli import main

    status = main([str(a) for a in args])
    return status, capsys.readouterr().out


def test_show_prints_datapoints_and_writes_raw_bytes(dataset, tmp_path, capsys):
    status, out = _cli(capsys, "show", dataset, "4", "-1")
    assert status == 0
    assert "datapoint 4" in out and "datapoint 39" in out
    assert "caption  'caption 4'" in out
    assert "vec      array float32 (4,)  min 0.0  max 3.0" in out
    assert "image    image PNG 3x3 RGB" in out
    assert "frames   1 element(s)\n" in out and "  [0] image PNG 3x3 RGB, 80 bytes\n" in out  # datapoint 4
    assert _cli(capsys, "show", dataset, "5", "--field", "image", "--out", tmp_path / "five.png")[0] == 0
    assert (np.asarray(Image.open(tmp_path / "five.png")) == _png(5)).all()
    assert _cli(capsys, "show", dataset, "99")[0] == 2
    assert _cli(capsys, "show", dataset, "1", "--field", "nope")[0] == 2


def test_info_adds_per_field_size_statistics(dataset, capsys):
    status, out = _cli(capsys, "info", "--json", dataset)
    assert status == 0
    fields = {f["field"]: f for f in json.loads(out)["fields"]}
    assert fields["label"]["sizes"]["min"] == fields["label"]["sizes"]["max"] == 8
    assert fields["label"]["sizes"]["count"] == N
    assert sum(fields["caption"]["sizes"]["histogram"]["counts"]) == N
    text = _cli(capsys, "info", dataset)[1]
    assert "size min 8  median 8.0  max 8  mean 8.0 bytes" in text
