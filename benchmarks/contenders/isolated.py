"""Measurements in a fresh interpreter: ``call("module:function", contender, *args)``.

The reference implementation is also a package called ``ffrecord``, so it can only run in
a process of its own (``PYTHONPATH=<its build>``); goals that speak of "a fresh process"
run every contender that way. The child imports ``module``, rebuilds the contender by name,
calls ``function(contender, *args)`` and prints its JSON result as the last line.

Example:
    >>> call("benchmarks.contenders.isolated:echo", None, 1, "a")
    [1, 'a']
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..config import REPO

TIMEOUT_S = 600


def child_env(first: str | None = None) -> dict[str, str]:
    """This interpreter's import path for a child, with ``first`` ahead of everything."""
    paths = [first] if first else []
    paths += [str(REPO)] + [p for p in sys.path if p and os.path.isdir(p)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def call(target: str, contender: Any, *args: Any) -> Any:
    """Runs ``target(contender, *args)`` in a fresh interpreter; returns its result.

    ``contender`` (or None) travels by name; its ``pythonpath`` (the reference's build)
    goes first on the child's import path. Arguments and result are JSON.
    """
    name = None if contender is None else contender.name
    job = json.dumps({"target": target, "contender": name, "args": [_plain(a) for a in args]})
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.contenders.isolated", job], capture_output=True, text=True,
        env=child_env(getattr(contender, "pythonpath", None)), cwd=REPO, timeout=TIMEOUT_S,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{target} for {name} failed in its own process:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def echo(contender: Any, *args: Any) -> list:
    """What the doctest above runs: the arguments back."""
    return list(args)


def runner(contender: Any, target: str, *args: Any):
    """A zero-argument callable measuring ``target(contender, *args)``: in a fresh process
    for an isolated contender (the reference), else in this one."""
    if getattr(contender, "isolated", False):
        return lambda: call(target, contender, *args)
    func = _resolve(target)
    return lambda: func(contender, *args)


def _resolve(target: str) -> Any:
    module, function = target.split(":")
    return getattr(importlib.import_module(module), function)


def _main(job_text: str) -> None:
    job = json.loads(job_text)
    func = _resolve(job["target"])
    contender = None
    if job["contender"] is not None:
        from . import contender_named

        contender = contender_named(job["contender"])
    print(json.dumps(func(contender, *job["args"])))


if __name__ == "__main__":
    _main(sys.argv[1])
