"""A keyed pseudo-random permutation of ``range(n)`` that is never stored.

An epoch's shuffle order must be a pure function of ``(seed, epoch)`` that maps any position
to its sample index in O(1) time and memory: a 100M-sample dataset then needs no 800 MB
permutation array, and resuming at batch ``k`` costs the same as starting at batch 0. The
core computes it (``ffr_permute``; the algorithm, a Feistel network with cycle walking, is
specified in ``core/permutation.go``): a batch of positions is one call.

>>> import numpy as np
>>> perm = FeistelPermutation(10, seed=7, epoch=0)
>>> sorted(perm(np.arange(10)).tolist()) == list(range(10))
True
>>> again = FeistelPermutation(10, seed=7, epoch=0)
>>> bool((perm(np.arange(10)) == again(np.arange(10))).all())
True
"""

from __future__ import annotations

import numpy as np

from . import _lib
from ._buffers import address

_MASK64 = (1 << 64) - 1
# Multipliers of the SplitMix64 finaliser: a well-studied 64-bit mixing function.
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15


def splitmix64_array(x: np.ndarray) -> np.ndarray:
    """SplitMix64 on each element of a uint64 array (wrapping arithmetic), as ``splitmix64``.

    >>> int(splitmix64_array(np.array([5], np.uint64))[0]) == splitmix64(5)
    True
    """
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(_GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def splitmix64(x: int) -> int:
    """One SplitMix64 step on a Python int: derives independent keys from a seed (the
    orders' and the datapoints' seeds, ``ffrecord.order``)."""
    z = (x + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


class FeistelPermutation:
    """The order of one epoch: position ``p`` in ``[0, n)`` → sample index, keyed by (seed, epoch).

    Call it with a numpy integer array of positions (a whole batch at once); it returns the
    sample indices as an ``int64`` array. A position outside ``[0, n)`` raises ``IndexError``.

    >>> import numpy as np
    >>> FeistelPermutation(1, seed=0, epoch=0)(np.array([0])).tolist()
    [0]
    >>> a = FeistelPermutation(1000, seed=1, epoch=0)(np.arange(1000))
    >>> b = FeistelPermutation(1000, seed=1, epoch=1)(np.arange(1000))
    >>> bool((a != b).any())
    True
    """

    def __init__(self, n: int, seed: int, epoch: int) -> None:
        if not 0 <= n <= _MASK64:  # what a uint64 argument carries (ctypes would wrap more)
            raise ValueError(f"n must lie in [0, 2**64), got {n}")
        self.n = n
        self.seed = seed
        self.epoch = epoch

    def __repr__(self) -> str:
        return f"FeistelPermutation(n={self.n}, seed={self.seed}, epoch={self.epoch})"

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        positions = np.ascontiguousarray(positions, np.int64)
        out = np.empty(positions.shape, np.int64)
        _lib.check(_lib.current().dll.ffr_permute(self.n, self.seed & _MASK64, self.epoch & _MASK64,
                                                  address(positions), positions.size, address(out)))
        return out
