"""benchmarks/RESULTS.md keeps one section per benchmark script, and its summary table links only to them.

The rule: every script at the top of ``benchmarks/`` named ``bench_*.py`` (a speed or memory measurement) or
``eval_*.py`` (a quality measurement) is a benchmark, and has a section headed ``### <script name>`` with its
``**Measures:**``, ``**Command:**`` (naming the script), ``**Anchor:**`` and ``**Latest...`` paragraphs, and one
row of the summary table linking to that heading. Figures recorded once live only in this page: a section lost in
an edit is lost for good unless someone digs it out of git history, so an edit that drops one fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RESULTS = BENCHMARKS / "RESULTS.md"
SCRIPT_PATTERNS = ("bench_*.py", "eval_*.py")
SUMMARY = "## Summary"
LINK = re.compile(r"\[([^\]]+)\]\(#([^)]+)\)")
PARAGRAPHS = ("**Measures:**", "**Command:**", "**Anchor:**", "**Latest")


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation other than ``-`` and ``_`` dropped, spaces
    as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def benchmark_scripts() -> list[str]:
    return sorted(path.name for pattern in SCRIPT_PATTERNS for path in BENCHMARKS.glob(pattern))


def page() -> str:
    return RESULTS.read_text(encoding="utf-8")


def sections(text: str) -> dict[str, str]:
    """Each ``### `` section's heading and its body, up to the next heading of level 2 or 3."""
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.MULTILINE)
    return {
        heading.removeprefix("### ").strip(): body
        for heading, body in zip(parts[1::2], parts[2::2], strict=True)
        if heading.startswith("### ")
    }


def summary_links(text: str) -> list[tuple[str, str]]:
    """(link text, fragment) of every row of the summary table."""
    start = text.index(SUMMARY) + len(SUMMARY)
    end = text.index("\n## ", start)
    rows = [line for line in text[start:end].splitlines() if line.startswith("| [")]
    return [LINK.search(row).groups() for row in rows]


def test_the_rule_finds_the_benchmarks() -> None:
    # guards the glob itself: an empty list would make every test below pass
    assert len(benchmark_scripts()) >= 20


@pytest.mark.parametrize("script", benchmark_scripts())
def test_every_benchmark_script_has_a_whole_section(script: str) -> None:
    found = sections(page())
    assert script in found, f"benchmarks/RESULTS.md has no '### {script}' section"
    body = found[script]
    missing = [p for p in PARAGRAPHS if not re.search(rf"^{re.escape(p)}", body, flags=re.MULTILINE)]
    assert not missing, f"the section of {script} lacks {missing}"
    command = body[body.index("**Command:**") :].split("\n\n", 1)[0]
    assert f"benchmarks/{script}" in command, f"the command of {script}'s section runs another script"


def test_every_section_is_a_benchmark_script() -> None:
    extra = sorted(set(sections(page())) - set(benchmark_scripts()))
    assert not extra, f"sections without a script in benchmarks/: {extra}"


def test_every_summary_link_has_a_target_heading() -> None:
    text = page()
    targets = {github_anchor(heading) for heading in sections(text)}
    dangling = [(label, fragment) for label, fragment in summary_links(text) if fragment not in targets]
    assert not dangling, f"summary links without a heading: {dangling}"


def test_the_summary_links_each_benchmark_once_by_its_name() -> None:
    links = summary_links(page())
    assert all(github_anchor(label) == fragment for label, fragment in links), links
    labels = [label for label, _ in links]
    assert sorted(labels) == benchmark_scripts()


def test_github_anchor() -> None:
    assert github_anchor("bench_near_dup_service.py") == "bench_near_dup_servicepy"
    assert github_anchor("Code location") == "code-location"
