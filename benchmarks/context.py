"""Where and on what a run measures: the machine, its page cache, the samples, the contenders.

``BenchContext`` is the state every workload gets (configuration, data folder, contenders,
results); the functions beside it make the samples and index batches every contender reads,
put files in the page cache (warm runs) or evict them (cold runs: as root the whole cache is
dropped through ``/proc/sys/vm/drop_caches``, which also drops inodes and dentries, so the
folder-of-files loader pays its metadata reads too; every file is also evicted with
``posix_fadvise(DONTNEED)``, which is all that works without root), and collect the facts
about the machine printed and stored with the results.

Example:
    >>> eviction_method() in ("drop_caches", "fadvise")
    True
    >>> machine_facts(".")["cores"] >= 1
    True
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .config import BenchConfig, SizeSpec
from .contenders import Contender
from .contenders.ffrecord_store import FFRecordContender
from .contenders.python_loop import write_tiny_samples
from .results import Results


def make_samples(spec: SizeSpec, seed: int = 0) -> list[bytes]:
    """``spec.count`` random (incompressible) samples of ``spec.size`` bytes.

    Example:
        >>> [len(s) for s in make_samples(SizeSpec(3, 2))]
        [3, 3]
    """
    blob = np.random.default_rng(seed).bytes(spec.size * spec.count)
    return [blob[i * spec.size : (i + 1) * spec.size] for i in range(spec.count)]


def index_batches(n: int, batch: int, count: int, seed: int) -> list[np.ndarray]:
    """``count`` batches of uniform random indices in [0, n), the same for every contender."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, n, size=batch, dtype=np.int64) for _ in range(count)]


@dataclass
class BenchContext:
    """Everything a workload needs; workloads add their cells to ``results``."""

    config: BenchConfig
    data_dir: Path
    contenders: list[Contender]
    results: Results = field(default_factory=Results)
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)
    samples: dict[int, list[bytes]] = field(default_factory=dict)

    def store_dir(self, contender: Contender, size: int) -> Path:
        """Where ``contender``'s dataset of ``size``-byte samples lives."""
        return self.data_dir / contender.store_name / f"{size}B"

    def scratch_dir(self, name: str) -> Path:
        """A fresh empty directory under the data directory."""
        path = self.data_dir / "scratch" / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def with_ffrecord_variant(self, variant: str) -> list[Contender]:
        """The contenders with ffrecord's ``variant`` right after ffrecord (when it runs)."""
        ffrecord = self.contender("ffrecord")
        if ffrecord is None:
            return self.contenders
        after = self.contenders.index(ffrecord) + 1
        return [*self.contenders[:after], FFRecordContender(variant), *self.contenders[after:]]

    def one_byte_samples_file(self) -> Path:
        """A file of ``config.open_samples`` one-byte samples, written once per run (the open
        and resume workloads share it; it goes with the data folder)."""
        path = self.data_dir / "shared" / f"{self.config.open_samples}-one-byte-samples.ffr"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")  # a failed write must not be reused
            write_tiny_samples(str(partial), self.config.open_samples)
            partial.rename(path)
        return path

    def contender(self, name: str) -> Contender | None:
        return next((c for c in self.contenders if c.name == name), None)

    def spec(self, size: int) -> SizeSpec:
        return next(s for s in self.config.datasets if s.size == size)

    def __repr__(self) -> str:
        return f"BenchContext({self.config.mode}, {self.data_dir}, {self.contenders})"


# -- the page cache ----------------------------------------------------------------------

_DROP_CACHES = "/proc/sys/vm/drop_caches"


def read_through(paths: list[str]) -> None:
    """Reads files once so that they sit in the page cache (warm runs)."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(8 << 20):
                pass


def read_tree(root: Path) -> None:
    """``read_through`` every file under the directory ``root``."""
    read_through([str(path) for path in sorted(Path(root).rglob("*")) if path.is_file()])


def eviction_method() -> str:
    """Names the strongest eviction available to this process."""
    return "drop_caches" if os.access(_DROP_CACHES, os.W_OK) else "fadvise"


def evict(paths: Iterable[str]) -> None:
    """Makes the next reads of ``paths`` come from the disk."""
    os.sync()  # dirty pages cannot be dropped
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if eviction_method() == "drop_caches":
        with open(_DROP_CACHES, "w") as f:
            f.write("3\n")


# -- the machine ------------------------------------------------------------------------


def _first_line_with(path: str, prefix: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _mount_of(path: str) -> tuple[str, str]:
    """Returns (device, filesystem type) of the mount holding ``path``."""
    best = ("", "unknown", "unknown")
    target = os.path.realpath(path)
    for line in Path("/proc/self/mounts").read_text().splitlines():
        device, mount_point, fs_type = line.split()[:3]
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best[0]):
            best = (mount_point, device, fs_type)
    return best[1], best[2]


def _disk_description(device: str) -> str:
    name = Path(device).name
    block = Path("/sys/class/block") / name
    if not block.exists():
        return device
    disk = block.resolve().parent if (block / "partition").exists() else block.resolve()
    queue = disk / "queue"
    rotational = (queue / "rotational").read_text().strip() if queue.exists() else "?"
    size_gib = int((disk / "size").read_text()) * 512 / 2**30
    return f"{device} ({disk.name}, {size_gib:.0f} GiB, rotational flag {rotational})"


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _fio_version() -> str | None:
    if shutil.which("fio") is None:
        return None
    return subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()


def machine_facts(data_dir: str) -> dict:
    """Collects cores, CPU model, kernel, memory, the data disk and package versions."""
    device, fs_type = _mount_of(data_dir)
    mem_kib = int(_first_line_with("/proc/meminfo", "MemTotal").split()[0])
    return {
        "cores": os.cpu_count(),
        # other work on the machine during the run makes figures noisy: recorded at the start
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpu": _first_line_with("/proc/cpuinfo", "model name"),
        "kernel": platform.release(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "disk": _disk_description(device),
        "filesystem": fs_type,
        "python": sys.version.split()[0],
        "root": os.geteuid() == 0,
        "fio": _fio_version(),
        "packages": {
            name: _version(name) for name in ("numpy", "torch", "lmdb", "h5py", "matplotlib",
                                              "granular", "array-record", "pybind11")
        },
    }
