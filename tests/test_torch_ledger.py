"""The ledger of a loader's steps: ``DataLoader.indices`` equal to the batches every rank is
handed over a whole epoch (0 workers, processes, threads), ``Mixture.locate``, ``skip`` then
resume, a weight schedule across an elastic resume (2 ranks → 3) and changed at a
checkpoint, ``ffrecord ledger`` and ``ffrecord audit`` from states alone, and their bad
inputs."""

from __future__ import annotations

import json
import operator
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ffrecord import ForeignStateError, StateError  # noqa: E402
from ffrecord.cli import main  # noqa: E402
from ffrecord.dataset import DatasetWriter, Mixture, ShardedDatasetWriter  # noqa: E402
from ffrecord.ledger import Ledger, audit  # noqa: E402
from ffrecord.order import ChunkShuffle  # noqa: E402
from ffrecord.torch import DataLoader, StructuredDataset, mixture_start  # noqa: E402

SPEC = {"source": "int", "n": "int"}
LENGTHS = [60, 67, 74, 81, 88]
SCHEDULE = [(40, [1, 1, 1, 1, 1]), (90, [0, 1, 2, 1, 1])]
pair = operator.itemgetter("source", "n")
WORKERS = [(0, "processes"), (2, "processes"), (2, "threads")]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("ledger")
    out = []
    for j, n in enumerate(LENGTHS):
        path = root / f"source{j}"
        writer = ShardedDatasetWriter(path, SPEC, shardlen=9) if j % 2 else DatasetWriter(path, SPEC)
        with writer:
            for k in range(n):
                writer.append({"source": j, "n": k})
        out.append(path)
    return out


def scheduled(paths: list[Path], schedule=SCHEDULE, **kwargs) -> Mixture:
    return Mixture.from_paths(paths, [3, 1, 1, 1, 0], schedule=schedule, period=12,
                              names=[f"s{j}" for j in range(len(paths))], **kwargs)


def make_loader(mix: Mixture, **kwargs) -> DataLoader:
    return DataLoader(StructuredDataset(mix, transform=pair), collate_fn=list, **kwargs)


def located(mix: Mixture, indices: list[int]) -> list[tuple[int, int]]:
    """What the datapoints at ``indices`` hold: (source, n) is (member, index in member)."""
    return [mix.locate(i)[:2] for i in indices]


def take(loader: DataLoader, steps: int = -1) -> list[list[tuple[int, int]]]:
    out, iterator = [], iter(loader)
    while steps < 0 or len(out) < steps:
        batch = next(iterator, None)
        if batch is None:
            break
        out.append([tuple(int(v) for v in d) for d in batch])
    return out


def through_json(state: dict) -> dict:
    return json.loads(json.dumps(state))


# ---- the ledger is what was delivered -------------------------------------------------------


@pytest.mark.parametrize("workers, kind", WORKERS)
@pytest.mark.parametrize("shuffle", [False, True])
def test_the_ledger_equals_the_batches_of_every_rank_over_an_epoch(paths, workers, kind, shuffle) -> None:
    mix = scheduled(paths)
    for rank in range(2):
        loader = make_loader(mix, batch_size=5, world_size=2, rank=rank, num_workers=workers, workers=kind,
                             shuffle=shuffle, seed=3 if shuffle else None)
        planned = [loader.indices(0, step, rank=rank) for step in range(len(loader))]
        delivered = take(loader)
        assert delivered == [located(mix, batch) for batch in planned], (rank, kind)
        ledger = Ledger(through_json(loader.state_dict()))  # taken after the epoch: epoch 1 next
        assert [ledger.indices(step, rank, epoch=0).tolist() for step in range(len(planned))] == planned
        rows = list(ledger.rows(range(len(planned)), rank, epoch=0))
        assert [(r["member"], r["member_index"]) for r in rows] == [d for batch in delivered for d in batch]
        assert {r["name"] for r in rows} <= {f"s{j}" for j in range(5)}
        assert loader.indices(0, 2) == [loader.indices(0, 2, rank=r) for r in range(2)]


def test_indices_of_a_generator_order_and_bad_asks(paths) -> None:
    mix = scheduled(paths)
    generated = make_loader(mix, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(5))
    planned = generated.indices(0, 3)
    assert [d for d in take(generated)[3]] == located(mix, planned[0])
    with pytest.raises(ValueError, match="known for the epoch in progress or the next one"):
        generated.indices(4, 0)
    plain = make_loader(mix, batch_size=4)
    with pytest.raises(IndexError, match="step 999 out of range"):
        plain.indices(0, 999)
    with pytest.raises(IndexError, match="rank 3 out of range"):
        plain.indices(0, 0, rank=3)
    custom = DataLoader(list(range(10)), batch_sampler=[[0, 1], [2, 3]])
    with pytest.raises(TypeError, match="sampler of yours"):
        custom.indices(0, 0)
    assert mix.locate(len(mix) - 1)[2] in {f"s{j}" for j in range(5)}


# ---- skipping --------------------------------------------------------------------------------


@pytest.mark.parametrize("workers, kind", WORKERS)
def test_a_skip_then_a_resume_delivers_the_epoch_without_the_skipped_steps(paths, workers, kind) -> None:
    mix = scheduled(paths)
    options = dict(batch_size=4, world_size=2, rank=1, num_workers=workers, workers=kind)
    whole = take(make_loader(mix, **options))
    first = make_loader(mix, **options)
    iterator = iter(first)
    seen = [[tuple(int(v) for v in d) for d in next(iterator)] for _ in range(3)]
    first.skip(2)  # the steps around a loss spike
    seen += [[tuple(int(v) for v in d) for d in next(iterator)] for _ in range(2)]
    state = through_json(first.state_dict())
    assert state["step"] == 7 and state["skipped"] == [
        {"epoch": 0, "step": 3, "batches": 2, "positions": [3 * 8, 5 * 8]}]
    resumed = make_loader(mix, **options)
    resumed.load_state_dict(state)
    rest = take(resumed)
    assert seen + rest == whole[:3] + whole[5:]
    assert resumed.state_dict()["skipped"] == state["skipped"]  # states keep what was skipped
    ledger = Ledger(state)
    assert [ledger.status(0, s) for s in (2, 3, 4, 5, 6, 7)] == ["delivered", "skipped", "skipped",
                                                                 "delivered", "delivered", "ahead"]


class CountingReads(StructuredDataset):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.reads: list[list[int]] = []

    def __getitems__(self, indices):
        self.reads.append(list(indices))
        return super().__getitems__(indices)


def test_a_skip_between_epochs_reads_nothing_and_is_bounded(paths) -> None:
    mix = scheduled(paths)
    saved = make_loader(mix, batch_size=4)
    take(saved, 3)
    state = through_json(saved.state_dict())
    data = CountingReads(mix, transform=pair)
    resumed = DataLoader(data, batch_size=4, collate_fn=list)
    resumed.load_state_dict(state)
    resumed.skip(4)
    first = next(iter(resumed))
    assert data.reads == [resumed.indices(0, 7)[0]] and len(first) == 4
    with pytest.raises(ValueError, match="batches must lie in"):
        resumed.skip(len(resumed) + 1)
    with pytest.raises(ValueError, match="batches must lie in"):
        resumed.skip(-1)


# ---- schedules and resumes ---------------------------------------------------------------------


def test_a_schedule_across_an_elastic_resume_from_2_ranks_to_3(paths) -> None:
    mix = scheduled(paths)
    assert len(mix) > SCHEDULE[-1][0] + 100  # every step of the schedule is read
    everything = located(mix, list(range(len(mix))))
    two = [make_loader(mix, batch_size=5, world_size=2, rank=r, num_workers=2) for r in range(2)]
    before = [take(loader, 6) for loader in two]  # 60 indices: across the step at 40
    state = through_json(two[1].state_dict())
    assert state["position"] == 60
    three = [make_loader(mix, batch_size=5, world_size=3, rank=r, num_workers=1, workers="threads") for r in range(3)]
    after = []
    for rank, loader in enumerate(three):
        loader.load_state_dict(state)
        # len(): the whole epoch, the 6 batches before the resume included; steps count from it
        planned = [loader.indices(0, step, rank=rank) for step in range(len(loader) - state["step"])]
        got = take(loader)
        assert got == [located(mix, batch) for batch in planned]  # the ledger of the resumed segment
        after += got
    delivered = [d for rank in before for batch in rank for d in batch] + [d for batch in after for d in batch]
    assert sorted(set(delivered)) == sorted(everything) and len(everything) == len(set(everything))
    padding = len(delivered) - len(everything)
    assert 0 <= padding < 3 and len(set(delivered)) == len(everything)


def test_a_schedule_changed_at_a_checkpoint_follows_the_rule_for_weights(paths) -> None:
    before = make_loader(scheduled(paths), batch_size=4)
    used = [d for batch in take(before, 12) for d in batch]  # 48 indices
    state = through_json(before.state_dict())
    members = scheduled(paths).members
    later = [(10, [0, 0, 1, 1, 1])]
    with pytest.raises(ForeignStateError, match=r"start=\["):
        make_loader(Mixture(members, [1, 1, 1, 1, 1], schedule=later), batch_size=4).load_state_dict(state)
    shuffled = make_loader(scheduled(paths), batch_size=4, shuffle=True, seed=0)
    take(shuffled, 2)
    with pytest.raises(ForeignStateError, match="own order"):
        make_loader(Mixture(members, [1, 1, 1, 1, 1], schedule=later), batch_size=4,
                    shuffle=True, seed=0).load_state_dict(shuffled.state_dict())
    start = mixture_start(state, members)
    changed = Mixture(members, [1, 1, 1, 1, 1], schedule=later, start=start)
    resumed = make_loader(changed, batch_size=4)
    resumed.load_state_dict(state)
    rest = [d for batch in take(resumed) for d in batch]
    assert not set(rest) & set(used)
    for j in range(5):  # each member carries on where it was
        mine = [n for source, n in used + rest if source == j]
        assert mine == list(range(len(mine)))
    assert {source for source, _ in rest[40:]} <= {2, 3, 4}  # the new step, from index 10 of the new mixture


# ---- ffrecord ledger and audit ----------------------------------------------------------------


def states_of(mix: Mixture, steps: int, world_size: int = 2, **kwargs) -> list[dict]:
    out = []
    for rank in range(world_size):
        loader = make_loader(mix, batch_size=4, world_size=world_size, rank=rank, **kwargs)
        iterator = iter(loader)
        for _ in range(steps):
            next(iterator)
        out.append(through_json(loader.state_dict()))
    return out


def test_an_audit_finds_what_was_delivered_twice_or_never(paths) -> None:
    mix = scheduled(paths)
    ledger, report = audit(states_of(mix, 5))
    assert report.clean and report.once == 40 and report.ahead == len(mix) - 40 and not report.twice
    # the end of the epoch: padding delivers the first again, the ranks' shares being equal (an odd length)
    ends = len(mix) // 8 + (len(mix) % 8 > 0)
    _, padded = audit(states_of(mix, ends))
    assert len(mix) % 2 and len(padded.twice) == 1 and not padded.clean
    assert padded.twice == list(range(len(padded.twice)))  # the segment's first positions again
    _, cut = audit(states_of(mix, len(mix) // 8, drop_last=True))
    assert cut.never == [(len(mix) // 8 * 8, len(mix))] and not cut.twice
    # a skip is no loss
    loaders = [make_loader(mix, batch_size=4, world_size=2, rank=r) for r in range(2)]
    for loader in loaders:
        iterator = iter(loader)
        next(iterator)
        loader.skip(2)
        next(iterator)
    _, skipped = audit([through_json(loader.state_dict()) for loader in loaders])
    assert skipped.clean and skipped.skipped == 16 and skipped.once == 16
    with pytest.raises(ForeignStateError, match="ranks \\[0\\]"):
        audit(states_of(mix, 5)[:1])
    early, late = states_of(mix, 2), states_of(mix, 3)
    with pytest.raises(ForeignStateError, match="'step'"):
        audit([early[0], late[1]])


def test_ffrecord_ledger_prints_the_samples_of_steps(paths, tmp_path, capsys) -> None:
    mix = scheduled(paths)
    loader = make_loader(mix, batch_size=4, world_size=2, rank=0)
    take(loader, 3)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(loader.state_dict()))
    assert main(["ledger", str(state_file), "--steps", "2:4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t") == ["epoch", "step", "rank", "index", "member", "member_index", "name", "status"]
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) == 2 * 2 * 4
    planned = [(step, rank, i) for step in (2, 3) for rank in (0, 1) for i in loader.indices(0, step, rank=rank)]
    assert [(int(r[1]), int(r[2]), int(r[3])) for r in rows] == planned
    assert [(int(r[4]), int(r[5]), r[6]) for r in rows] == [mix.locate(i) for _, _, i in planned]
    assert [r[7] for r in rows] == ["delivered"] * 8 + ["ahead"] * 8
    checkpoint = tmp_path / "ckpt.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "loader": loader.state_dict()}, checkpoint)
    assert main(["ledger", str(checkpoint), "--steps", "3", "--rank", "1", "--json",
                 "--dataset", *map(str, paths)]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["index"] for row in printed] == loader.indices(0, 3, rank=1)


def test_ffrecord_ledger_and_audit_refuse_what_they_cannot_use(paths, tmp_path, capsys) -> None:
    mix = scheduled(paths)
    states = states_of(mix, 2)
    for rank, state in enumerate(states):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(state))
    assert main(["audit", str(tmp_path / "rank0.json"), str(tmp_path / "rank1.json")]) == 0
    assert "delivered twice: 0" in capsys.readouterr().out
    given = DataLoader(StructuredDataset(Mixture.from_paths(paths, [1] * 5, lengths=LENGTHS)), batch_size=4)
    (tmp_path / "given.json").write_text(json.dumps(given.state_dict()))  # members known by name and length
    cases = [
        (["ledger", str(tmp_path / "rank0.json"), "--steps", "1", "--dataset", *map(str, paths[::-1])],
         "source4 is not the data of the state's member ledger0/source0"),
        (["ledger", str(tmp_path / "given.json"), "--steps", "1", "--dataset", *map(str, paths[::-1])],
         r"source4 \(88 datapoints\) is not the state's member ledger0/source0"),
        (["ledger", str(tmp_path / "rank0.json"), "--steps", "1", "--dataset", str(paths[0])],
         "has 5 members; 1 path"),
        (["ledger", str(tmp_path / "rank0.json"), "--steps", "9999"], "step 9999 out of range"),
        (["ledger", str(tmp_path / "rank0.json"), "--steps", "3:1"], "need 0 <= A < B"),
        (["audit", str(tmp_path / "rank0.json")], "ranks \\[0\\]"),
    ]
    (tmp_path / "garbage.json").write_bytes(b"\x00not a state")
    cases.append((["ledger", str(tmp_path / "garbage.json"), "--steps", "1"], "neither JSON nor a torch checkpoint"))
    damaged = dict(states[0], position=3)
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    cases.append((["ledger", str(tmp_path / "damaged.json"), "--steps", "1"], "damaged state: position 3"))
    chunked = DataLoader(list(range(40)), batch_size=4,
                         order=ChunkShuffle([0, 10, 20, 30, 40], seed=0, window=1))
    (tmp_path / "chunks.json").write_text(json.dumps(chunked.state_dict()))
    cases.append((["ledger", str(tmp_path / "chunks.json"), "--steps", "1"], "chunk-aware order"))
    other = DataLoader(StructuredDataset(Mixture.from_paths(paths[:2], [1, 1])), batch_size=4)
    (tmp_path / "other.json").write_text(json.dumps(other.state_dict()))
    cases.append((["ledger", str(tmp_path / "other.json"), "--steps", "1", "--dataset", *map(str, paths[2:4])],
                  "source2 is not the data of the state's member ledger0/source0"))
    assert main(["ledger", str(tmp_path / "given.json"), "--steps", "1", "--dataset", *map(str, paths)]) == 0
    for argv, words in cases:
        assert main(argv) == 2, argv
        assert re.search(words, capsys.readouterr().err), (argv, words)
    with pytest.raises(StateError):
        Ledger({"format": "something else"})
