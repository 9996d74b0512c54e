"""The C header is the contract: the Python side's constants, exception mapping and ctypes
signatures are checked against ``capi/ffrecord.h`` itself, so that neither can drift.

(The Go side's constants are checked against the same header by the Go tests, and the C
compiler checks the exports' signatures.)"""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ffrecord import _lib, errors
from conftest import REPO

HEADER = (REPO / "capi" / "ffrecord.h").read_text()
DEFINES = {name: int(value) for name, value in
           re.findall(r"^#define\s+FFR_(\w+)\s+(-?\d+)u?\b", HEADER, re.MULTILINE)}
STATUS = re.compile(r"OK|E_\w+")


def test_the_header_was_parsed() -> None:
    assert {"ABI_VERSION", "OK", "E_IO", "CHECK_DATA", "COMPRESS_LZ4"} <= DEFINES.keys()


@pytest.mark.parametrize("name", sorted(DEFINES))
def test_every_define_has_its_python_constant(name: str) -> None:
    home = errors if STATUS.fullmatch(name) else _lib
    assert getattr(home, name, None) == DEFINES[name], f"FFR_{name} vs {home.__name__}.{name}"


def test_every_python_status_is_in_the_header() -> None:
    python = {name for name in vars(errors) if STATUS.fullmatch(name)}
    assert python == {name for name in DEFINES if STATUS.fullmatch(name)}


def test_exception_classes_follow_the_header() -> None:
    mapping = re.findall(r"^#define\s+FFR_(E_\w+)\s+-?\d+\s*/\*.*->\s*(\w+)\s*\*/", HEADER,
                         re.MULTILINE)
    assert len(mapping) == sum(1 for name in DEFINES if name.startswith("E_"))
    for name, exception in mapping:
        assert errors.exception_for(DEFINES[name]).__name__ == exception, name


# C parameter types and the ctypes types that may stand for them.
_CTYPES = {
    "int32_t": {ctypes.c_int32}, "uint32_t": {ctypes.c_uint32}, "int64_t": {ctypes.c_int64},
    "uint64_t": {ctypes.c_uint64}, "size_t": {ctypes.c_size_t},
    "char*": {ctypes.c_char_p}, "constchar*": {ctypes.c_char_p},
    "constchar*const*": {ctypes.POINTER(ctypes.c_char_p)},
    "constvoid*const*": {ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)},
    "void*": {ctypes.c_void_p}, "constvoid*": {ctypes.c_void_p},
}


def _accepted(c_type: str) -> set:
    if c_type in _CTYPES:
        return _CTYPES[c_type]
    pointee = c_type.removeprefix("const").removesuffix("*")
    return {ctypes.c_void_p} | {ctypes.POINTER(t) for t in _CTYPES[pointee]}


def test_ctypes_signatures_follow_the_header() -> None:
    prototypes = re.findall(r"^int32_t\s+(ffr_\w+)\(([^)]*)\);", HEADER, re.MULTILINE)
    assert {name for name, _ in prototypes} == set(_lib._SIGNATURES)
    for name, params in prototypes:
        c_types = [re.sub(r"\s+", "", re.sub(r"\w+$", "", p.strip()))
                   for p in params.split(",")]
        declared = _lib._SIGNATURES[name]
        assert len(declared) == len(c_types), name
        for k, (c_type, py_type) in enumerate(zip(c_types, declared)):
            assert py_type in _accepted(c_type), f"{name} argument {k}: {c_type} as {py_type}"


_OLD_ABI = "int ffr_version(char *buf, unsigned long len) { if (len) buf[0] = 0; return 1; }"
_OTHER_ABI = "int ffr_version(char *buf, unsigned long len, int *abi) { *abi = 99; return 0; }"


@pytest.mark.parametrize("source, found", [(_OLD_ABI, 1), (_OTHER_ABI, 99)])
def test_a_library_of_another_abi_is_refused_at_load(tmp_path: Path, source: str,
                                                     found: int) -> None:
    """A stale build (ABI 1 returned its version where ABI 2 returns a status) or a library
    of any other ABI version raises a clear RuntimeError at the first call, in any process."""
    (tmp_path / "stale.c").write_text(source)
    library = tmp_path / "libstale.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(tmp_path / "stale.c")],
                   check=True, capture_output=True, timeout=60)
    code = textwrap.dedent("""
        from ffrecord import FileReader
        for attempt in range(2):
            try:
                FileReader("anything.ffr")
            except RuntimeError as exc:
                print(exc)
    """)
    env = {"FFRECORD_LIBRARY": str(library), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert f"implements C ABI version {found}" in first and "stale or mismatched" in first
    assert str(library) in first and first == second
