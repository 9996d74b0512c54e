"""Test helpers: deterministic sample data, dataset files, and bounded child processes."""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

import ffrecord
from ffrecord import FileWriter
from ffrecord._processes import frozen_objects


def payload(index: int, size: int) -> bytes:
    """Sample ``index`` of ``size`` bytes: distinct per index, cheap for any size."""
    seed = hashlib.sha256(f"{index}:{size}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def write_dataset(path: str | os.PathLike[str], samples: Iterable[bytes],
                  n: int | None = None) -> Path:
    samples = list(samples)
    with FileWriter(path, len(samples) if n is None else n) as writer:
        for sample in samples:
            writer.write_one(sample)
    return Path(path)


def random_sizes(count: int, low: int, high: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(low, high, count).tolist()


def run_threads(body: Callable[[int], None], count: int, timeout: float = 60.0) -> None:
    """Runs ``body(0) … body(count-1)`` in threads at once; re-raises the first failure and
    fails if any thread is still running after ``timeout``."""
    errors: list[BaseException] = []

    def guarded(seed: int) -> None:
        try:
            body(seed)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(seed,)) for seed in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), f"a thread still runs after {timeout}s"
    if errors:
        raise errors[0]


class FinalizedWhere:
    """Garbage (it refers to itself) whose finalizer writes down the process it runs in."""

    def __init__(self, record: Path) -> None:
        self.record, self.me = record, self

    def __del__(self) -> None:
        with open(self.record, "a") as out:
            out.write(f"{os.getpid()}\n")


@contextlib.contextmanager
def garbage_pending(record: Path) -> Iterator[None]:
    """Keeps a ``FinalizedWhere`` garbage uncollected for the duration (the collector off),
    then collects it: the processes its finalizer ran in are then the lines of ``record``."""
    gc.collect()
    gc.disable()
    try:
        FinalizedWhere(record)
        yield
        gc.collect()
    finally:
        gc.enable()


def run_in_child(body: Callable[[], None], timeout: float = 60.0) -> None:
    """Runs ``body`` in a child made by ``os.fork``; raises if it fails or outlives ``timeout``.

    The child's traceback comes back through a pipe, a crash's too; a child that hangs is
    killed, so a hang fails the test instead of the run. The child forks with the suite's
    objects frozen, as ffrecord's workers do (``ffrecord._processes``): its collector
    never finalizes what earlier tests left (Ray's gRPC clients crash in a forked child).
    """
    read_end, write_end = os.pipe()
    with frozen_objects():  # the child never leaves this block: it keeps them frozen
        pid = os.fork()
        if pid == 0:  # child: never return into pytest
            status = 0
            try:
                os.close(read_end)
                faulthandler.enable(write_end, all_threads=True)
                body()
            except BaseException:  # noqa: BLE001 - report everything to the parent
                os.write(write_end, traceback.format_exc().encode())
                status = 1
            finally:
                os._exit(status)
    os.close(write_end)
    try:
        status = wait_bounded(pid, timeout)
        report = _read_all(read_end)
    finally:
        os.close(read_end)
    if status is None:
        raise AssertionError(f"forked child still running after {timeout}s: a hang")
    if status != 0:
        raise AssertionError(f"forked child failed (exit {status}):\n{report}")


def run_python(code: str, cwd: str | os.PathLike[str] | None = None, **env: str) -> str:
    """The standard output (stripped) of ``code`` run by a fresh interpreter, which must
    succeed. The child imports the same ffrecord as this run (installed, or the source tree
    in development) and these helpers; ``env`` adds environment variables."""
    paths = [str(Path(ffrecord.__file__).resolve().parent.parent), str(Path(__file__).parent)]
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path[:0] = {paths!r}\n" + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=120, cwd=cwd, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def run_benchmark(script: str, *args: str, timeout: float = 300) -> str:
    """The standard output of ``benchmarks/<script>`` run by a fresh interpreter with
    ``args``, which must succeed; it imports the installed ffrecord (no ``PYTHONPATH``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "benchmarks" / script), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def wait_bounded(pid: int, timeout: float) -> int | None:
    """The exit code of ``pid``, or ``None`` after killing it when ``timeout`` runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class DeadlineExceeded(AssertionError):
    """Raised in the main thread by ``deadline`` when Python code ran past its time."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fails the block (``DeadlineExceeded``) if it is still running after ``seconds``.

    A SIGALRM interrupts Python code only: a call blocked inside C is ended by other means
    (see ``fifo_that_unblocks``). Main thread only, as signals are.
    """
    def expire(signum: int, frame: object) -> None:
        raise DeadlineExceeded(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def fifo_that_unblocks(path: str | os.PathLike[str], after: float = 10.0) -> Iterator[Path]:
    """Makes a FIFO at ``path`` and fails the block if anything blocked on it for ``after``
    seconds: a watchdog then opens the writing end and closes it, so that a reader stuck
    in ``open`` or ``read`` (in C, where no signal handler runs) sees end of file and the
    test fails instead of hanging the run."""
    os.mkfifo(path)
    rescued = threading.Event()

    def rescue() -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO when nobody waits
        except OSError:
            return
        rescued.set()
        os.close(fd)

    timer = threading.Timer(after, rescue)
    timer.start()
    try:
        yield Path(path)
    finally:
        timer.cancel()
    assert not rescued.is_set(), f"something blocked on the FIFO {path} for {after}s"
