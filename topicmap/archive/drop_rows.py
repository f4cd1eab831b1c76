"""A drop's rows, whatever their format: the columns, where a row is in its file, and the checks that make a row
a story (``topicmap.archive.drops`` reads the formats through ``drop_csv``, ``drop_parquet`` and ``drop_warc``).

* A NUL character in a text field (url, title, text, medium, publish_date) rejects the row: the store
  cannot hold one, and dropping it would store a text that differs from the file's.
* URLs longer than the store's ``MAX_URL_LENGTH`` (1024) are rejected with a reason, never cut: every URL
  column of the store is an indexed VARCHAR(1024) that the spider matches on (as Media Cloud does), and
  a cut URL is another URL that would match, or merge with, the wrong story.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory
from topicmap.web.titles import clean_title, og_values
from topicmap.web.urls import is_http_url

if TYPE_CHECKING:
    from topicmap.archive.warc import ReadLimits

REQUIRED_COLUMNS = ("url", "title", "text", "publish_date")
OPTIONAL_COLUMNS = ("medium", "html")
EARLIEST_DATE = datetime(2008, 1, 1, tzinfo=UTC)


class ArchiveFileError(ValueError):
    """A whole file cannot be read (missing columns, unknown format, broken CSV or Parquet): names the file,
    where, and the problem."""


@dataclass(frozen=True)
class RowError:
    """A rejected row: its physical line(s) in a CSV (header = 1), row number + 1 in a Parquet file, or the
    record's byte offset in a WARC/ARC file (``unit="offset"``). ``rows``: how many rows it rejects (a
    Parquet row group refused unread is one error for all its rows)."""

    path: str
    line: int
    problem: str
    end_line: int | None = None
    unit: str = "line"
    rows: int = 1

    @property
    def where(self) -> str:
        if self.unit == "offset":
            return f"offset {self.line}"
        if self.end_line is not None and self.end_line != self.line:
            return f"lines {self.line}-{self.end_line}"
        return f"line {self.line}"

    def __str__(self) -> str:
        if self.unit == "line" and (self.end_line is None or self.end_line == self.line):
            return f"{self.path}:{self.line}: {self.problem}"
        return f"{self.path}: {self.where}: {self.problem}"


@dataclass(frozen=True)
class SourceRow:
    """One row of a drop before validation, with where it is in the file."""

    line: int
    end_line: int
    values: dict[str, Any]
    unit: str = "line"


@dataclass(frozen=True)
class FileBound:
    """What the rows of one drop file may decode to together, in bytes, and the limit that says so (for a
    message: its name and how it comes to this many bytes)."""

    bytes: int
    limit: str


def file_decoded_bound(size_on_disk: int, limits: ReadLimits) -> FileBound:
    """The bound on what one file's rows decode to: ``max_expansion`` times its size on disk, at least
    ``max_row_bytes``, at most ``max_file_bytes`` (``ReadLimits``)."""
    by_expansion = max(limits.max_expansion * size_on_disk, limits.max_row_bytes)
    if by_expansion >= limits.max_file_bytes:
        return FileBound(
            limits.max_file_bytes, f"max_file_bytes read limit of {limits.max_file_bytes:,} bytes"
        )
    return FileBound(
        by_expansion,
        f"max_expansion read limit ({limits.max_expansion:,} times the file's {size_on_disk:,} bytes on disk, "
        f"and never less than max_row_bytes: {by_expansion:,} bytes)",
    )


def row_bytes(values: dict[str, Any]) -> int:
    """What a row's text and binary fields hold, as decoded (characters for text: cheap to tell)."""
    return sum(len(value) for value in values.values() if isinstance(value, str | bytes))


def url_problem(url: object) -> str | None:
    """Why `url` cannot be a story URL, or None. Too long is a reason, never a cut (module doc)."""
    if not url or not isinstance(url, str) or not is_http_url(url):
        return f"url {url!r} is not an absolute http(s) URL"
    if len(url) > s.MAX_URL_LENGTH:
        return (
            f"url is {len(url)} characters, longer than the store's {s.MAX_URL_LENGTH} "
            f"(not cut, which would make it another URL): {url[:80]}..."
        )
    return None


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


#: the fields of a row that are stored as text (html is stored as bytes, where a NUL is just a byte)
TEXT_FIELDS = ("url", "title", "text", "medium", "publish_date")


def _text_field_problem(row: dict) -> str | None:
    """Why a text field cannot be stored as it is in the file: not text, or holding a NUL character."""
    for name in TEXT_FIELDS:
        value = row.get(name)
        if isinstance(value, str):
            if "\x00" in value:
                return (
                    f"{name} holds a NUL character (at character {value.index(chr(0)) + 1}); the row is "
                    "rejected rather than stored without it"
                )
        elif value is not None and not (name == "publish_date" and isinstance(value, date)):
            return f"{name} is a {type(value).__name__}, not text"
    return None


def story_from_row(row: dict, now: datetime | None = None) -> NewStory:
    """Validate one archive row; raises ValueError with the reason."""
    problem = _text_field_problem(row)
    if problem:
        raise ValueError(problem)
    url = row.get("url").strip() if isinstance(row.get("url"), str) else row.get("url")
    problem = url_problem(url)
    if problem:
        raise ValueError(problem)
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
    medium_name = medium.strip() if isinstance(medium, str) and medium.strip() else None
    html = row.get("html")
    if isinstance(html, str):
        html = html.encode("utf-8")
    extracted = row.get("extracted")
    page_site_name, page_headline = og_values(html)
    site_name = page_site_name or getattr(extracted, "site_name", None)
    fields = {
        # the extractor's rule for a title that comes alone: the page's og:title where the title extends it,
        # else the medium's name (the row's, the page's og:site_name, the URL's domain) off its edges
        "title": clean_title(title, [medium_name, site_name], url, [page_headline]),
        "text": text if isinstance(text, str) else "",
        "medium_name": medium_name,
        "site_name": site_name,
        "html": html if isinstance(html, bytes) and html else None,
        "encoding": "utf-8" if html else None,
    }
    if extracted is not None:
        # a page of a generic crawl, read by the spider's extraction: its date keeps the page's own UTC offset
        # (the page's calendar day), and how title, date and language were found is kept with the story
        return NewStory.from_extracted(url, extracted, **fields)
    return NewStory(url=url, publish_date=publish_date, **fields)


def check_columns(
    path: Path,
    columns: Sequence[str],
    required: Sequence[str],
    expected: Sequence[str] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS,
) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise ArchiveFileError(f"{path}: missing column(s) {missing}; expected {list(expected)}")
