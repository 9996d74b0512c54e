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

import contextlib
import functools
import os
import pickle
import warnings
from pathlib import Path
from typing import Any, Callable, ContextManager, List, Optional, Sequence, Tuple

from . import _paths, _remote
from ._paths import PathLike
from ._progress import ProgressBar
from .errors import clean_up_after
from .converters import _runner
from .dataset import grow
from .writer import FileWriter

__all__ = ["dump"]


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
    A dump in parts then publishes a version of the folder's manifest (``_manifest/``: its
    parts, their sample counts and versions; see ``ffrecord.dataset.manifest``), the next one
    when the folder had one: ``ffrecord.dataset.open_dataset(fname)`` reads it as a dataset
    of one field, ``bytes``.

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
        _remote.check_options(storage_options)  # bad options fail before any work
        with _claim_prefix(os.fsdecode(fname), nfiles, storage_options) as claim:
            staging = _remote.Staging(os.fsdecode(fname))
            try:
                _dump(dataset, staging.path, nfiles, verbose, compression=compression,
                      max_workers=max_workers, start_method=start_method, durable=durable, staged=True)
                if claim is not None:  # parts go up only while the prefix is still this dump's
                    claim.check()
                _upload_dump(staging.path, os.fsdecode(fname), nfiles, storage_options)
            finally:
                staging.discard()
        return
    _dump(dataset, fname, nfiles, verbose, compression=compression, max_workers=max_workers,
          start_method=start_method, durable=durable, staged=False)


def _dump(dataset: Sequence[Any], fname: PathLike, nfiles: int, verbose: bool, *,
          compression: Optional[str], max_workers: Optional[int], start_method: Optional[str],
          durable: bool, staged: bool) -> None:
    """``dump`` to a local path; a dump in parts publishes its manifest unless ``staged``
    (for an upload, which publishes the uploaded parts')."""
    n = len(dataset)
    options = {"compression": compression, "durable": durable}  # for each FileWriter
    if nfiles == 1:
        tasks, parts = [(fname, 0, n)], []
    else:
        parts, tasks = _parts(fname, n, nfiles)
    method = _runner.start_method(start_method)
    workers = max_workers or min(len(tasks), os.cpu_count() or 1)
    if method != "fork" and workers > 1 and not _picklable(dataset):
        warnings.warn(f"the dataset cannot be pickled for the {method!r} start method; "
                      "writing the parts in this process")
        workers = 1
    try:
        with ProgressBar(n, verbose) as bar:
            _runner.run_tasks(_Dump(dataset, options), tasks, workers, bar, method)
        if parts and not staged:
            grow.publish_parts(grow.Root(fname), durable=durable)
    except BaseException as exc:
        for path in parts:  # each tried; a failure is a note on the dump's error
            clean_up_after(exc, functools.partial(path.unlink, missing_ok=True))
        raise


def _parts(folder: PathLike, n: int, nfiles: int) -> Tuple[List[Path], list]:
    """The part files of a dump into ``folder`` (made if missing) and their
    ``(path, start, count)`` tasks."""
    ranges = _split(n, nfiles)
    if len(ranges) != nfiles:
        warnings.warn(f"split {n} samples into {len(ranges)} files rather than {nfiles}")
    out_dir = Path(folder)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = [out_dir / _paths.part_name(k, len(ranges)) for k in range(len(ranges))]
    stale = sorted(set(map(Path, _paths.dataset_files(out_dir))) - set(parts))
    if stale:
        raise FileExistsError(
            f"{out_dir} already holds {len(stale)} other .ffr file(s) (e.g. {stale[0].name}) "
            "that would be read as part of the dataset; remove them first"
        )
    return parts, [(str(p), start, count) for p, (start, count) in zip(parts, ranges)]


def _claim_prefix(url: str, nfiles: int, storage_options: Optional[dict]) -> ContextManager:
    """For a dump in parts under the prefix ``url``: the prefix claimed for this dump (one
    writer at a time), refused when it holds parts already. One object needs neither."""
    if nfiles == 1:
        return contextlib.nullcontext()
    from .dataset.claim import RemoteClaim

    claim = RemoteClaim(url, storage_options)
    try:
        _refuse_taken_prefix(url, storage_options)
    except BaseException:
        claim.release()
        raise
    return claim


def _refuse_taken_prefix(url: str, storage_options: Optional[dict]) -> None:
    """``FileExistsError`` when the prefix ``url`` already holds ``.ffr`` objects: they would
    be read as part of the dataset, or be overwritten and then deleted by a failed dump."""
    taken = [u.rsplit("/", 1)[-1] for u in _remote.dataset_urls(url, storage_options)]
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
    try:
        grow.publish_parts(grow.Root(url, storage_options), local)
    except BaseException:
        for _, part in pairs:
            _remote.remove(part, storage_options)
        raise


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


class _Dump:
    """Writes one contiguous range of the dataset to one file (a task of ``run_tasks``)."""

    def __init__(self, dataset: Sequence[Any], options: dict) -> None:
        self.dataset, self.options = dataset, options

    def __repr__(self) -> str:
        return f"_Dump({type(self.dataset).__name__}, {self.options})"

    def write(self, path: str, start: int, count: int, advance: Callable[[int], Any],
              cancelled: Callable[[], bool]) -> None:
        with FileWriter(path, count, **self.options) as writer:
            for i in range(start, start + count):
                _runner.check_cancelled(i - start, cancelled)
                try:
                    writer.write_one(self.dataset[i])
                except Exception as exc:
                    _add_note(exc, f"while writing dataset[{i}] to {path}")
                    raise
                advance(1)


def _add_note(exc: BaseException, note: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python >= 3.11
    if add_note is not None:
        add_note(note)
