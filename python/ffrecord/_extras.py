"""Optional packages, each brought by an extra of ours: importing one that is missing raises
an ``ImportError`` (``MissingDependencyError``) that says what to install.

>>> require("json", "convert").__name__
'json'
>>> require("no_such_module_anywhere", "torch", "ffrecord.torch")
Traceback (most recent call last):
...
ffrecord.dataset.errors.MissingDependencyError: ffrecord.torch needs no_such_module_anywhere: pip install "ffrecord[torch]"
"""

from __future__ import annotations

import importlib
from typing import Any


def require(module: str, extra: str, what: str = "this", package: str | None = None) -> Any:
    """``import module``, or ``MissingDependencyError`` naming ``pip install "ffrecord[extra]"``
    (and ``package``, the one to install alone, when it differs from the module's name)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        from .dataset.errors import MissingDependencyError

        name = package or (exc.name or module).split(".")[0]
        raise MissingDependencyError(f'{what} needs {name}: pip install "ffrecord[{extra}]"') from exc
