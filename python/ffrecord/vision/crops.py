"""Where crops fall: torchvision's ``RandomResizedCrop`` and ``Resize`` + ``CenterCrop``
boxes, drawn from a numpy ``Generator`` so that a per-datapoint seed fixes them.

A box is ``(top, left, height, width)`` in pixels of the stored image, as torchvision's
``RandomResizedCrop.get_params`` returns it.

>>> import numpy as np
>>> random_resized_crop_box(375, 500, (0.08, 1.0), (3 / 4, 4 / 3), np.random.default_rng(0))
(35, 302, 171, 129)
>>> center_crop_box(375, 500, 224, 256)
(23.4375, 85.04..., 328.125, 328.44...)
"""

from __future__ import annotations

import math

import numpy as np

ATTEMPTS = 10  # torchvision's: then the central crop


def random_resized_crop_box(height: int, width: int, scale: tuple[float, float],
                            ratio: tuple[float, float], rng: np.random.Generator) -> tuple[int, int, int, int]:
    """The box of torchvision's ``RandomResizedCrop``: an area fraction uniform in ``scale``
    and an aspect ratio log-uniform in ``ratio``, ``ATTEMPTS`` tries to fit it in the image,
    then the largest central crop whose aspect ratio lies in ``ratio``."""
    area = height * width
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(ATTEMPTS):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_low, log_high))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return top, left, h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        w, h = int(round(height * max(ratio))), height
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def center_crop_box(height: int, width: int, size: int, resize: int) -> tuple[float, float, float, float]:
    """The part of the stored image that torchvision's ``Resize(resize)`` then
    ``CenterCrop(size)`` keep, in stored pixels (fractional: one resize does both)."""
    short, long_ = (height, width) if height <= width else (width, height)
    resized_long = int(resize * long_ / short)  # torchvision's rounding of the long side
    resized_h, resized_w = (resize, resized_long) if height <= width else (resized_long, resize)
    top = int(round((resized_h - size) / 2.0))
    left = int(round((resized_w - size) / 2.0))
    sy, sx = height / resized_h, width / resized_w
    return top * sy, left * sx, size * sy, size * sx
