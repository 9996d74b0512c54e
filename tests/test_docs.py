"""Every fenced ``python`` block of the documentation (README.md, docs/*.md,
benchmarks/README.md) runs, each on its own, in a scratch directory (its working directory,
and where ``tempfile`` puts what the example makes). Blocks that are not meant to run are
fenced without a language."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from conftest import REPO
from ffr_helpers import deadline

_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

pytestmark = pytest.mark.usefixtures("ray_garbage_collected")  # docs/ray.md runs Ray here


DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "README.md"]


def doc_blocks() -> list:
    return [pytest.param(block, id=f"{doc.relative_to(REPO)}:{n}")
            for doc in DOCS
            for n, block in enumerate(_BLOCK.findall(doc.read_text()), 1)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_relative_links_resolve(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
        assert (doc.parent / target).exists(), f"{doc.relative_to(REPO)} links to missing {target}"


@pytest.mark.parametrize("code", doc_blocks())
def test_doc_example_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with deadline(60):
        exec(compile(code, "<doc>", "exec"), {"__name__": "__doc_example__"})
