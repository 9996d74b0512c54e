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
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np
import torch

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
    """What both transforms share: the field, the output size, the batch thread pool."""

    def __init__(self, size: int, field: str, threads: int | None) -> None:
        if int(size) != size or size < 1:
            raise ValueError(f"size must be a positive int, not {size!r}")
        self.size = int(size)
        self.field = field
        self.threads = threads or min(4, len(os.sched_getaffinity(0)))
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0

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
        batch = torch.empty((n, 3, self.size, self.size), dtype=torch.uint8)
        out = batch.numpy()

        def render(k: int) -> None:
            self._render(datapoints[k], generators[k], out[k],
                         k if indices is None else int(indices[k]))

        if (threads or self.threads) > 1 and n > 1:
            list(self._executor().map(render, range(n)))
        else:
            for k in range(n):
                render(k)
        return [{**datapoint, self.field: batch[k]} for k, datapoint in enumerate(datapoints)]

    def _render(self, datapoint: dict, rng: np.random.Generator, out: np.ndarray, index: int) -> None:
        try:
            value = datapoint[self.field]
        except KeyError:
            raise KeyError(f"datapoint {index} has no field {self.field!r} (it has {sorted(datapoint)})") from None
        try:
            image = images.open_image(value)
            box, flip = self._box_and_flip(image, rng)
            image.render_box(box, self.size, flip, out)
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
                 threads: int | None = None) -> None:
        super().__init__(size, field, threads)
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
                f"ratio={self.ratio}, flip={self.flip})")


class CenterCrop(_ImageTransform):
    """torchvision's ``Resize(resize)`` then ``CenterCrop(size)`` (the validation transform),
    fused with decoding into one resize: uint8, ``3 × size × size``. ``resize`` defaults to
    ``size / 0.875`` (256 for 224).

    >>> CenterCrop(224)
    CenterCrop(size=224, resize=256, field='image')
    """

    def __init__(self, size: int, resize: int | None = None, field: str = "image",
                 threads: int | None = None) -> None:
        super().__init__(size, field, threads)
        self.resize = int(resize) if resize is not None else int(round(self.size / 0.875))
        if self.resize < self.size:
            raise ValueError(f"resize ({self.resize}) must be at least size ({self.size})")

    def _box_and_flip(self, image: images.EncodedImage, rng: np.random.Generator) -> tuple[images.Box, bool]:
        return crops.center_crop_box(image.height, image.width, self.size, self.resize), False

    def __repr__(self) -> str:
        return f"CenterCrop(size={self.size}, resize={self.resize}, field={self.field!r})"
