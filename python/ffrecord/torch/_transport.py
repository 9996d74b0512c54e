"""Worker batches through shared memory: a ring of reusable slots per worker.

torch's worker queue pickles each batch through a pipe: a ``bytes`` value is copied four
times (pickle, pipe write, pipe read, unpickle) and a tensor in shared memory costs a new
segment, a file descriptor passed over a socket and a fresh mapping per batch. Here each
worker owns a few *arenas* (``memfd_create`` files, never named in ``/dev/shm``), each cut
into equal *slots*. A batch's tensors, numpy arrays and bytes-like values are written into
one slot (or read into it directly: see ``scratch``); only a small skeleton crosses the
pipe. The main process maps each arena once (``/proc/<worker>/fd/<fd>``) and rebuilds the
batch as views of the slot: no copy on its side.

Lifetime: the main process's views of a slot all hold one buffer object; when the last one
is gone (user code dropped the batch, or ``pin_memory`` copied it), a finalizer marks the
slot free in the arena's header, and only then may the worker reuse it. A worker whose slots
are all held opens another arena rather than wait, so user code may keep batches as long as
it likes. Memory is anonymous: it is freed when the last process holding it exits or
unmaps it, whichever dies first, and no name is ever left behind.

In the main process, bytes-like values arrive as read-only ``memoryview`` objects (``bytes(v)``
copies one; ``pickle.loads``, ``np.frombuffer`` and ``==`` take them as they are), tensors and
arrays as writable views of the slot. With ``exact_types`` (a user's own ``collate_fn``),
``bytes`` and ``bytearray`` values arrive as what they were, copied once out of the slot.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import threading
import weakref
from typing import Any, Callable

import numpy as np
import torch
from torch._utils import ExceptionWrapper
from torch.utils.data import get_worker_info
from torch.utils.data._utils.pin_memory import pin_memory as _torch_pin_memory

from ffrecord import _timing
from ffrecord._buffers import BufferPool

__all__ = ["BytesColumn", "ColumnsHere", "Packed", "Receiving", "TaskGroup", "WorkerCollate", "WorkerStart",
           "columns_as_views", "columns_welcome", "datapoints", "each_batch", "forget_exited_workers",
           "read_columns_in_this_thread", "receive", "received", "scratch", "slot_bytes"]

# Linux: memfd_create, and /proc/<pid>/fd to map a worker's arena; elsewhere torch's pipe.
SUPPORTED = hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")
_ALIGN = 64
_HEADER = 4096  # the arena's slot states, one byte each
_SLOTS = 4  # slots per arena: a worker's prefetched batches, plus one the user holds
_MIN_SLOT = 64 << 10
FREE, BUSY = 0, 1
_FREE_BYTE = bytes([FREE])
_BYTES_TYPES = (bytes, bytearray, memoryview)


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _memfd_name(nonce: str, arena_id: int) -> str:
    return f"ffrecord-batches-{nonce}-{arena_id}"


class BytesColumn:
    """A column of bytes-like values lying back to back in one buffer (value ``k`` is
    ``buffer[offsets[k]:offsets[k + 1]]``), made in a worker by a dataset that read a batch
    into the slot (see ``columns_welcome``). It crosses as one value, and the main process
    gets it as a list of read-only ``memoryview`` objects of the slot, as it gets the list
    of ``bytes`` values torch's collate makes: no per-value object on the worker's side.
    ``offsets`` is None in a column of ``count`` values of one ``size`` (``equal_sized``),
    which crosses with no offsets at all.

    >>> len(BytesColumn.equal_sized(np.zeros(6, np.uint8), 3, 2))
    3
    """

    __slots__ = ("buffer", "offsets", "count", "size")

    def __init__(self, buffer: np.ndarray, offsets: np.ndarray | None, count: int = 0, size: int = 0) -> None:
        self.buffer, self.offsets = buffer, offsets
        self.count, self.size = (len(offsets) - 1, -1) if offsets is not None else (count, size)

    @classmethod
    def equal_sized(cls, buffer: np.ndarray, count: int, size: int) -> BytesColumn:
        """The column of ``count`` values of ``size`` bytes each at the start of ``buffer``."""
        return cls(buffer, None, count, size)

    def __len__(self) -> int:
        return self.count

    def views(self) -> list[memoryview]:
        """The values as read-only ``memoryview`` objects of the buffer (what a loader
        thread hands on: no copy)."""
        return _column_views(memoryview(self.buffer).cast("B").toreadonly(), self._bounds())

    def values(self) -> list[bytes]:
        """The values as ``bytes`` (what 0 workers hand on, as torch's collate makes them):
        sliced out of one copy of the buffer, which is free again at once.

        >>> BytesColumn(np.frombuffer(b"abbccc", np.uint8), np.array([0, 1, 3, 6])).values()
        [b'a', b'bb', b'ccc']
        """
        bounds = self._bounds()
        end = bounds[0] * bounds[1] if type(bounds) is tuple else bounds[-1]
        return _column_views(memoryview(self.buffer).cast("B")[:end].tobytes(), bounds)

    def _bounds(self) -> tuple[int, int] | list[int]:
        return (self.count, self.size) if self.offsets is None else np.asarray(self.offsets, np.int64).tolist()

    def __repr__(self) -> str:
        return f"<BytesColumn: {len(self)} values, {self.buffer.nbytes} bytes>"


def _column_views(view: Any, bounds: tuple[int, int] | list[int]) -> list[Any]:
    """The values of a column lying in ``view`` (a ``memoryview``, or ``bytes``): ``(count,
    size)`` of values of one size, or the list of their ``count + 1`` offsets."""
    if type(bounds) is tuple:
        count, size = bounds
        if not size:
            return [view[0:0] for _ in range(count)]
        return [view[a:a + size] for a in range(0, count * size, size)]
    return [view[a:b] for a, b in zip(bounds, bounds[1:])]


class TaskGroup(list):
    """Consecutive batches of an epoch that one loader worker fetches as one task: their
    indices on the way in (as the loader's sampler yields them), the batches on the way
    out, all in one slot and one message. A worker's cost per task (its queues, waking
    the main process, the library's threads waking for a call) is then paid once for
    several batches. A batch that failed travels as torch's ``ExceptionWrapper`` and is
    raised when its turn comes (see ``each_batch``).

    >>> TaskGroup([[0, 1], [2, 3]])
    TaskGroup([[0, 1], [2, 3]])
    """

    def __repr__(self) -> str:
        return f"TaskGroup({list(self)!r})"


def each_batch(fetch: Callable[[Any], Any], group: TaskGroup) -> TaskGroup:
    """``fetch`` of each batch of a task group, in a loader worker; a batch whose fetch
    raises is the exception wrapped as torch wraps a worker's, for the main process to
    raise at that batch, the others arriving as usual.

    >>> each_batch(lambda batch: [10 * i for i in batch], TaskGroup([[1], [2]]))
    TaskGroup([[10], [20]])
    """
    return TaskGroup(_wrapped_failure(fetch, batch) for batch in group)


def _wrapped_failure(fn: Callable[[Any], Any], arg: Any) -> Any:
    """``fn(arg)``, or what it raised as torch's worker wraps it."""
    try:
        return fn(arg)
    except Exception:
        info = get_worker_info()
        return ExceptionWrapper(where=f"in DataLoader worker process {info.id if info else 0}")


def datapoints(data: Any) -> int:
    """Datapoints in what a dataset's fetch returned: a list of them, a batch collated
    already (a dict of columns, an array), or a worker's task of batches.

    >>> datapoints([1, 2, 3]), datapoints({"a": [1, 2]}), datapoints(np.zeros((4, 2)))
    (3, 2, 4)
    """
    kind = type(data)
    if kind is list or kind is tuple:
        return len(data)
    if kind is TaskGroup:
        return sum(map(datapoints, data))
    if kind is ExceptionWrapper:
        return 0
    if isinstance(data, dict):
        return datapoints(next(iter(data.values()))) if data else 0
    shape = getattr(data, "shape", None)
    if shape:
        return int(shape[0])
    try:
        return len(data)
    except TypeError:
        return 1


class _Leaf:
    """Where one value of a batch lies in its slot, and what it was (a column's ``dtype``
    holds its offsets, as ``int64`` bytes)."""

    __slots__ = ("kind", "offset", "nbytes", "dtype", "shape")

    def __init__(self, kind: str, offset: int, nbytes: int, dtype: Any = None, shape: tuple = ()) -> None:
        self.kind, self.offset, self.nbytes, self.dtype, self.shape = kind, offset, nbytes, dtype, shape

    def __reduce__(self) -> tuple:
        return _Leaf, (self.kind, self.offset, self.nbytes, self.dtype, self.shape)


class Packed:
    """A batch in a worker's slot, as it crosses the worker queue: the arena, the slot and
    the batch's skeleton (its containers, with ``_Leaf`` for each value in the slot)."""

    __slots__ = ("pid", "nonce", "arena_id", "fd", "arena_size", "slot_size", "slot", "skeleton", "retired")

    def __init__(self, pid: int, nonce: str, arena_id: int, fd: int, arena_size: int, slot_size: int,
                 slot: int, skeleton: Any, retired: tuple) -> None:
        self.pid, self.nonce, self.arena_id, self.fd = pid, nonce, arena_id, fd
        self.arena_size, self.slot_size, self.slot = arena_size, slot_size, slot
        self.skeleton, self.retired = skeleton, retired

    def __reduce__(self) -> tuple:
        return Packed, (self.pid, self.nonce, self.arena_id, self.fd, self.arena_size, self.slot_size,
                        self.slot, self.skeleton, self.retired)

    def unpack(self) -> Any:
        """The batch, as views of the slot (main process)."""
        return _RECEIVER.unpack(self)

    def pin_memory(self) -> Any:
        """What torch's pin-memory thread calls: the batch, pinned (the slot is released as
        soon as the pinned copy is made, or when the last bytes-like view of it goes)."""
        return _pinned(self.unpack())

    def __repr__(self) -> str:
        return f"<batch in shared memory: worker {self.pid}, arena {self.arena_id}, slot {self.slot}>"


def _pinned(data: Any) -> Any:
    """torch's ``pin_memory`` of a batch, bytes-like views left as they are (torch takes a
    ``memoryview`` for a sequence and would make a list of ints of it)."""
    kind = type(data)
    if kind is memoryview or (kind is torch.Tensor and data.device.type != "cpu"):  # e.g. decoded on the GPU
        return data
    if kind is list:
        return [_pinned(x) for x in data]
    if kind is TaskGroup:
        return TaskGroup(_pinned(x) for x in data)
    if kind is dict:
        return {k: _pinned(v) for k, v in data.items()}
    if kind is tuple:
        return tuple(_pinned(x) for x in data)
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return kind(*(_pinned(x) for x in data))
    return _torch_pin_memory(data)


def receive(batch: Any) -> Any:
    """``batch`` as user code sees it: a ``Packed`` batch unpacked, anything else as is."""
    return batch.unpack() if type(batch) is Packed else batch


def received(batch: Any, clock: _timing.Clock | None) -> Any:
    """``receive(batch)``, the unpacking of a ``Packed`` batch added to ``clock``'s
    transfer (the training loop's, when the loader times it)."""
    if clock is None or type(batch) is not Packed:
        return receive(batch)
    start = _timing.now()
    unpacked = receive(batch)
    clock.transfer += _timing.now() - start
    return unpacked


class Receiving:
    """An iterator of torch's loader whose ``Packed`` batches are unpacked (``stats``: the
    loader's ``_stats.LoaderStats`` timing the loop's wait, or None)."""

    def __init__(self, inner: Any, stats: Any = None) -> None:
        self._inner = inner
        self._stats = stats

    def __iter__(self) -> Receiving:
        return self

    def __next__(self) -> Any:
        stats = self._stats
        return self._next() if stats is None else stats.timed_next(self._next)

    def _next(self) -> Any:
        return received(next(self._inner), self._stats and self._stats.loop)

    def __len__(self) -> int:
        return len(self._inner)


# -- worker side -------------------------------------------------------------------------

class _Arena:
    """One memfd of ``slots`` slots (at most ``_HEADER``) of ``slot_size`` bytes, mapped in
    the worker."""

    def __init__(self, nonce: str, ident: int, slot_size: int, slots: int = _SLOTS) -> None:
        self.ident, self.slot_size, self.slots = ident, slot_size, slots
        self.size = _HEADER + slot_size * slots
        self.fd = os.memfd_create(_memfd_name(nonce, ident), os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, self.size)
            self.map = mmap.mmap(self.fd, self.size)
        except BaseException:
            os.close(self.fd)
            raise
        self.states = np.frombuffer(self.map, np.uint8, slots)
        self.bytes = torch.frombuffer(self.map, dtype=torch.uint8)
        self.array = np.frombuffer(self.map, np.uint8)  # the same bytes, for numpy readers
        self.base = self.bytes.data_ptr()

    def take_free_slot(self) -> int | None:
        """The lowest free slot, marked busy (the lowest: the pages in use stay few)."""
        slot = self.map.find(_FREE_BYTE, 0, self.slots)
        if slot < 0:
            return None
        self.map[slot] = BUSY
        return slot

    def slot_start(self, slot: int) -> int:
        return _HEADER + slot * self.slot_size

    def all_free(self) -> bool:
        return not self.states.any()

    def close(self) -> None:
        """Drops the worker's hold (the mapping goes with the last view of it)."""
        os.close(self.fd)
        del self.states, self.bytes, self.array


class _Sender:
    """A worker's arenas and the slot the batch being fetched is read into."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.nonce = os.urandom(8).hex()
        self.arenas: list[_Arena] = []
        self.next_id = 0
        self.slot_size = 0
        self.retired: list[int] = []
        self.current: tuple[_Arena, int] | None = None  # the slot scratch() fills
        self.used = 0  # bytes of the current slot handed out by scratch()

    def _acquire(self, nbytes: int) -> tuple[_Arena, int]:
        if nbytes > self.slot_size:
            self.slot_size = max(_MIN_SLOT, _round_up(nbytes + nbytes // 4, _MIN_SLOT))
        for arena in self.arenas:
            if arena.slot_size == self.slot_size:
                slot = arena.take_free_slot()
                if slot is not None:
                    self._retire_outgrown()
                    return arena, slot
        arena = _Arena(self.nonce, self.next_id, self.slot_size)
        self.next_id += 1
        self.arenas.append(arena)
        arena.states[0] = BUSY
        self._retire_outgrown()
        return arena, 0

    def _retire_outgrown(self) -> None:
        """Arenas of an outgrown slot size are dropped once the main process freed them."""
        for arena in list(self.arenas):
            if arena.slot_size != self.slot_size and arena.all_free():
                self.arenas.remove(arena)
                self.retired.append(arena.ident)
                arena.close()

    def place(self, nbytes: int) -> tuple[_Arena, int] | None:
        """The arena and the start of ``nbytes`` of the current batch's slot (None when
        they do not fit)."""
        if self.current is None:
            self.current, self.used = self._acquire(nbytes), 0
        arena, slot = self.current
        at = _round_up(self.used, _ALIGN)
        if at + nbytes > arena.slot_size:
            return None
        self.used = at + nbytes
        return arena, arena.slot_start(slot) + at

    def scratch(self, nbytes: int) -> torch.Tensor | None:
        """``nbytes`` of the current batch's slot (None when it does not fit)."""
        place = self.place(nbytes)
        return None if place is None else place[0].bytes[place[1]:place[1] + nbytes]

    def pack(self, batch: Any, exact_types: bool = False) -> Any:
        leaves: list[tuple[_Leaf, Any]] = []
        current = self.current
        self.current = None
        inside = _slot_bounds(current) if current else None
        size = [_round_up(self.used, _ALIGN) if current else 0]
        skeleton = _plan(batch, leaves, size, inside, exact_types)
        if not leaves:
            if current:
                current[0].states[current[1]] = FREE
            return batch
        arena, slot = current if current and size[0] <= current[0].slot_size else (None, None)
        if arena is None:
            if current:  # outgrown: everything goes to a bigger slot, scratch values included
                current[0].states[current[1]] = FREE
                size = [0]
                leaves.clear()
                skeleton = _plan(batch, leaves, size, None, exact_types)
            arena, slot = self._acquire(size[0])
        start = arena.slot_start(slot)
        for leaf, value in leaves:
            if value is not None:
                _copy_into(arena, start + leaf.offset, leaf, value)
        retired, self.retired = tuple(self.retired), []
        return Packed(self.pid, self.nonce, arena.ident, arena.fd, arena.size, arena.slot_size, slot,
                      skeleton, retired)


def _slot_bounds(current: tuple[_Arena, int]) -> tuple[int, int]:
    arena, slot = current
    start = arena.base + arena.slot_start(slot)
    return start, start + arena.slot_size


def _plan(obj: Any, leaves: list, size: list, inside: tuple[int, int] | None,
          exact_types: bool = False) -> Any:
    """The skeleton of ``obj``; each value to carry gets a ``_Leaf`` at the next offset of
    ``size[0]`` (or where it already lies in the slot, when ``inside`` holds it). With
    ``exact_types``, a ``bytes`` or ``bytearray`` leaf remembers its type (as its dtype)."""
    kind = type(obj)
    if kind is list:
        return [_plan(x, leaves, size, inside, exact_types) for x in obj]
    if kind is TaskGroup:
        return TaskGroup(_plan(x, leaves, size, inside, exact_types) for x in obj)
    if kind is dict:
        return {k: _plan(v, leaves, size, inside, exact_types) for k, v in obj.items()}
    if kind is tuple:
        return tuple(_plan(x, leaves, size, inside, exact_types) for x in obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return kind(*(_plan(x, leaves, size, inside, exact_types) for x in obj))
    if kind is torch.Tensor:
        if (obj.device.type != "cpu" or obj.layout != torch.strided or obj.requires_grad
                or obj.is_quantized or obj.numel() == 0):
            return obj
        nbytes = obj.numel() * obj.element_size()
        leaf = _Leaf("tensor", 0, nbytes, obj.dtype, tuple(obj.shape))
        if inside is not None and obj.is_contiguous() and inside[0] <= obj.data_ptr() < inside[1]:
            leaf.offset = obj.data_ptr() - inside[0]  # read straight into the slot
            leaves.append((leaf, None))
            return leaf
    elif kind is np.ndarray:
        if obj.dtype.hasobject or obj.size == 0:
            return obj
        leaf = _Leaf("array", 0, obj.nbytes, obj.dtype, obj.shape)
    elif kind is BytesColumn:
        buffer = obj.buffer
        # (count, size) of values of one size, else their offsets (as int64 bytes)
        bounds = (obj.count, obj.size) if obj.offsets is None else np.asarray(obj.offsets, np.int64).tobytes()
        leaf = _Leaf("column", 0, buffer.nbytes, bounds)
        address = buffer.__array_interface__["data"][0]
        if inside is not None and inside[0] <= address < inside[1]:
            leaf.offset = address - inside[0]  # read straight into the slot
            leaves.append((leaf, None))
            return leaf
        obj = buffer
    elif kind in _BYTES_TYPES:
        if kind is memoryview and not obj.c_contiguous:
            obj = obj.tobytes()
        nbytes = obj.nbytes if kind is memoryview else len(obj)
        if nbytes == 0:
            return obj
        leaf = _Leaf("bytes", 0, nbytes, kind if exact_types and kind is not memoryview else None)
    else:
        return obj
    leaf.offset = _round_up(size[0], _ALIGN)
    size[0] = leaf.offset + leaf.nbytes
    leaves.append((leaf, obj))
    return leaf


def _copy_into(arena: _Arena, at: int, leaf: _Leaf, value: Any) -> None:
    if leaf.kind == "column":
        arena.map[at:at + leaf.nbytes] = memoryview(value).cast("B")
    elif leaf.kind == "bytes":
        arena.map[at:at + leaf.nbytes] = value if type(value) is not memoryview else value.cast("B")
    elif leaf.kind == "tensor":
        arena.bytes[at:at + leaf.nbytes].view(leaf.dtype).view(leaf.shape).copy_(value)
    else:
        np.copyto(np.frombuffer(arena.map, leaf.dtype, value.size, at).reshape(leaf.shape), value)


_SENDER: _Sender | None = None


def _sender() -> _Sender:
    global _SENDER
    if _SENDER is None or _SENDER.pid != os.getpid():
        _SENDER = _Sender()
    return _SENDER


def scratch(nbytes: int) -> torch.Tensor | None:
    """In a worker whose batches go through shared memory: ``nbytes`` of the slot the batch
    being fetched will travel in (read into it, the batch needs no copy); else None."""
    if not _ACTIVE or get_worker_info() is None:
        return None
    return _sender().scratch(nbytes)


def slot_bytes(nbytes: int) -> np.ndarray:
    """``nbytes`` of the slot the batch being fetched will travel in, as a ``uint8`` array
    (a fresh array when it does not fit; in a loader thread, memory of its own that is
    recycled once no batch refers to it): what a dataset whose ``columns_welcome`` reads into.
    """
    pool = getattr(_THREAD, "pool", None)
    if pool is not None:
        return pool.take(nbytes)
    place = _sender().place(nbytes) if _ACTIVE and get_worker_info() is not None else None
    return np.empty(nbytes, np.uint8) if place is None else place[0].array[place[1]:place[1] + nbytes]


def columns_welcome(dataset: Any) -> bool:
    """True in a worker whose batches go through shared memory, or in a loader thread,
    collated by the loader's default collate, when ``dataset`` is the loader's: its
    ``__getitems__`` may then hand the collate ``ffrecord.torch.collate.Collated`` batches
    read into the slot (``slot_bytes``), with ``BytesColumn`` values (set by ``WorkerStart``
    or ``read_columns_in_this_thread``)."""
    if getattr(_THREAD, "dataset", None) is dataset:
        return True
    if not _COLUMNS:
        return False
    info = get_worker_info()
    return info is not None and info.dataset is dataset


_THREAD = threading.local()  # in a loader thread: the dataset it reads in columns, and its buffers


def read_columns_in_this_thread(dataset: Any, pool: Any = None) -> tuple[Any, Any]:
    """This thread fetches batches of ``dataset`` for a loader whose collate takes
    ``Collated`` batches: see ``columns_welcome``; its ``BytesColumn`` values become lists
    of views in ``columns_as_views``. They are read into ``pool`` (a ``BufferPool``; None:
    a new one). Returns the dataset and pool set before (both None: none), to set back."""
    before = getattr(_THREAD, "dataset", None), getattr(_THREAD, "pool", None)
    _THREAD.dataset, _THREAD.pool = dataset, (pool if pool is not None or dataset is None else BufferPool())
    return before


class ColumnsHere:
    """The ``fetch`` of torch's ``fetcher`` (a batch, with 0 workers) made by the training
    thread in columns, as a loader thread makes it (see ``columns_welcome``): each ``bytes``
    field read by one call into one buffer of this thread's, no object per datapoint, then
    its values handed on as ``bytes``, the type torch's collate gives with 0 workers. For a
    ``StructuredDataset`` of 16 KiB ``bytes`` and an ``int``, 1.2-1.3× faster than a
    datapoint at a time. Set as the fetcher's ``fetch``, it refers to the fetcher weakly: a
    strong reference back would make a cycle, and the fetcher, with the dataset and its open
    files, would outlive its iterator until the garbage collector's next pass."""

    def __init__(self, fetcher: Any, dataset: Any) -> None:
        self.fetcher, self.fetch = weakref.ref(fetcher), type(fetcher).fetch
        self.dataset, self.pool = dataset, BufferPool()

    def __call__(self, index: Any) -> Any:
        before = read_columns_in_this_thread(self.dataset, self.pool)
        try:
            batch = self.fetch(self.fetcher(), index)
        finally:
            read_columns_in_this_thread(*before)
        return _each_column(batch, BytesColumn.values)


def columns_as_views(batch: Any) -> Any:
    """A batch collated by a loader thread, its ``BytesColumn`` fields as lists of read-only
    ``memoryview`` values (what a worker process's batch arrives with)."""
    return _each_column(batch, BytesColumn.views)


def _each_column(batch: Any, values: Callable[[BytesColumn], list]) -> Any:
    """``batch`` with each of its ``BytesColumn`` fields as ``values`` gives it."""
    if type(batch) is not dict:
        return batch
    return {name: values(value) if type(value) is BytesColumn else value for name, value in batch.items()}


_ACTIVE = False  # set in a worker by its first WorkerCollate call
_COLUMNS = False  # set in a worker by WorkerStart: its collate takes Collated batches
PACKING = False  # set in a worker by WorkerStart: ffrecord's loader packs its batches into slots


class WorkerCollate:
    """The loader's ``collate_fn``, then, in a worker, the batch packed into a slot; the
    stages marked on the worker's clock, when it times them (``batched``: the loader
    batches, else a fetch is one datapoint)."""

    def __init__(self, collate_fn: Callable[[Any], Any], exact_types: bool = False, batched: bool = True) -> None:
        self.collate_fn = collate_fn
        self.exact_types = exact_types
        self.batched = batched

    def __call__(self, batch: Any) -> Any:
        global _ACTIVE
        if get_worker_info() is None:
            return self.collate_fn(batch)
        _ACTIVE = True
        clock = _timing.worker_clock()
        if clock is not None:
            clock.fetched(datapoints(batch) if self.batched else 1)
        if type(batch) is TaskGroup:  # each batch collated, all packed in one slot
            collated = TaskGroup(b if type(b) is ExceptionWrapper else _wrapped_failure(self.collate_fn, b)
                                 for b in batch)
        else:
            collated = self.collate_fn(batch)
        if clock is None:
            return _sender().pack(collated, self.exact_types)
        clock.collated()
        packed = _sender().pack(collated, self.exact_types)
        clock.handed_over(len(batch) if type(batch) is TaskGroup else 1)
        return packed

    def __repr__(self) -> str:
        return f"WorkerCollate({self.collate_fn!r})"


class WorkerStart:
    """The loader's ``worker_init_fn``, after telling the worker, before its first batch,
    whether its collate takes ``Collated`` batches (``columns``: see ``columns_welcome``)."""

    def __init__(self, worker_init_fn: Callable[[int], Any] | None, columns: bool) -> None:
        self.worker_init_fn = worker_init_fn
        self.columns = columns

    def __call__(self, worker_id: int) -> None:
        global _COLUMNS, PACKING
        _COLUMNS, PACKING = self.columns, True
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)

    def __repr__(self) -> str:
        return f"WorkerStart({self.worker_init_fn!r}, columns={self.columns})"


# -- main-process side -------------------------------------------------------------------

class _Mapped:
    """An arena of a worker, mapped in the main process."""

    def __init__(self, pid: int, nonce: str, arena_id: int, fd: int, arena_size: int, slot_size: int) -> None:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as exc:
            raise RuntimeError(f"DataLoader worker {pid} is gone: its batch in shared memory "
                               f"cannot be read ({exc})") from None
        try:
            expected = f"/memfd:{_memfd_name(nonce, arena_id)} (deleted)"
            if os.readlink(f"/proc/self/fd/{fd}") != expected:  # the pid was reused
                raise RuntimeError(f"DataLoader worker {pid} is gone: its batch in shared "
                                   "memory cannot be read")
            self.map = mmap.mmap(fd, arena_size)
        finally:
            os.close(fd)
        self.pid = pid
        self.states = np.frombuffer(self.map, np.uint8, _SLOTS)
        self.slot_type = ctypes.c_ubyte * slot_size


def _release(states: np.ndarray, slot: int, owner: int) -> None:
    if os.getpid() == owner:  # never from a forked copy of the batch's objects
        states[slot] = FREE


class _Receiver:
    """The arenas the main process has mapped, by (worker nonce, arena id)."""

    def __init__(self) -> None:
        self.mapped: dict[tuple[str, int], _Mapped] = {}
        self.lock = threading.Lock()  # the pin-memory thread unpacks too

    def unpack(self, packed: Packed) -> Any:
        with self.lock:
            for ident in packed.retired:
                self.mapped.pop((packed.nonce, ident), None)
        mapped = self.arena(packed.pid, packed.nonce, packed.arena_id, packed.fd, packed.arena_size,
                            packed.slot_size)
        slot = mapped.slot_type.from_buffer(mapped.map, _HEADER + packed.slot * packed.slot_size)
        weakref.finalize(slot, _release, mapped.states, packed.slot, os.getpid()).atexit = False
        return _rebuild(packed.skeleton, slot, memoryview(slot).cast("B").toreadonly())

    def arena(self, pid: int, nonce: str, arena_id: int, fd: int, arena_size: int, slot_size: int) -> _Mapped:
        """Arena ``arena_id`` of worker ``pid`` (``nonce``: its incarnation), mapped once."""
        key = (nonce, arena_id)
        with self.lock:
            mapped = self.mapped.get(key)
            if mapped is None:
                self.forget_exited()
                mapped = self.mapped[key] = _Mapped(pid, nonce, arena_id, fd, arena_size, slot_size)
            return mapped

    def forget_exited(self) -> None:
        """Drops the mappings of workers that have exited (views still held keep theirs)."""
        for key, mapped in list(self.mapped.items()):
            if not _alive(mapped.pid):
                del self.mapped[key]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_RECEIVER = _Receiver()


def forget_exited_workers() -> None:
    """Called as a loader starts an epoch: the arenas of finished workers are unmapped."""
    with _RECEIVER.lock:
        _RECEIVER.forget_exited()


@functools.lru_cache(maxsize=None)
def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()  # dtype.itemsize needs torch 2.1


def _rebuild(skeleton: Any, slot: Any, raw: memoryview) -> Any:
    """The batch of ``skeleton`` over ``slot`` (``raw``: the slot as read-only bytes)."""
    kind = type(skeleton)
    if kind is _Leaf:
        leaf = skeleton
        if leaf.kind == "bytes":
            view = raw[leaf.offset:leaf.offset + leaf.nbytes]
            return view if leaf.dtype is None else leaf.dtype(view)  # bytes or bytearray: a copy
        if leaf.kind == "column":  # (count, size) of values of one size, else their offsets
            bounds = leaf.dtype if type(leaf.dtype) is tuple else np.frombuffer(leaf.dtype, np.int64).tolist()
            return _column_views(raw[leaf.offset:leaf.offset + leaf.nbytes], bounds)
        if leaf.kind == "tensor":
            flat = torch.frombuffer(slot, dtype=leaf.dtype, count=leaf.nbytes // _itemsize(leaf.dtype),
                                    offset=leaf.offset)
            return flat if len(leaf.shape) == 1 else flat.view(leaf.shape)  # a view costs 3 us
        return np.frombuffer(slot, leaf.dtype, leaf.nbytes // leaf.dtype.itemsize, leaf.offset).reshape(leaf.shape)
    if kind is list:
        return [_rebuild(x, slot, raw) for x in skeleton]
    if kind is TaskGroup:
        return TaskGroup(_rebuild(x, slot, raw) for x in skeleton)
    if kind is dict:
        return {k: _rebuild(v, slot, raw) for k, v in skeleton.items()}
    if kind is tuple:
        return tuple(_rebuild(x, slot, raw) for x in skeleton)
    if isinstance(skeleton, tuple) and hasattr(skeleton, "_fields"):
        return kind(*(_rebuild(x, slot, raw) for x in skeleton))
    return skeleton
