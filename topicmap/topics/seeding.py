"""Seeds: the topic query run over the archive month by month, plus the topic's seed URL lists.

An archive story is a seed because the query matches it: it joins the topic at iteration 0. A seed list's URLs
are fetched by the spider at iteration 0; each row carries its list's ``assume_match``: true (the default)
and the story joins the topic whatever its text, false and it is judged by the query like any page found.
A topic re-seeded after its declaration changed stores its rows again (``TopicStore.add_seed_urls``): a URL
already stored takes the flag the file gives it now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from topicmap.archive.drops import ArchiveFileError, RowError, read_csv_rows, url_problem
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import DEFAULT_SEED_ASSUME_MATCH, TopicConfig

ARCHIVE_SOURCE = "archive query"


class TooManySeedsError(RuntimeError):
    """The topic query matches more archive stories than the topic's max_stories allows."""


@dataclass
class SeedSelection:
    rows: list[dict] = field(default_factory=list)
    per_month: Counter = field(default_factory=Counter)
    scanned: int = 0
    csv_errors: list[RowError] = field(default_factory=list)


def month_windows(start: date, end: date) -> list[tuple[date, date]]:
    """Calendar months clipped to [start, end], both ends inclusive (Media Cloud's month_offset loop)."""
    windows = []
    cursor = start
    while cursor <= end:
        next_month = (cursor.replace(day=1) + timedelta(days=32)).replace(day=1)
        windows.append((cursor, min(end, next_month - timedelta(days=1))))
        cursor = next_month
    return windows


def select_archive_seeds(
    store: TopicStore, topic: TopicConfig, progress: Callable[[str], None] | None = None
) -> SeedSelection:
    """Run the topic's query over archive stories in its date range, one calendar month at a time."""
    query = topic.parsed_query
    selection = SeedSelection()
    for month_start, month_end in month_windows(topic.start_date, topic.end_date):
        month_key = month_start.strftime("%Y-%m")
        matched = 0
        for story in store.iter_stories_published_between(month_start, month_end):
            selection.scanned += 1
            if query.matches_story(story["title"], story["text"], story["url"], story["description"]):
                matched += 1
                selection.rows.append(
                    {
                        "url": story["url"],
                        "source": ARCHIVE_SOURCE,
                        "stories_id": story["stories_id"],
                        "publish_date": story["publish_date"],
                        "title": story["title"],
                    }
                )
                if len(selection.rows) > topic.max_stories:
                    raise TooManySeedsError(
                        f"topic {topic.name!r}: the query matches more than max_stories={topic.max_stories} "
                        f"archive stories (reached while scanning {month_key}); narrow the query or raise max_stories"
                    )
        selection.per_month[month_key] = matched
        if progress:
            progress(f"{topic.name}: {month_key}: {matched} matching stories")
    return selection


def read_seed_url_csv(
    path: Path, assume_match: bool = DEFAULT_SEED_ASSUME_MATCH
) -> tuple[list[dict], list[RowError]]:
    """A seed URL list: a UTF-8 CSV with a ``url`` column (other columns ignored), read like a CSV drop
    (fields of any length, exact lines, invalid UTF-8 rejected). Bad rows are reported; a URL longer than
    the store's 1024 characters is one of them, never cut (it would be another URL). Each row carries the
    list's ``assume_match``."""
    if not path.is_file():
        return [], [RowError(str(path), 0, "seed URL file not found")]
    rows, errors = [], []
    try:
        for item in read_csv_rows(path, required=("url",), expected=("url",)):
            if isinstance(item, RowError):
                errors.append(item)
                continue
            url = (item.values.get("url") or "").strip()
            problem = url_problem(url)
            if problem:
                errors.append(RowError(str(path), item.line, problem, item.end_line))
                continue
            rows.append({"url": url, "source": f"csv:{path.name}", "assume_match": assume_match})
    except ArchiveFileError as exc:  # no url column, or a CSV syntax error: the rows before it still count
        errors.append(RowError(str(path), 0, str(exc)))
    return rows, errors


def select_seeds(
    store: TopicStore, topic: TopicConfig, progress: Callable[[str], None] | None = None
) -> SeedSelection:
    """The archive's matches, then the rows of each seed URL list. A URL is a seed once (the store keeps one
    row per topic and URL): an archive match stays one, and a URL in several lists is taken as relevant if
    one of them says so."""
    selection = select_archive_seeds(store, topic, progress)
    by_url = {row["url"]: row for row in selection.rows}
    for seed_list in topic.seed_urls:
        rows, errors = read_seed_url_csv(seed_list.path, seed_list.assume_match)
        for row in rows:
            earlier = by_url.get(row["url"])
            if earlier is None:
                by_url[row["url"]] = row
                selection.rows.append(row)
            elif earlier.get("stories_id") is None and row["assume_match"]:
                earlier["assume_match"] = True
        selection.csv_errors.extend(errors)
        selection.per_month[f"csv:{seed_list.path.name}"] += len(rows)
    if len(selection.rows) > topic.max_stories:
        raise TooManySeedsError(
            f"topic {topic.name!r}: {len(selection.rows)} seeds exceed max_stories={topic.max_stories}"
        )
    return selection
