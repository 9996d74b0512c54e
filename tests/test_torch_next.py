"""The loader's iterator skips torch's profiler scope only when no profiler runs."""

import numpy as np
import torch

from ffrecord._indices import index_array
from ffrecord.torch import DataLoader


def test_batches_same_under_the_profiler_which_sees_the_loader():
    loader = DataLoader(list(range(20)), batch_size=4, shuffle=True, seed=3)
    plain = [b.tolist() for b in loader]
    loader.set_epoch(0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        profiled = [b.tolist() for b in loader]
    assert profiled == plain
    assert any("enumerate(DataLoader)" in e.name for e in prof.events())
    loader.set_epoch(0)
    loader.set_step(2)
    assert [b.tolist() for b in loader] == plain[2:]


def test_index_lists_as_before():
    assert index_array([3, 0, 7], 10).tolist() == [3, 0, 7]
    assert index_array([3, -1], 10).tolist() == [3, 9]
    assert index_array([np.int32(2), np.int32(5)], 10).tolist() == [2, 5]
    assert index_array([2, 5], 10).dtype == np.uint64
