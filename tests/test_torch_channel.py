"""The loader's worker queues without a feeder thread (``ffrecord.torch._channel``): a put
never blocks, messages keep their order, torch's loop gets what it expects."""

from __future__ import annotations

import multiprocessing
import queue
import time

import pytest

torch = pytest.importorskip("torch")

from ffrecord.torch import DataLoader  # noqa: E402
from ffrecord.torch._channel import DirectQueue, direct_queues  # noqa: E402


def test_puts_never_block_and_keep_their_order_when_nobody_reads():
    q = DirectQueue(ctx=multiprocessing.get_context("fork"))
    big = [bytes([k]) * 40_000 for k in range(8)]  # 320 KB: far more than a pipe holds
    start = time.monotonic()
    for k in range(8):
        q.put((k, big[k]))
        q.put((k, "small"))  # would fit in place, but must not overtake the big one
    assert time.monotonic() - start < 5
    got = [q.get(timeout=30) for _ in range(16)]
    assert got == [m for k in range(8) for m in ((k, big[k]), (k, "small"))]
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)
    q.put("in place again")
    assert q.get(timeout=30) == "in place again"
    with q._wlock:  # held by another writer (say, a sibling's backlog thread stuck on a full pipe)
        q.put("while the lock is held")  # returns: the backlog thread writes it later
    assert q.get(timeout=30) == "while the lock is held"


def _send_from_child(q: DirectQueue) -> None:
    for k in range(4):
        q.put((k, b"x" * 30_000))
    time.sleep(0.3)  # its backlog thread writes before the process exits


def test_a_child_writes_through_the_pipe():
    """(Loaders started by spawn and forkserver: test_torch_workers.)"""
    context = direct_queues("fork")
    q = context.Queue()
    child = context.Process(target=_send_from_child, args=(q,))
    child.start()
    assert [q.get(timeout=60)[0] for _ in range(4)] == [0, 1, 2, 3]
    child.join(60)
    assert child.exitcode == 0


class _Text(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> str:
        return str(index) * 20_000  # a batch torch pickles whole: it does not fit the pipe


def test_loader_queues_are_direct_and_large_pickled_batches_still_flow():
    loader = DataLoader(_Text(), batch_size=8, num_workers=2, timeout=60)
    assert type(loader.multiprocessing_context.Queue()) is DirectQueue
    assert [b[0] for b in loader] == [str(8 * k) * 20_000 for k in range(8)]
    assert direct_queues(None) is None or isinstance(direct_queues(None).Queue(), DirectQueue)
