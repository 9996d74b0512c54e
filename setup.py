"""Builds ``libffrecord.so`` from the Go sources and ships it inside the ``ffrecord`` package.

Everything declarative is in ``pyproject.toml``; this file adds the one build step setuptools
cannot express: ``go build -buildmode=c-shared ./capi``. The library's version (the constant
``Version`` in ``capi/internal/abi/library.go``) is the single source of the package version;
the build writes it to ``ffrecord/_version.py`` next to the library.

    pip install .                          # build and install (Go >= 1.26 and gcc needed)
    python setup.py build_ext --inplace    # build into python/ffrecord/ for development
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
VERSION_SOURCE = ROOT / "capi" / "internal" / "abi" / "library.go"
LIBRARY = "ffrecord.libffrecord"


def go_version() -> str:
    match = re.search(r'^const Version = "([^"]+)"', VERSION_SOURCE.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no `const Version = \"…\"` in {VERSION_SOURCE}")
    return match.group(1)


class GoSharedLibrary(build_ext):
    """Builds each extension as a Go c-shared library named exactly ``<name>.so``."""

    def get_ext_filename(self, fullname: str) -> str:
        return os.path.join(*fullname.split(".")) + ".so"  # loaded by ctypes: no ABI suffix

    def build_extension(self, ext: Extension) -> None:
        go = shutil.which("go")
        if go is None:
            raise RuntimeError("building ffrecord needs the Go toolchain (>= 1.26) on PATH")
        out = Path(self.get_ext_fullpath(ext.name)).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            # -s -w: no ELF symbol table nor DWARF (a third smaller, so faster to copy when a
            # forked child loads its private copy); Go's own tracebacks keep their names.
            [go, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", str(out),
             "./capi"],
            cwd=ROOT, env={**os.environ, "CGO_ENABLED": "1"}, check=True)
        out.with_suffix(".h").unlink(missing_ok=True)  # the real header is capi/ffrecord.h
        write_version(out.parent)

    def copy_extensions_to_source(self) -> None:
        """``--inplace``: setuptools copies the library into the source tree; the version too."""
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            write_version(Path(build_py.get_package_dir(ext.name.rpartition(".")[0])))


def write_version(folder: Path) -> None:
    (folder / "_version.py").write_text(
        f'"""Written by setup.py from {VERSION_SOURCE.relative_to(ROOT)}."""\n\n'
        f'__version__ = "{go_version()}"\n')


def wheel_command() -> dict[str, type]:
    """The wheel holds no Python extension, only a library loaded by ctypes: ``py3-none``."""
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:
        try:
            from wheel.bdist_wheel import bdist_wheel
        except ImportError:
            return {}

    class PlatformWheel(bdist_wheel):
        def get_tag(self) -> tuple[str, str, str]:
            return "py3", "none", super().get_tag()[2]

    return {"bdist_wheel": PlatformWheel}


setup(
    version=go_version(),
    ext_modules=[Extension(LIBRARY, sources=[])],
    cmdclass={"build_ext": GoSharedLibrary, **wheel_command()},
)
