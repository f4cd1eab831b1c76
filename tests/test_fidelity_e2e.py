"""Real news pages through the whole pipeline, scored on what was stored (tests/fidelity.py runs and scores).

The news corpus is replayed from a WARC through `topicmap topic run` (seeds, spider iterations, post-spider
stages) for a topic whose query keeps about half of the extracted stories; a second topic with a query
matching everything then stores the pages the first did not. What a researcher counts on:

- no story the full relevance test keeps on the extractor's story is missing from the topic (a page whose
  matching sentences another story of its medium and week claimed first is not a loss: Media Cloud's rule);
- no page is in the topic that the test rejects (every seed here is judged by the query);
- the stored title, text, date and language of every page are what the benchmarked extractor returns;
- the stored stories score no lower against the annotations than the extractor on the same pages.

The two topic runs take about a minute on an idle 2-core machine; the figures in full: benchmarks/eval_fidelity.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tests.fidelity import (
    FIELDS,
    MISSING_CAUSES,
    RELEVANT_SHARE_BOUNDS,
    FidelityReport,
    StoryComparison,
    describe,
    markdown,
    run_and_evaluate,
)
from tests.shared_data import NEWS_HTML, require_shared

pytestmark = pytest.mark.deployment


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> FidelityReport:
    require_shared(NEWS_HTML / "expected.jsonl")
    return run_and_evaluate(tmp_path_factory.mktemp("fidelity"))


def fail(summary: str, pages: Sequence[StoryComparison], figures: str = "") -> None:
    """Fail with the summary, one line per offending page and the figures (no repr of the whole report)."""
    lines = [summary + (":" if pages else ""), *(f"  {describe(page)}" for page in pages)]
    pytest.fail("\n".join(lines) + (f"\n\n{figures}" if figures else ""), pytrace=False)


def test_the_topic_judges_both_ways_with_excluded_words_in_raw_html(report: FidelityReport) -> None:
    """The run tests what it claims to: the query keeps about half of the pages, some relevant pages carry
    an excluded word outside their story, and every page reached the spider and got a stored story."""
    share = len(report.relevant) / report.pages
    low, high = RELEVANT_SHARE_BOUNDS
    assert low <= share <= high, (
        f"the query keeps {share:.1%} of the extracted stories, not {low:.0%}-{high:.0%}"
    )
    assert any(v.reference.excluded_word_in_raw_page for v in report.relevant), (
        "no relevant page has an excluded word in its raw HTML: the NOT clause tests nothing"
    )
    unreached = [v for v in report.verdicts if v.outcome is None or v.outcome.state is None]
    if unreached:
        fail(f"{len(unreached)} seed URLs never reached the spider", unreached)
    if report.unstored:
        fail(
            f"{len(report.unstored)} pages have no stored story even for a query matching everything",
            report.unstored,
        )


def test_no_relevant_story_is_missing_from_the_topic(report: FidelityReport) -> None:
    missing = report.missing()
    if missing:
        by_cause = ", ".join(f"{cause}: {len(report.missing(cause))}" for cause in MISSING_CAUSES)
        fail(
            f"{len(missing)} of {len(report.relevant)} pages whose extracted story matches the query are "
            f"not in the topic ({by_cause})",
            missing,
            markdown(report),
        )


def test_every_seed_is_judged_by_the_query(report: FidelityReport) -> None:
    kept = report.falsely_kept
    if kept:
        fail(
            f"{len(kept)} pages are in the topic although their extracted story does not match the query",
            kept,
        )


def test_every_page_is_stored_as_the_extractor_returns_it(report: FidelityReport) -> None:
    differing = report.differing(report.every_page)
    if differing:
        counts = ", ".join(f"{name}: {len(report.differing(report.every_page, name))}" for name in FIELDS)
        fail(
            f"{len(differing)} of {len(report.every_page)} stored stories differ from extract_story on the "
            f"same page ({counts})",
            differing,
        )


def test_stored_stories_score_no_lower_than_the_extractor(report: FidelityReport) -> None:
    below = {
        "stories of the topic": report.topic_scores.below_extractor(),
        "every page": report.every_page_scores.below_extractor(),
    }
    if any(below.values()):
        fail(f"stored stories score below extract_story on the same pages: {below}", [], markdown(report))
