"""Seeds: the topic query run over the archive month by month, plus the topic's seed URL lists and the URLs
shared in its posts (``topicmap.topics.posts``).

An archive story is a seed because the query matches it: it joins the topic at iteration 0. A seed list's URLs
are fetched by the spider at iteration 0; each row carries its list's ``assume_match``: true (the default)
and the story joins the topic whatever its text, false and it is judged by the query like any page found.
A topic re-seeded after its declaration changed stores its rows again (``TopicStore.add_seed_urls``): a URL
already stored takes the flag the file gives it now.

Topics that keep running are seeded again and again as the archive grows (the ``archive_growth`` sensor): each
seeding records what it read of the archive (``ArchiveScan``: the dates, the newest story id, how many stories)
and the next one reads only what that does not cover: the stories added since, and every story of dates the
topic gained (``plan_archive_scan``). The seeds already stored stay as they are (the spider imported them); the
new ones are imported by the spider's next iteration, which fetches no URL the topic already has.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from topicmap.archive.drop_csv import read_csv_rows
from topicmap.archive.drop_rows import ArchiveFileError, RowError, url_problem
from topicmap.store import schema as s
from topicmap.store.topic_store import SPIDER_SOURCE, TopicStore
from topicmap.topics.declarations import DEFAULT_SEED_ASSUME_MATCH, TopicConfig
from topicmap.topics.posts import PostSourceReport, import_posts

ARCHIVE_SOURCE = "archive query"


class TooManySeedsError(RuntimeError):
    """The topic query matches more archive stories than the topic's max_stories allows."""


@dataclass(frozen=True)
class ArchiveScan:
    """What a topic's seeding has read of the archive: every archive story published in ``start_date`` ..
    ``end_date`` with ``stories_id <= through_id`` (``stories`` of them when it read them), matched against the
    query whose sha256 is ``query_sha256``. The next seeding reads only what this does not cover (see
    ``plan_archive_scan``)."""

    topics_id: int | None
    query_sha256: str
    start_date: date
    end_date: date
    through_id: int
    stories: int

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "start_date": self.start_date.isoformat(),
            "end_date": self.end_date.isoformat(),
        }

    @classmethod
    def from_json(cls, data: Any) -> ArchiveScan | None:
        """The record, or None for anything else (an older release's, a damaged one): the topic is then read
        whole, which is always right."""
        try:
            return cls(
                topics_id=None if data["topics_id"] is None else int(data["topics_id"]),
                query_sha256=str(data["query_sha256"]),
                start_date=date.fromisoformat(data["start_date"]),
                end_date=date.fromisoformat(data["end_date"]),
                through_id=int(data["through_id"]),
                stories=int(data["stories"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class ArchiveScanPlan:
    """The archive reads of one seeding: ``(first day, last day, after_id)`` windows, each read for stories with
    ``after_id < stories_id <= scan.through_id``; ``scan`` is what the archive is covered through afterwards."""

    windows: tuple[tuple[date, date, int], ...]
    reason: str
    scan: ArchiveScan

    @property
    def incremental(self) -> bool:
        return any(after for _, _, after in self.windows)


@dataclass
class SeedSelection:
    plan: ArchiveScanPlan  # what was read of the archive
    rows: list[dict] = field(default_factory=list)
    per_month: Counter = field(
        default_factory=Counter
    )  # archive matches by publication month; seeds per list
    scanned: int = 0
    csv_errors: list[RowError] = field(default_factory=list)
    #: what reading each post source did (its bad rows are in its report)
    posts: list[PostSourceReport] = field(default_factory=list)


@dataclass(frozen=True)
class SeedingRequest:
    """One seeding of a topic: the topic, and what the store already holds of it."""

    topic: TopicConfig
    previous: ArchiveScan | None = None
    """What the topic's last seeding read of the archive (None: its dates are read whole)."""
    topics_id: int | None = None
    """The store's id of the topic: a ``previous`` scan recorded for another id is not trusted."""
    known_urls: Collection[str] = frozenset()
    """The topic's seeds already stored, counted with the new ones against max_stories."""
    today: date | None = None
    """The day an open-ended topic's dates reach (default: the current UTC day)."""
    progress: Callable[[str], None] | None = None
    """Told each month read, with its matches."""


def query_sha256(topic: TopicConfig) -> str:
    return hashlib.sha256(topic.query.encode()).hexdigest()


def archive_through_id(store: TopicStore) -> int:
    """The newest archive story's id (0 for an empty archive): stories the spider found are not the archive's."""
    st = s.stories
    with store.engine.connect() as conn:
        newest = conn.execute(
            select(func.max(st.c.stories_id)).where(st.c.source != SPIDER_SOURCE)
        ).scalar_one_or_none()
    return int(newest or 0)


def archive_stories_between(
    store: TopicStore, start: date, end: date, after_id: int = 0, through_id: int | None = None
) -> int:
    """How many archive stories are published in [start, end] (UTC days) with ``after_id < stories_id <=
    through_id``."""
    st = s.stories
    lo = datetime(start.year, start.month, start.day, tzinfo=UTC)
    hi = datetime(end.year, end.month, end.day, tzinfo=UTC) + timedelta(days=1)
    query = select(func.count()).where(
        st.c.publish_date >= lo,
        st.c.publish_date < hi,
        st.c.source != SPIDER_SOURCE,
        st.c.stories_id > after_id,
    )
    if through_id is not None:
        query = query.where(st.c.stories_id <= through_id)
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def plan_archive_scan(store: TopicStore, request: SeedingRequest) -> ArchiveScanPlan:
    """What one seeding reads: the whole of the topic's dates the first time, and again when its query changed or
    the archive changed below what was read (a load that committed its stories late, stories removed); otherwise
    only the stories added since (``stories_id > previous.through_id``) in the dates read before, and every story
    of the dates the topic gained (an open-ended topic gains each new day; a changed end or start date its new
    range). The archive is read through its newest story at planning time: a story loaded meanwhile is the
    next seeding's."""
    topic, previous, topics_id = request.topic, request.previous, request.topics_id
    start, end = topic.start_date, topic.last_day(request.today)
    through_id = archive_through_id(store)
    digest = query_sha256(topic)
    reason = ""
    if previous is None:
        reason = "first reading of the archive for this topic"
    elif topics_id is not None and previous.topics_id not in (None, topics_id):
        reason = (
            f"the store's topic is another one (topics_id {topics_id}, read before: {previous.topics_id})"
        )
    elif previous.query_sha256 != digest:
        reason = "the query changed"
    else:
        below = archive_stories_between(
            store, previous.start_date, previous.end_date, through_id=previous.through_id
        )
        if below != previous.stories:
            reason = (
                f"the archive changed below story {previous.through_id} ({previous.stories} stories in "
                f"{previous.start_date}..{previous.end_date} when read, {below} now)"
            )
    if reason:
        windows = ((start, end, 0),)
    else:
        overlap = (max(start, previous.start_date), min(end, previous.end_date))
        if overlap[0] > overlap[1]:
            windows = ((start, end, 0),)
            reason = f"new dates {start}..{end} (read before: {previous.start_date}..{previous.end_date})"
        else:
            parts: list[tuple[date, date, int]] = []
            if start < overlap[0]:
                parts.append((start, overlap[0] - timedelta(days=1), 0))
            parts.append((overlap[0], overlap[1], previous.through_id))
            if overlap[1] < end:
                parts.append((overlap[1] + timedelta(days=1), end, 0))
            windows = tuple(parts)
            gained = [f"{lo}..{hi}" for lo, hi, after in parts if not after]
            reason = f"stories after {previous.through_id} in {overlap[0]}..{overlap[1]}" + (
                f", every story of the new dates {', '.join(gained)}" if gained else ""
            )
    scan = ArchiveScan(
        topics_id=topics_id,
        query_sha256=digest,
        start_date=start,
        end_date=end,
        through_id=through_id,
        # counted before reading: a story committed later below through_id changes the count, so the next
        # seeding reads the topic whole instead of missing it
        stories=archive_stories_between(store, start, end, through_id=through_id),
    )
    return ArchiveScanPlan(windows, reason, scan)


def unread_archive_stories(
    store: TopicStore, topic: TopicConfig, previous: ArchiveScan, through_id: int, today: date | None = None
) -> int:
    """Archive stories (``stories_id <= through_id``) in the topic's dates as of ``today`` that the seeding which
    recorded ``previous`` did not read: those added since in the dates it read, and every one of the dates the
    topic gained since (an open-ended topic gains each day). What the ``archive_growth`` sensor counts."""
    start, end = topic.start_date, topic.last_day(today)
    overlap = (max(start, previous.start_date), min(end, previous.end_date))
    if overlap[0] > overlap[1]:
        return archive_stories_between(store, start, end, through_id=through_id)
    unread = 0
    if through_id > previous.through_id:
        unread += archive_stories_between(
            store, *overlap, after_id=previous.through_id, through_id=through_id
        )
    if start < overlap[0]:
        unread += archive_stories_between(store, start, overlap[0] - timedelta(days=1), through_id=through_id)
    if overlap[1] < end:
        unread += archive_stories_between(store, overlap[1] + timedelta(days=1), end, through_id=through_id)
    return unread


def month_windows(start: date, end: date) -> list[tuple[date, date]]:
    """Calendar months clipped to [start, end], both ends inclusive (Media Cloud's month_offset loop)."""
    windows = []
    cursor = start
    while cursor <= end:
        next_month = (cursor.replace(day=1) + timedelta(days=32)).replace(day=1)
        windows.append((cursor, min(end, next_month - timedelta(days=1))))
        cursor = next_month
    return windows


def select_archive_seeds(store: TopicStore, request: SeedingRequest) -> SeedSelection:
    """Run the topic's query over the archive stories ``plan_archive_scan`` says to read, one calendar month at a
    time (the stories added since the last seeding in one pass: they are few). The request's ``known_urls`` count
    towards max_stories with the new ones."""
    topic, known_urls, progress = request.topic, request.known_urls, request.progress
    query = topic.parsed_query
    plan = plan_archive_scan(store, request)
    selection = SeedSelection(plan=plan)
    new_urls: set[str] = set()
    for first, last, after_id in plan.windows:
        for month_start, month_end in [(first, last)] if after_id else month_windows(first, last):
            label = (
                f"{month_start}..{month_end}, stories after {after_id}"
                if after_id
                else month_start.strftime("%Y-%m")
            )
            matched = 0
            stories = store.iter_stories_published_between(
                month_start, month_end, after_id=after_id, through_id=plan.scan.through_id
            )
            for story in stories:
                selection.scanned += 1
                if not query.matches_story(story["title"], story["text"], story["url"], story["description"]):
                    continue
                matched += 1
                selection.per_month[story["publish_date"].strftime("%Y-%m")] += 1
                selection.rows.append(
                    {
                        "url": story["url"],
                        "source": ARCHIVE_SOURCE,
                        "stories_id": story["stories_id"],
                        "publish_date": story["publish_date"],
                        "title": story["title"],
                    }
                )
                if story["url"] not in known_urls:
                    new_urls.add(story["url"])
                if len(known_urls) + len(new_urls) > topic.max_stories:
                    raise TooManySeedsError(
                        f"topic {topic.name!r}: the query matches more than max_stories={topic.max_stories} "
                        f"archive stories (reached while scanning {label}); narrow the query or raise max_stories"
                    )
            if progress:
                progress(f"{topic.name}: {label}: {matched} matching stories")
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


def select_seeds(store: TopicStore, request: SeedingRequest) -> SeedSelection:
    """The archive's matches (only what the request's ``previous`` did not read: ``plan_archive_scan``), then the
    rows of each seed URL list, then the URLs shared in the topic's posts (read into the store on the way). A URL is a seed once (the store keeps one row per topic and URL): an archive match
    stays one, and a URL in several lists is taken as relevant if one of them says so. The request's
    ``known_urls``: the topic's stored seeds, counted with the new ones against max_stories."""
    topic, known_urls = request.topic, request.known_urls
    selection = select_archive_seeds(store, request)
    by_url = {row["url"]: row for row in selection.rows}

    def add_rows(rows: list[dict]) -> None:
        for row in rows:
            earlier = by_url.get(row["url"])
            if earlier is None:
                by_url[row["url"]] = row
                selection.rows.append(row)
            elif earlier.get("stories_id") is None and row.get("assume_match"):
                earlier["assume_match"] = True

    for seed_list in topic.seed_urls:
        rows, errors = read_seed_url_csv(seed_list.path, seed_list.assume_match)
        add_rows(rows)
        selection.csv_errors.extend(errors)
        selection.per_month[f"csv:{seed_list.path.name}"] += len(rows)
    if topic.posts:
        if request.topics_id is None:
            raise ValueError(f"topic {topic.name!r}: its posts are stored under its topics_id: give it")
        posts = import_posts(store, request.topics_id, topic, request.today, progress=request.progress)
        add_rows(posts.rows)
        selection.posts = posts.reports
    seeds = len(set(known_urls) | set(by_url))
    if seeds > topic.max_stories:
        raise TooManySeedsError(f"topic {topic.name!r}: {seeds} seeds exceed max_stories={topic.max_stories}")
    return selection
