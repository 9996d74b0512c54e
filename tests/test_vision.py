"""ffrecord.vision: the crops are torchvision's, the pixels PIL's up to interpolation, bad
images give a clear error naming the datapoint, and batches cross DataLoader workers."""

from __future__ import annotations

import functools
import io
import math
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
vision = pytest.importorskip("ffrecord.vision")
transforms = pytest.importorskip("torchvision.transforms")
F = pytest.importorskip("torchvision.transforms.functional")

from ffrecord.dataset import CodecError, DatasetReader, DatasetWriter  # noqa: E402
from ffrecord.torch import DataLoader, StructuredDataset  # noqa: E402
from ffrecord.vision import crops, images  # noqa: E402

DRAWS = 10_000


def photo(width: int, height: int, seed: int = 0) -> np.ndarray:
    """Smooth colour waves plus grain: compresses like a photograph, unlike pure noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.zeros((height, width, 3), np.float32)
    for c in range(3):
        for _ in range(4):
            fx, fy = rng.uniform(0.005, 0.05, 2)
            img[..., c] += rng.uniform(15, 40) * np.sin(x * fx + y * fy + rng.uniform(0, 6))
    img += rng.normal(0, 6, img.shape)
    return np.clip(img + 128, 0, 255).astype(np.uint8)


def encode(image: Image.Image, format_: str = "JPEG", **options) -> bytes:
    stream = io.BytesIO()
    image.save(stream, format=format_, **options)
    return stream.getvalue()


@functools.lru_cache(maxsize=None)
def jpeg(width: int, height: int, seed: int = 0) -> bytes:
    return encode(Image.fromarray(photo(width, height, seed)), quality=92)


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample Kolmogorov–Smirnov statistic: the largest gap between the ECDFs."""
    both = np.concatenate([a, b])
    gap = np.searchsorted(np.sort(a), both, "right") / len(a) - np.searchsorted(np.sort(b), both, "right") / len(b)
    return float(np.abs(gap).max())


# ---- the crops ---------------------------------------------------------------------------

@pytest.mark.parametrize("height,width,scale,ratio", [
    (375, 500, (0.08, 1.0), (3 / 4, 4 / 3)),
    (150, 450, (0.08, 1.0), (3 / 4, 4 / 3)),  # a panorama: some draws fall back to the centre
    (300, 300, (0.5, 0.9), (0.5, 2.0)),
])
def test_crop_distribution_matches_torchvision(height, width, scale, ratio) -> None:
    rng = np.random.default_rng(1)
    ours = np.array([crops.random_resized_crop_box(height, width, scale, ratio, rng) for _ in range(DRAWS)])
    torch.manual_seed(1)
    blank = Image.new("RGB", (width, height))
    theirs = np.array([transforms.RandomResizedCrop.get_params(blank, list(scale), list(ratio))
                       for _ in range(DRAWS)])
    # 1.95·sqrt(2/n) is the KS bound at α = 0.001: 0.028 for n = 10,000
    bound = 1.95 * math.sqrt(2 / DRAWS)
    for name, of in [("area", lambda b: b[:, 2] * b[:, 3] / (height * width)),
                     ("aspect ratio", lambda b: b[:, 3] / b[:, 2]),
                     ("top", lambda b: b[:, 0] / height), ("left", lambda b: b[:, 1] / width)]:
        assert ks_statistic(of(ours), of(theirs)) < bound, name
    assert (ours[:, 2:] >= 1).all() and (ours[:, 0] + ours[:, 2] <= height).all()
    assert (ours[:, 1] + ours[:, 3] <= width).all()


def test_fallback_is_torchvision_central_crop() -> None:
    # scale above 1 never fits: ten tries then the central crop, whose ratio is clamped
    never = (5.0, 6.0)
    for height, width in [(10, 1000), (1000, 10), (200, 220)]:
        theirs = transforms.RandomResizedCrop.get_params(Image.new("L", (width, height)), list(never), [3 / 4, 4 / 3])
        assert crops.random_resized_crop_box(height, width, never, (3 / 4, 4 / 3), np.random.default_rng()) == theirs


def test_center_crop_box_is_resize_then_center_crop() -> None:
    for height, width in [(375, 500), (500, 375), (256, 256), (1, 300)]:
        top, left, h, w = crops.center_crop_box(height, width, 224, 256)
        # the box scaled by the resize is exactly the 224-pixel crop torchvision takes
        resized = F.resize(Image.new("L", (width, height)), 256)
        scale_y, scale_x = resized.height / height, resized.width / width
        assert (round(h * scale_y, 6), round(w * scale_x, 6)) == (224, 224)
        assert top * scale_y == pytest.approx(int(round((resized.height - 224) / 2.0)))
        assert left * scale_x == pytest.approx(int(round((resized.width - 224) / 2.0)))


def test_dct_factor() -> None:
    assert [images.dct_factor(s, s, 224) for s in (100, 447, 448, 895, 896, 1792, 5000)] == [1, 1, 2, 2, 4, 8, 8]
    assert images.dct_factor(2000, 300, 224) == 1  # both sides must allow it


# ---- the pixels --------------------------------------------------------------------------

def pil_path(data: bytes, box, size: int) -> np.ndarray:
    """torchvision's PIL path on the same box: decode, crop, bilinear resize, CHW uint8."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    top, left, h, w = box
    return np.asarray(F.resized_crop(image, top, left, h, w, [size, size])).transpose(2, 0, 1)


def render(data: bytes, box, size: int, flip: bool = False) -> np.ndarray:
    out = np.empty((3, size, size), np.uint8)
    images.open_image(data).render_box(box, size, flip, out)
    return out


def mad(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


@pytest.mark.parametrize("box,bound", [
    ((100, 200, 300, 240), 1.0),   # under twice the output: full decode, bilinear
    ((0, 0, 900, 1200), 1.5),      # 4× the output: decoded at 1/4 in the DCT domain
    ((50, 80, 500, 460), 1.5),     # 2×: decoded at 1/2
    ((7, 9, 20, 30), 0.5),         # upscaled
])
def test_pixels_match_pil_up_to_interpolation(box, bound) -> None:
    data = jpeg(1200, 900)
    ours = render(data, box, 224)
    assert mad(ours, pil_path(data, box, 224)) < bound
    assert np.array_equal(render(data, box, 224, flip=True), ours[:, :, ::-1])


def test_transforms_match_torchvision() -> None:
    data = jpeg(500, 375, seed=3)
    sample = vision.CenterCrop(224)({"image": data, "label": 1})
    expected = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])(
        Image.open(io.BytesIO(data)).convert("RGB"))
    assert sample["label"] == 1 and sample["image"].dtype == torch.uint8
    assert mad(sample["image"].numpy(), np.asarray(expected).transpose(2, 0, 1)) < 2.0

    train = vision.RandomResizedCrop(64, field="jpg")
    rng = np.random.default_rng(42)
    box = crops.random_resized_crop_box(375, 500, train.scale, train.ratio, rng)
    flip = rng.random() < 0.5
    expected = pil_path(data, box, 64)
    got = train({"jpg": data}, seed=42)["jpg"].numpy()
    assert mad(got, expected[:, :, ::-1] if flip else expected) < 2.0


def test_seeds_fix_the_crops_threads_change_nothing() -> None:
    datapoints = [{"image": jpeg(320, 240, seed=k), "k": k} for k in range(6)]
    train = vision.RandomResizedCrop(48, threads=3)
    one_by_one = torch.stack([train(d, seed=100 + k)["image"] for k, d in enumerate(datapoints)])
    batch = train.transform_batch(datapoints, seeds=range(100, 106))
    assert [d["k"] for d in batch] == list(range(6))
    stacked = torch.stack([d["image"] for d in batch])
    assert torch.equal(stacked, one_by_one)
    assert batch[0]["image"].untyped_storage().data_ptr() == batch[5]["image"].untyped_storage().data_ptr()
    other = torch.stack([d["image"] for d in train.transform_batch(datapoints, seeds=range(6))])
    assert not torch.equal(other, stacked)
    generator = train(datapoints[0], seed=np.random.default_rng(100))["image"]
    assert torch.equal(generator, one_by_one[0])
    torch.manual_seed(5)  # no seed: drawn from torch's generator, as torchvision's are
    first = train.transform_batch(datapoints)
    torch.manual_seed(5)
    assert all(torch.equal(a["image"], b["image"]) for a, b in zip(first, train.transform_batch(datapoints)))
    class Indices(list):  # a loader's batch of indices carrying per-datapoint seeds
        seeds = [100 + k for k in range(6)]

    carried = train.transform_batch(datapoints, Indices(range(6)))
    assert torch.equal(torch.stack([d["image"] for d in carried]), one_by_one)
    clone = pickle.loads(pickle.dumps(train))
    assert repr(clone) == repr(train) and torch.equal(clone(datapoints[1], seed=101)["image"], one_by_one[1])


# ---- bad and unusual images ------------------------------------------------------------------

def three_channels(value, size: int = 32) -> np.ndarray:
    return vision.CenterCrop(size, resize=size)({"image": value})["image"].numpy()


def test_unusual_images_give_the_right_rgb() -> None:
    rgb = photo(120, 90)
    # grey JPEG: the three channels are the grey ones
    grey = Image.fromarray(rgb[..., 0])
    out = three_channels(encode(grey))
    assert np.array_equal(out[0], out[1]) and np.array_equal(out[1], out[2])
    # CMYK JPEG (libjpeg-turbo cannot convert it: Pillow's path), as torchvision's loader sees it
    cmyk = encode(Image.fromarray(rgb).convert("CMYK"), quality=95)
    expected = np.asarray(F.center_crop(F.resize(Image.open(io.BytesIO(cmyk)).convert("RGB"), 32), 32))
    assert mad(three_channels(cmyk), expected.transpose(2, 0, 1)) < 1.0
    # PNG with alpha: alpha dropped, as convert("RGB") does
    rgba = np.dstack([rgb, np.full(rgb.shape[:2], 7, np.uint8)])
    png = encode(Image.fromarray(rgba, "RGBA"), "PNG")
    expected = np.asarray(F.center_crop(F.resize(Image.fromarray(rgb), 32), 32)).transpose(2, 0, 1)
    assert mad(three_channels(png), expected) < 1.0  # one resize instead of two
    # palette PNG and an already-decoded array
    assert three_channels(encode(Image.fromarray(rgb).convert("P"), "PNG")).shape == (3, 32, 32)
    assert mad(three_channels(rgb), expected) < 1.0
    # 1×1 and a 20,000-pixel side
    dot = three_channels(encode(Image.new("RGB", (1, 1), (200, 10, 30)), quality=100), 8)
    assert np.abs(dot.reshape(3, -1).astype(int) - [[200], [10], [30]]).max() <= 3
    train = vision.RandomResizedCrop(16)
    for size in [(1, 1), (20_000, 12), (12, 20_000)]:
        value = encode(Image.new("RGB", size, (90, 90, 90)))
        assert train({"image": value}, seed=3)["image"].shape == (3, 16, 16)


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "empty", "not an image", "4 channels"])
def test_bad_images_raise_naming_the_datapoint(damage: str) -> None:
    data = jpeg(64, 48)
    value = {"truncated": data[: len(data) // 2], "corrupt": data[:600] + bytes(400) + data[1000:],
             "empty": b"", "not an image": b"hello world",
             "4 channels": np.zeros((4, 4, 4), np.uint8)}[damage]
    datapoints = [{"image": data}, {"image": value}, {"image": data}]
    with pytest.raises(CodecError, match="datapoint 17, field 'image'") as info:
        vision.RandomResizedCrop(16).transform_batch(datapoints, indices=[16, 17, 18], seeds=[1, 2, 3])
    assert info.value.index == 17 and info.value.field == "image"


def test_huge_images_are_refused_clearly(monkeypatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    big = encode(Image.new("RGB", (800, 400)))  # over the limit even at 1/8 scale
    for transform in (vision.CenterCrop(8), vision.RandomResizedCrop(8)):
        with pytest.raises(CodecError, match="DecompressionBombError"):
            transform({"image": big}, seed=1)


def test_downscale_image_keeps_format_and_small_images() -> None:
    data = jpeg(1000, 600)
    small = vision.downscale_image(data, 250)
    image = Image.open(io.BytesIO(small))
    assert (image.format, image.size) == ("JPEG", (250, 150))
    expected = np.asarray(Image.open(io.BytesIO(data)).resize((250, 150), Image.LANCZOS))
    assert mad(np.asarray(image), expected) < 3.0
    assert vision.downscale_image(data, 1000) == data
    png = encode(Image.new("RGBA", (90, 30), (1, 2, 3, 4)), "PNG")
    image = Image.open(io.BytesIO(vision.downscale_image(png, 45)))
    assert (image.format, image.mode, image.size) == ("PNG", "RGBA", (45, 15))


# ---- in a DataLoader ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("vision") / "photos"
    with DatasetWriter(path, {"image": "bytes", "label": "int"}) as writer:
        for k in range(24):
            image = jpeg(80 + k, 60, seed=k) if k != 13 else encode(Image.new("LA", (50, 70)), "PNG")
            writer.append({"image": image, "label": k})
    return str(path)


def test_dataloader_workers_get_uint8_batches(photos: str) -> None:
    data = StructuredDataset(DatasetReader(photos, decoders=vision.ENCODED), transform=vision.RandomResizedCrop(32))
    batches = list(DataLoader(data, batch_size=8, shuffle=True, seed=3, num_workers=2, timeout=60))
    assert sorted(torch.cat([b["label"] for b in batches]).tolist()) == list(range(24))
    for batch in batches:
        assert batch["image"].shape == (8, 3, 32, 32) and batch["image"].dtype == torch.uint8
    # validation: the same images whatever the order
    val = StructuredDataset(DatasetReader(photos, decoders=vision.ENCODED), transform=vision.CenterCrop(32))
    a = torch.cat([b["image"] for b in DataLoader(val, batch_size=8)])
    assert torch.equal(a[13, 0], a[13, 2]) and a.shape == (24, 3, 32, 32)


def test_bad_image_in_a_worker_is_an_error_naming_it(tmp_path) -> None:
    path = tmp_path / "bad"
    with DatasetWriter(path, {"image": "bytes"}) as writer:
        for k in range(6):
            writer.append({"image": jpeg(40, 30)[: 200 if k == 4 else None]})
    data = StructuredDataset(DatasetReader(path, decoders=vision.ENCODED), transform=vision.RandomResizedCrop(8))
    with pytest.raises(CodecError, match="datapoint 4, field 'image'"):
        list(DataLoader(data, batch_size=3, num_workers=1, timeout=60))


# ---- the module ---------------------------------------------------------------------------------

def test_docstring_examples_run() -> None:
    import doctest

    from ffrecord.vision import transforms as transforms_module

    for module in (vision, crops, images, transforms_module):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__


def test_extra_is_lazy_and_named_when_missing() -> None:
    import subprocess
    import sys

    code = ("import sys, ffrecord, ffrecord.dataset\n"
            "print(any(m in sys.modules for m in ('cv2', 'simplejpeg', 'ffrecord.vision')))\n"
            "sys.modules['simplejpeg'] = None\n"
            "try:\n    import ffrecord.vision\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines() == ["False", 'ffrecord.vision needs simplejpeg: pip install "ffrecord[vision]"'], out.stderr


def test_benchmark_runs_on_a_few_images(tmp_path) -> None:
    """benchmarks/vision.py's code paths, on 20 images (no timing asserted)."""
    import sys

    from conftest import REPO

    sys.path.insert(0, str(REPO))
    from benchmarks import vision as bench

    root, dataset = tmp_path / "images", tmp_path / "images.ffds"
    bench.make_images(root, 20)
    bench.convert(root, dataset)
    assert sorted(p.name for p in root.iterdir()) == [f"class_{k}" for k in range(bench.CLASSES)]
    for contender, dtype in [("torchvision", "torch.float32"), ("ffrecord", "torch.uint8")]:
        result = bench.epoch(contender, root, dataset)
        assert (result["images"], result["dtype"]) == (20, dtype) and result["images_per_s"] > 0
    rates = bench.in_process(root, dataset, 20)
    assert set(rates) == {"torchvision", "ffrecord", "pool_speedup"} and min(rates.values()) > 0
