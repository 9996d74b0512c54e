"""Scripts written for the reference FFRecord run unchanged: its public names exist here with
compatible signatures, and the pieces added for it behave as the reference's do.

The table lists the reference's public API (its Python package and its pybind module): module,
name, and for callables the parameters in order. "Compatible" means a call that works on the
reference binds the same way here: each reference parameter sits at the same position (so
positional calls bind alike) and, if it has a default there, is accepted by name.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
import zlib
from pathlib import Path

import numpy as np
import pytest

import ffrecord
from ffr_helpers import write_dataset

# (module, dotted name, parameters or None for a plain attribute). Parameters before "/" are
# positional-only in the reference (pybind methods declared without argument names), those
# after "*" keyword-only.
REFERENCE_API = [
    ("ffrecord", "FileReader", ["fname", "check_data"]),
    ("ffrecord", "FileWriter", ["fname", "n"]),
    ("ffrecord", "PackedFolder", ["ffr_file", "check_data"]),
    ("ffrecord", "checkFsAlign", ["fd", "/"]),
    ("ffrecord", "pack_folder", ["folder", "out_file", "verbose"]),
    ("ffrecord", "utils", None),
    ("ffrecord.fileio", "FileReader", ["fname", "check_data"]),
    ("ffrecord.fileio", "FileWriter", ["fname", "n"]),
    ("ffrecord.fileio", "checkFsAlign", ["fd", "/"]),
    ("ffrecord.fileio", "FileReader.read", ["indices", "/"]),
    ("ffrecord.fileio", "FileReader.read_one", ["index", "/"]),
    ("ffrecord.fileio", "FileReader.validate", []),
    ("ffrecord.fileio", "FileReader.get_offsets", ["file_index", "/"]),
    ("ffrecord.fileio", "FileReader.get_checksums", ["file_index", "/"]),
    ("ffrecord.fileio", "FileReader.close", []),
    ("ffrecord.fileio", "FileReader.__enter__", []),
    ("ffrecord.fileio", "FileReader.__exit__", None),
    ("ffrecord.fileio", "FileReader.__reduce__", []),
    ("ffrecord.fileio", "FileWriter.write_one", ["buf", "/"]),
    ("ffrecord.fileio", "FileWriter.close", []),
    ("ffrecord.fileio", "FileWriter.__enter__", []),
    ("ffrecord.fileio", "FileWriter.__exit__", None),
    ("ffrecord.utils", "dump", ["dataset", "fname", "nfiles", "verbose"]),
    ("ffrecord.package", "PackedFolder", ["ffr_file", "check_data"]),
    ("ffrecord.package", "pack_folder", ["folder", "out_file", "verbose"]),
    ("ffrecord.package", "PackedFolder.num_files", []),
    ("ffrecord.package", "PackedFolder.read_one", ["fname"]),
    ("ffrecord.package", "PackedFolder.read", ["fnames"]),
    ("ffrecord.package", "PackedFolder.list", ["path", "list_file", "list_dir", "recursive"]),
    ("ffrecord.package", "PackedFolder.exists", ["path"]),
    ("ffrecord.package", "PackedFolder.is_file", ["path"]),
    ("ffrecord.package", "PackedFolder.is_dir", ["path"]),
    ("ffrecord.torch", "ConcatDataset", ["datasets"]),
    ("ffrecord.torch", "DataLoader", ["dataset", "batch_size", "shuffle", "sampler", "batch_sampler",
                                      "num_workers", "collate_fn", "pin_memory", "drop_last",
                                      "timeout", "worker_init_fn", "generator", "*",
                                      "prefetch_factor", "persistent_workers", "skippable"]),
    ("ffrecord.torch", "Dataset", ["fnames", "check_data"]),
    ("ffrecord.torch", "ReaderRegistry", []),
    ("ffrecord.torch", "Subset", ["dataset", "indices"]),
    ("ffrecord.torch.dataset", "ReaderRegistry.ffreaders", []),
    ("ffrecord.torch.dataset", "Dataset.process", ["indices", "data"]),
    ("ffrecord.torch.dataset", "Dataset.ffreaders", []),
    ("ffrecord.torch.dataset", "Dataset.__add__", ["other"]),
    ("ffrecord.torch.dataset", "ConcatDataset.cumsum", ["sequence"]),
    ("ffrecord.torch.dataloader", "DataLoader.set_step", ["step"]),
    ("ffrecord.torch.dataloader", "SkipableSampler", ["sampler"]),
    ("ffrecord.torch.dataloader", "SkipableSampler.set_step", ["step"]),
]

# Reference attributes of instances (pybind def_readonly and plain attributes).
REFERENCE_ATTRIBUTES = {
    "FileReader": ["n", "fnames", "check_data"],
    "FileWriter": ["n", "count"],
    "PackedFolder": ["reader", "structure"],
}

# Where a reference parameter is not at the same place here, and why.
BINDS_OTHERWISE = {
    # torch.utils.data.DataLoader's order: multiprocessing_context comes before generator,
    # which is therefore passed by name.
    ("DataLoader", "generator"),
}

# Public helpers of the reference's package module that its pack_folder uses internally;
# no script calls them.
NOT_PROVIDED = ["ffrecord.package.dump_structure", "ffrecord.package.dump_files"]


def _resolve(module: str, dotted: str):
    obj = importlib.import_module(module)
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def binding_problems(obj, dotted: str, ref_params: list[str]) -> list[str]:
    """How a call that binds on the reference would bind differently on ``obj``."""
    ours = list(inspect.signature(obj).parameters.values())
    if ours and ours[0].name == "self":
        ours = ours[1:]
    kinds = {p.kind for p in ours}
    positional = [p.name for p in ours if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name for p in ours if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    by_position = ref_params.index("/") if "/" in ref_params else 0
    ref_params = [name for name in ref_params if name != "/"]
    cut = ref_params.index("*") if "*" in ref_params else len(ref_params)
    problems = []
    for k, name in enumerate(ref_params[:cut]):
        if (dotted.split(".")[-1], name) in BINDS_OTHERWISE:
            continue
        same = k < len(positional) and (k < by_position or positional[k] == name)
        if not same and not (
                k >= len(positional) and inspect.Parameter.VAR_POSITIONAL in kinds):
            problems.append(f"{name!r} is not positional parameter {k}")
    for name in ref_params[cut + 1:]:
        if name not in by_name and inspect.Parameter.VAR_KEYWORD not in kinds:
            problems.append(f"keyword {name!r} is not accepted")
    for p in ours:
        if (p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                and p.name not in ref_params and p.name not in positional[:by_position]):
            problems.append(f"{p.name!r} is required here, unknown to the reference")
    return problems


@pytest.mark.parametrize("module, dotted, ref_params", REFERENCE_API,
                         ids=[f"{m}.{d}" for m, d, _ in REFERENCE_API])
def test_reference_name_exists_with_a_compatible_signature(module, dotted, ref_params):
    if module.startswith("ffrecord.torch"):
        pytest.importorskip("torch")
    obj = _resolve(module, dotted)
    if ref_params is not None:
        assert binding_problems(obj, dotted, ref_params) == []


@pytest.mark.parametrize("name", NOT_PROVIDED)
def test_only_the_listed_reference_helpers_are_left_out(name):
    module, attr = name.rsplit(".", 1)
    assert not hasattr(importlib.import_module(module), attr)


@pytest.fixture
def ffr(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "a.ffr", [b"first", b"", b"third sample"])


@pytest.mark.parametrize("cls_name", sorted(REFERENCE_ATTRIBUTES))
def test_reference_attributes_exist(cls_name, ffr, tmp_path):
    if cls_name == "FileReader":
        obj = ffrecord.FileReader(ffr)
    elif cls_name == "FileWriter":
        obj = ffrecord.FileWriter(tmp_path / "w.ffr", 1)
    else:
        folder = tmp_path / "folder"
        folder.mkdir()
        (folder / "x.txt").write_bytes(b"x")
        ffrecord.pack_folder(folder, tmp_path / "p.ffr")
        obj = ffrecord.PackedFolder(tmp_path / "p.ffr")
    with obj:
        for attr in REFERENCE_ATTRIBUTES[cls_name]:
            assert hasattr(obj, attr), f"{cls_name}.{attr}"
        if cls_name == "FileWriter":
            obj.write_one(b"x")


def test_get_offsets_and_checksums_match_the_file(ffr):
    samples = [b"first", b"", b"third sample"]
    with ffrecord.FileReader(ffr) as reader:
        offsets, checksums = reader.get_offsets(0), reader.get_checksums(0)
    assert offsets.dtype == np.int64 and checksums.dtype == np.uint32
    header = 12 + 12 * len(samples)
    assert offsets.tolist() == [header, header + 5, header + 5, os.path.getsize(ffr)]
    assert checksums.tolist() == [zlib.crc32(s) for s in samples]
    raw = Path(ffr).read_bytes()
    assert all(raw[offsets[i]:offsets[i + 1]] == s for i, s in enumerate(samples))


def test_get_offsets_per_file_of_a_folder(tmp_path):
    (tmp_path / "d").mkdir()
    write_dataset(tmp_path / "d" / "0.ffr", [b"a"])
    write_dataset(tmp_path / "d" / "1.ffr", [b"bb", b"ccc"])
    with ffrecord.FileReader(tmp_path / "d") as reader:
        assert len(reader.get_offsets(1)) == 3 and len(reader.get_checksums(1)) == 2
        assert reader.get_offsets(-1).tolist() == reader.get_offsets(1).tolist()
        with pytest.raises(IndexError):
            reader.get_offsets(2)
    with pytest.raises(ValueError):
        reader.get_checksums(0)  # closed


def test_compressed_file_shows_its_stored_tables(tmp_path):
    path = tmp_path / "z.ffr"
    with ffrecord.FileWriter(path, 2, compression="lz4") as writer:
        writer.write_one(bytes(5000))
        writer.write_one(b"x")
    with ffrecord.FileReader(path) as reader:
        offsets = reader.get_offsets(0)
        assert len(offsets) == reader.file_info(0).stored_samples + 1 == 4
        assert offsets[-1] == os.path.getsize(path)


def test_check_fs_align_is_false_on_ordinary_filesystems(ffr):
    from ffrecord import checkFsAlign
    from ffrecord.fileio import checkFsAlign as same

    assert checkFsAlign is same
    with open(ffr, "rb") as f:
        assert checkFsAlign(f.fileno()) is False
    assert checkFsAlign(-1) is False  # a bad descriptor is "no", as the reference's ioctl says


def test_reference_module_paths_hold_the_same_objects():
    from ffrecord import fileio, package, utils

    assert fileio.FileReader is ffrecord.FileReader and fileio.FileWriter is ffrecord.FileWriter
    assert package.PackedFolder is ffrecord.PackedFolder and package.pack_folder is ffrecord.pack_folder
    assert ffrecord.utils is utils and callable(utils.dump)


# -- torch: ReaderRegistry, ffreaders, SkipableSampler -----------------------------------


def test_ffreaders_finds_readers_of_nested_objects(ffr):
    pytest.importorskip("torch")
    from ffrecord.torch import ConcatDataset, Dataset, ReaderRegistry, Subset

    class Labels(ReaderRegistry):
        def __init__(self) -> None:
            self.labels = ffrecord.FileReader(ffr)

    class Paired(Dataset):
        def __init__(self) -> None:
            super().__init__(ffr)
            self.images = ffrecord.FileReader(ffr)
            self.meta = Labels()
            self.shards = {"a": ffrecord.FileReader(ffr)}
            self.ids = list(range(1000))

    paired = Paired()
    readers = paired.ffreaders()
    assert [id(r) for r in readers] == [id(paired.reader), id(paired.images), id(paired.meta.labels),
                                        id(paired.shards["a"])]
    assert paired.meta.ffreaders() == [paired.meta.labels]
    both = ConcatDataset([paired, Subset(Dataset(ffr), [0, 2])])
    assert len(both.ffreaders()) == 5
    assert both.ffreaders()[:4] == readers


def test_ffreaders_reopens_a_pickled_dataset(ffr):
    pytest.importorskip("torch")
    from ffrecord.torch import Dataset

    copy = pickle.loads(pickle.dumps(Dataset(ffr)))
    (reader,) = copy.ffreaders()
    assert reader.fnames == [str(ffr)] and reader.read_one(0).tobytes() == b"first"


def test_reference_style_subclass_with_its_own_reader(ffr):
    """The reference README's pattern: a Dataset that owns its reader and closes it through
    ffreaders()."""
    pytest.importorskip("torch")
    from ffrecord.torch import DataLoader, Dataset

    class Custom(Dataset):
        def __init__(self, fname, check_data=True):
            self.reader = ffrecord.FileReader(fname, check_data)

        def __len__(self):
            return self.reader.n

        def __getitem__(self, indices):
            return [bytes(b) for b in self.reader.read(indices)]

    data = Custom(ffr)
    loader = DataLoader(data, batch_size=2, collate_fn=lambda batch: batch)
    assert list(loader) == [[b"first", b""], [b"third sample"]]
    for reader in data.ffreaders():
        reader.close()
    assert data.reader.closed


def test_skipable_sampler_skips_like_the_reference():
    pytest.importorskip("torch")
    from torch.utils.data import BatchSampler, SequentialSampler

    from ffrecord.torch.dataloader import SkipableSampler

    sampler = SkipableSampler(BatchSampler(SequentialSampler(range(7)), 3, False))
    assert len(sampler) == 3
    sampler.set_step(1)
    assert list(sampler) == [[3, 4, 5], [6]] and len(sampler) == 2
    assert "step=1" in repr(sampler)


def test_concat_cumsum_is_the_running_total():
    pytest.importorskip("torch")
    from ffrecord.torch import ConcatDataset

    both = ConcatDataset([[1, 2], [3, 4, 5]])
    assert ConcatDataset.cumsum([[1, 2], [3, 4, 5]]) == both.cumulative_sizes == [2, 5]


def test_torch_docstring_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import doctest

    from ffrecord.torch import _stats, dataloader, dataset, sampler

    monkeypatch.chdir(tmp_path)
    for module in (dataset, sampler, dataloader, _stats):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__
