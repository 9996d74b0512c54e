"""``bytes`` values and small tensors through the stock ``torch.utils.data.DataLoader``'s
worker queue, by shared memory instead of its pipe.

torch's worker queue pickles each batch (``multiprocessing``'s ``ForkingPickler``) through a
pipe of 64 KiB: a batch of 64 values of 16 KiB takes sixteen rounds of write, wake-up and
read between a worker and the main process, and each value is copied four times; a small
tensor (the default collate's labels) is moved into a new shared-memory segment whose
descriptor the main process fetches through a socket of its own, for every batch. A
``DatasetReader`` read in a worker of that loader (``__getitems__``, the loader's batched
fetch) gives its ``bytes`` values as ``SharedBytes``, a ``bytes`` subclass that
``ForkingPickler`` reduces by copying the value into a slot of the worker's arenas (the
``memfd`` arenas of ``_transport``) and sending only the slot's address; unpickling it in
the main process copies the value out as plain ``bytes`` and frees the slot. In such a
worker, small tensors of their own memory, not yet shared, go in slots too (``_reduce_tensor``)
and arrive as tensors of the same dtype, shape and values. So user code in the main process
sees what the pipe would have brought.

Flow control: a value too small or too large to be worth it, or arriving while every slot
that fits it is taken (the main process is behind, or dropped batches it never unpickled),
is pickled as ordinary ``bytes``: sending never waits. Each slot starts with the sequence
number of the value written into it: a payload unpickled twice, or after its slot was freed
and reused, raises instead of returning other bytes. Arenas are anonymous memory, freed when
the worker exits and the main process unmaps them (on mapping a new worker's arena, or
``_transport.forget_exited_workers``): nothing is named in ``/dev/shm`` and no descriptor
stays open.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from collections.abc import Callable, Mapping
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import torch
from torch.multiprocessing.reductions import reduce_tensor as _torch_reduce_tensor

from . import _transport

__all__ = ["SharedBytes", "worker_decoders"]

MIN_SHARED = 1 << 10  # smaller values cost less through the pipe than a slot's bookkeeping
MAX_SHARED = 8 << 20  # larger ones: rare, and an arena of such slots would be large
MAX_SHARED_TENSOR = 256 << 10  # larger tensors: torch's shared memory costs less than two copies
_ARENA_BYTES = 64 << 20  # address space of an arena (pages are used only as slots are)
_MAX_ARENAS = 4  # per worker: slot sizes grown for larger values
_PAGE = 4096
_SEQUENCE = struct.Struct("<Q")  # at the start of each slot: the value's sequence number


class SharedBytes(bytes):
    """A ``bytes`` value read in a worker of torch's ``DataLoader``: it crosses the worker
    queue through shared memory and arrives in the main process as plain ``bytes``. Pickled
    by anything but ``ForkingPickler`` it is plain ``bytes`` too.

    >>> import pickle
    >>> value = SharedBytes(b"pixels")
    >>> value == b"pixels", type(pickle.loads(pickle.dumps(value))) is bytes
    (True, True)
    """

    __slots__ = ()

    def __reduce__(self) -> tuple:
        return bytes, (bytes(self),)


class _Slots:
    """A worker's arenas for ``SharedBytes`` values, one value per slot."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.nonce = os.urandom(8).hex()
        self.arenas: list[_transport._Arena] = []  # by slot size, smallest first
        self.sequence = 0
        self.lock = threading.Lock()  # the queue's feeder thread pickles; user threads may too

    def put(self, value: Any, nbytes: int) -> tuple | None:
        """Copies ``value`` (``nbytes`` of contiguous memory) into a free slot; its address,
        or None when no slot is free."""
        with self.lock:
            found = self._free_slot(nbytes + _SEQUENCE.size)
            if found is None:
                return None
            arena, slot = found
            self.sequence += 1
            start = arena.slot_start(slot)
            _SEQUENCE.pack_into(arena.map, start, self.sequence)
            arena.map[start + _SEQUENCE.size:start + _SEQUENCE.size + nbytes] = value
            return (self.pid, self.nonce, arena.ident, arena.fd, arena.size, arena.slot_size, slot,
                    self.sequence, nbytes)

    def _free_slot(self, nbytes: int) -> tuple[_transport._Arena, int] | None:
        fitting = [arena for arena in self.arenas if arena.slot_size >= nbytes]
        for arena in fitting:
            slot = arena.take_free_slot()
            if slot is not None:
                return arena, slot
        if fitting or len(self.arenas) == _MAX_ARENAS:
            return None  # full: the main process is behind, and sending never waits
        slot_size = -(-(nbytes + nbytes // 4) // _PAGE) * _PAGE
        arena = _transport._Arena(self.nonce, len(self.arenas), slot_size,
                                  max(8, min(_transport._HEADER, _ARENA_BYTES // slot_size)))
        self.arenas = sorted(self.arenas + [arena], key=lambda a: a.slot_size)
        return arena, arena.take_free_slot()


_SLOTS: _Slots | None = None


def _slots() -> _Slots:
    global _SLOTS
    if _SLOTS is None or _SLOTS.pid != os.getpid():  # a forked child has its own
        _SLOTS = _Slots()
    return _SLOTS


def _reduce_bytes(value: SharedBytes) -> tuple:
    address = _put(value)
    if address is None:
        return bytes, (bytes(value),)
    return _received_bytes, address


def _reduce_tensor(tensor: torch.Tensor) -> tuple:
    """torch's reduction, but for a small tensor that it would move into a new shared-memory
    segment, and pass as a descriptor through a socket, for this one batch (the default
    collate's tensor of labels): that tensor's memory goes in a slot, as bytes values do."""
    address = _put(tensor)
    if address is None:
        return _torch_reduce_tensor(tensor)
    return _received_tensor, (address, tensor.dtype, tuple(tensor.shape))


def _put(value: SharedBytes | torch.Tensor) -> tuple | None:
    """``value`` copied into a slot of this process; None when it is not worth it or no
    slot is free: the caller pickles it its usual way. Never raises: an exception in the
    queue's feeder thread would drop the batch, and the main process would wait for it."""
    try:
        if type(value) is SharedBytes:
            worth = MIN_SHARED <= len(value) <= MAX_SHARED
            return _slots().put(value, len(value)) if worth else None
        nbytes = value.numel() * value.element_size()
        worth = (type(value) is torch.Tensor and 0 < nbytes <= MAX_SHARED_TENSOR
                 and value.device.type == "cpu" and value.layout == torch.strided
                 and not value.requires_grad and not value.is_quantized and not value.is_nested
                 and not value.is_conj() and not value.is_neg() and value.is_contiguous()
                 and not value.is_shared() and value.untyped_storage().nbytes() == nbytes)
        return _slots().put(value.reshape(-1).view(torch.uint8).numpy(), nbytes) if worth else None
    except Exception:  # e.g. no memory left for an arena: the pipe still works
        return None


def _copied_out(address: tuple, copy: Callable[[mmap.mmap, int, int], Any]) -> Any:
    """``copy(arena, start, nbytes)`` of the value at ``address`` (a slot of a worker's
    arena, mapped here once), then the slot freed for the worker to reuse."""
    pid, nonce, arena_id, fd, arena_size, slot_size, slot, sequence, nbytes = address
    arena = _transport._RECEIVER.arena(pid, nonce, arena_id, fd, arena_size, slot_size).map
    start = _transport._HEADER + slot * slot_size
    if arena[slot] != _transport.BUSY or _SEQUENCE.unpack_from(arena, start)[0] != sequence:
        raise RuntimeError(f"a value from DataLoader worker {pid} was unpickled twice, or after "
                           "its shared memory was freed: unpickle each payload once")
    value = copy(arena, start + _SEQUENCE.size, nbytes)
    arena[slot] = _transport.FREE
    return value


def _received_bytes(*address: Any) -> bytes:
    """The value at ``address``, as plain ``bytes``."""
    return _copied_out(address, lambda arena, start, nbytes: arena[start:start + nbytes])


def _received_tensor(address: tuple, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    """The tensor at ``address``, in memory of its own."""
    def copy(arena: mmap.mmap, start: int, nbytes: int) -> torch.Tensor:
        tensor = torch.empty(shape, dtype=dtype)
        tensor.reshape(-1).view(torch.uint8).numpy()[:] = np.frombuffer(arena, np.uint8, nbytes, start)
        return tensor

    return _copied_out(address, copy)


ForkingPickler.register(SharedBytes, _reduce_bytes)


_TENSORS_IN_SLOTS = False  # this worker pickles small tensors with _reduce_tensor


def worker_decoders(decoders: Mapping[str, Callable]) -> dict[str, Callable] | None:
    """``decoders`` with ``bytes`` made ``SharedBytes``, in a worker of a stock torch loader
    that can take them; None anywhere else (ffrecord's own loader packs batches itself)."""
    global _TENSORS_IN_SLOTS
    if not _transport.SUPPORTED or _transport.PACKING:
        return None
    if not _TENSORS_IN_SLOTS:
        ForkingPickler.register(torch.Tensor, _reduce_tensor)
        _TENSORS_IN_SLOTS = True
    return {name: SharedBytes if decode is bytes else decode for name, decode in decoders.items()}
