"""Seeds: the topic query run over the archive month by month, plus the topic's seed URL lists."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from topicmap.archive.drops import RowError
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig
from topicmap.web.urls import is_http_url

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


def read_seed_url_csv(path: Path) -> tuple[list[dict], list[RowError]]:
    """A seed URL list: a CSV with a ``url`` column (other columns ignored). Bad rows are reported."""
    try:
        text = path.read_bytes().decode("utf-8-sig", errors="replace")
    except FileNotFoundError:
        return [], [RowError(str(path), 0, "seed URL file not found")]
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if "url" not in (reader.fieldnames or []):
        return [], [RowError(str(path), 1, f"no 'url' column (columns: {reader.fieldnames})")]
    rows, errors = [], []
    for row in reader:
        url = (row.get("url") or "").strip()
        if not is_http_url(url):
            errors.append(RowError(str(path), reader.line_num, f"url {url!r} is not an absolute http(s) URL"))
            continue
        rows.append({"url": url, "source": f"csv:{path.name}"})
    return rows, errors


def select_seeds(
    store: TopicStore, topic: TopicConfig, progress: Callable[[str], None] | None = None
) -> SeedSelection:
    selection = select_archive_seeds(store, topic, progress)
    for path in topic.seed_urls:
        rows, errors = read_seed_url_csv(path)
        selection.rows.extend(rows)
        selection.csv_errors.extend(errors)
        selection.per_month[f"csv:{path.name}"] += len(rows)
    if len(selection.rows) > topic.max_stories:
        raise TooManySeedsError(
            f"topic {topic.name!r}: {len(selection.rows)} seeds exceed max_stories={topic.max_stories}"
        )
    return selection
