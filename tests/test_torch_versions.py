"""A loader state taken on version 1 of a dataset resumes on the dataset grown to version 3
(shards appended, a field added): the interrupted epoch finishes over version 1's datapoints
exactly as the saving loader would have, the next epoch runs over version 3; anything that
is not such a growth is refused with a typed error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ffrecord.dataset import ShardedDatasetWriter, add_field, open_dataset, vacuum  # noqa: E402
from ffrecord.dataset import manifest as manifests  # noqa: E402
from ffrecord.errors import ForeignStateError, StateError  # noqa: E402
from ffrecord.order import ChunkShuffle, FullShuffle, Order, Sequential  # noqa: E402
from ffrecord.torch import DataLoader, StructuredDataset  # noqa: E402

from remote_fixtures import bucket, s3_endpoint  # noqa: E402,F401 - fixtures

SPEC = {"image": "bytes", "label": "int"}
V1 = 50  # 7 shards of 7 and one of 1: version 1's last shard is short
TAKEN = 5  # batches of version 1's epoch 0 before the state


def append(path: Path | str, start: int, stop: int, mode: str = "append", remote: dict | None = None) -> None:
    with ShardedDatasetWriter(path, SPEC, shardlen=7, mode=mode, storage_options=remote) as writer:
        for k in range(start, stop):
            writer.append({"image": bytes([k % 251]) * (1 + k % 5), "label": k})


@pytest.fixture
def grown(tmp_path: Path) -> Path:
    """A dataset of version 1; the test grows it to version 3 after taking its state."""
    path = tmp_path / "ds"
    append(path, 0, V1, mode="w")
    return path


def grow_to_version_3(path: Path | str, remote: dict | None = None) -> None:
    append(path, V1, V1 + 23, remote=remote)  # version 2: shards appended
    add_field(path, "double", "int", lambda d: 2 * d["label"], storage_options=remote)  # version 3: a field added


def labels(batch: dict) -> list[int]:
    return [int(v) for v in batch["label"]]


def loader_of(reader, options: dict) -> DataLoader:
    options = dict(options)
    chunked = options.pop("chunks", False)
    if chunked:
        options["order"] = ChunkShuffle.of(reader, 64, seed=5, window=2)
    if options.get("shuffle") == "generator":
        options["shuffle"], options["generator"] = True, torch.Generator().manual_seed(9)
    return DataLoader(StructuredDataset(reader), batch_size=4, **options)


def through_json(state: dict) -> dict:
    return json.loads(json.dumps(state))


ORDERS = {
    "sequential": {"shuffle": False},
    "shuffle": {"shuffle": True, "seed": 3},
    "chunks": {"chunks": True},
    "generator": {"shuffle": "generator"},
    "shuffle, 2 workers": {"shuffle": True, "seed": 3, "num_workers": 2},
    "shuffle, 2 threads": {"shuffle": True, "seed": 3, "num_workers": 2, "workers": "threads"},
    "shuffle, rank 1 of 2, drop_last": {"shuffle": True, "seed": 3, "rank": 1, "world_size": 2, "drop_last": True},
}


@pytest.mark.parametrize("options", ORDERS.values(), ids=ORDERS.keys())
def test_a_state_of_version_1_finishes_its_epoch_on_version_3(grown: Path, options: dict) -> None:
    resumes_across_growth(grown, options)


def test_on_s3_a_state_of_version_1_finishes_its_epoch_on_version_3(bucket, tmp_path: Path) -> None:
    _, name, remote = bucket
    path = f"s3://{name}/ds"
    append(path, 0, V1, mode="w", remote=remote)
    resumes_across_growth(path, {"shuffle": True, "seed": 3, "num_workers": 2},
                          {**remote, "cache_dir": str(tmp_path / "cache")})


def resumes_across_growth(grown: Path | str, options: dict, remote: dict | None = None) -> None:
    """Version 1's loader interrupted in epoch 0; the dataset grown to version 3; a loader
    on version 3 that loads the state finishes epoch 0 as version 1's would, then epoch 1
    over version 3."""
    with open_dataset(grown, storage_options=remote) as v1:
        saving = loader_of(v1, options)
        epoch = [labels(b) for b in saving]  # what version 1's loader yields in epoch 0
        saving = loader_of(v1, options)
        iterator = iter(saving)
        for _ in range(TAKEN):
            next(iterator)
        state = through_json(saving.state_dict())
        del iterator
    grow_to_version_3(grown, remote)

    with open_dataset(grown, storage_options=remote) as v3:
        assert (v3.version, len(v3)) == (3, V1 + 23)
        resumed = loader_of(v3, options)
        resumed.load_state_dict(state)
        assert len(resumed) == len(epoch)
        rest = list(resumed)
        assert [labels(b) for b in rest] == epoch[TAKEN:]
        assert all(max(labels(b)) < V1 for b in rest)  # version 1's datapoints only
        assert all(b["double"].tolist() == [2 * k for k in labels(b)] for b in rest)  # read with version 3's fields
        if "world_size" not in options:
            assert sorted(sum(epoch[:TAKEN] + [labels(b) for b in rest], [])) == list(range(V1))

        fresh = loader_of(v3, options)
        fresh.set_epoch(1)
        if options.get("shuffle") == "generator":  # its order continues from the resumed generator
            fresh.generator.set_state(resumed.generator.get_state())
        assert [labels(b) for b in resumed] == [labels(b) for b in fresh]  # epoch 1: all of version 3
        assert resumed.state_dict()["dataset"]["dataset"]["version"] == 3


def test_a_state_taken_in_the_pinned_epoch_pins_it_again(grown: Path) -> None:
    options = {"shuffle": True, "seed": 3}
    with open_dataset(grown) as v1:
        epoch = [labels(b) for b in loader_of(v1, options)]
        saving = loader_of(v1, options)
        iterator = iter(saving)
        for _ in range(TAKEN):
            next(iterator)
        state = through_json(saving.state_dict())
    grow_to_version_3(grown)
    with open_dataset(grown) as v3:
        first = loader_of(v3, options)
        first.load_state_dict(state)
        iterator = iter(first)
        for _ in range(3):
            next(iterator)
        again = through_json(first.state_dict())
        assert again["dataset"] == state["dataset"] and again["step"] == TAKEN + 3
        assert first.indices(0, TAKEN + 3, rank=0) == labels(next(iterator))  # the ledger of the pinned epoch

        second = loader_of(v3, options)
        second.load_state_dict(again)
        assert second.indices(0, TAKEN + 3, rank=0) == epoch[TAKEN + 3]
        assert [labels(b) for b in second] == epoch[TAKEN + 3:]

        # an elastic resume of the pinned epoch (another batch size): what is left of it
        wider = DataLoader(StructuredDataset(v3), batch_size=6, shuffle=True, seed=3)
        wider.load_state_dict(again)
        left = sorted(sum((labels(b) for b in wider), []))
        assert left == sorted(sum(epoch[TAKEN + 3:], []))


def test_states_that_are_not_of_an_earlier_version_are_refused(grown: Path) -> None:
    with open_dataset(grown) as v1:
        saving = loader_of(v1, {"shuffle": True, "seed": 3})
        next(iter(saving))
        state = through_json(saving.state_dict())
    grow_to_version_3(grown)

    def refused(changed: dict, error: type, match: str, version: int | None = None) -> None:
        with open_dataset(grown, version=version) as reader:
            with pytest.raises(error, match=match):
                loader_of(reader, {"shuffle": True, "seed": 3}).load_state_dict(changed)

    other_data = {**state, "dataset": {**state["dataset"], "dataset": {**state["dataset"]["dataset"],
                                                                        "digest": "0" * 16}}}
    refused(other_data, ForeignStateError, "holds other data")
    refused({**state, "dataset": {**state["dataset"], "length": V1 + 1}}, StateError, "damaged state")
    with open_dataset(grown) as v3:
        later = loader_of(v3, {"shuffle": True, "seed": 3})
        next(iter(later))
        of_version_3 = through_json(later.state_dict())
    refused(of_version_3, ForeignStateError, "different dataset", version=1)  # a later version: not pinned

    vacuum(grown, keep=1)
    refused(state, ForeignStateError, "version 1 is gone")


def test_a_rewritten_dataset_is_not_a_grown_one(grown: Path) -> None:
    with open_dataset(grown) as v1:
        saving = loader_of(v1, {"shuffle": False})
        next(iter(saving))
        state = through_json(saving.state_dict())
    append(grown, V1, V1 + 7)
    # version 3 holds version 2's shards in another order: its first datapoints are others
    v2 = manifests.load(grown).manifest
    manifests.publish(grown, v2.successor(v2.entries()[::-1]))
    with open_dataset(grown) as v3:
        assert v3.version == 3
        with pytest.raises(ForeignStateError, match="are not the first ones of version 3"):
            loader_of(v3, {"shuffle": False}).load_state_dict(state)


def test_a_later_state_loaded_over_a_pinned_one_unpins(grown: Path) -> None:
    options = {"shuffle": True, "seed": 3}
    with open_dataset(grown) as v1:
        saving = loader_of(v1, options)
        next(iter(saving))
        of_version_1 = through_json(saving.state_dict())
    grow_to_version_3(grown)
    with open_dataset(grown) as v3:
        epoch = [labels(b) for b in loader_of(v3, options)]
        later = loader_of(v3, options)
        iterator = iter(later)
        for _ in range(2):
            next(iterator)
        of_version_3 = through_json(later.state_dict())
        resumed = loader_of(v3, options)
        resumed.load_state_dict(of_version_1)
        assert len(resumed) == -(-V1 // 4)
        resumed.load_state_dict(of_version_3)  # the pin goes with the state that set it
        assert len(resumed) == len(epoch)
        assert [labels(b) for b in resumed] == epoch[2:]


class Reversed(Order):
    """An order of the user's: last sample first, every epoch; it says no order over fewer."""

    kind = "reversed"

    def __init__(self, n: int) -> None:
        self.n = n

    def indices(self, epoch: int, positions: np.ndarray) -> np.ndarray:
        return self.n - 1 - np.asarray(positions, np.int64)


def test_an_order_that_cannot_shorten_refuses_a_grown_dataset(grown: Path) -> None:
    with open_dataset(grown) as v1:
        saving = DataLoader(StructuredDataset(v1), batch_size=4, order=Reversed(len(v1)))
        next(iter(saving))
        state = through_json(saving.state_dict())
    grow_to_version_3(grown)
    with open_dataset(grown) as v3:
        loader = DataLoader(StructuredDataset(v3), batch_size=4, order=Reversed(len(v3)))
        with pytest.raises(ForeignStateError, match="Reversed cannot say its order over an earlier version"):
            loader.load_state_dict(state)
    with pytest.raises(ValueError, match="covers 10 samples, not 11"):
        FullShuffle(10, seed=1).first(11)
    assert Sequential(10).first(0).n == 0
