"""Write any indexable dataset of byte samples to FFRecord files, in parallel.

Example:
    >>> import pickle, tempfile, ffrecord
    >>> from ffrecord.utils import dump
    >>> out = tempfile.mkdtemp() + "/parts"
    >>> dump([pickle.dumps(i) for i in range(100)], out, nfiles=4)
    >>> with ffrecord.FileReader(out) as r:
    ...     len(r), pickle.loads(r.read_one(42))
    (100, 42)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import time
import warnings
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import _paths, _remote
from ._paths import PathLike
from ._progress import ProgressBar
from .writer import FileWriter

__all__ = ["dump"]


# How often workers check for cancellation and report progress (in samples / seconds): rare
# enough to cost nothing next to a write, frequent enough to stop and redraw promptly.
_CHECK_EVERY = 64
_REPORT_SECONDS = 0.2


class _Cancelled(Exception):
    """Raised inside a worker told to stop because another part failed."""


def dump(
    dataset: Sequence[Any],
    fname: PathLike,
    nfiles: int,
    verbose: bool = False,
    *,
    compression: Optional[str] = None,
    max_workers: Optional[int] = None,
    start_method: Optional[str] = None,
    storage_options: Optional[dict] = None,
    progress: bool = False,
    durable: bool = True,
) -> None:
    """Writes ``dataset[0] … dataset[len(dataset)-1]`` to FFRecord file(s).

    With ``nfiles == 1`` the samples go to the single file ``fname``. Otherwise ``fname`` is a
    folder that receives ``PART_00000.ffr``, ``PART_00001.ffr``, … (the number widened past
    100,000 parts, so that name order stays part order) holding contiguous ranges
    of the dataset (fewer than ``nfiles`` when the dataset is small), written by parallel
    worker processes; ``FileReader(fname)`` reads them back as one dataset in the original
    order. Each file appears only when complete; if anything fails, every part of this dump is
    removed and the first error is raised, so a failed dump never looks like a valid dataset.

    Args:
        dataset: any object with ``len()`` and ``[i]`` returning a bytes-like sample (bytes,
            bytearray, memoryview, numpy array, ...).
        fname: output file (``nfiles == 1``) or folder; or an ``s3://`` URL of the file or
            prefix, in which case the parts are written to a local staging directory, then
            uploaded (each object appears only when its upload completes, and when any part
            fails every part already uploaded is deleted). A prefix that already holds
            ``.ffr`` objects is refused with ``FileExistsError`` before anything is written.
        nfiles: number of output files.
        verbose: show a progress bar (rate and ETA, on stderr); ``progress=True`` is the
            same, spelled as the other writers spell it.
        compression: ``None``, ``"lz4"`` or ``"zstd"`` (see :class:`ffrecord.FileWriter`).
        max_workers: worker processes (default: one per CPU, at most one per file).
        storage_options: options for an ``s3://`` destination (see
            :class:`ffrecord.FileReader`).
        durable: ``False`` skips the fsync of each file at its close (scratch output: see
            :class:`ffrecord.FileWriter`).
        start_method: multiprocessing start method. The default is ``"fork"`` where it
            exists, because the workers then share the dataset copy-on-write and it need not
            be picklable (the Go library reloads itself safely in forked children); otherwise
            ``"spawn"``, which pickles the dataset to every worker. A dataset that cannot be
            pickled under ``spawn``/``forkserver`` is written in this process, with a warning.

    Raises:
        FileExistsError: the folder already holds ``.ffr`` files that this dump would not
            replace (``FileReader(folder)`` would mix them into the dataset).

    Example:
        >>> dump(images, "train_ffr/", nfiles=64, verbose=True)    # doctest: +SKIP
    """
    verbose = verbose or progress
    if not isinstance(nfiles, int) or nfiles < 1:
        raise ValueError(f"nfiles must be a positive integer, got {nfiles!r}")
    fname = _remote.local_path(fname)
    if _remote.is_url(fname):
        _remote.encode_options(storage_options)  # bad options fail before any work
        if nfiles > 1:
            _refuse_taken_prefix(os.fsdecode(fname), storage_options)
        staging = _remote.Staging(os.fsdecode(fname))
        try:
            dump(dataset, staging.path, nfiles, verbose, compression=compression,
                 max_workers=max_workers, start_method=start_method, durable=durable)
            _upload_dump(staging.path, os.fsdecode(fname), nfiles, storage_options)
        finally:
            staging.discard()
        return
    n = len(dataset)
    options = {"compression": compression, "durable": durable}  # for each FileWriter
    if nfiles == 1:
        _write_here(dataset, [(fname, 0, n)], options, verbose)
        return

    ranges = _split(n, nfiles)
    if len(ranges) != nfiles:
        warnings.warn(f"split {n} samples into {len(ranges)} files rather than {nfiles}")
    out_dir = Path(fname)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = [out_dir / _paths.part_name(k, len(ranges)) for k in range(len(ranges))]
    stale = sorted(set(map(Path, _paths.dataset_files(out_dir))) - set(parts))
    if stale:
        raise FileExistsError(
            f"{out_dir} already holds {len(stale)} other .ffr file(s) (e.g. {stale[0].name}) "
            "that would be read as part of the dataset; remove them first"
        )
    tasks = [(str(p), start, count) for p, (start, count) in zip(parts, ranges)]
    method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    try:
        if method != "fork" and not _picklable(dataset):
            warnings.warn(f"the dataset cannot be pickled for the {method!r} start method; "
                          "writing the parts in this process")
            _write_here(dataset, tasks, options, verbose)
        else:
            workers = max_workers or min(len(tasks), os.cpu_count() or 1)
            _run_workers(dataset, tasks, options, verbose, n, workers, method)
    except BaseException:
        for path in parts:
            path.unlink(missing_ok=True)
        raise


def _refuse_taken_prefix(url: str, storage_options: Optional[dict]) -> None:
    """``FileExistsError`` when the prefix ``url`` already holds ``.ffr`` objects: they would
    be read as part of the dataset, or be overwritten and then deleted by a failed dump."""
    taken = [name for name in _remote.list_dir(url, storage_options)
             if name.endswith(".ffr") and not name.startswith(".")]
    if taken:
        raise FileExistsError(
            f"{url} already holds {len(taken)} .ffr object(s) (e.g. {taken[0]}); a dump needs "
            "a prefix without any: remove them or choose another prefix")


def _upload_dump(local: str, url: str, nfiles: int, storage_options: Optional[dict]) -> None:
    """Uploads a dump staged at ``local``; when one part fails, every part is deleted
    again, so that no part of a failed dump is left to look complete."""
    if nfiles == 1:
        _remote.upload(local, url, storage_options)
        return
    pairs = [(p, _remote.join(url, os.path.basename(p))) for p in _paths.dataset_files(local)]
    _remote.upload_all(pairs, storage_options)


def _split(n: int, nfiles: int) -> List[Tuple[int, int]]:
    """Contiguous (start, count) ranges of equal size, the reference's way; one for n == 0."""
    if n == 0:
        return [(0, 0)]
    size = -(-n // nfiles)
    return [(start, min(size, n - start)) for start in range(0, n, size)]


def _picklable(obj: Any) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:
        return False
    return True


def _write_here(dataset: Sequence[Any], tasks: list, options: dict, verbose: bool) -> None:
    """Writes the (path, start, count) tasks one after the other in this process."""
    with ProgressBar(sum(task[2] for task in tasks), verbose) as bar:
        for path, start, count in tasks:
            _write_range(dataset, path, start, count, options, bar.update, lambda: False)


def _write_range(dataset: Sequence[Any], path: PathLike, start: int, count: int,
                 options: dict, advance: Callable[[int], Any],
                 cancelled: Callable[[], bool]) -> None:
    with FileWriter(path, count, **options) as writer:
        for i in range(start, start + count):
            if (i - start) % _CHECK_EVERY == 0 and cancelled():
                raise _Cancelled()
            try:
                writer.write_one(dataset[i])
            except Exception as exc:
                _add_note(exc, f"while writing dataset[{i}] to {path}")
                raise
            advance(1)


def _add_note(exc: BaseException, note: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python >= 3.11
    if add_note is not None:
        add_note(note)


def _run_workers(dataset: Sequence[Any], tasks: list, options: dict,
                 verbose: bool, n: int, workers: int, method: str) -> None:
    ctx = mp.get_context(method)
    cancel = ctx.Event()
    progress = ctx.Queue() if verbose else None
    with ProgressBar(n, verbose) as bar, ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_init_worker,
        initargs=(dataset, options, cancel, progress),
    ) as pool:
        pending = {pool.submit(_write_part, *task) for task in tasks}
        try:
            while pending:
                done, pending = wait(pending, timeout=_REPORT_SECONDS,
                                     return_when=FIRST_EXCEPTION)
                _drain(progress, bar)
                _raise_first_error(done)
            # Every part is written; the workers' last reports may still be in flight.
            bar.update(n - bar.count)
        except BaseException:
            cancel.set()
            for future in pending:
                future.cancel()
            raise


def _raise_first_error(done: "set[Future]") -> None:
    for future in done:
        exc = future.exception()
        if exc is not None:
            raise exc


def _drain(progress, bar: "ProgressBar") -> None:
    if progress is None:
        return
    while not progress.empty():
        bar.update(progress.get())


# Worker-process state, set once per worker by the pool initializer.
_worker: dict = {}


def _init_worker(dataset, options, cancel, progress) -> None:
    _worker.update(dataset=dataset, options=options, cancel=cancel,
                   progress=progress)


def _write_part(path: str, start: int, count: int) -> None:
    reporter = _Reporter(_worker["progress"])
    try:
        _write_range(_worker["dataset"], path, start, count, _worker["options"],
                     reporter.add, _worker["cancel"].is_set)
    finally:
        reporter.flush()


class _Reporter:
    """Batches a worker's progress so the queue sees a few messages a second."""

    def __init__(self, queue) -> None:
        self.queue, self.pending, self.last = queue, 0, time.monotonic()

    def add(self, k: int) -> None:
        if self.queue is None:
            return
        self.pending += k
        if time.monotonic() - self.last >= _REPORT_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.queue is not None and self.pending:
            self.queue.put(self.pending)
            self.pending, self.last = 0, time.monotonic()
