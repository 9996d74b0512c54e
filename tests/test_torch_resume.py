"""set_step, set_epoch, state_dict / load_state_dict: resuming at the exact batch."""

from __future__ import annotations

import io
import json

import pytest

torch = pytest.importorskip("torch")

from torch_scripts.common import (  # noqa: E402
    InMemoryDataset,
    epoch_batches,
    indices_of,
    make_loader,
    run_script,
    write_samples,
)

N = 30  # 8 batches of 4, the last one of 2


@pytest.fixture(scope="module")
def ffr(tmp_path_factory):
    return write_samples(tmp_path_factory.mktemp("resume") / "samples.ffr", N)


def generator_loader(ffr, **kwargs):
    return make_loader(ffr, shuffle=True, generator=torch.Generator().manual_seed(21), **kwargs)


def through_json(state):
    return json.loads(json.dumps(state))


@pytest.mark.parametrize("step", [0, 1, 4, 7])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_set_step_skips_batches_like_the_stock_loader(ffr, step, num_workers):
    stock = torch.utils.data.DataLoader(InMemoryDataset(N), batch_size=4, shuffle=True,
                                        generator=torch.Generator().manual_seed(21))
    expected = epoch_batches(stock)
    loader = generator_loader(ffr, num_workers=num_workers)
    loader.set_step(step)
    assert len(loader) == 8 - step
    assert epoch_batches(loader) == expected[step:]
    assert len(loader) == 8  # set_step applies to one epoch only
    assert epoch_batches(loader) == epoch_batches(stock)


def test_set_step_with_a_seed_and_out_of_range(ffr):
    loader = make_loader(ffr, shuffle=True, seed=3)
    full = [epoch_batches(loader) for _ in range(2)]
    loader.set_epoch(1)
    loader.set_step(7)
    loader.set_step(0)  # harmless, as reference users call it at a fresh start
    loader.set_step(5)
    assert epoch_batches(loader) == full[1][5:]
    for bad in (8, -1):
        with pytest.raises(ValueError):
            loader.set_step(bad)
    with pytest.raises(TypeError):
        loader.set_step(1.5)


@pytest.mark.parametrize("mode, num_workers", [("seed", 0), ("seed", 2), ("generator", 2)])
def test_state_mid_epoch_resumes_in_a_new_process(ffr, tmp_path, mode, num_workers):
    if mode == "generator":
        loader = generator_loader(ffr, num_workers=num_workers)
    else:
        loader = make_loader(ffr, shuffle=True, seed=17, num_workers=num_workers)
    epoch_batches(loader)  # the state is taken in epoch 1, batch 3
    iterator = iter(loader)
    for _ in range(3):
        indices_of(next(iterator))
    state = loader.state_dict()  # workers have prefetched beyond batch 3 by now
    assert (state["epoch"], state["step"]) == (1, 3)
    expected = [epoch_batches(iterator), epoch_batches(loader)]
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state))
    args = ["--workers", str(num_workers)] + (["--generator"] if mode == "generator" else [])
    assert run_script("resume", ffr, str(path), *args) == expected


@pytest.mark.parametrize("mode", ["seed", "generator"])
def test_states_at_epoch_boundaries(ffr, mode):
    def fresh():
        return generator_loader(ffr) if mode == "generator" else make_loader(ffr, shuffle=True, seed=5)

    loader = fresh()
    epoch_batches(loader)
    between = through_json(loader.state_dict())
    assert (between["epoch"], between["step"]) == (1, 0)
    iterator = iter(loader)
    epoch1 = [indices_of(next(iterator)) for _ in range(8)]
    at_last_batch = through_json(loader.state_dict())  # every batch out, StopIteration not yet
    assert (at_last_batch["epoch"], at_last_batch["step"]) == (1, 8)
    with pytest.raises(StopIteration):
        next(iterator)
    following = [epoch_batches(loader) for _ in range(2)]

    resumed = fresh()
    resumed.load_state_dict(between)
    assert [epoch_batches(resumed) for _ in range(3)] == [epoch1, *following]
    resumed = fresh()
    resumed.load_state_dict(at_last_batch)
    assert [epoch_batches(resumed) for _ in range(3)] == [[], *following]  # epoch 1's rest is empty


def test_state_is_small_and_survives_torch_save(ffr):
    loader = make_loader(ffr, shuffle=True, seed=9, num_workers=0)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    assert len(json.dumps(state)) < 1000
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    restored = make_loader(ffr, shuffle=True)
    restored.load_state_dict(torch.load(buffer))
    assert epoch_batches(restored) == epoch_batches(iterator)
    assert len(json.dumps(generator_loader(ffr).state_dict())) < 10_000


def test_fingerprint_or_configuration_mismatch_raises(ffr, tmp_path):
    state = make_loader(ffr, shuffle=True, seed=1).state_dict()
    other_name = write_samples(tmp_path / "other.ffr", N)
    other_length = write_samples(tmp_path / "samples.ffr", N + 1)
    other_sizes = tmp_path / "sizes"
    other_sizes.mkdir()
    other_sizes = write_samples(other_sizes / "samples.ffr", N, first=1000)
    for path in (other_name, other_length, other_sizes):
        with pytest.raises(ValueError, match="different dataset"):
            make_loader(path, shuffle=True, seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="another order"):
        make_loader(ffr, shuffle=False).load_state_dict(state)
    with pytest.raises(ValueError, match="seed 1, this loader has seed 2"):
        make_loader(ffr, shuffle=True, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="another order"):
        generator_loader(ffr).load_state_dict(state)
    for options in (dict(batch_size=5), dict(world_size=2, rank=1)):  # topologies: elastic resume
        generator_loader(ffr, **options).load_state_dict(generator_loader(ffr, **options).state_dict())
        with pytest.raises(ValueError, match="cannot resume on another topology"):
            generator_loader(ffr).load_state_dict(generator_loader(ffr, **options).state_dict())
    with pytest.raises(ValueError):
        make_loader(ffr).load_state_dict({"epoch": 0})


def test_state_from_another_rank_loads(ffr):
    rank0 = make_loader(ffr, shuffle=True, seed=2, rank=0, world_size=2)
    iterator = iter(rank0)
    next(iterator)
    rank1 = make_loader(ffr, shuffle=True, seed=2, rank=1, world_size=2)
    expected = epoch_batches(make_loader(ffr, shuffle=True, seed=2, rank=1, world_size=2))[1:]
    rank1.load_state_dict(rank0.state_dict())
    assert epoch_batches(rank1) == expected


def test_custom_sampler_is_walked(ffr):
    order = list(reversed(range(N)))
    loader = make_loader(ffr, sampler=order)
    full = epoch_batches(loader)
    assert full[0] == [29, 28, 27, 26]
    loader.set_step(6)
    assert epoch_batches(loader) == full[6:]
    iterator = iter(loader)
    next(iterator)
    restored = make_loader(ffr, sampler=order)
    restored.load_state_dict(through_json(loader.state_dict()))
    assert epoch_batches(restored) == full[1:]


def test_not_skippable_is_the_stock_loader(ffr):
    loader = make_loader(ffr, shuffle=True, generator=torch.Generator().manual_seed(4), skippable=False)
    stock = torch.utils.data.DataLoader(InMemoryDataset(N), batch_size=4, shuffle=True,
                                        generator=torch.Generator().manual_seed(4))
    assert epoch_batches(loader) == epoch_batches(stock)
    assert len(loader) == 8
    for call in (lambda: loader.set_step(1), loader.state_dict, lambda: loader.set_epoch(1)):
        with pytest.raises(RuntimeError, match="skippable"):
            call()


def test_len_after_load_state_dict_is_the_whole_epoch(ffr):
    """Like torchdata's StatefulDataLoader: a trainer that restores its own batch counter
    (Lightning) counts to len(), so the remaining batches must not be subtracted twice."""
    saved = make_loader(ffr, shuffle=True, seed=5)
    it = iter(saved)
    for _ in range(3):
        next(it)
    state = through_json(saved.state_dict())
    loader = make_loader(ffr, shuffle=True, seed=5)
    loader.load_state_dict(state)
    assert len(loader) == 8
    it = iter(loader)
    assert len(loader) == len(it) == 8
    assert [indices_of(b) for b in it] == epoch_batches(make_loader(ffr, shuffle=True, seed=5))[3:]
    assert len(loader) == 8
    loader.set_step(2)  # set_step keeps the reference's meaning: batches from the step on
    assert len(loader) == 6
    loader.load_state_dict(state)
    loader.set_step(1)
    assert len(loader) == 7
