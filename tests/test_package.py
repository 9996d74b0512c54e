"""The package: import is cheap and lazy, version and exports, ``python -m ffrecord``."""

from __future__ import annotations

from pathlib import Path

import ffrecord
from ffrecord import _lib
from ffr_helpers import run_python


def test_import_loads_no_native_code_and_no_torch() -> None:
    out = run_python(
        "import ffrecord, sys\n"
        "from ffrecord import _lib\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(_lib.loaded() is None, 'libffrecord' in maps, 'torch' in sys.modules)")
    assert out == "True False False"


def test_version_is_the_library_version() -> None:
    assert ffrecord.__version__ == _lib.version()
    assert ffrecord.__version__.count(".") >= 2


def test_public_names_and_lazy_exports() -> None:
    for name in ffrecord.__all__:
        assert getattr(ffrecord, name) is not None
    from ffrecord.packed import PackedFolder, pack_folder

    assert ffrecord.pack_folder is pack_folder and ffrecord.PackedFolder is PackedFolder
    assert "pack_folder" in dir(ffrecord)


def test_python_dash_m_runs_the_command_line() -> None:
    out = run_python("import runpy, sys\n"
                     "sys.argv = ['ffrecord', '--version']\n"
                     "try:\n    runpy.run_module('ffrecord', run_name='__main__')\n"
                     "except SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n")
    assert ffrecord.__version__ in out


def test_the_library_ships_inside_the_package() -> None:
    assert Path(ffrecord.__file__).with_name("libffrecord.so").is_file()
    assert (Path(ffrecord.__file__).parent / "py.typed").is_file()


def test_docstring_examples_run() -> None:
    import doctest

    from ffrecord import (_batch, _buffers, _counters, _file_info, _handle, _indices, _integers, _paths,
                          _processes, _remote, _verification, errors, fileio, reader, writer)

    for module in (ffrecord, _lib, _batch, _buffers, _counters, _file_info, _handle, _indices, _integers, _paths,
                   _processes, _remote, _verification, errors, fileio, reader, writer):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__


def test_import_does_not_import_ray() -> None:
    out = run_python("import ffrecord, ffrecord.dataset, sys\nprint('ray' in sys.modules)")
    assert out == "False"
