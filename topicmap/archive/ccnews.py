"""CC-NEWS by day: Common Crawl's news crawl loaded into the story archive, one day's WARC files at a time.

CC-NEWS publishes, per month, ``crawl-data/CC-NEWS/YYYY/MM/warc.paths.gz`` (one path a line) and WARC files
named by the time their crawl started: ``crawl-data/CC-NEWS/2026/01/CC-NEWS-20260105083012-01234.warc.gz``.
A day's files are those whose name carries that day. Each file (about 1 GB) is **streamed**: warcio reads
gzip members from the HTTP response as they arrive, a payload over ``max_record_bytes`` is refused without
being read, so memory stays bounded whatever the file's size.

Progress is kept per file in ``cc_news_files`` in the same transaction as the stories of each batch: a
re-run skips completed files, and a file cut short (a kill, a network error) is streamed again from its
start with the records already done skipped, not extracted again. Stories are keyed by (medium, guid), so a
batch written twice adds nothing.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

from sqlalchemy import select

from topicmap.archive.cc_settings import CCNEWS_START as CCNEWS_START  # re-exported
from topicmap.archive.commoncrawl import (
    CommonCrawlError,
    CommonCrawlSettings,
    FetchedPage,
    Rejections,
    StoryRejected,
    _Http,
    guarded_session,
    host_matches,
    page_from_record,
    story_from_page,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc

log = logging.getLogger(__name__)

CCNEWS_PREFIX = "crawl-data/CC-NEWS"
CCNEWS_SOURCE = "cc-news"
_FILE_NAME = re.compile(r"CC-NEWS-(\d{8})(\d{6})-(\d{5})\.warc\.gz$")


def month_listing_path(year: int, month: int) -> str:
    return f"{CCNEWS_PREFIX}/{year:04d}/{month:02d}/warc.paths.gz"


def file_day(path: str) -> date | None:
    """The day a CC-NEWS file's name carries (None for a name that is not a CC-NEWS WARC)."""
    found = _FILE_NAME.search(path)
    if not found:
        return None
    stamp = found.group(1)
    try:
        return date(int(stamp[:4]), int(stamp[4:6]), int(stamp[6:8]))
    except ValueError:
        return None


def files_for_day(paths: list[str], day: date) -> list[str]:
    """The day's files, in crawl order (their names sort by timestamp, then serial)."""
    return sorted(p for p in paths if file_day(p) == day)


@dataclass
class DayReport:
    day: date
    files: list[str] = field(default_factory=list)
    files_skipped: list[str] = field(default_factory=list)
    files_failed: dict[str, str] = field(default_factory=dict)
    records: int = 0
    records_filtered: int = 0
    stories_added: int = 0
    stories_existing: int = 0
    rejections: Rejections = field(default_factory=Rejections)


class CcNewsLoader:
    """Loads CC-NEWS days into the archive; ``outlets`` (domains) keeps only their pages, empty keeps all."""

    def __init__(
        self,
        store: TopicStore,
        settings: CommonCrawlSettings,
        *,
        outlets: frozenset[str] = frozenset(),
        batch_size: int = 100,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.outlets = frozenset(o.lower() for o in outlets)
        self.batch_size = max(1, batch_size)
        self.http = _Http(settings, guarded_session(settings), time.sleep)
        self.progress = progress or (lambda message: log.info(message))

    def list_month(self, year: int, month: int) -> list[str]:
        url = self.settings.data_file_url(month_listing_path(year, month))
        what = f"CC-NEWS listing {year:04d}-{month:02d} ({url})"
        response = self.http.get(url, what)
        if response.status_code != 200:
            raise CommonCrawlError(f"{what}: HTTP {response.status_code}")
        try:
            text = gzip.decompress(response.content).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommonCrawlError(f"{what}: not a gzipped list of paths: {exc}") from exc
        return [line.strip() for line in text.splitlines() if line.strip()]

    def load_day(self, day: date) -> DayReport:
        report = DayReport(day)
        report.files = files_for_day(self.list_month(day.year, day.month), day)
        done = self._completed_files(report.files)
        self.progress(f"CC-NEWS {day}: {len(report.files)} files, {len(done)} already loaded")
        for number, path in enumerate(report.files, start=1):
            if path in done:
                report.files_skipped.append(path)
                continue
            try:
                self._load_file(path, day, report)
            except Exception as exc:  # noqa: BLE001 - one broken file must not stop the day's other files
                message = f"{path}: {exc.__class__.__name__}: {exc}"
                report.files_failed[path] = message
                self._mark_file(path, day, "error", error=message)
                log.error("CC-NEWS %s", message)
            self.progress(
                f"CC-NEWS {day}: file {number}/{len(report.files)} done; {report.records} records, "
                f"{report.stories_added} new stories"
            )
        return report

    # ------------------------------------------------------------------ one file

    def _completed_files(self, paths: list[str]) -> set[str]:
        f = s.cc_news_files
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(f.c.path).where(f.c.path.in_(paths), f.c.state == "completed"))
            return set(rows.scalars())

    def _records_done(self, path: str) -> int:
        f = s.cc_news_files
        with self.store.engine.connect() as conn:
            return int(
                conn.execute(select(f.c.records_done).where(f.c.path == path)).scalar_one_or_none() or 0
            )

    def _load_file(self, path: str, day: date, report: DayReport) -> None:
        from warcio.archiveiterator import ArchiveIterator

        skip = self._records_done(path)
        url = self.settings.data_file_url(path)
        response = self.http.get(url, f"CC-NEWS file {path}", stream=True)
        if response.status_code != 200:
            response.close()
            raise CommonCrawlError(f"HTTP {response.status_code} from {url}")
        position = 0
        stories: list[NewStory] = []
        rejections = Rejections()
        pending = 0
        try:
            for record in ArchiveIterator(response.raw):
                if record.rec_type != "response":
                    continue
                position += 1
                if position <= skip:  # done before a crash: streamed past, not extracted again
                    continue
                pending += 1
                report.records += 1
                target = record.rec_headers.get_header("WARC-Target-URI") or ""
                if self.outlets and not host_matches(target, self.outlets):
                    report.records_filtered += 1
                else:
                    self._convert(record, target, stories, rejections)
                if pending >= self.batch_size:
                    self._commit(path, day, position, stories, rejections, report, "loading")
                    stories, rejections, pending = [], Rejections(), 0
        finally:
            response.close()
        self._commit(path, day, position, stories, rejections, report, "completed")

    def _convert(self, record, url: str, stories: list[NewStory], rejections: Rejections) -> None:  # noqa: ANN001
        where = f"{url} ({record.rec_headers.get_header('WARC-Record-ID')})"
        page: FetchedPage | None = page_from_record(record, self.settings.max_record_bytes)
        if page is None:
            rejections.add("payload too large", where, f"payload over {self.settings.max_record_bytes} bytes")
            return
        try:
            stories.append(story_from_page(page, url))
        except StoryRejected as exc:
            rejections.add(exc.reason, where, str(exc))

    def _commit(
        self,
        path: str,
        day: date,
        position: int,
        stories: list[NewStory],
        rejections: Rejections,
        report: DayReport,
        state: str,
    ) -> None:
        f = s.cc_news_files
        with self.store.engine.begin() as conn:
            result = self.store.insert_stories(conn, stories, CCNEWS_SOURCE)
            previous = conn.execute(
                select(f.c.stories_added, f.c.records_rejected, f.c.rejections_json).where(f.c.path == path)
            ).first()
            reasons = json.loads(previous.rejections_json or "{}") if previous else {}
            for reason, count in rejections.counts.items():
                reasons[reason] = reasons.get(reason, 0) + count
            row = {
                "path": path,
                "day": day,
                "state": state,
                "records_done": position,
                "stories_added": (previous.stories_added if previous else 0) + result.created,
                "records_rejected": (previous.records_rejected if previous else 0) + rejections.total,
                "rejections_json": json.dumps(reasons, sort_keys=True),
                "error": None,
                "updated_at": now_utc(),
            }
            self.store.upsert(conn, f, [row], ["path"], [k for k in row if k != "path"])
        report.stories_added += result.created
        report.stories_existing += result.existing
        report.rejections.merge(rejections)

    def _mark_file(self, path: str, day: date, state: str, error: str | None = None) -> None:
        f = s.cc_news_files
        row = {"path": path, "day": day, "state": state, "error": error, "updated_at": now_utc()}
        with self.store.engine.begin() as conn:
            self.store.upsert(conn, f, [row], ["path"], ["state", "error", "updated_at"])
