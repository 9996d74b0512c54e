"""An image folder with one sub-folder per class (torchvision's ``ImageFolder`` layout):
``ROOT/CLASS/…/IMAGE``. Each image becomes ``{image: its bytes as stored, label: the class
number, path: its path under ROOT}``; classes are numbered in sorted order and their names
kept in the dataset's metadata (``reader.metadata["classes"]``).

Images are JPEG or PNG files, checked with Pillow (a file that is not an image is an error
naming it, as is one that is not a regular file: a FIFO, a device); the field's type is
``jpg`` or ``png`` when every file has that extension, else ``bytes``. Files with other
extensions are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._paths import PathArg
from ._base import Source, check_image, raw, require
from ._files import read_file

EXTENSIONS = {".jpg": "jpg", ".jpeg": "jpg", ".png": "png"}
UNIT = 1000  # images per unit: shards of a few hundred MB for typical photos


class ImageFolderSource(Source):
    """``ImageFolderSource("train/")``: the images under ``train/CLASS/``."""

    kind = "imagefolder"

    def __init__(self, path: PathArg) -> None:
        require("PIL.Image", "Pillow")
        self.path = Path(os.fsdecode(path))
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such directory")
        classes = sorted(p.name for p in self.path.iterdir() if p.is_dir() and not p.name.startswith("."))
        self.files: list[tuple[str, int]] = [
            (os.path.relpath(os.path.join(folder, name), self.path), label)
            for label, name_ in enumerate(classes)
            for folder, dirs, names in sorted(os.walk(self.path / name_))
            for name in sorted(names) if Path(name).suffix.lower() in EXTENSIONS]
        kinds = {EXTENSIONS[Path(name).suffix.lower()] for name, _ in self.files}
        image = kinds.pop() if len(kinds) == 1 else "bytes"
        self.spec = {"image": image, "label": "int", "path": "utf8"}
        self.encoders = {image: raw}
        self.metadata = {"classes": classes, "source": "imagefolder"}

    def units(self) -> list[str]:
        return [f"{self.path}[{start}:{min(start + UNIT, len(self.files))}]"
                for start in range(0, len(self.files), UNIT)]

    def _range(self, unit: str) -> range:
        start, stop = unit[unit.rindex("[") + 1:-1].split(":")
        return range(int(start), int(stop))

    def count(self, unit: str) -> int:
        return len(self._range(unit))

    def unit_files(self, unit: str) -> list[Path]:
        return [self.path / self.files[k][0] for k in self._range(unit)]

    def read(self, unit: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        for k in self._range(unit):
            name, label = self.files[k]
            path = self.path / name
            yield k, {"image": check_image(read_file(path), path, k), "label": label, "path": name}
