"""The story archive's inputs: CSV, Parquet and WARC drops (url, title, text, publish_date, medium[, html]).

A bad row is reported with its line (CSV: the physical line in the file, header = line 1; Parquet: the row
number + 1 so both read the same way) and skipped; it never stops the load. Files are recognised by content
hash, so loading the same drop twice adds nothing.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow.parquet as pq

from topicmap.archive.warc import WarcReadError, stories_from_warc
from topicmap.store.topic_store import NewStory
from topicmap.web.extract import extract_story
from topicmap.web.urls import is_http_url

REQUIRED_COLUMNS = ("url", "title", "text", "publish_date")
OPTIONAL_COLUMNS = ("medium", "html")
EARLIEST_DATE = datetime(2008, 1, 1, tzinfo=UTC)


class ArchiveFileError(ValueError):
    """A whole file cannot be read (missing columns, unknown format): names the file and the problem."""


@dataclass(frozen=True)
class RowError:
    path: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}"


@dataclass
class ParsedDrop:
    path: Path
    sha256: str
    stories: list[NewStory] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_publish_date(value: object) -> datetime | None:
    """ISO dates and datetimes (naive = UTC). Empty → None. Raises ValueError on anything else."""
    if value is None or (isinstance(value, float) and value != value) or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        if not text:
            return None
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def story_from_row(row: dict, now: datetime | None = None) -> NewStory:
    """Validate one archive row; raises ValueError with the reason."""
    url = (row.get("url") or "").strip() if isinstance(row.get("url"), str) else row.get("url")
    if not url or not isinstance(url, str) or not is_http_url(url):
        raise ValueError(f"url {url!r} is not an absolute http(s) URL")
    title = row.get("title")
    text = row.get("text")
    if (not isinstance(title, str) or not title.strip()) and (not isinstance(text, str) or not text.strip()):
        raise ValueError("both title and text are empty")
    try:
        publish_date = parse_publish_date(row.get("publish_date"))
    except ValueError as exc:
        raise ValueError(f"publish_date {row.get('publish_date')!r} is not an ISO date: {exc}") from exc
    now = now or datetime.now(UTC)
    if publish_date is not None and not (EARLIEST_DATE <= publish_date <= now):
        raise ValueError(f"publish_date {publish_date.isoformat()} is before 2008 or in the future")
    medium = row.get("medium")
    html = row.get("html")
    if isinstance(html, str):
        html = html.encode("utf-8")
    return NewStory(
        url=url,
        title=title.strip() if isinstance(title, str) else None,
        text=text if isinstance(text, str) else "",
        publish_date=publish_date,
        medium_name=medium.strip() if isinstance(medium, str) and medium.strip() else None,
        html=html if isinstance(html, bytes) and html else None,
        encoding="utf-8" if html else None,
    )


def _check_columns(path: Path, columns: list[str]) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise ArchiveFileError(
            f"{path}: missing column(s) {missing}; expected {list(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)}"
        )


def _csv_rows(path: Path) -> Iterator[tuple[int, dict]]:
    raw = path.read_bytes()
    text = raw.decode("utf-8-sig", errors="replace")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    _check_columns(path, list(reader.fieldnames or []))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield reader.line_num, {"__error__": f"unreadable CSV row: {exc}"}
            continue
        if None in row:
            yield (
                reader.line_num,
                {"__error__": f"row has {len(row) - 1 + len(row[None])} fields, header has {len(row) - 1}"},
            )
            continue
        yield reader.line_num, row


def _parquet_rows(path: Path) -> Iterator[tuple[int, dict]]:
    table = pq.read_table(path)
    _check_columns(path, table.column_names)
    for i, row in enumerate(table.to_pylist()):
        yield i + 2, row  # the same numbering as a CSV with a header line


WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")


def is_warc(path: Path) -> bool:
    return path.name.lower().endswith(WARC_SUFFIXES)


def _warc_rows(path: Path, errors: list[WarcReadError]) -> Iterator[tuple[int, dict]]:
    """Stories of a WARC/ARC file. Story-indexer archives carry title, text and date in their metadata;
    for a generic crawl they are extracted from the captured HTML. The "line" of a WARC story is its
    record number (1-based), so a report still points at the place in the file."""
    for number, record in enumerate(stories_from_warc(path, errors=errors), start=1):
        if record.get("title") is None and record.get("text") is None and record.get("html"):
            extracted = extract_story(record["html"], record["url"])
            record = {
                **record,
                "title": extracted.title,
                "text": extracted.text,
                "publish_date": extracted.publish_date,
            }
        yield number, record


def parse_drop(path: str | Path, now: datetime | None = None) -> ParsedDrop:
    """Read a CSV, Parquet or WARC drop into valid stories and per-row errors."""
    path = Path(path)
    suffix = path.suffix.lower()
    warc_errors: list[WarcReadError] = []
    if suffix == ".csv":
        rows = _csv_rows(path)
    elif suffix in (".parquet", ".pq"):
        rows = _parquet_rows(path)
    elif is_warc(path):
        rows = _warc_rows(path, warc_errors)
    else:
        raise ArchiveFileError(
            f"{path}: unknown archive format {suffix!r} (expected .csv, .parquet, .warc[.gz] or .arc[.gz])"
        )
    drop = ParsedDrop(path=path, sha256=file_sha256(path))
    for line, row in rows:
        if "__error__" in row:
            drop.errors.append(RowError(str(path), line, row["__error__"]))
            continue
        try:
            drop.stories.append(story_from_row(row, now))
        except ValueError as exc:
            drop.errors.append(RowError(str(path), line, str(exc)))
    drop.errors.extend(
        RowError(str(path), error.offset, f"unreadable WARC record: {error}") for error in warc_errors
    )
    return drop
