"""Shared fixtures: the golden files.

The deadline for every test is pytest's ``faulthandler_timeout`` with
``faulthandler_exit_on_timeout`` (pyproject.toml): a call blocked in C, where no Python signal
handler runs, still ends the run with every thread's stack instead of hanging CI.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def golden_dir() -> Path | None:
    """``$FFRECORD_GOLDEN``, else ``shared/golden`` beside the repository."""
    override = os.environ.get("FFRECORD_GOLDEN")
    folder = Path(override) if override else REPO.parent / "shared" / "golden"
    return folder if (folder / "MANIFEST.json").is_file() else None


def pytest_report_header(config: pytest.Config) -> list[str]:
    import ffrecord

    return [f"ffrecord {ffrecord.__version__} from {Path(ffrecord.__file__).parent}",
            f"golden files: {golden_dir() or 'not found'}"]


@pytest.fixture(scope="session")
def golden() -> Path:
    folder = golden_dir()
    if folder is None:
        if os.environ.get("CI"):
            pytest.fail("golden files not found: shared/golden must sit beside the repository")
        pytest.skip("golden files not found (set FFRECORD_GOLDEN or put shared/ beside the repo)")
    return folder


@pytest.fixture(scope="module")
def ray_garbage_collected() -> Iterator[None]:
    """Collects garbage when the module ends, in the suite's process: Ray's gRPC clients left
    in reference cycles segfault a forked child whose collector frees them (the children of
    later tests that the stock DataLoader or ``multiprocessing`` fork without freezing the
    suite's objects first, as ffrecord does)."""
    yield
    gc.collect()
