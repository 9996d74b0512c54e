"""Image pipelines for structured datasets: JPEG decoding fused with the crop, uint8 batches.

``RandomResizedCrop`` (training) and ``CenterCrop`` (validation) replace a datapoint's image
field with a ``3 × size × size`` uint8 tensor, the same crops as torchvision's transforms,
decoding only what the crop needs (see ``docs/vision.md``). Needs the ``vision`` extra:
``pip install "ffrecord[vision]"`` (simplejpeg, OpenCV, Pillow, torch).

Read image fields as their encoded bytes (``ENCODED``) so that decoding happens here:

>>> from ffrecord.vision import ENCODED, RandomResizedCrop
>>> sorted(ENCODED)
['bytes', 'jpg', 'png']
"""

from __future__ import annotations

try:
    import cv2  # noqa: F401
    import simplejpeg  # noqa: F401
    import torch  # noqa: F401
    from PIL import Image  # noqa: F401
except ImportError as exc:
    raise ImportError(f'ffrecord.vision needs {exc.name}: pip install "ffrecord[vision]"') from exc

from .images import dct_factor, downscale_image
from .transforms import CenterCrop, RandomResizedCrop

# Decoders for DatasetReader(..., decoders=ENCODED): image fields as views of their stored
# bytes, decoded by the transforms rather than by the reader's Pillow codec.
ENCODED = {"jpg": memoryview, "png": memoryview, "bytes": memoryview}

__all__ = ["ENCODED", "CenterCrop", "RandomResizedCrop", "dct_factor", "downscale_image"]
