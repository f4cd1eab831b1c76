"""docs/extending.md's examples run: a focus kind, an archive source (a drop format) and a stage, each added as the
page says and used through the project's own paths."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from topicmap.archive.drop_formats import DROP_FORMATS
from topicmap.topics.focus_kinds import FOCUS_KINDS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_the_page_has_an_example_of_each_extension() -> None:
    text = PAGE.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == ["A focus kind", "An archive source", "A stage"]
    assert len(python_blocks(text)) >= 6


@pytest.fixture
def registries_restored() -> Iterator[None]:
    """The examples register their kind and format in the project's registries: undone after the test."""
    kinds, formats = dict(FOCUS_KINDS), list(DROP_FORMATS)
    yield
    FOCUS_KINDS.clear()
    FOCUS_KINDS.update(kinds)
    DROP_FORMATS[:] = formats


def test_the_examples_of_docs_extending_run(
    registries_restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one module for the page, as if its blocks were one file (dataclasses look their module up)
    module = types.ModuleType("docs_extending")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for number, block in enumerate(python_blocks(PAGE.read_text(encoding="utf-8")), start=1):
        code = compile(block, f"{PAGE.name} (python block {number})", "exec", dont_inherit=True)
        exec(code, module.__dict__)  # the page's own examples
    assert "media_ids" in FOCUS_KINDS and DROP_FORMATS[-1].name == "JSON lines"
