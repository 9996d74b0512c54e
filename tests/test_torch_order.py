"""The order of batches: torch's for a generator, keyed by (seed, epoch) otherwise, per rank."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ffrecord.torch import DataLoader  # noqa: E402
from ffrecord._permutation import FeistelPermutation  # noqa: E402
from torch_scripts.common import InMemoryDataset, epoch_batches, indices_of, make_loader, write_samples  # noqa: E402

N = 37


@pytest.fixture(scope="module")
def ffr(tmp_path_factory):
    return write_samples(tmp_path_factory.mktemp("order") / "samples.ffr", N)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 17, 64, 1000, 4097])
def test_permutation_is_a_bijection(n):
    for seed, epoch in [(0, 0), (1, 0), (1, 1), (2**70 + 5, 3)]:
        order = FeistelPermutation(n, seed, epoch)(np.arange(n))
        assert sorted(order.tolist()) == list(range(n))


def test_permutation_keeps_the_orders_of_earlier_releases():
    # written by the numpy implementation that the core's replaced: states recorded then
    # resume in the same order (the core's own test pins more sizes)
    assert FeistelPermutation(7, 3, 2)(np.array([0, 1, 3, 4, 6])).tolist() == [5, 2, 3, 4, 0]
    assert FeistelPermutation(10**9, 0, 3)(np.array([0, 999_999_999])).tolist() == [563692895, 258640654]
    masked = FeistelPermutation(2**63 - 1, 2**64 - 1, 2**64 - 2)(np.array([1]))
    assert masked.tolist() == [982298542681682918]
    assert (FeistelPermutation(1000, 2**70 + 5, 3)(np.arange(9)) == FeistelPermutation(1000, 5, 3)(np.arange(9))).all()


@pytest.mark.parametrize("n", [-1, 2**64 + 5])
def test_permutation_refuses_a_size_it_cannot_pass_on(n):
    with pytest.raises(ValueError, match="n must lie in"):
        FeistelPermutation(n, 1, 0)


def test_permutation_refuses_a_size_above_two_to_the_63():
    with pytest.raises(ValueError, match="at most 2\\^63"):
        FeistelPermutation(2**63 + 1, 1, 0)(np.array([1]))


@pytest.mark.parametrize("position", [-1, 10])
def test_permutation_refuses_a_position_outside(position):
    with pytest.raises(IndexError, match=f"position {position} of a permutation of \\[0, 10\\)"):
        FeistelPermutation(10, 1, 0)(np.array([3, position]))


def test_permutation_positions_are_independent_of_the_batch():
    perm = FeistelPermutation(10**12, seed=9, epoch=4)
    whole = perm(np.arange(10**12 - 50, 10**12))
    parts = np.concatenate([perm(np.arange(10**12 - 50, 10**12 - 20)), perm(np.arange(10**12 - 20, 10**12))])
    assert (whole == parts).all()
    assert whole.min() >= 0 and whole.max() < 10**12 and len(set(whole.tolist())) == 50


@pytest.mark.parametrize("shuffle, num_workers, drop_last", list(itertools.product([True, False], [0, 2], [True, False])))
def test_same_batches_as_stock_dataloader_for_a_generator(ffr, shuffle, num_workers, drop_last):
    def batches(loader):
        return [epoch_batches(loader) for _ in range(3)]

    options = dict(batch_size=5, shuffle=shuffle, num_workers=num_workers, drop_last=drop_last)
    stock = torch.utils.data.DataLoader(InMemoryDataset(N), generator=torch.Generator().manual_seed(3), **options)
    ours = make_loader(ffr, generator=torch.Generator().manual_seed(3), **options)
    expected = batches(stock)
    assert batches(ours) == expected
    assert len(expected[0]) == len(ours) == (N // 5 if drop_last else -(-N // 5))
    if shuffle:
        assert expected[0] != expected[1]


@pytest.mark.parametrize("batch_size, drop_last", [(8, False), (8, True), (37, False)])
def test_generator_shared_with_the_training_loop_stays_in_step(ffr, batch_size, drop_last):
    def draws(loader, generator):
        return [(indices_of(batch), torch.rand(1, generator=generator).item()) for _ in range(2) for batch in loader]

    options = dict(batch_size=batch_size, drop_last=drop_last, shuffle=True)
    g = torch.Generator().manual_seed(2)
    stock = draws(torch.utils.data.DataLoader(InMemoryDataset(N), generator=g, **options), g)
    g = torch.Generator().manual_seed(2)
    assert draws(make_loader(ffr, generator=g, **options), g) == stock


def test_unbatched_loader_matches_stock(ffr):
    stock = torch.utils.data.DataLoader(InMemoryDataset(N), batch_size=None, shuffle=True,
                                        generator=torch.Generator().manual_seed(8))
    ours = make_loader(ffr, batch_size=None, shuffle=True, generator=torch.Generator().manual_seed(8))
    assert [int(b[0]) for b in ours] == [int(b[0]) for b in stock]


def test_seeded_order_is_a_function_of_seed_and_epoch(ffr):
    loader = make_loader(ffr, shuffle=True, seed=11)
    epochs = [epoch_batches(loader) for _ in range(3)]
    for batches in epochs:
        assert sorted(itertools.chain(*batches)) == list(range(N))
    assert epochs[0] != epochs[1] != epochs[2]

    again = make_loader(ffr, shuffle=True, seed=11, num_workers=2)
    assert [epoch_batches(again) for _ in range(3)] == epochs
    later = make_loader(ffr, shuffle=True, seed=11)
    later.set_epoch(2)
    assert epoch_batches(later) == epochs[2]
    assert epoch_batches(make_loader(ffr, shuffle=True, seed=12)) != epochs[0]


def test_without_seed_or_generator_a_seed_is_drawn_and_recorded(ffr):
    torch.manual_seed(5)
    first = make_loader(ffr, shuffle=True)
    torch.manual_seed(5)
    second = make_loader(ffr, shuffle=True)
    assert isinstance(first.seed, int) and first.seed == second.seed
    assert first.state_dict()["seed"] == first.seed
    assert epoch_batches(first) == epoch_batches(second)
    assert make_loader(ffr, shuffle=False).seed is None


def test_huge_dataset_order_needs_no_permutation_array():
    loader = DataLoader(range(10**9), batch_size=3, shuffle=True, seed=2)
    loader.set_step(len(loader) - 1)
    (last,) = list(loader)
    assert len(last) == 1 and 0 <= int(last[0]) < 10**9


@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_get_disjoint_complete_shares(ffr, drop_last):
    shares = []
    for rank in range(3):
        loader = make_loader(ffr, batch_size=5, shuffle=True, seed=4, rank=rank, world_size=3, drop_last=drop_last)
        shares.append(list(itertools.chain(*epoch_batches(loader))))
    sizes = {len(share) for share in shares}
    every = list(itertools.chain(*shares))
    if drop_last:  # 12 each (the tail of the order is cut), then each rank's partial batch dropped
        assert sizes == {10}
        assert len(set(every)) == len(every)
    else:  # 13 each: the order is padded by wrapping around
        assert sizes == {13}
        assert set(every) == set(range(N)) and len(every) == N + 2


def test_distributed_arguments_are_checked(ffr):
    with pytest.raises(ValueError):
        make_loader(ffr, rank=2, world_size=2)
    with pytest.raises(ValueError):
        make_loader(ffr, sampler=range(N), seed=1)
    with pytest.raises(ValueError):
        make_loader(ffr, shuffle=True, seed=1, skippable=False)
