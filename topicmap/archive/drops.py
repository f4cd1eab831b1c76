"""The story archive's inputs: CSV, Parquet and WARC drops (url, title, text, publish_date, medium[, html]).

What a drop promises: no row is lost without a report and none is invented.

The formats are read by ``topicmap.archive.drop_csv``, ``drop_parquet`` and ``drop_warc``, their rows checked
by ``drop_rows``; this module walks them into stories and the store, and records each file's outcome
(``topicmap.archive.store``).

* A file whose name is not valid UTF-8, or a link leading out of the drops folder, is refused unread and
  recorded once with its reason (keyed by its name, so a renamed copy loads).
* No file decodes past its bound (``drop_rows.file_decoded_bound``: ``max_expansion`` times its size on disk,
  ``max_file_bytes`` at most), and no row past the row limits of its format. A reader that can tell what a file
  decodes to refuses it before reading a row (Parquet, CSV); the rows of any file are counted again as they are
  read (`iter_drop`), and the row that takes a file past its bound stops it there, before it is stored (a WARC
  page's Content-Encoding, a Parquet page of shared prefixes).

A file that cannot be read fails alone (`load_drop`): it is recorded in ``archive_files`` with state
``failed`` and its reason, the good files beside it load, and it is retried only when its content (sha256)
changes. Rows read before the point of failure are kept (they are valid; loading is idempotent).

Every file of the folder has its own record and its own row in the report, also when it holds the same bytes
as another: the content is recorded (and read) once, under the first file that had it, and each other file
holding it is recorded by its name with state ``same bytes`` and the first file named (`same_bytes_key`), so
a failure is never reported under another file's name, and no story is read twice.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.exc import SQLAlchemyError

from topicmap.archive.drop_formats import drop_format, known_endings
from topicmap.archive.drop_rows import (
    ArchiveFileError,
    RowError,
    file_decoded_bound,
    row_bytes,
    story_from_row,
)
from topicmap.archive.store import (
    STATE_FAILED,
    STATE_LOADED,
    STATE_SAME_BYTES,
    ArchiveFileRecord,
    archive_file_record,
    record_archive_file,
)
from topicmap.archive.warc import DEFAULT_READ_LIMITS, MIB, ReadLimits
from topicmap.store.topic_store import NewStory, TopicStore

#: stories handed to the store per transaction while a drop streams in, and what their texts may add up to
LOAD_BATCH = 500
LOAD_BATCH_BYTES = 32 * MIB
#: row errors kept per file for the report (all are counted)
MAX_REPORTED_ERRORS = 1000


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


# ---------------------------------------------------------------------------------------------- reading


def iter_drop(
    path: str | Path, now: datetime | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> Iterator[NewStory | RowError]:
    """A drop's valid stories and rejected rows, in file order, streamed. Raises ArchiveFileError when the
    file (or the rest of it) cannot be read."""
    path = Path(path)
    found = drop_format(path)
    if found is None:
        raise ArchiveFileError(
            f"{path}: unknown archive format {path.suffix.lower()!r} (expected one of {known_endings()})"
        )
    bound = file_decoded_bound(path.stat().st_size, limits)
    decoded = 0  # what the rows read so far decode to: a reader that cannot tell it up front is stopped here
    for row in found.read(path, limits):
        if isinstance(row, RowError):
            yield row
            continue
        decoded += row_bytes(row.values)
        if decoded > bound.bytes:
            where = RowError(str(path), row.line, "", row.end_line, row.unit).where
            raise ArchiveFileError(
                f"{path}: {where}: the rows up to this one decode to {decoded:,} bytes, more than the "
                f"{bound.limit}; reading stopped here (the rows before it were read)"
            )
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


def _story_bytes(story: NewStory) -> int:
    """About what a story holds in memory: its text, title and html (the rest is small)."""
    return len(story.text or "") + len(story.title or "") + len(story.html or b"")


@dataclass
class DropLoad:
    """What loading one file did. ``state``: loaded | failed (now) | already loaded | failed before | same bytes
    (as ``same_as``, the record of the file its content was recorded under: not read)."""

    path: Path
    sha256: str
    state: str
    stories_read: int = 0
    created: int = 0
    existing: int = 0
    rows_rejected: int = 0
    errors: list[RowError] = field(default_factory=list)  # the first MAX_REPORTED_ERRORS
    reason: str | None = None
    same_as: ArchiveFileRecord | None = None


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
    if drop_format(path) is None:
        return f"not a drop format (expected one of {known_endings()}): not read"
    return None


def refused_file_key(path: Path) -> str:
    """The ``archive_files`` key of a refused file: its name's, not its content's (which is not read)."""
    return hashlib.sha256(b"refused:" + os.fsencode(path)).hexdigest()


def same_bytes_key(path: Path, sha256: str) -> str:
    """The ``archive_files`` key of a file holding the same bytes as a file recorded before: its name's and its
    content's (the content's own key, its sha256, belongs to the first file)."""
    return hashlib.sha256(b"same bytes:" + sha256.encode() + b":" + os.fsencode(path)).hexdigest()


def _names(recorded: str, path: Path) -> bool:
    """Whether a record's path names this file."""
    return os.path.abspath(recorded) == os.path.abspath(printable_name(path))


def _record_same_bytes(store: TopicStore, path: Path, sha: str, first: ArchiveFileRecord) -> DropLoad:
    """Record once, by its name, a file holding the bytes recorded under ``first`` (which is not read again)."""
    key = same_bytes_key(path, sha)
    if archive_file_record(store, key) is None:
        record_archive_file(store, path, key, STATE_SAME_BYTES, 0, 0, f"same bytes as {first.path}")
    return DropLoad(path, sha, STATE_SAME_BYTES, reason=first.reason, same_as=first)


def _record_refused(store: TopicStore, path: Path, reason: str) -> DropLoad:
    """Record a refused file once, keyed by its name (its content is not read)."""
    key = refused_file_key(path)
    known = archive_file_record(store, key)
    if known is not None:
        return DropLoad(path, key, "failed before", reason=known.reason)
    record_archive_file(store, Path(printable_name(path)), key, STATE_FAILED, 0, 0, reason)
    return DropLoad(path, key, STATE_FAILED, reason=reason)


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

    A file ``refused_file_reason`` refuses (a name that is not UTF-8, a link out of ``folder``, a format no reader
    knows, such as a zip archive) is not read:
    it is recorded once as failed, keyed by its name, and skipped on later runs.

    A file whose content was loaded before is skipped; one that failed before is skipped too (with its
    recorded reason) unless `retry_failed`. A file holding the content recorded under another file is recorded
    by its name as ``same bytes`` and not read (unless `retry_failed` retries a failed content whose file is
    gone). ArchiveFileError fails this file alone; the stories read before the failure are kept. Errors of the
    store itself (the database is down) propagate: they are not the file's fault and must not mark it failed.
    """
    path = Path(path)
    refused = refused_file_reason(path, folder)
    if refused is not None:
        return _record_refused(store, path, refused)
    sha = file_sha256(path)
    known = archive_file_record(store, sha)
    if known is not None and not _names(known.path, path):
        retry = retry_failed and known.state == STATE_FAILED and not Path(known.path).exists()
        if not retry:
            return _record_same_bytes(store, path, sha, known)
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
    batch_bytes = 0
    source = f"archive:{path.name}"

    def flush() -> None:
        nonlocal batch_bytes
        batch_bytes = 0
        if batch:
            added = store.add_stories(batch, source=source)
            result.created += added.created
            result.existing += added.existing
            batch.clear()

    try:
        for item in iter_drop(path, now, limits):
            if isinstance(item, RowError):
                result.rows_rejected += item.rows
                if len(result.errors) < MAX_REPORTED_ERRORS:
                    result.errors.append(item)
                continue
            batch.append(item)
            batch_bytes += _story_bytes(item)
            result.stories_read += 1
            if len(batch) >= LOAD_BATCH or batch_bytes >= LOAD_BATCH_BYTES:
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


class DropsLog(Protocol):
    """Where a pass over the drops folder reports each file (a logger, or Dagster's ``context.log``)."""

    def info(self, msg: str) -> Any: ...

    def warning(self, msg: str) -> Any: ...

    def error(self, msg: str) -> Any: ...


@dataclass
class DropsReport:
    """What one pass over the drops folder did, by printable file name (relative to the folder)."""

    loaded: list[str] = field(default_factory=list)
    already_loaded: list[str] = field(default_factory=list)
    failed: list[dict[str, str | None]] = field(default_factory=list)  # file, reason
    failed_before: list[dict[str, str | None]] = field(default_factory=list)  # file, reason
    row_errors: list[dict[str, str]] = field(default_factory=list)  # file, where, problem
    same_bytes: list[dict[str, str | None]] = field(
        default_factory=list
    )  # file, same_as, outcome (of same_as)
    created: int = 0
    existing: int = 0
    rows_rejected: int = 0


def _name_in(recorded: str, folder: Path) -> str:
    """A recorded path as the report names files: relative to the drops folder when it is in it."""
    try:
        return str(Path(recorded).relative_to(folder))
    except ValueError:
        return recorded


def load_drops(
    store: TopicStore,
    files: Iterable[Path],
    folder: Path,
    *,
    log: DropsLog,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    retry_failed: bool = False,
) -> DropsReport:
    """`load_drop` for each file of the drops folder, each outcome logged and reported.

    A file that fails (ArchiveFileError) is recorded as failed, as `load_drop` says. Any other error of a
    file's reading (a reader bug, an I/O error) fails that file for this pass alone, unrecorded, so the next
    pass reads it again; an error of the store itself is not the file's and is raised.
    """
    report = DropsReport()
    for path in files:
        name = printable_name(path.relative_to(folder))  # a name that is not UTF-8 is shown escaped
        try:
            result = load_drop(
                store, path, limits=limits, retry_failed=retry_failed, progress=log.info, folder=folder
            )
        except SQLAlchemyError:
            raise  # the store, not the file: fail the run, nothing is recorded against the file
        except Exception as exc:  # a reader bug or an I/O error: this file fails this run alone, unrecorded
            log.error(f"{name}: could not be read, will be retried next run: {exc!r}")
            report.failed.append({"file": name, "reason": f"{type(exc).__name__}: {exc}"})
            continue
        if result.state == "already loaded":
            report.already_loaded.append(name)
            continue
        if result.same_as is not None:
            first = _name_in(result.same_as.path, folder)
            outcome = result.same_as.state + (f": {result.reason}" if result.reason else "")
            report.same_bytes.append({"file": name, "same_as": first, "outcome": outcome})
            log.info(f"{name}: the same bytes as {first} ({result.same_as.state}), not read again")
            continue
        if result.state == "failed before":
            report.failed_before.append({"file": name, "reason": result.reason})
            log.warning(f"{name}: failed before and unchanged since, not read: {result.reason}")
            continue
        for error in result.errors:
            log.warning(f"skipped bad archive row: {error}")
            report.row_errors.append({"file": name, "where": error.where, "problem": error.problem})
        report.rows_rejected += result.rows_rejected
        report.created += result.created
        report.existing += result.existing
        if result.state == STATE_FAILED:
            log.error(f"{name}: failed (kept the {result.stories_read} stories before): {result.reason}")
            report.failed.append({"file": name, "reason": result.reason})
        else:
            report.loaded.append(name)
        log.info(
            f"{name}: {result.state}; {result.created} new stories, {result.existing} already known, "
            f"{result.rows_rejected} bad rows"
        )
    return report
