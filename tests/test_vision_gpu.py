"""``ffrecord.vision`` transforms with ``device="cuda"``: the same crops as the CPU path,
pixels within ``TOLERANCE``; PNG and CMYK images on the CPU path; no device → the CPU path.

The device path's crop and resize (``vision.gpu``) run on any device: here on the CPU, after
torchvision's CPU JPEG decoder, they are held to the bound the GPU is held to where CUDA is.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
vision = pytest.importorskip("ffrecord.vision")
torchvision_io = pytest.importorskip("torchvision.io")

from ffrecord.dataset import CodecError  # noqa: E402
from ffrecord.vision import gpu  # noqa: E402
from test_vision import encode, jpeg, photo  # noqa: E402

# Mean absolute difference per image, in levels of 255, between the device path's pixels and
# the CPU path's: full-size decoding and antialiased bilinear against DCT-scaled decoding and
# area averaging (measured on these photos: 1.8 median, 3.2 at most on the CPU), plus room for
# nvjpeg's inverse DCT rounding.
TOLERANCE = 4.0
CUDA = torch.cuda.is_available()
TRANSFORMS = [vision.RandomResizedCrop(64), vision.RandomResizedCrop(64, scale=(0.9, 1.0)), vision.CenterCrop(64)]


def photos(count: int = 12) -> list[dict]:
    return [{"image": jpeg(320 + 16 * k, 240, seed=k), "label": k} for k in range(count)]


def mean_differences(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    return (a.cpu().float() - b.cpu().float()).abs().mean(dim=(1, 2, 3)).tolist()


@pytest.mark.parametrize("transform", TRANSFORMS, ids=repr)
def test_the_device_path_crops_as_the_cpu_path_within_the_tolerance(transform) -> None:
    datapoints = photos()
    seeds = list(range(100, 112))
    cpu = torch.stack([d["image"] for d in transform.transform_batch(datapoints, seeds=seeds)])
    out = torch.empty_like(cpu)
    for k, (datapoint, seed) in enumerate(zip(datapoints, seeds)):
        image, box, flip = transform._open(datapoint, np.random.default_rng(seed), k)
        pixels = torchvision_io.decode_jpeg(torch.frombuffer(bytearray(image.jpeg), dtype=torch.uint8),
                                            mode=torchvision_io.ImageReadMode.RGB)
        gpu.crop_resize_into(pixels, box, flip, out[k])
    assert max(mean_differences(out, cpu)) <= TOLERANCE
    # another box is far outside it: the bound tells crops apart
    assert min(mean_differences(out, cpu.flip(-1))) > 2 * TOLERANCE or isinstance(transform, vision.CenterCrop)


def test_without_the_device_the_cpu_path_runs_with_one_warning(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    transform = vision.RandomResizedCrop(32, device="cuda")
    with pytest.warns(RuntimeWarning, match="decoding on the CPU .no cuda device here."):
        got = transform.transform_batch(photos(4), seeds=[1, 2, 3, 4])
    expected = vision.RandomResizedCrop(32).transform_batch(photos(4), seeds=[1, 2, 3, 4])
    assert all(torch.equal(a["image"], b["image"]) and a["image"].device.type == "cpu" for a, b in zip(got, expected))
    assert repr(transform).endswith("flip=True, device='cuda')")


def test_normalize_gives_float_batches() -> None:
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    plain = vision.CenterCrop(16).transform_batch(photos(2))
    normalised = vision.CenterCrop(16, normalize=(mean, std)).transform_batch(photos(2))
    expected = (plain[0]["image"].float() / 255 - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
    assert normalised[0]["image"].dtype == torch.float32
    assert torch.allclose(normalised[0]["image"], expected, atol=1e-5)
    with pytest.raises(ValueError, match="normalize must be .mean, std."):
        vision.CenterCrop(16, normalize=((0.5, 0.5), (1, 1, 1)))


@pytest.mark.skipif(not CUDA, reason="GPU decoding needs a CUDA device")
@pytest.mark.parametrize("transform", TRANSFORMS, ids=repr)
def test_gpu_decode_equals_the_cpu_crops_within_the_tolerance(transform) -> None:
    on_gpu = type(transform)(**{k: v for k, v in vars(transform).items() if k in ("size", "scale", "ratio", "resize")},
                             device="cuda")
    seeds = list(range(12))
    got = torch.stack([d["image"] for d in on_gpu.transform_batch(photos(), seeds=seeds)])
    cpu = torch.stack([d["image"] for d in transform.transform_batch(photos(), seeds=seeds)])
    assert got.device.type == "cuda" and got.dtype == torch.uint8
    assert max(mean_differences(got, cpu)) <= TOLERANCE


@pytest.mark.skipif(not CUDA, reason="GPU decoding needs a CUDA device")
def test_gpu_batches_with_png_cmyk_and_bad_images() -> None:
    rgb = photo(120, 90)
    png = encode(Image.fromarray(rgb), "PNG")
    cmyk = encode(Image.fromarray(rgb).convert("CMYK"), quality=95)
    datapoints = [{"image": jpeg(200, 150)}, {"image": png}, {"image": cmyk}]
    got = vision.CenterCrop(32, device="cuda").transform_batch(datapoints)
    cpu = vision.CenterCrop(32).transform_batch(datapoints)
    assert torch.equal(got[1]["image"].cpu(), cpu[1]["image"]) and torch.equal(got[2]["image"].cpu(), cpu[2]["image"])
    broken = datapoints + [{"image": jpeg(200, 150)[:300]}]
    with pytest.raises(CodecError, match="datapoint 3, field 'image'"):
        vision.CenterCrop(32, device="cuda").transform_batch(broken)
