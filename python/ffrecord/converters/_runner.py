"""The one runner every conversion writes through: its outputs staged where nothing reads
them until all are complete (``Staging``), and written by worker processes with a shared
progress bar, the first failure stopping the rest (``run_tasks``).

``converters.run`` (other dataset formats, Granular's included) stages and runs its units
here; ``utils.dump`` (an indexable dataset of byte samples) runs its parts here (and removes
them all after a failure, as the reference's does, rather than resuming);
``tokens.convert_text`` (text to tokens, one ordered stream) and Ray's datasink (Ray runs
the tasks) stage and publish here. What each adds is only how to read its source.

>>> import tempfile
>>> from ffrecord._progress import ProgressBar
>>> class Squares:
...     def write(self, n, advance, cancelled):
...         advance(1)
...         return n * n
>>> with ProgressBar(3, enabled=False) as bar:
...     run_tasks(Squares(), [(1,), (2,), (3,)], 2, bar), bar.count
([1, 4, 9], 3)
>>> staging = Staging(os.path.join(tempfile.mkdtemp(), ".out.converting"))
>>> staging.resume({"source": "a"}, {"000000": "v1"})
set()
>>> (staging.path / "000000").mkdir(); staging.complete("000000")
False
>>> staging.resume({"source": "a"}, {"000000": "v1"})  # its source unchanged: kept
{'000000'}
>>> staging.resume({"source": "a"}, {"000000": "v2"})  # changed since: converted again
set()
>>> staging.resume({"source": "b"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ffrecord.converters._runner.OtherConversionError: ... holds an unfinished conversion with other settings (source): ...
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import stat
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable

from .._paths import PathArg
from .._processes import start_context
from .._progress import ProgressBar
from ..dataset.spec import SPEC_FILE, sync_directory

#: What a conversion in progress is converting, in its staging directory.
MANIFEST = "convert.json"
#: The manifest's key for what each output's source was when it was converted.
IDENTITIES = "identities"
#: How often workers check for cancellation and report progress (in items / seconds): rare
#: enough to cost nothing next to a write, frequent enough to stop and redraw promptly.
CHECK_EVERY = 64
REPORT_SECONDS = 0.2


class OtherConversionError(FileExistsError, ValueError):
    """The staging directory holds an unfinished conversion with other settings: resuming
    it would mix two conversions' outputs."""


class Cancelled(Exception):
    """Raised inside a worker told to stop because another task failed."""


def refuse_taken(destination: PathArg) -> None:
    """``FileExistsError`` unless ``destination`` is free for a conversion: absent, or an
    empty directory (which ``Staging.publish`` replaces)."""
    destination = Path(os.fsdecode(destination))
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise FileExistsError(f"{destination}: already exists and is not an empty directory")


class Staging:
    """A directory beside the destination (hidden, or ``DEST.partial`` for token datasets)
    where a conversion writes its outputs (shard directories or ``.ffr`` files, each
    complete once its name appears), with a manifest saying what is being converted and, per
    output, what its source was. A later run with the same manifest resumes: it keeps the
    complete outputs whose source is unchanged and writes the rest; ``publish`` moves the
    result to its destination in one rename, so that a dataset appears there only complete."""

    def __init__(self, path: PathArg) -> None:
        self.path = Path(os.fsdecode(path))

    def __repr__(self) -> str:
        return f"Staging({str(self.path)!r})"

    def resume(self, plan: dict[str, Any], identities: dict[str, str] | None = None) -> set[str]:
        """Starts a conversion described by ``plan`` (a JSON object), or checks that the
        unfinished one found is the same (``OtherConversionError`` otherwise); returns the
        outputs whose source is unchanged since the earlier run: those whose entry in
        ``identities`` (output name -> what its source was, e.g. ``unit_identity``) is what
        the earlier run recorded. The manifest then records ``identities``.

        A staging directory that is not this user's, that others may write, or whose
        manifest is damaged or not a regular file is not trusted: ``FileExistsError``."""
        plan = json.loads(json.dumps(plan))  # compared as it is read back: tuples are lists
        if not os.path.lexists(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(self.path, 0o700)  # nobody else can plant outputs; publish opens it up
            self._record(plan, identities)
            return set()
        earlier = self._earlier()
        changed = sorted(k for k in {*plan, *earlier} - {IDENTITIES} if earlier.get(k) != plan.get(k))
        if changed:
            raise OtherConversionError(
                f"{self.path} holds an unfinished conversion with other settings "
                f"({', '.join(changed)}): remove it to start again, or resume with the same "
                f"settings (see its {MANIFEST})")
        if identities is None:
            return set()
        recorded = earlier.get(IDENTITIES)
        recorded = recorded if isinstance(recorded, dict) else {}
        self._record(plan, identities)
        return {name for name, identity in identities.items() if recorded.get(name) == identity}

    def record(self, name: str, identity: Any) -> None:
        """Records what the output ``name``, just completed, was made from (for outputs whose
        source is known only once written: a token shard's documents)."""
        earlier = self._earlier()
        identities = earlier.pop(IDENTITIES, None)
        identities = dict(identities) if isinstance(identities, dict) else {}
        identities[name] = identity
        self._record(earlier, identities)

    def _earlier(self) -> dict[str, Any]:
        """The manifest of the conversion in progress found here, if it can be trusted."""
        from ._files import read_json

        st = os.lstat(self.path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise FileExistsError(
                f"{self.path} exists but is not a conversion in progress of yours (a link, "
                f"another user's, or writable by others: mode {stat.filemode(st.st_mode)}, "
                f"owner uid {st.st_uid}): remove it")
        try:
            earlier = read_json(self.path / MANIFEST, "no manifest")
        except (OSError, ValueError) as exc:
            raise FileExistsError(f"{self.path} exists but is not a conversion in progress "
                                  f"({exc}): remove it") from None
        if not isinstance(earlier, dict):
            raise FileExistsError(f"{self.path} exists but is not a conversion in progress "
                                  f"({MANIFEST} is not a JSON object): remove it")
        return earlier

    def _record(self, plan: dict[str, Any], identities: dict[str, str] | None) -> None:
        tmp = self.path / f".{MANIFEST}.tmp"
        document = plan if identities is None else {**plan, IDENTITIES: identities}
        tmp.write_text(json.dumps(document, indent=1))
        os.replace(tmp, self.path / MANIFEST)

    def complete(self, name: str) -> bool:
        """Whether the output ``name`` was finished by an earlier run: a file (a writer
        names its file only when complete) or a dataset with its spec (written last)."""
        output = self.path / name
        return output.is_file() or (output / SPEC_FILE).is_file()

    def keep_only(self, names: Iterable[str]) -> None:
        """Removes everything but the manifest and the outputs ``names`` (what an
        interrupted run left part-way)."""
        keep = {MANIFEST, *names}
        for entry in self.path.iterdir():
            if entry.name not in keep:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()

    def publish(self, destination: PathArg, only: str | None = None, durable: bool = True) -> None:
        """Moves the staged outputs to ``destination`` (absent, or an empty directory): the
        whole directory, or with ``only`` that one output of it; synced unless ``durable`` is
        false, so that after a crash the destination is either absent or complete."""
        destination = Path(os.fsdecode(destination))
        (self.path / MANIFEST).unlink(missing_ok=True)
        if only is None:  # staged private (resume): the dataset gets a directory's usual mode
            os.chmod(self.path, 0o777 & ~_umask())
        if durable:
            sync_directory(self.path)
        if destination.is_dir():
            destination.rmdir()  # empty (checked at the start); fails if something came since
        if only is None:
            os.rename(self.path, destination)
        else:
            os.rename(self.path / only, destination)
            self.path.rmdir()
        if durable:
            sync_directory(destination.parent)

    def discard(self) -> None:
        """Removes the staging directory and all it holds."""
        shutil.rmtree(self.path, ignore_errors=True)


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it, for every thread)."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 0o022


def start_method(asked: str | None = None) -> str:
    """``asked``, or ``fork`` where it exists: workers then share the job copy-on-write and
    it need not pickle (the library reloads itself in forked children); ``spawn`` else."""
    return asked or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def run_tasks(job: Any, tasks: Sequence[tuple], workers: int, bar: ProgressBar,
              method: str | None = None) -> list[Any]:
    """``job.write(*task, advance, cancelled)`` for every task, in ``workers`` processes
    started by ``method`` (see ``start_method``; one worker or fewer: in this process, one
    task after the other); returns their results in task order.

    ``write`` writes one task's output, calls ``advance(k)`` as it writes items, and calls
    ``check_cancelled`` as it goes, which stops it once another task has failed. The first
    failure is raised when the other workers have stopped; a worker killed (e.g. out of
    memory) raises ``OSError``."""
    if workers <= 1 or len(tasks) <= 1:
        return [job.write(*task, bar.update, _never) for task in tasks]
    ctx = start_context(start_method(method))
    cancel, queue = ctx.Event(), ctx.Queue()
    counted = bar.count
    with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=ctx, initializer=_init_worker,
                             initargs=(job, cancel, queue)) as pool:
        futures = [pool.submit(_write_in_worker, *task) for task in tasks]
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=REPORT_SECONDS, return_when=FIRST_EXCEPTION)
                while not queue.empty():
                    bar.update(queue.get())
                for future in done:
                    if future.exception() is not None:
                        raise future.exception()
        except BrokenProcessPool as exc:  # no data is at fault
            raise OSError(f"a worker process died ({exc}; out of memory?): run again") from exc
        except BaseException:
            cancel.set()
            for future in pending:
                future.cancel()
            raise
    results = [future.result() for future in futures]
    # The workers' last reports may still be in flight: count what they said they did.
    bar.update(counted + sum(advanced for _, advanced in results) - bar.count)
    return [result for result, _ in results]


def _never() -> bool:
    return False


_worker: dict[str, Any] = {}  # set once per worker process by the pool initializer


def _init_worker(job: Any, cancel: Any, queue: Any) -> None:
    _worker.update(job=job, cancel=cancel, queue=queue)


def _write_in_worker(*task: Any) -> tuple[Any, int]:
    reporter = _Reporter(_worker["queue"])
    try:
        return _worker["job"].write(*task, reporter.add, _worker["cancel"].is_set), reporter.total
    finally:
        reporter.flush()


class _Reporter:
    """Batches a worker's progress so the queue sees a few messages a second."""

    def __init__(self, queue: Any) -> None:
        self.queue, self.pending, self.total, self.last = queue, 0, 0, time.monotonic()

    def add(self, k: int) -> None:
        self.pending += k
        self.total += k
        if time.monotonic() - self.last >= REPORT_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.queue.put(self.pending)
            self.pending, self.last = 0, time.monotonic()

    def __repr__(self) -> str:
        return f"_Reporter(total={self.total}, pending={self.pending})"


def check_cancelled(written: int, cancelled: Callable[[], bool]) -> None:
    """``Cancelled`` every ``CHECK_EVERY`` items once ``cancelled()`` is true."""
    if written % CHECK_EVERY == 0 and cancelled():
        raise Cancelled()
