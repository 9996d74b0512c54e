"""Batches as one tensor over the batch's one buffer, with torch's ``default_collate`` results.

An ffrecord batch is read back to back into one buffer. torch's ``default_collate`` then
turns the samples into tensors one by one and copies them into a new tensor; when the
samples are equal-shaped arrays, ``default_collate`` here builds the same tensor (dtype,
shape, values) from the one buffer instead:

- the samples the dataset read and handed on unchanged are the rows of that buffer: the
  batch tensor is the buffer itself, no copy;
- an array returned by ``Dataset.process_batch`` that lies inside the batch buffer is used
  as is too; other equal-shaped arrays are stacked with one copy;
- anything else (unequal shapes, other types, dtypes torch cannot hold) goes to torch's
  ``default_collate``, unchanged, errors included.

In a DataLoader worker the batch is read straight into shared memory, as torch's own
collate allocates it: the batch crosses to the main process as one tensor (a file
descriptor), never as per-sample objects.

>>> import numpy as np
>>> default_collate([np.arange(3, dtype=np.int16), np.arange(3, dtype=np.int16)]).shape
torch.Size([2, 3])
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import get_worker_info
from torch.utils.data._utils import collate as _torch_collate

from ffrecord._buffers import BufferPool
from ffrecord.reader import FileReader

from . import _transport

# Element types torch's default_collate turns into tensors of the same dtype.
_DTYPES = {np.dtype(name): getattr(torch, name) for name in (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex64", "complex128")}
_layout = operator.attrgetter("shape", "strides", "dtype")
_local = threading.local()


@dataclass
class _BatchBuffer:
    """The buffer the batch being fetched was read into, and its samples when handed on
    unchanged (with the (shape, strides, dtype) they had, to detect in-place changes)."""

    array: np.ndarray
    tensor: torch.Tensor | None  # the shared-memory tensor behind ``array`` in a worker
    samples: list | None = None
    members: tuple = ()
    layout: tuple | None = None

    def as_tensor(self) -> torch.Tensor:
        return torch.from_numpy(self.array) if self.tensor is None else self.tensor


def read_batch(reader: FileReader, indices: Any) -> tuple[np.ndarray, np.ndarray]:
    """Reads ``indices`` into one buffer (shared memory in a DataLoader worker, page-locked
    memory in a loader thread that pins its batches) and makes it
    the batch that ``default_collate`` may use as is; returns ``(buffer, offsets)``."""
    _local.batch = None  # a batch no collate consumed must not keep its buffer alive
    if _plain_memory():
        buffer, offsets = reader.read_batch(indices)
        _local.batch = _BatchBuffer(buffer, None)
        return buffer, offsets
    made = []

    def allocate(nbytes: int) -> np.ndarray:
        made.append(_batch_bytes(nbytes))
        return made[-1].numpy()

    buffer, offsets = reader.read_batch(indices, out=allocate)
    _local.batch = _BatchBuffer(buffer, made[-1])
    return buffer, offsets


def batch_buffer(nbytes: int) -> np.ndarray:
    """A ``uint8`` buffer of ``nbytes`` for the batch being fetched (shared memory in a
    DataLoader worker, page-locked in a loader thread that pins its batches): an array inside it that a dataset returns for the whole batch
    becomes the batch tensor without a copy (as the arrays of ``Dataset.process_batch`` do).

    >>> buf = batch_buffer(16).view(np.int64)
    >>> buf[:] = [4, 5]
    >>> default_collate(buf.reshape(1, 2)).tolist()
    [[4, 5]]
    """
    _local.batch = None
    if _plain_memory():
        pool = getattr(_local, "pool", None)
        if pool is None:  # recycled once no batch refers to it: no page faults on fresh memory
            pool = _local.pool = BufferPool()
        array = pool.take(nbytes)
        _local.batch = _BatchBuffer(array, None)
        return array
    tensor = _batch_bytes(nbytes)
    _local.batch = _BatchBuffer(tensor.numpy(), tensor)
    return _local.batch.array


def hand_on(samples: list) -> None:
    """Records ``samples`` (made by ``split_batch`` from the current batch buffer) as they
    are before user code sees them: if the very same list reaches ``default_collate`` with
    the same members, unchanged in shape and dtype, it is the buffer's rows."""
    batch = getattr(_local, "batch", None)
    if batch is not None and samples:
        batch.samples, batch.members, batch.layout = samples, tuple(samples), _layout(samples[0])


class Collated(dict):
    """A batch of dicts that its dataset collated already, field by field, as
    ``default_collate`` would (in a DataLoader worker: see ``_transport.columns_welcome``);
    ``default_collate`` hands it on as the plain dict it is.

    >>> default_collate(Collated(label=torch.tensor([1, 2])))
    {'label': tensor([1, 2])}
    """


def default_collate(batch: Any) -> Any:
    """``torch.utils.data.default_collate``, without per-sample work for equal-shaped arrays.

    >>> import numpy as np
    >>> default_collate([np.zeros(2, np.float32), np.ones(2, np.float32)]).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    if type(batch) is Collated:
        return dict(batch)
    current, _local.batch = getattr(_local, "batch", None), None
    if _torch_defaults_intact():
        if isinstance(batch, np.ndarray):
            fast = _collate_array(batch, current)
        elif type(batch) is list:
            fast = _collate_samples(batch, current)
        elif type(batch) is dict and batch and all(type(v) is np.ndarray for v in batch.values()):
            # a batch of named arrays (first axis: the batch), e.g. a language model's inputs
            columns = {key: _collate_array(value, current) for key, value in batch.items()}
            fast = None if None in columns.values() else columns
        else:
            fast = None
        if fast is not None:
            return fast
    return _torch_collate.default_collate(batch)


def _torch_defaults_intact() -> bool:
    """False when the user re-registered how torch collates arrays or tensors: then only
    torch's own collate knows the result."""
    table = _torch_collate.default_collate_fn_map
    return (table.get(np.ndarray) is _torch_collate.collate_numpy_array_fn
            and table.get(torch.Tensor) is _torch_collate.collate_tensor_fn)


def _collate_samples(samples: list, current: _BatchBuffer | None) -> torch.Tensor | None:
    if not samples or set(map(type, samples)) != {np.ndarray}:
        return None
    layouts = set(map(_layout, samples))
    if len(layouts) != 1:
        return None
    shape, _, dtype = layout = layouts.pop()
    if dtype not in _DTYPES or not dtype.isnative or not shape:
        return None
    k = len(samples)
    if (current is not None and samples is current.samples and layout == current.layout
            and all(map(operator.is_, samples, current.members))):
        # exactly the uint8 rows split_batch made, back to back from the buffer's start
        return current.as_tensor()[: k * shape[0]].view(k, shape[0])
    out = _new_batch_tensor((k, *shape), dtype)
    np.stack(samples, out=out.numpy())
    return out


def _collate_array(array: np.ndarray, current: _BatchBuffer | None) -> torch.Tensor | None:
    """An array whose first axis is the batch (what ``process_batch`` may return)."""
    dtype = array.dtype
    if array.ndim == 0 or len(array) == 0 or dtype not in _DTYPES or not dtype.isnative:
        return None
    if current is not None and array.flags.c_contiguous:
        start = array.__array_interface__["data"][0] - current.array.__array_interface__["data"][0]
        if 0 <= start and start + array.nbytes <= current.array.nbytes:
            if start % dtype.itemsize == 0:
                if current.tensor is None and array.flags.writeable:  # in process: wrapped as is
                    return torch.from_numpy(array)
                flat = current.as_tensor()[start : start + array.nbytes]
                return flat.view(_DTYPES[dtype]).view(array.shape)
    if array.ndim == 1:  # torch wraps it without a copy: leave it to torch
        return None
    # not memory of this batch: torch copies it (a cached array must not be aliased)
    out = _new_batch_tensor(array.shape, dtype)
    np.copyto(out.numpy(), array)
    return out


def _new_batch_tensor(shape: tuple, dtype: np.dtype) -> torch.Tensor:
    """An empty tensor for a batch: in shared memory in a worker, as torch's collate makes
    it; page-locked in a loader thread that pins its batches."""
    if _plain_memory():
        return torch.empty(shape, dtype=_DTYPES[dtype])
    nbytes = int(np.prod(shape)) * dtype.itemsize
    return _batch_bytes(nbytes).view(_DTYPES[dtype]).view(shape)


def pin_batches_in_this_thread(pinned: bool = True) -> bool:
    """Batch memory made in this thread from now on is page-locked (a loader thread of a
    loader with ``pin_memory=True``): the batch then needs no pinned copy. Returns what
    was set before (``pinned=False`` with it: back to ordinary memory)."""
    before, _local.pinned = getattr(_local, "pinned", False), pinned
    return before


def _plain_memory() -> bool:
    """True when a batch is made in ordinary memory: in process, outside a pinning thread."""
    return get_worker_info() is None and not getattr(_local, "pinned", False)


def _batch_bytes(nbytes: int) -> torch.Tensor:
    """A 1-D uint8 tensor of ``nbytes`` for the batch being fetched, where it is not made in
    ordinary memory: shared memory in a worker, page-locked memory in a pinning thread
    (torch's caching host allocator: a block is reused once its tensor is gone and no
    asynchronous copy from it is pending)."""
    if get_worker_info() is None:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    return _shared_bytes(nbytes)


def _shared_bytes(nbytes: int) -> torch.Tensor:
    """A 1-D uint8 tensor of ``nbytes`` in shared memory (what torch sends between processes
    by file descriptor, without copying), or of the slot the batch will travel in when the
    loader's batches go through ``_transport``."""
    slot = _transport.scratch(nbytes)
    if slot is not None:
        return slot
    storage = torch.UntypedStorage._new_shared(max(nbytes, 1))
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (nbytes,))
