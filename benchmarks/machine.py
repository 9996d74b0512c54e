"""Facts about the machine a run was measured on, printed and stored with the results.

Example:
    >>> facts = machine_facts(".")
    >>> facts["cores"] >= 1
    True
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path


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
