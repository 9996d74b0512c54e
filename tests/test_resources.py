"""No leaks: file descriptors and handles across many opens, memory across many reads."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ffrecord import FileReader, FileWriter, _lib
from ffr_helpers import payload, write_dataset


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fds_open_on(path: Path) -> list[str]:
    """The descriptors of this process open on ``path``."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path.resolve()):
                found.append(fd)
        except FileNotFoundError:  # closed since the listing
            pass
    return found


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_100k_open_close_leaks_no_fd_nor_handle(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "small.ffr", [payload(i, 100) for i in range(4)])
    with FileReader(path) as warm:  # load the library before counting
        warm.read([0])
    fds, handles = open_fds(), _lib.open_handles()
    for i in range(100_000):
        reader = FileReader(path, check_data=bool(i & 1))
        if i % 1000 == 0:
            assert reader.read_one(i % 4).tobytes() == payload(i % 4, 100)
            assert fds_open_on(path) != []  # what the check below looks for
        reader.close()
    # Descriptors that earlier tests left (idle connections, other libraries' threads) may
    # close meanwhile: none may be open on the file, and the count may not grow.
    assert fds_open_on(path) == []
    assert open_fds() <= fds
    assert _lib.open_handles() == handles


def test_readers_dropped_without_close_are_released(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "small.ffr", [b"x"])
    FileReader(path).close()
    fds, handles = open_fds(), _lib.open_handles()
    for _ in range(2000):
        FileReader(path)  # collected at once by reference counting
    assert (open_fds(), _lib.open_handles()) == (fds, handles)


def test_a_million_samples_read_with_flat_memory(tmp_path: Path) -> None:
    n = 1_000_000
    path = tmp_path / "million.ffr"
    with FileWriter(path, n) as writer:
        for i in range(n):
            writer.write_one(i.to_bytes(8, "little"))
    batch = 4096
    with FileReader(path) as reader:
        assert reader.n == n
        order = np.random.default_rng(5).permutation(n)

        def read_range(start: int, stop: int) -> None:
            for first in range(start, stop, batch):
                idx = order[first:first + batch]
                buf, _ = reader.read_batch(idx)
                assert np.array_equal(buf.view("<u8"), idx)
                reader.read(idx[:256])

        read_range(0, n // 4)  # reach steady state
        before = rss_bytes()
        read_range(n // 4, n)
        grown = rss_bytes() - before
    assert grown < 16 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 750k reads"
