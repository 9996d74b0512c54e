"""Decoding one image straight to a crop resized to ``size × size``, written into a slot of
the batch.

JPEGs go through libjpeg-turbo (``simplejpeg``, which releases the GIL): the header gives
the size, the crop box is chosen, and when the box is at least twice the output on both
sides the image is decoded at 1/2, 1/4 or 1/8 scale in the DCT domain (an area reduction
that skips most of the inverse DCT and colour conversion). OpenCV then resizes the box
(GIL released): bilinear when what is left to shrink is under 2× — the DCT scaling did the
rest, so there is nothing to antialias — and area averaging above (images Pillow decoded at
full size). Anything else (PNG, GIF, WebP, CMYK JPEGs, …) is opened by Pillow and converted
to RGB as torchvision's ``ImageFolder`` loader does (alpha dropped, grey replicated), with
Pillow's ``draft`` giving the same DCT scaling to JPEGs.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Callable

import cv2
import numpy as np
import simplejpeg
from PIL import Image

_JPEG_MAGIC = b"\xff\xd8\xff"
_TURBO_COLORSPACES = {"YCbCr", "Gray", "RGB"}  # what libjpeg-turbo converts to RGB itself

Box = tuple  # (top, left, height, width) in stored pixels, ints or floats


def dct_factor(box_height: float, box_width: float, size: int) -> int:
    """The largest of 8, 4, 2 that keeps the box at least ``size`` on both sides once the
    image is decoded that many times smaller; 1 when the crop is under twice the output."""
    for factor in (8, 4, 2):
        if min(box_height, box_width) >= factor * size:
            return factor
    return 1


@dataclass
class EncodedImage:
    """An image as stored (a JPEG libjpeg-turbo can convert, or anything Pillow opens), or
    an already decoded uint8 array: its size, and a way to render a box of it."""

    height: int
    width: int
    render_box: Callable[[Box, int, bool, np.ndarray], None]
    jpeg: memoryview | None = None  # the bytes of a JPEG that libjpeg-turbo (and nvjpeg) decode to RGB


def open_image(value: Any) -> EncodedImage:
    """Reads the size of ``value``: encoded bytes (``bytes``, ``memoryview``, a 1-D uint8
    array), a decoded ``H×W`` / ``H×W×3`` uint8 array, or a PIL image."""
    if isinstance(value, Image.Image):
        return _pixels(np.asarray(value.convert("RGB")))
    if isinstance(value, np.ndarray) and value.ndim != 1:
        return _decoded_array(value)
    data = memoryview(value).cast("B")
    if bytes(data[:3]) == _JPEG_MAGIC:
        try:
            height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
        except ValueError:
            colorspace = None  # Pillow says what is wrong with it
        if colorspace in _TURBO_COLORSPACES:
            return EncodedImage(height, width, lambda box, size, flip, out:
                                _render_turbo(data, height, width, box, size, flip, out), data)
    image = Image.open(io.BytesIO(data))
    return EncodedImage(image.height, image.width, lambda box, size, flip, out:
                        _render_pil(image, box, size, flip, out))


def _decoded_array(array: np.ndarray) -> EncodedImage:
    if array.dtype != np.uint8 or not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (1, 3))):
        raise ValueError(
            f"a decoded image must be a uint8 H×W or H×W×3 array, not {array.dtype} {array.shape}: "
            "read the field as encoded bytes with DatasetReader(..., decoders=ffrecord.vision.ENCODED)")
    rgb = array if array.ndim == 3 and array.shape[2] == 3 else np.repeat(array.reshape(*array.shape[:2], 1), 3, 2)
    return _pixels(rgb)


def _pixels(rgb: np.ndarray) -> EncodedImage:
    return EncodedImage(rgb.shape[0], rgb.shape[1], lambda box, size, flip, out:
                        _resize_into(rgb, box, 1.0, 1.0, size, flip, out))


def _check_pixels(height: int, width: int, factor: int) -> None:
    """Pillow's decompression-bomb limit, applied to what libjpeg-turbo would allocate."""
    limit = Image.MAX_IMAGE_PIXELS
    if limit and height * width > 2 * limit:
        raise Image.DecompressionBombError(
            f"image decoded at 1/{factor} scale would be {width}×{height} pixels, over twice "
            f"Pillow's MAX_IMAGE_PIXELS ({limit})")


def _render_turbo(data: memoryview, height: int, width: int, box: Box, size: int, flip: bool,
                  out: np.ndarray) -> None:
    factor = dct_factor(box[2], box[3], size)
    min_height, min_width = -(-height // factor), -(-width // factor)
    _check_pixels(min_height, min_width, factor)
    pixels = simplejpeg.decode_jpeg(data, "RGB", min_height=min_height, min_width=min_width,
                                    min_factor=factor)
    _resize_into(pixels, box, pixels.shape[0] / height, pixels.shape[1] / width, size, flip, out)


def _render_pil(image: Image.Image, box: Box, size: int, flip: bool, out: np.ndarray) -> None:
    height, width = image.height, image.width
    factor = dct_factor(box[2], box[3], size)
    if factor > 1 and image.format == "JPEG":
        image.draft("RGB", (-(-width // factor), -(-height // factor)))
    rgb = np.asarray(image.convert("RGB"))  # decodes; alpha dropped, grey and CMYK converted
    _resize_into(rgb, box, rgb.shape[0] / height, rgb.shape[1] / width, size, flip, out)


def box_rows_and_columns(box: Box, scale_y: float, scale_x: float, height: int, width: int) -> tuple[int, int, int, int]:
    """``(y0, y1, x0, x1)``: the pixels of ``box`` (stored pixels) in an image decoded at
    ``scale`` times the stored size, ``height × width``, its edges rounded to whole pixels.

    >>> box_rows_and_columns((10, 20, 100, 50.4), 0.5, 0.5, 200, 200)
    (5, 55, 10, 35)
    """
    top, left, h, w = box
    y0, x0 = int(round(top * scale_y)), int(round(left * scale_x))
    y1 = max(y0 + 1, min(height, int(round((top + h) * scale_y))))
    x1 = max(x0 + 1, min(width, int(round((left + w) * scale_x))))
    return y0, y1, x0, x1


def _resize_into(pixels: np.ndarray, box: Box, scale_y: float, scale_x: float, size: int,
                 flip: bool, out: np.ndarray) -> None:
    """Crops ``box`` (stored pixels; ``pixels`` is ``scale`` times the stored size, H×W×3),
    resizes it to ``size × size``, flips it left to right when asked, and writes it into
    ``out`` (``3 × size × size`` uint8). Box edges are rounded to whole decoded pixels."""
    y0, y1, x0, x1 = box_rows_and_columns(box, scale_y, scale_x, pixels.shape[0], pixels.shape[1])
    shrink = max(y1 - y0, x1 - x0) / size
    resized = cv2.resize(pixels[y0:y1, x0:x1], (size, size),
                         interpolation=cv2.INTER_AREA if shrink >= 2 else cv2.INTER_LINEAR)
    if flip:
        resized = resized[:, ::-1]
    np.copyto(out, resized.transpose(2, 0, 1))


def downscale_image(data: Any, max_side: int, quality: int = 90) -> bytes:
    """``data`` (an encoded image) with its longer side at most ``max_side``, in its own
    format; the bytes unchanged when they already fit. For converting a data set once, as
    FFCV's ``max_resolution`` does: decoding then costs the smaller size every epoch.

    >>> import io
    >>> from PIL import Image
    >>> stream = io.BytesIO(); Image.new("RGB", (800, 600), "teal").save(stream, "JPEG")
    >>> Image.open(io.BytesIO(downscale_image(stream.getvalue(), 400))).size
    (400, 300)
    """
    data = bytes(data)
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    if max(width, height) <= max_side:
        return data
    factor = max_side / max(width, height)
    target = (max(1, round(width * factor)), max(1, round(height * factor)))
    format_ = image.format
    if format_ == "JPEG":
        image.draft(image.mode, target)  # DCT scaling: decodes at the smallest 1/k ≥ target
    image = image.resize(target, Image.LANCZOS)
    stream = io.BytesIO()
    options = {"quality": quality} if format_ == "JPEG" else {}
    image.save(stream, format=format_, **options)
    return stream.getvalue()
