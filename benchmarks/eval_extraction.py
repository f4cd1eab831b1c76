"""Score topicmap.web.extract on real news pages, next to plain trafilatura in the same run.

    .venv/bin/python benchmarks/eval_extraction.py [--data DIR] [--repeats N] [--split develop|measure|both]
        [--verbose] [--ablations] [--before GIT_REV]

Generalise, don't tune: the pages are split by SITE into a develop part (rules may be written
while looking at its failures: ``--split develop --verbose``) and a measure part (only scored, never
inspected page by page), so no site's template is in both. A page's site is its URL's host without
"www."; the part is fixed by the first byte of sha256(site) (even: develop, odd: measure), so the split is
deterministic and does not depend on which pages exist. ``--verbose`` refuses to list measure failures.

Data: the news-page corpus (tests/shared_data.py: expected.jsonl + gzipped pages: Zyte's article-extraction benchmark with
human-annotated bodies, Media Cloud's htmldate set with human-annotated days, goose3/newspaper4k fixtures).
Skips cleanly (exit 0, message) when the folder is absent.

Systems: topicmap.web.extract (``extract_story`` on the page's bytes); the same story as the spider stores it
(``extract_story_and_links`` on the page as its fetcher decodes it: it must score the same, field for field);
trafilatura's default and fast modes; ``--before REV``: ``extract_story`` of topicmap/web/extract.py as committed
at a git revision (loaded beside the current one, its imports the working tree's), so before and after are scored
and timed in one run.

Metrics:
- text: mean token F1 over rows whose text_kind is full_body_human_annotated (lowercased \\w+ tokens,
  multiset overlap);
- title: exact match after casefold and whitespace collapse, over rows with a title;
- date: same calendar day, over rows with a date: the page's own day, as written (both the expected value
  and publish_date keep their UTC offset; "23:30+09:00" is that day in Tokyo, as readers count it);
- language: the detected language against the fixture's ``meta_lang`` (the page's own declaration, so a
  weak check: it only shows the text-first detection rarely contradicts a right declaration);
- lede kept: over rows with an expected text of any kind, whether its opening paragraph is in the text: the
  expected text's first line on rows that are only its beginning (``prefix_of_expected_text``), else its first
  paragraph of at least LEDE_MIN_WORDS words (a dek or a "click for results" line is not the lede); kept when
  its first LEDE_PROBE_WORDS words occur in that order, one after the other, in the extracted text;
- pages/s: all pages, one process, bytes in → result out, measured in process CPU time (other work
  shares the machine, which makes wall-clock time swing by 2x between passes). After one untimed warm-up
  pass, every page is run by each system in turn, `--repeats` times; per page and system the fastest run
  counts, and pages/s = pages / sum of those times.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import logging
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

from dateutil import parser as dateutil_parser

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import trafilatura  # noqa: E402

from tests.shared_data import NEWS_HTML  # noqa: E402
from topicmap.web import article_text as article_text_module  # noqa: E402
from topicmap.web import dates as dates_module  # noqa: E402
from topicmap.web import extract as extract_module  # noqa: E402
from topicmap.web.extract import decode_html  # noqa: E402
from topicmap.web.links import extract_story_and_links  # noqa: E402

DEFAULT_DATA = NEWS_HTML
TARGETS = {"text_f1": 0.965, "title": 0.85, "date": 0.92}
SPEED_TARGET = 1.5  # × trafilatura (fast), CPU time, same run
PARTS = ("develop", "measure")


@dataclass
class Page:
    file: str
    url: str
    html: bytes
    expected: dict


@dataclass
class Prediction:
    title: str | None
    text: str
    day: date | None
    language: str | None = None


def site_of(page: Page) -> str:
    host = (urlsplit(page.url).hostname or "").lower()
    return host.removeprefix("www.") or page.file.split("/")[0]


def part_of(page: Page) -> str:
    """develop or measure, by a hash of the page's site (so a site is never in both parts)."""
    return PARTS[hashlib.sha256(site_of(page).encode("utf-8")).digest()[0] % 2]


def load_pages(data_dir: Path) -> list[Page]:
    pages = []
    with open(data_dir / "expected.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            url = row.get("url") or row.get("url_raw_from_fixture") or ""
            html = gzip.decompress((data_dir / row["file"]).read_bytes())
            pages.append(Page(row["file"], url, html, row))
    return pages


def tokens(text: str | None) -> Counter:
    return Counter(re.findall(r"\w+", (text or "").lower()))


def token_f1(predicted: str | None, expected: str | None) -> float:
    got, want = tokens(predicted), tokens(expected)
    overlap = sum((got & want).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(got.values()), overlap / sum(want.values())
    return 2 * precision * recall / (precision + recall)


LEDE_MIN_WORDS = 12
LEDE_PROBE_WORDS = 8


def lede_of(expected: dict) -> list[str] | None:
    """The first LEDE_PROBE_WORDS words of the expected text's opening paragraph, or None without one."""
    text = expected.get("text") or ""
    if expected.get("text_kind") == "prefix_of_expected_text":
        paragraphs = [line for line in text.split("\n") if line.strip()][:1]
    else:
        paragraphs = [line for line in text.split("\n") if len(re.findall(r"\w+", line)) >= LEDE_MIN_WORDS]
    words = re.findall(r"\w+", paragraphs[0].lower()) if paragraphs else []
    return words[:LEDE_PROBE_WORDS] or None


def lede_kept(predicted: str | None, lede: list[str]) -> bool:
    words = re.findall(r"\w+", (predicted or "").lower())
    return any(words[i : i + len(lede)] == lede for i in range(len(words) - len(lede) + 1))


def title_key(title: str | None) -> str:
    return " ".join((title or "").casefold().split())


_US_ZONES = {"EDT": -4 * 3600, "EST": -5 * 3600, "CDT": -5 * 3600, "CST": -6 * 3600, "PDT": -7 * 3600}


def expected_day(value: str) -> date | None:
    try:
        moment = dateutil_parser.parse(value, tzinfos=_US_ZONES)
    except (ValueError, OverflowError):
        return None
    return moment.date()  # the day as written, in the page's own offset


def as_day(value: object) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()  # the page's own calendar day (its offset kept)
    if isinstance(value, date):
        return value
    try:
        return as_day(datetime.fromisoformat(str(value)))
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------------
# systems


def extractor_system(module: ModuleType) -> Callable[[Page], Prediction]:
    """``module.extract_story`` on the page's bytes."""

    def run(page: Page) -> Prediction:
        story = module.extract_story(page.html, page.url)
        return Prediction(story.title, story.text, as_day(story.publish_date), story.language)

    return run


topicmap_system = extractor_system(extract_module)


def module_at_revision(revision: str, path: str) -> ModuleType:
    """This repository's module at ``path`` ("topicmap/web/extract.py") as committed at ``revision``, loaded as a
    module of its own beside the current one (what it imports is the working tree's)."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{revision}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    name = f"{Path(path).stem}_at_{re.sub(r'[^0-9A-Za-z]', '_', revision)}"
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def spider_system(page: Page) -> Prediction:
    """What the spider stores: extract_story_and_links on the page as its fetcher decodes it."""
    story, _links = extract_story_and_links(decode_html(page.html), page.url)
    return Prediction(story.title, story.text, as_day(story.publish_date), story.language)


def trafilatura_system(fast: bool) -> Callable[[Page], Prediction]:
    def run(page: Page) -> Prediction:
        document = trafilatura.bare_extraction(page.html, url=page.url or None, with_metadata=True, fast=fast)
        if document is None:
            return Prediction(None, "", None)
        return Prediction(document.title, document.text or "", as_day(document.date), document.language)

    return run


def topicmap_variant(
    module: object = article_text_module, **settings: object
) -> Callable[[Page], Prediction]:
    """topicmap.web.extract with some of the tuned settings of its text extraction (or of ``module``) changed (for
    --ablations)."""

    def run(page: Page) -> Prediction:
        saved = {name: getattr(module, name) for name in settings}
        for name, value in settings.items():
            setattr(module, name, value)
        try:
            return topicmap_system(page)
        finally:
            for name, value in saved.items():
                setattr(module, name, value)

    return run


SYSTEMS: dict[str, Callable[[Page], Prediction]] = {
    "topicmap.web.extract": topicmap_system,
    "as the spider stores it (extract_story_and_links)": spider_system,
    "trafilatura (default)": trafilatura_system(fast=False),
    "trafilatura (fast)": trafilatura_system(fast=True),
}
_NO_COMMENTS = {"include_comments": False}
ABLATIONS: dict[str, Callable[[Page], Prediction]] = {
    "topicmap, text by trafilatura balanced": topicmap_variant(TRAFILATURA_OPTIONS=_NO_COMMENTS),
    "topicmap, text by trafilatura fast": topicmap_variant(
        TRAFILATURA_OPTIONS={**_NO_COMMENTS, "fast": True}
    ),
    "topicmap, text by trafilatura recall": topicmap_variant(
        TRAFILATURA_OPTIONS={**_NO_COMMENTS, "favor_recall": True}
    ),
    "topicmap, text with comments": topicmap_variant(
        TRAFILATURA_OPTIONS={"include_comments": True, "favor_precision": True}
    ),
    "topicmap, no pre-pruning": topicmap_variant(_NEVER_ARTICLE_TEXT=()),
    "topicmap, full precision mode on every page (no fast first)": topicmap_variant(FAST_FIRST=False),
    "topicmap, no recall fallback": topicmap_variant(RECALL_FALLBACK_BELOW_CHARS=0),
    "topicmap, htmldate extensive search": topicmap_variant(dates_module, EXTENSIVE_DATE_SEARCH=True),
    "topicmap, through bare_extraction (tree copied each pass)": topicmap_variant(DIRECT_SEQUENCE=False),
    "topicmap, recall fallback in trafilatura's full mode": topicmap_variant(
        RECALL_OPTIONS={**_NO_COMMENTS, "favor_recall": True}
    ),
}


# --------------------------------------------------------------------------------------------------
# scoring


@dataclass
class Score:
    text_f1: float
    title: float
    date: float
    language: float
    cpu_seconds: float
    pages: int
    counts: tuple[int, int, int, int]
    failures: list[str]
    ledes_kept: tuple[int, int] = (0, 0)  # (kept, pages with an opening paragraph)
    detects_language: bool = True  # False: the system never names a language (trafilatura without langid)

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.cpu_seconds if self.cpu_seconds else float("inf")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def score(pages: list[Page], predictions: list[Prediction], seconds: list[float]) -> Score:
    f1s, titles, dates, languages, failures, ledes = [], [], [], [], [], []
    for page, predicted in zip(pages, predictions, strict=True):
        expected = page.expected
        lede = lede_of(expected)
        if lede:
            ledes.append(lede_kept(predicted.text, lede))
            if not ledes[-1]:
                failures.append(f"lede  {page.file}: {' '.join(lede)!r}")
        if expected.get("text_kind") == "full_body_human_annotated":
            f1s.append(token_f1(predicted.text, expected["text"]))
            if f1s[-1] < 0.9:
                failures.append(f"text  {f1s[-1]:.3f} {page.file}")
        if expected.get("title"):
            titles.append(title_key(predicted.title) == title_key(expected["title"]))
            if not titles[-1]:
                failures.append(f"title {page.file}: {predicted.title!r} != {expected['title']!r}")
        if expected.get("date"):
            dates.append(predicted.day is not None and predicted.day == expected_day(expected["date"]))
            if not dates[-1]:
                failures.append(f"date  {page.file}: {predicted.day} != {expected['date']}")
        if expected.get("meta_lang"):
            languages.append((predicted.language or "") == expected["meta_lang"][:2].lower())
            if not languages[-1]:
                failures.append(f"lang  {page.file}: {predicted.language} != {expected['meta_lang']}")
    return Score(
        text_f1=_mean(f1s),
        title=_mean(titles),
        date=_mean(dates),
        language=_mean(languages),
        cpu_seconds=sum(seconds),
        pages=len(pages),
        counts=(len(f1s), len(titles), len(dates), len(languages)),
        failures=failures,
        ledes_kept=(sum(ledes), len(ledes)),
        detects_language=any(predicted.language for predicted in predictions),
    )


def evaluate(
    pages: list[Page], repeats: int, systems: dict[str, Callable[[Page], Prediction]] | None = None
) -> tuple[dict[str, list[Prediction]], dict[str, list[float]]]:
    """Run every system on every page; time each page with each system in turn (so load swings hit all
    alike) and keep, per page and system, the fastest of `repeats` runs (process CPU time)."""
    systems = systems or SYSTEMS
    for system in systems.values():  # warm-up: imports, lazy tables, language model
        for page in pages:
            system(page)
    fastest: dict[str, list[float]] = {name: [float("inf")] * len(pages) for name in systems}
    predictions: dict[str, list[Prediction]] = {name: [] for name in systems}
    for repeat in range(repeats):
        for index, page in enumerate(pages):
            for name, system in systems.items():
                started = time.process_time()
                predicted = system(page)
                elapsed = time.process_time() - started
                fastest[name][index] = min(fastest[name][index], elapsed)
                if repeat == 0:
                    predictions[name].append(predicted)
    return predictions, fastest


def scores_for_part(
    pages: list[Page], predictions: dict[str, list[Prediction]], seconds: dict[str, list[float]], part: str
) -> dict[str, Score]:
    chosen = [index for index, page in enumerate(pages) if part == "all" or part_of(page) == part]
    return {
        name: score(
            [pages[i] for i in chosen],
            [predictions[name][i] for i in chosen],
            [seconds[name][i] for i in chosen],
        )
        for name in predictions
    }


def markdown_table(results: dict[str, Score], anchor: str = "trafilatura (fast)") -> str:
    first = next(iter(results.values()))
    n_text, n_title, n_date, n_language = first.counts
    anchor_speed = results[anchor].pages_per_second if anchor in results else float("nan")
    lines = [
        f"| system | text F1 ({n_text} pages) | title exact ({n_title}) | date same day ({n_date}) | "
        f"language ({n_language}) | lede kept ({first.ledes_kept[1]}) | pages/s (CPU) | × {anchor} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, result in results.items():
        language = f"{result.language:.3f}" if result.detects_language else "–"
        lines.append(
            f"| {name} | {result.text_f1:.4f} | {result.title:.3f} | {result.date:.3f} | {language} | "
            f"{result.ledes_kept[0]} | {result.pages_per_second:.1f} | {result.pages_per_second / anchor_speed:.2f} |"
        )
    lines.append(
        f"| goal (unseen pages) | ≥ {TARGETS['text_f1']} | ≥ {TARGETS['title']} | ≥ {TARGETS['date']} | | | | "
        f"≥ {SPEED_TARGET} |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--data", type=Path, default=DEFAULT_DATA)
    arguments.add_argument("--repeats", type=int, default=3)
    arguments.add_argument("--split", choices=["develop", "measure", "both", "all"], default="both")
    arguments.add_argument(
        "--verbose", action="store_true", help="list the develop pages each system gets wrong"
    )
    arguments.add_argument(
        "--ablations", action="store_true", help="also score topicmap with each tuned setting reverted"
    )
    arguments.add_argument(
        "--before", metavar="GIT_REV", help="also score extract_story as committed at GIT_REV"
    )
    options = arguments.parse_args(argv)
    if not (options.data / "expected.jsonl").exists():
        print(f"skipped: no evaluation data at {options.data}")
        return 0
    logging.disable(logging.WARNING)  # trafilatura logs every page it discards
    all_pages = load_pages(options.data)
    parts = PARTS if options.split == "both" else (options.split,)
    pages = [page for page in all_pages if options.split in ("both", "all") or part_of(page) == options.split]
    systems = {**SYSTEMS, **ABLATIONS} if options.ablations else SYSTEMS
    if options.before:
        before = extractor_system(module_at_revision(options.before, "topicmap/web/extract.py"))
        systems = {f"topicmap.web.extract at {options.before}": before, **systems}
    predictions, seconds = evaluate(pages, options.repeats, systems)
    for part in parts:
        results = scores_for_part(pages, predictions, seconds, part)
        sites = {site_of(page) for page in pages if part == "all" or part_of(page) == part}
        count = next(iter(results.values())).pages
        print(
            f"\n### {part}: {count} pages from {len(sites)} sites, fastest of {options.repeats} timed runs per page\n"
        )
        print(markdown_table(results))
        if options.verbose:
            if part == "measure":
                print("\n(measure failures are not listed: that part is only scored)")
                continue
            for name, result in results.items():
                print(f"\n#### {name} ({part})")
                print("\n".join(result.failures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
