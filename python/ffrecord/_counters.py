"""Readers' I/O counters (``FileReader.stats()``): one shape for a reader, a structured
dataset's readers and a DataLoader's processes, so that they add up.

A stats dict holds the core's counters (``_lib.STAT_NAMES``, integers) and
``fetched_per_delivered``: bytes the store sent per stored byte of the samples read, the
egress an epoch costs for the data it reads (0.0 before anything was read remotely).

>>> one = with_ratio(dict.fromkeys(_lib.STAT_NAMES, 0) | {"bytes_fetched": 300, "bytes_delivered": 200})
>>> one["fetched_per_delivered"], summed([one, one])["bytes_fetched"]
(1.5, 600)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from . import _lib

RATIO = "fetched_per_delivered"


def with_ratio(values: Mapping[str, int]) -> dict[str, int | float]:
    """The counters ``values`` with their ``fetched_per_delivered`` ratio."""
    delivered = values["bytes_delivered"]
    return {**values, RATIO: values["bytes_fetched"] / delivered if delivered else 0.0}


def summed(stats: Iterable[Mapping[str, int | float]]) -> dict[str, int | float]:
    """The counters of several stats dicts added up, with their ratio (zeros for none)."""
    total = dict.fromkeys(_lib.STAT_NAMES, 0)
    for one in stats:
        for name in _lib.STAT_NAMES:
            total[name] += int(one[name])
    return with_ratio(total)
