"""Every fenced ``python`` block of docs/*.md runs, each on its own, in a scratch directory
(its working directory, and where ``tempfile`` puts what the example makes)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from conftest import REPO
from ffr_helpers import deadline

_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def doc_blocks() -> list:
    return [pytest.param(block, id=f"{doc.name}:{n}")
            for doc in sorted((REPO / "docs").glob("*.md"))
            for n, block in enumerate(_BLOCK.findall(doc.read_text()), 1)]


@pytest.mark.parametrize("code", doc_blocks())
def test_doc_example_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with deadline(60):
        exec(compile(code, "<doc>", "exec"), {"__name__": "__doc_example__"})
