"""The story archive's inputs: CSV, Parquet and WARC drops (url, title, text, publish_date, medium[, html]).

What a drop promises: no row is lost without a report and none is invented.

* CSV: fields up to ``ReadLimits.max_row_bytes`` (32 Mi characters a row, all its fields and lines; the csv
  module's own 128 KiB field limit is raised to it, so a long ``html`` field never makes the reader lose its
  place). A longer row stops the file at its line without being read whole (a file without a line break
  must not be read into memory); a rejected row is reported with its exact physical lines (header = line 1; a row whose quoted field spans lines reports ``lines 5-9``). The CSV is
  parsed strictly: a syntax error (an unclosed quote, text after a closing quote) stops the file there and
  fails it, naming the line, because reading on after a quoting error would turn lines inside a field into
  invented rows.
* A NUL character in a text field (url, title, text, medium, publish_date) rejects the row: the store
  cannot hold one, and dropping it would store a text that differs from the file's.
* Invalid UTF-8 rejects the row, naming its lines and how many bytes are invalid. Replacing the bytes would
  store an altered title, text or URL that no later run can repair; the usual cause is a file saved in
  another encoding, which the user fixes by saving it as UTF-8 and dropping it again (the rows that
  already loaded are recognised, the fixed ones load).
* Parquet is read batch by batch; a file pyarrow cannot open (truncated, or not Parquet at all) fails, and so
  does one whose columns are not of text type (a ``text`` column of lists is not a text to store as "").
* A file whose name is not valid UTF-8, or a link leading out of the drops folder, is refused unread and
  recorded once with its reason (keyed by its name, so a renamed copy loads).
* WARC/ARC: see ``topicmap.archive.warc`` (bounded decompression, truncation reported with its offset);
  a story's place is its record offset.
* URLs longer than the store's ``MAX_URL_LENGTH`` (1024) are rejected with a reason, never cut: every URL
  column of the store is an indexed VARCHAR(1024) that the spider matches on (as Media Cloud does), and
  a cut URL is another URL that would match, or merge with, the wrong story.

A file that cannot be read fails alone (`load_drop`): it is recorded in ``archive_files`` with state
``failed`` and its reason, the good files beside it load, and it is retried only when its content (sha256)
changes. Rows read before the point of failure are kept (they are valid; loading is idempotent).
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import select

from topicmap.archive.warc import DEFAULT_READ_LIMITS, ReadLimits, WarcReadError, stories_from_warc
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.web.extract import extract_story
from topicmap.web.urls import is_http_url

REQUIRED_COLUMNS = ("url", "title", "text", "publish_date")
OPTIONAL_COLUMNS = ("medium", "html")
EARLIEST_DATE = datetime(2008, 1, 1, tzinfo=UTC)
#: stories handed to the store per transaction while a drop streams in
LOAD_BATCH = 500
#: row errors kept per file for the report (all are counted)
MAX_REPORTED_ERRORS = 1000

STATE_LOADED = "loaded"
STATE_FAILED = "failed"


class ArchiveFileError(ValueError):
    """A whole file cannot be read (missing columns, unknown format, broken CSV or Parquet): names the file,
    where, and the problem."""


@dataclass(frozen=True)
class RowError:
    """A rejected row: its physical line(s) in a CSV (header = 1), row number + 1 in a Parquet file, or the
    record's byte offset in a WARC/ARC file (``unit="offset"``)."""

    path: str
    line: int
    problem: str
    end_line: int | None = None
    unit: str = "line"

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


# ---------------------------------------------------------------------------------------------- validation


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
    html = row.get("html")
    if isinstance(html, str):
        html = html.encode("utf-8")
    fields = {
        "title": title.strip() if isinstance(title, str) else None,
        "text": text if isinstance(text, str) else "",
        "medium_name": medium.strip() if isinstance(medium, str) and medium.strip() else None,
        "html": html if isinstance(html, bytes) and html else None,
        "encoding": "utf-8" if html else None,
    }
    extracted = row.get("extracted")
    if extracted is not None:
        # a page of a generic crawl, read by the spider's extraction: its date keeps the page's own UTC offset
        # (the page's calendar day), and how title, date and language were found is kept with the story
        return NewStory.from_extracted(url, extracted, **fields)
    return NewStory(url=url, publish_date=publish_date, **fields)


def _check_columns(
    path: Path,
    columns: Sequence[str],
    required: Sequence[str],
    expected: Sequence[str] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS,
) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise ArchiveFileError(f"{path}: missing column(s) {missing}; expected {list(expected)}")


# ---------------------------------------------------------------------------------------------- CSV

# surrogateescape decodes each invalid byte to one lone surrogate U+DC80..U+DCFF, at its exact place
_INVALID_UTF8 = re.compile("[\udc80-\udcff]")


def _invalid_bytes(value: str) -> list[str]:
    return _INVALID_UTF8.findall(value)


def _allow_fields_up_to(size: int) -> None:
    """Raise the csv module's field limit (128 KiB by default, process-wide) to at least `size` characters."""
    limit = min(max(size + 1, csv.field_size_limit()), sys.maxsize)
    if limit > csv.field_size_limit():
        csv.field_size_limit(limit)


class _CappedLines:
    """A CSV file's physical lines for the csv reader, a row at most ``cap`` characters long (all its lines).

    Each line is read with a bound, so a row over the cap is refused where it starts without being read
    whole; ``start_row`` is called as the reader starts each row."""

    def __init__(self, handle: Any, cap: int, path: Path) -> None:
        self.handle, self.cap, self.path = handle, cap, path
        self.row_chars = 0
        self.row_line = 1

    def start_row(self, line: int) -> None:
        self.row_chars, self.row_line = 0, line

    def __iter__(self) -> _CappedLines:
        return self

    def __next__(self) -> str:
        room = self.cap - self.row_chars
        text = self.handle.readline(room + 1) if room >= 0 else ""
        if room < 0 or (len(text) > room and not text.endswith(("\n", "\r"))):
            raise ArchiveFileError(
                f"{self.path}:{self.row_line}: the row starting on this line is longer than "
                f"{self.cap:,} characters (the max_row_bytes read limit); reading stopped here without "
                "reading it whole: the rows before it were read"
            )
        if not text:
            raise StopIteration
        self.row_chars += len(text)
        return text


def read_csv_rows(
    path: Path,
    required: Sequence[str] = REQUIRED_COLUMNS,
    expected: Sequence[str] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS,
    max_row_chars: int = DEFAULT_READ_LIMITS.max_row_bytes,
) -> Iterator[SourceRow | RowError]:
    """Rows of a UTF-8 CSV (a BOM is allowed) as SourceRows with their physical lines, or RowErrors.

    Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (the csv module's own rule). Raises ArchiveFileError for a
    missing header or column, for a CSV syntax error (where reading has to stop; module doc), and for a row
    over ``max_row_chars``.
    """
    _allow_fields_up_to(max_row_chars)
    with path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
        lines = _CappedLines(handle, max_row_chars, path)
        reader = csv.reader(lines, strict=True)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise ArchiveFileError(f"{path}:1: the header line is not valid CSV: {exc}") from exc
        if header is None:
            raise ArchiveFileError(f"{path}: empty file (no header line)")
        header = [name.strip() for name in header]
        if any(_invalid_bytes(name) for name in header):
            raise ArchiveFileError(f"{path}:1: the header line has invalid UTF-8; save the file as UTF-8")
        _check_columns(path, header, required, expected)
        while True:
            start = reader.line_num + 1
            lines.start_row(start)
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise ArchiveFileError(
                    f"{path}:{start}: CSV syntax error in the row starting on this line ({exc}); reading "
                    "stopped here so that no line inside a quoted field is taken for a row: the rows "
                    "before it were read, fix the file to load the rest"
                ) from exc
            end = reader.line_num
            if not fields:  # a blank line
                continue
            invalid = [char for value in fields for char in _invalid_bytes(value)]
            if invalid:
                first = bytes([ord(invalid[0]) - 0xDC00])
                yield RowError(
                    str(path),
                    start,
                    f"{len(invalid)} invalid UTF-8 byte(s) (the first is {first!r}); the row is rejected "
                    "rather than stored with replaced characters: save the file as UTF-8",
                    end,
                )
                continue
            if len(fields) != len(header):
                yield RowError(
                    str(path), start, f"row has {len(fields)} fields, header has {len(header)}", end
                )
                continue
            yield SourceRow(start, end, dict(zip(header, fields, strict=True)))


# ---------------------------------------------------------------------------------------------- Parquet


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)


_PARQUET_TYPES = {
    "url": _is_text,
    "title": _is_text,
    "text": _is_text,
    "medium": _is_text,
    "html": lambda kind: _is_text(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind),
    "publish_date": lambda kind: _is_text(kind) or pa.types.is_date(kind) or pa.types.is_timestamp(kind),
}
_PARQUET_TYPE_NAMES = {
    **dict.fromkeys(("url", "title", "text", "medium"), "string"),
    "html": "string or binary",
    "publish_date": "string, date or timestamp",
}


def _parquet_rows(path: Path, batch_size: int = 1000) -> Iterator[SourceRow]:
    try:
        parquet = pq.ParquetFile(path)
        columns = parquet.schema_arrow.names
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveFileError(
            f"{path}: not a readable Parquet file (truncated, or not Parquet at all): {exc}"
        ) from exc
    _check_columns(path, columns, REQUIRED_COLUMNS)
    wanted = [c for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if c in columns]
    for name in wanted:
        kind = parquet.schema_arrow.field(name).type
        if not _PARQUET_TYPES[name](kind):
            raise ArchiveFileError(
                f"{path}: column {name!r} is of type {kind}, expected {_PARQUET_TYPE_NAMES[name]}; "
                "nothing of the file is read (its values cannot be stored as they are)"
            )
    line = 2  # the same numbering as a CSV with a header line
    try:
        for batch in parquet.iter_batches(batch_size=batch_size, columns=wanted):
            for row in batch.to_pylist():
                yield SourceRow(line, line, row)
                line += 1
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveFileError(f"{path}: unreadable from row {line - 1} on: {exc}") from exc


# ---------------------------------------------------------------------------------------------- WARC

WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")


def is_warc(path: Path) -> bool:
    return path.name.lower().endswith(WARC_SUFFIXES)


def _warc_rows(path: Path, limits: ReadLimits) -> Iterator[SourceRow | RowError]:
    """Stories of a WARC/ARC file, then its read errors. Story-indexer archives carry title, text and date
    in their metadata; for a generic crawl they are extracted from the captured HTML. A story's place is
    its record's byte offset."""
    errors: list[WarcReadError] = []
    for record in stories_from_warc(path, errors=errors, limits=limits):
        if record.get("title") is None and record.get("text") is None and record.get("html"):
            extracted = extract_story(record["html"], record["url"])
            record = {
                **record,
                "title": extracted.title,
                "text": extracted.text,
                "publish_date": extracted.publish_date,
                "extracted": extracted,
            }
        yield SourceRow(record["offset"], record["offset"], record, unit="offset")
    for error in errors:
        if error.file_level:  # cut short, or over the file's decompression cap: the file fails
            continue
        where = " of the decompressed stream" if error.decompressed else ""
        yield RowError(
            str(path), error.offset, f"unreadable WARC record{where}: {error.reason}", unit="offset"
        )
    fatal = next((error for error in errors if error.file_level), None)
    if fatal is not None:
        raise ArchiveFileError(f"{fatal}; the records before it were read")


# ---------------------------------------------------------------------------------------------- reading


def iter_drop(
    path: str | Path, now: datetime | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> Iterator[NewStory | RowError]:
    """A drop's valid stories and rejected rows, in file order, streamed. Raises ArchiveFileError when the
    file (or the rest of it) cannot be read."""
    path = Path(path)
    name = path.name.lower()
    rows: Iterator[SourceRow | RowError]
    if name.endswith(".csv"):
        rows = read_csv_rows(path, max_row_chars=limits.max_row_bytes)
    elif name.endswith((".parquet", ".pq")):
        rows = _parquet_rows(path)
    elif is_warc(path):
        rows = _warc_rows(path, limits)
    else:
        raise ArchiveFileError(
            f"{path}: unknown archive format {path.suffix.lower()!r} "
            "(expected .csv, .parquet, .warc[.gz] or .arc[.gz])"
        )
    for row in rows:
        if isinstance(row, RowError):
            yield row
            continue
        try:
            yield story_from_row(row.values, now)
        except ValueError as exc:
            yield RowError(str(path), row.line, str(exc), row.end_line, row.unit)


def parse_drop(
    path: str | Path, now: datetime | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> ParsedDrop:
    """Read a whole CSV, Parquet or WARC drop into valid stories and per-row errors (tests and small
    drops; `load_drop` streams into the store)."""
    path = Path(path)
    drop = ParsedDrop(path=path, sha256=file_sha256(path))
    for item in iter_drop(path, now, limits):
        (drop.errors if isinstance(item, RowError) else drop.stories).append(item)
    return drop


# ---------------------------------------------------------------------------------------------- loading


@dataclass
class DropLoad:
    """What loading one file did. ``state``: loaded | failed (now) | already loaded | failed before."""

    path: Path
    sha256: str
    state: str
    stories_read: int = 0
    created: int = 0
    existing: int = 0
    rows_rejected: int = 0
    errors: list[RowError] = field(default_factory=list)  # the first MAX_REPORTED_ERRORS
    reason: str | None = None


def printable_name(path: Path) -> str:
    """The path as text that can be logged and stored: bytes that are not UTF-8 shown as \\x escapes."""
    return os.fsencode(path).decode("utf-8", errors="backslashreplace")


def refused_file_reason(path: Path, folder: Path | None) -> str | None:
    """Why a file in the drops folder is not read at all, or None."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return "the file name is not valid UTF-8 (shown with \\x escapes): rename the file to load it"
    if folder is not None and path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(folder.resolve()):
            return f"a link to {printable_name(target)}, outside the drops folder: not followed"
    return None


def refused_file_key(path: Path) -> str:
    """The ``archive_files`` key of a refused file: its name's, not its content's (which is not read)."""
    return hashlib.sha256(b"refused:" + os.fsencode(path)).hexdigest()


def _record_refused(store: TopicStore, path: Path, reason: str) -> DropLoad:
    """Record a refused file once, keyed by its name (its content is not read)."""
    key = refused_file_key(path)
    known = archive_file_record(store, key)
    if known is not None:
        return DropLoad(path, key, "failed before", reason=known.reason)
    record_archive_file(store, Path(printable_name(path)), key, STATE_FAILED, 0, 0, reason)
    return DropLoad(path, key, STATE_FAILED, reason=reason)


@dataclass(frozen=True)
class ArchiveFileRecord:
    path: str
    state: str
    reason: str | None
    rows_loaded: int
    rows_rejected: int


def archive_file_record(store: TopicStore, sha256: str) -> ArchiveFileRecord | None:
    """What the store knows of a file with this content, or None."""
    af = s.archive_files
    with store.engine.connect() as conn:
        row = conn.execute(
            select(af.c.path, af.c.state, af.c.reason, af.c.rows_loaded, af.c.rows_rejected).where(
                af.c.sha256 == sha256
            )
        ).first()
    return ArchiveFileRecord(*row) if row is not None else None


def record_archive_file(
    store: TopicStore,
    path: Path,
    sha256: str,
    state: str,
    rows_loaded: int,
    rows_rejected: int,
    reason: str | None = None,
) -> None:
    """Record the outcome for this content (an upsert: a failed file retried and loaded becomes loaded)."""
    row = {
        "path": str(path)[:2048],
        "sha256": sha256,
        "state": state,
        "reason": reason,
        "rows_loaded": rows_loaded,
        "rows_rejected": rows_rejected,
        "loaded_at": now_utc(),
    }
    with store.engine.begin() as conn:
        store.upsert(
            conn,
            s.archive_files,
            [row],
            ["sha256"],
            ["path", "state", "reason", "rows_loaded", "rows_rejected", "loaded_at"],
        )


def load_drop(
    store: TopicStore,
    path: str | Path,
    *,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    retry_failed: bool = False,
    now: datetime | None = None,
    progress: Callable[[str], None] | None = None,
    folder: Path | None = None,
) -> DropLoad:
    """Stream one drop into the store and record the outcome for its content hash.

    A file ``refused_file_reason`` refuses (a name that is not UTF-8, a link out of ``folder``) is not read:
    it is recorded once as failed, keyed by its name, and skipped on later runs.

    A file whose content was loaded before is skipped; one that failed before is skipped too (with its
    recorded reason) unless `retry_failed`. ArchiveFileError fails this file alone; the stories read before
    the failure are kept. Errors of the store itself (the database is down) propagate: they are not the
    file's fault and must not mark it failed.
    """
    path = Path(path)
    refused = refused_file_reason(path, folder)
    if refused is not None:
        return _record_refused(store, path, refused)
    sha = file_sha256(path)
    known = archive_file_record(store, sha)
    if known is not None and (known.state == STATE_LOADED or not retry_failed):
        return DropLoad(
            path,
            sha,
            "already loaded" if known.state == STATE_LOADED else "failed before",
            rows_rejected=known.rows_rejected,
            reason=known.reason,
        )
    result = DropLoad(path, sha, STATE_LOADED)
    batch: list[NewStory] = []
    source = f"archive:{path.name}"

    def flush() -> None:
        if batch:
            added = store.add_stories(batch, source=source)
            result.created += added.created
            result.existing += added.existing
            batch.clear()

    try:
        for item in iter_drop(path, now, limits):
            if isinstance(item, RowError):
                result.rows_rejected += 1
                if len(result.errors) < MAX_REPORTED_ERRORS:
                    result.errors.append(item)
                continue
            batch.append(item)
            result.stories_read += 1
            if len(batch) >= LOAD_BATCH:
                flush()
                if progress and result.stories_read % (LOAD_BATCH * 20) == 0:
                    progress(f"{path.name}: {result.stories_read} stories read so far")
    except ArchiveFileError as exc:
        flush()  # the rows before the failure are valid
        result.state = STATE_FAILED
        result.reason = str(exc)
    else:
        flush()
    record_archive_file(
        store, path, sha, result.state, result.stories_read, result.rows_rejected, result.reason
    )
    return result
