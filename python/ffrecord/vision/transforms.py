"""The training and validation transforms of an image field, per datapoint or per batch.

A transform called on one datapoint returns it with the image field replaced by a
``3 × size × size`` uint8 tensor. ``StructuredDataset`` calls ``transform_batch`` instead
when the transform has one: the batch's images are then decoded by a small thread pool
(libjpeg-turbo and Pillow's resize release the GIL, so one DataLoader worker uses several
cores) into one contiguous ``batch × 3 × size × size`` uint8 tensor, and each datapoint's
field is a view of it.

Randomness is per datapoint: ``seed`` is an int (any size: ``ffrecord.order.datapoint_seed``
gives one per datapoint from the loader's seed, the epoch and the canonical position) or a
``numpy.random.Generator``. Without one a seed is drawn from torch's default generator,
which the DataLoader seeds per worker (as torchvision's transforms draw from it). With
per-datapoint seeds a resumed run sees the same crops.

``device="cuda"`` decodes a batch's JPEGs on the GPU (nvjpeg) and crops, resizes and flips
them there (``gpu``), with the boxes and flips the CPU path draws from the same seeds; the
batch is then on the device. Images the device does not decode (PNG, CMYK, a JPEG nvjpeg
refuses) take the CPU path and are copied over; with no device, or in a DataLoader worker
process (where CUDA cannot start after ``fork``), the whole batch takes the CPU path (one
``RuntimeWarning``). ``normalize=(mean, std)`` (per channel, in 0-1 units) gives float32
``(x / 255 - mean) / std`` instead of uint8, on the batch's device.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Sequence

import numpy as np
import torch
import torch.utils.data

from ..dataset.errors import CodecError
from . import crops, images

Seed = Any  # int | numpy.random.Generator | None


def _generator(seed: Seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    return np.random.default_rng(seed)


class _ImageTransform:
    """What both transforms share: the field, the output size, the batch thread pool, the
    device that decodes, the normalisation."""

    def __init__(self, size: int, field: str, threads: int | None, device: Any = None,
                 normalize: tuple[Sequence[float], Sequence[float]] | None = None) -> None:
        if int(size) != size or size < 1:
            raise ValueError(f"size must be a positive int, not {size!r}")
        self.size = int(size)
        self.field = field
        self.threads = threads or min(4, len(os.sched_getaffinity(0)))
        self.device = None if device is None else torch.device(device)
        self.normalize = None if normalize is None else _normalization(normalize)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._warned = False

    def _box_and_flip(self, image: images.EncodedImage, rng: np.random.Generator) -> tuple[images.Box, bool]:
        """The crop box in stored pixels and whether to flip it."""
        raise NotImplementedError

    def __call__(self, datapoint: dict, seed: Seed = None) -> dict:
        """The datapoint with its image field a ``3 × size × size`` uint8 tensor."""
        return self.transform_batch([datapoint], seeds=[seed], threads=1)[0]

    def transform_batch(self, datapoints: Sequence[dict], indices: Sequence[int] | None = None,
                        seeds: Sequence[Seed] | None = None, threads: int | None = None) -> list[dict]:
        """The datapoints with their image fields views of one ``n × 3 × size × size`` uint8
        tensor. ``indices`` (the datapoints' indices in the dataset) name a bad image in the
        error; ``seeds``, one per datapoint, fix the random crops (by default the indices'
        ``seeds`` attribute when they carry one, as a loader's per-datapoint seeds)."""
        n = len(datapoints)
        if seeds is None:
            seeds = getattr(indices, "seeds", None)
        seeds = list(seeds) if seeds is not None else [None] * n
        # draw the seeds here, in order, so that the pool's scheduling changes nothing
        generators = [_generator(seed) for seed in seeds]
        names = [k if indices is None else int(indices[k]) for k in range(n)]
        device = self._decoding_device()
        if device is None:
            batch = self._on_cpu(datapoints, generators, names, threads)
        else:
            batch = self._on_device(device, datapoints, generators, names)
        if self.normalize is not None:
            mean, std = (t.to(batch.device) for t in self.normalize)
            batch = (batch.float() - mean) / std
        return [{**datapoint, self.field: batch[k]} for k, datapoint in enumerate(datapoints)]

    def _on_cpu(self, datapoints: Sequence[dict], generators: list[np.random.Generator], names: list[int],
                threads: int | None) -> torch.Tensor:
        batch = torch.empty((len(datapoints), 3, self.size, self.size), dtype=torch.uint8)
        out = batch.numpy()

        def render(k: int) -> None:
            image, box, flip = self._open(datapoints[k], generators[k], names[k])
            self._render(image, box, flip, out[k], names[k])

        if (threads or self.threads) > 1 and len(datapoints) > 1:
            list(self._executor().map(render, range(len(datapoints))))
        else:
            for k in range(len(datapoints)):
                render(k)
        return batch

    def _on_device(self, device: torch.device, datapoints: Sequence[dict], generators: list[np.random.Generator],
                   names: list[int]) -> torch.Tensor:
        """The batch made on ``device``: its JPEGs decoded there in one call (``gpu``), the
        other images (PNG, CMYK, one the device cannot decode) on the CPU and copied over."""
        from . import gpu

        batch = torch.empty((len(datapoints), 3, self.size, self.size), dtype=torch.uint8, device=device)
        opened = [self._open(d, rng, name) for d, rng, name in zip(datapoints, generators, names)]
        jpegs = [k for k, (image, _, _) in enumerate(opened) if image.jpeg is not None]
        decoded = dict(zip(jpegs, gpu.decode_jpegs([opened[k][0].jpeg for k in jpegs], device)))
        row = np.empty((3, self.size, self.size), np.uint8)
        for k, (image, box, flip) in enumerate(opened):
            pixels = decoded.get(k)
            if pixels is not None:
                gpu.crop_resize_into(pixels, box, flip, batch[k])
            else:
                self._render(image, box, flip, row, names[k])
                batch[k].copy_(torch.from_numpy(row))
        return batch

    def _decoding_device(self) -> torch.device | None:
        """The device asked for, where it can decode: in the training process (0 workers or
        loader threads) with the device present; None (the CPU path) otherwise."""
        if self.device is None or self.device.type == "cpu":
            return None
        usable = (torch.utils.data.get_worker_info() is None
                  and getattr(torch, self.device.type).is_available())
        if not usable and not self._warned:
            self._warned = True
            warnings.warn(f"{type(self).__name__}(device={str(self.device)!r}): decoding on the CPU "
                          + ("in a DataLoader worker process (decode on the device with 0 workers or "
                             "workers='threads')" if torch.utils.data.get_worker_info() is not None
                             else f"(no {self.device.type} device here)"), RuntimeWarning, stacklevel=3)
        return self.device if usable else None

    def _open(self, datapoint: dict, rng: np.random.Generator, index: int) -> tuple[images.EncodedImage, images.Box, bool]:
        """The datapoint's image, opened (its size read), its crop box and flip drawn."""
        try:
            value = datapoint[self.field]
        except KeyError:
            raise KeyError(f"datapoint {index} has no field {self.field!r} (it has {sorted(datapoint)})") from None
        with self._naming(index):
            image = images.open_image(value)
            return (image, *self._box_and_flip(image, rng))

    def _render(self, image: images.EncodedImage, box: images.Box, flip: bool, out: np.ndarray, index: int) -> None:
        with self._naming(index):
            image.render_box(box, self.size, flip, out)

    @contextlib.contextmanager
    def _naming(self, index: int) -> Iterator[None]:
        """Any error inside as a ``CodecError`` naming the datapoint and the field."""
        try:
            yield
        except Exception as exc:
            raise CodecError(f"datapoint {index}, field {self.field!r}: cannot decode the image: "
                             f"{type(exc).__name__}: {exc}", field=self.field, index=index) from exc

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None or self._pool_pid != os.getpid():  # threads do not survive fork
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ffrecord-vision")
            self._pool_pid = os.getpid()
        return self._pool

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_pool": None, "_pool_pid": 0}

    def _options(self) -> str:
        """The device and normalisation of the repr, when not the defaults."""
        device = "" if self.device is None else f", device={str(self.device)!r}"
        return device + ("" if self.normalize is None else ", normalize=(mean, std)")


def _normalization(normalize: tuple[Sequence[float], Sequence[float]]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, std)`` per channel, in the uint8 scale (0-255), shaped to broadcast over a
    ``n × 3 × H × W`` batch."""
    mean, std = (torch.as_tensor(v, dtype=torch.float32).reshape(-1) for v in normalize)
    if mean.numel() != 3 or std.numel() != 3 or not bool((std > 0).all()):
        raise ValueError(f"normalize must be (mean, std), three values each, std positive, not {normalize!r}")
    return (mean * 255).view(1, 3, 1, 1), (std * 255).view(1, 3, 1, 1)


class RandomResizedCrop(_ImageTransform):
    """torchvision's ``RandomResizedCrop(size, scale, ratio)`` then, with ``flip``,
    ``RandomHorizontalFlip()``, fused with decoding: uint8, ``3 × size × size``.

    >>> import io
    >>> from PIL import Image
    >>> stream = io.BytesIO(); Image.new("RGB", (500, 375), "teal").save(stream, "JPEG")
    >>> train = RandomResizedCrop(224)
    >>> sample = train({"image": stream.getvalue(), "label": 3}, seed=7)
    >>> sample["image"].shape, sample["image"].dtype, sample["label"]
    (torch.Size([3, 224, 224]), torch.uint8, 3)
    """

    def __init__(self, size: int, field: str = "image", scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3 / 4, 4 / 3), flip: bool = True,
                 threads: int | None = None, device: Any = None,
                 normalize: tuple[Sequence[float], Sequence[float]] | None = None) -> None:
        super().__init__(size, field, threads, device, normalize)
        if not 0 < scale[0] <= scale[1] or not 0 < ratio[0] <= ratio[1]:
            raise ValueError(f"scale and ratio must be (low, high) with 0 < low <= high, not {scale}, {ratio}")
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        self.flip = flip

    def _box_and_flip(self, image: images.EncodedImage, rng: np.random.Generator) -> tuple[images.Box, bool]:
        box = crops.random_resized_crop_box(image.height, image.width, self.scale, self.ratio, rng)
        return box, bool(self.flip and rng.random() < 0.5)

    def __repr__(self) -> str:
        return (f"RandomResizedCrop(size={self.size}, field={self.field!r}, scale={self.scale}, "
                f"ratio={self.ratio}, flip={self.flip}{self._options()})")


class CenterCrop(_ImageTransform):
    """torchvision's ``Resize(resize)`` then ``CenterCrop(size)`` (the validation transform),
    fused with decoding into one resize: uint8, ``3 × size × size``. ``resize`` defaults to
    ``size / 0.875`` (256 for 224).

    >>> CenterCrop(224)
    CenterCrop(size=224, resize=256, field='image')
    """

    def __init__(self, size: int, resize: int | None = None, field: str = "image",
                 threads: int | None = None, device: Any = None,
                 normalize: tuple[Sequence[float], Sequence[float]] | None = None) -> None:
        super().__init__(size, field, threads, device, normalize)
        self.resize = int(resize) if resize is not None else int(round(self.size / 0.875))
        if self.resize < self.size:
            raise ValueError(f"resize ({self.resize}) must be at least size ({self.size})")

    def _box_and_flip(self, image: images.EncodedImage, rng: np.random.Generator) -> tuple[images.Box, bool]:
        return crops.center_crop_box(image.height, image.width, self.size, self.resize), False

    def __repr__(self) -> str:
        return f"CenterCrop(size={self.size}, resize={self.resize}, field={self.field!r}{self._options()})"
