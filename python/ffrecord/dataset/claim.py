"""A writer's claim on a dataset directory: while one ``DatasetWriter`` writes a directory,
no other can, in this process or any other (for an ``s3://`` prefix: ``RemoteClaim``, which
``dump`` takes too).

The claim is a hidden file, ``.ffrecord-writer``, created with ``O_EXCL`` and held locked
(``flock``) for the writer's life. The lock dies with its process, so a claim left behind by
a writer that was killed is taken over by the next writer, and never by two at once: the
taker locks the file it opened, then checks that the name still leads to it (a writer that
releases removes the name first, then unlocks). On a file system without ``flock`` the
exclusive creation alone claims, and a claim left behind must be removed by hand (the error
says so). A process forked while holding a claim does not hold it (the child closes its copy
of the descriptor), so a writer's claim ends with the writer's process, not its children.

>>> import tempfile
>>> from pathlib import Path
>>> folder = Path(tempfile.mkdtemp())
>>> first = Claim(folder)
>>> try:
...     Claim(folder)
... except FileExistsError as exc:
...     print("refused:", "another writer" in str(exc))
refused: True
>>> first.release(); Claim(folder).release()
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
import uuid
import warnings
import weakref
from pathlib import Path
from typing import Any

from ..errors import FFRecordWarning, clean_up_after

CLAIM_FILE = ".ffrecord-writer"
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class Claim:
    """Claims ``directory`` for one writer (``FileExistsError`` when another holds it);
    ``release()`` gives it back."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / CLAIM_FILE
        self._fd: int | None = None
        while self._fd is None:
            self._fd = self._try_claim()
        _HELD.add(self)

    def _try_claim(self) -> int | None:
        """The locked descriptor of the claim file, or ``None`` to try again (the claim was
        released or replaced while we opened it)."""
        flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd, created = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            try:
                fd, created = os.open(self.path, flags), False
            except FileNotFoundError:
                return None
        try:
            if not self._lock(fd, created):
                raise FileExistsError(f"{self.path.parent}: another writer is writing a dataset "
                                      f"here ({_holder(fd)})")
            try:
                if not os.path.samestat(os.fstat(fd), os.stat(self.path, follow_symlinks=False)):
                    os.close(fd)
                    return None
            except FileNotFoundError:
                os.close(fd)
                return None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _lock(self, fd: int, created: bool) -> bool:
        """Locks the claim file; ``False`` when a live writer holds it."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                raise
        if created:  # no locks here: the exclusive creation is the claim
            return True
        raise FileExistsError(f"{self.path.parent}: claimed by a writer ({_holder(fd)}); this file "
                              f"system has no locks to tell whether it still runs: if it does not, "
                              f"remove {self.path}")

    def release(self) -> None:
        """Gives the directory back (removing the name first, then unlocking). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if os.path.samestat(os.fstat(fd), os.stat(self.path, follow_symlinks=False)):
                os.unlink(self.path)
        except FileNotFoundError:  # removed by hand: nothing of ours to remove
            pass
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"Claim({str(self.path)!r}, {'held' if self._fd is not None else 'released'})"


class RemoteClaim:
    """Claims the ``s3://`` prefix ``url`` for one writer: the hidden object
    ``.ffrecord-writer`` under it, created by a conditional PUT, so that of two writers
    starting together exactly one gets it (``FileExistsError`` for the other, naming the
    holder). It holds a random token: ``check()`` says whether the claim is still this
    writer's, and ``release()`` deletes it only while it is (on condition of its ETag), so
    a writer never removes another's claim. Object storage cannot tell whether the writer
    that left a claim still runs, so a claim left by a killed writer must be removed by hand
    (the error names it); a live writer whose claim was removed finds out at ``check()``.
    A forked child never releases its parent's claim."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None) -> None:
        from .. import _remote  # the library loads on first use, not on import

        self.url = _remote.join(url, CLAIM_FILE)
        self._options = storage_options
        self._owner: int | None = None
        body = (f"pid {os.getpid()} on {socket.gethostname()} since "
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} ({uuid.uuid4().hex})\n")
        self._body = body.encode()  # the token makes it this writer's, and no other's
        try:
            _remote.put_new(self.url, storage_options, self._body)
        except FileExistsError:
            try:
                holder = _remote.fetch_bytes(self.url, storage_options).decode(errors="replace")
            except FileNotFoundError:  # released meanwhile: still another writer's moment
                holder = "released just now"
            raise FileExistsError(
                f"{url}: claimed by a writer ({holder.strip()}); object storage cannot tell "
                f"whether it still runs: if it does not, remove {self.url}") from None
        self._owner = os.getpid()

    def check(self) -> None:
        """``FileExistsError`` unless the claim is still this writer's: one removed by hand
        (taken for a killed writer's) or replaced by another writer's means another
        writer may be writing here, so this one must not publish anything."""
        from .. import _remote

        try:
            held = _remote.fetch_bytes(self.url, self._options)
        except FileNotFoundError:
            held = b"removed"
        if held != self._body:
            raise FileExistsError(
                f"{self.url.rsplit('/', 1)[0]}/: this writer's claim was removed or replaced while it wrote "
                f"(now: {held.decode(errors='replace').strip()}): another writer may be writing here; "
                "nothing published")

    def release(self) -> None:
        """Deletes the claim (in the process that made it) while it is this writer's; one
        replaced by another writer's stays, with a warning. Idempotent."""
        from .. import _remote

        owner, self._owner = self._owner, None
        if owner != os.getpid():
            return
        try:
            _remote.remove_if_holds(self.url, self._options, self._body)
        except FileExistsError:
            warnings.warn(f"{self.url}: left in place: it is another writer's claim now (this writer's "
                          "was removed while it wrote)", FFRecordWarning, stacklevel=2)

    def __enter__(self) -> RemoteClaim:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, _: object) -> None:
        if exc is None:
            self.release()
        else:
            clean_up_after(exc, self.release)

    def __repr__(self) -> str:
        return f"RemoteClaim({self.url!r}, {'held' if self._owner is not None else 'released'})"


_HELD: weakref.WeakSet[Claim] = weakref.WeakSet()


def _forget_in_child() -> None:
    """After ``fork()``: the child closes its copies of held claims' descriptors (the lock
    stays with the parent's) and will not release them."""
    for claim in list(_HELD):
        fd, claim._fd = claim._fd, None
        if fd is not None:
            os.close(fd)


os.register_at_fork(after_in_child=_forget_in_child)


def _holder(fd: int) -> str:
    text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    return text or "starting"
