"""JPEG batches decoded by the GPU (nvjpeg, through ``torchvision.io.decode_jpeg``), then
cropped, resized and flipped there: the boxes and flips are the CPU path's, drawn by the
same code from the same seeds (``transforms._ImageTransform``), only the pixels are made
elsewhere.

Differences from the CPU path's pixels: nvjpeg decodes at full size (the CPU path decodes a
large box at 1/2, 1/4 or 1/8 scale in the DCT domain) and the box is resized by
antialiased bilinear interpolation (the CPU path: OpenCV's area averaging above 2×
shrinking, bilinear below): a few levels of 255 on average (``tests/test_vision_gpu.py``
states the bound).
"""

from __future__ import annotations

import torch
import torch.nn.functional

from . import images


def decode_jpegs(jpegs: list[memoryview], device: torch.device) -> list[torch.Tensor | None]:
    """Each JPEG decoded to an RGB ``3 × H × W`` uint8 tensor on ``device``, in one batched
    call; one at a time when the batch fails, None for a JPEG the device cannot decode (the
    caller decodes it on the CPU)."""
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(jpeg), dtype=torch.uint8) for jpeg in jpegs]
    if not data:
        return []
    try:
        return list(decode_jpeg(data, mode=ImageReadMode.RGB, device=device))
    except RuntimeError:  # one bad image fails the batch: find which
        decoded: list[torch.Tensor | None] = []
        for one in data:
            try:
                decoded.append(decode_jpeg(one, mode=ImageReadMode.RGB, device=device))
            except RuntimeError:
                decoded.append(None)
        return decoded


def crop_resize_into(pixels: torch.Tensor, box: images.Box, flip: bool, out: torch.Tensor) -> None:
    """Crops ``box`` (stored pixels) of ``pixels`` (``3 × H × W`` uint8, decoded at the stored
    size), resizes it to ``out``'s ``size × size`` (antialiased bilinear), flips it left to
    right when asked, and writes it into ``out`` (``3 × size × size`` uint8), on the tensors'
    device. The box's edges are rounded as the CPU path rounds them."""
    y0, y1, x0, x1 = images.box_rows_and_columns(box, 1.0, 1.0, pixels.shape[1], pixels.shape[2])
    crop = pixels[:, y0:y1, x0:x1].unsqueeze(0).float()
    resized = torch.nn.functional.interpolate(crop, size=tuple(out.shape[1:]), mode="bilinear", antialias=True,
                                              align_corners=False)[0]
    if flip:
        resized = resized.flip(-1)
    out.copy_(resized.round_().clamp_(0, 255))
