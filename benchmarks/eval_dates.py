"""Score topicmap's publication dates (topicmap.web.dates.guess_date) in two halves, next to htmldate alone.

    .venv/bin/python benchmarks/eval_dates.py [--data DIR] [--before GIT_REV] [--verbose]

Cases:
- date_guesser: the cases of Media Cloud's date_guesser test suite (tests/date_cases.py): dates in URL paths
  in its forms, impossible dates, og:image against the article URL, undateable URLs. A hit is the expected
  day, or no date where none is expected; on a year-month case the guess must also say in its method that
  only the month is known.
- pages: every real page of the news-page corpus with an expected date (tests/shared_data.py:
  expected.jsonl; Media Cloud's htmldate set with human-annotated days, goose3/newspaper4k fixtures). A hit
  is the page's own calendar day (its UTC offset kept, as eval_extraction.py counts it). Skipped when the
  corpus is absent.

Halves, fixed before any rule was written: a date_guesser case by the first byte of sha256(case name), a page
by eval_extraction.py's site rule (sha256 of the URL's host), even: tuning, odd: held-out. Rules may be
written while looking at tuning failures (``--verbose`` lists only those); the held-out half is only scored.

Systems: topicmap's guess_date; ``--before REV``: the same function as committed at a git revision (read with
``git show``, loaded beside the current one, so before and after are scored in one run); the anchor: htmldate's
``find_date`` with the page's URL, in the window topicmap accepts (2008 to now).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import htmldate  # noqa: E402
from eval_extraction import expected_day, load_pages, module_at_revision, part_of  # noqa: E402

from tests.date_cases import DATE_GUESSER_CASES  # noqa: E402
from tests.shared_data import NEWS_HTML  # noqa: E402
from topicmap.web import dates as dates_module  # noqa: E402

HALVES = ("tuning", "held-out")
PAGE_HALF = {"develop": "tuning", "measure": "held-out"}


@dataclass(frozen=True)
class Item:
    """One scored case: what goes in, what should come out, and which half it is in."""

    source: str  # "date_guesser" or "pages"
    name: str
    url: str | None
    html: str | bytes
    expected: date | None
    month_only: bool
    half: str


@dataclass(frozen=True)
class Answer:
    day: date | None
    method: str | None


def items(data_dir: Path) -> list[Item]:
    found = [
        Item("date_guesser", case.name, case.url, case.html, case.expected, case.month_only, case.half)
        for case in DATE_GUESSER_CASES
    ]
    if (data_dir / "expected.jsonl").exists():
        for page in load_pages(data_dir):
            if page.expected.get("date"):
                expected = expected_day(page.expected["date"])
                found.append(
                    Item("pages", page.file, page.url, page.html, expected, False, PAGE_HALF[part_of(page)])
                )
    return found


def topicmap_system(module: ModuleType) -> Callable[[Item], Answer]:
    def run(item: Item) -> Answer:
        guess = module.guess_date(item.html, item.url)
        return Answer(guess.day, guess.method)

    return run


def htmldate_system(item: Item) -> Answer:
    """htmldate alone, as topicmap calls it but without topicmap's own steps."""
    if not item.html:
        return Answer(None, None)
    try:
        found = htmldate.find_date(
            item.html,
            url=item.url or None,
            original_date=True,
            extensive_search=False,
            min_date="2008-01-01",
            max_date=datetime.now(UTC).strftime("%Y-%m-%d"),
        )
    except Exception:  # noqa: BLE001 - the anchor may fail on a page; that is a miss, not a crash
        return Answer(None, None)
    return Answer(date.fromisoformat(found), "htmldate") if found else Answer(None, None)


def is_hit(item: Item, answer: Answer) -> bool:
    if answer.day != item.expected:
        return False
    # a day-less date must say so: the 15th alone would pass for a known day
    return not item.month_only or "month" in (answer.method or "")


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--data", type=Path, default=NEWS_HTML)
    arguments.add_argument("--before", metavar="GIT_REV", help="also score dates.py as committed at GIT_REV")
    arguments.add_argument("--verbose", action="store_true", help="list the tuning-half misses of topicmap")
    options = arguments.parse_args(argv)

    systems: dict[str, Callable[[Item], Answer]] = {}
    if options.before:
        systems[f"topicmap at {options.before}"] = topicmap_system(
            module_at_revision(options.before, "topicmap/web/dates.py")
        )
    systems["topicmap (working tree)"] = topicmap_system(dates_module)
    systems["htmldate.find_date (anchor)"] = htmldate_system

    cases = items(options.data)
    if not any(item.source == "pages" for item in cases):
        print(f"(no news-page corpus at {options.data}: date_guesser cases only)")
    answers = {name: [system(item) for item in cases] for name, system in systems.items()}

    groups = [(source, half) for source in ("date_guesser", "pages") for half in HALVES]
    counts = {group: sum(1 for item in cases if (item.source, item.half) == group) for group in groups}
    groups = [group for group in groups if counts[group]]
    header = " | ".join(f"{source} {half} ({counts[source, half]})" for source, half in groups)
    print(f"| system | {header} | all ({len(cases)}) |")
    print("|---" * (len(groups) + 2) + "|")
    for name, given in answers.items():
        hits = [is_hit(item, answer) for item, answer in zip(cases, given, strict=True)]
        cells = [
            f"{sum(h for h, i in zip(hits, cases, strict=True) if (i.source, i.half) == group)}/{counts[group]}"
            for group in groups
        ]
        print(f"| {name} | {' | '.join(cells)} | {sum(hits)}/{len(cases)} |")

    if options.verbose:
        print("\nTopicmap's misses in the tuning half (the held-out half is only scored):")
        for item, answer in zip(cases, answers["topicmap (working tree)"], strict=True):
            if item.half == "tuning" and not is_hit(item, answer):
                print(
                    f"- {item.source} {item.name}: {answer.day} by {answer.method!r}, expected {item.expected}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
