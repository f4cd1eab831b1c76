"""WARC in and out: story-indexer archives, generic crawls, and offline replay of a crawl.

Three jobs, one reading core:

* **Writing** topic stories as WARC in Media Cloud story-indexer's layout (`StoryArchiveWriter`, as its
  archiver writes them): a `warcinfo` record, then per story a `response` (forged HTTP/1.0 head + raw HTML)
  and a `metadata` record (`application/x.mediacloud-indexer+json`, `WARC-Refers-To` the response).
* **Reading** story-indexer archives back (`read_story_archive`), any WARC/ARC crawl as pages
  (`read_warc_pages`), and either as story dicts for the archive (`stories_from_warc`).
* **Replay** (`WarcReplay`): URL → latest capture, following recorded redirects, so the spider can re-run
  offline and reproducibly.

Error policy for reading (all readers share it). Problems are `WarcReadError`s naming the file and the
record offset. Pages are yielded as they are read, so a bad record never loses the good ones before it.
Without an ``errors`` list the first problem is raised (after everything before it was yielded). With a
list, problems are appended and reading goes on: past a bad record when the stream is intact, and past a
broken stream (a corrupt gzip member, garbage where a record header should be, even garbage warcio
parses as an ARC header in a WARC file) by resuming at the next record start found in the file (the next
gzip member that inflates to "WARC/", or the next "WARC/1.x" line), so one damaged record costs only itself.

Before that, a gzipped file that warcio cannot read member by member gets one more try: a WARC gzipped as
ONE member (``gzip file.warc``), or with records split across gzip members, is a valid WARC when read as
one continuous gzip stream (what ``zcat`` does). The reader re-reads it that way and carries on after the
records it already delivered; offsets of the records found that way are offsets in the decompressed
stream (`WarcPage.offset_is_decompressed`).

A record shorter than its declared Content-Length (a crawl killed mid-write) is an error, never a page with
silently cut HTML, unless its HTTP Content-Length shows the body is whole (only framing bytes missing). A WARC-Truncated record (the crawler's own size cap) is a normal page with `truncated`
set. A digest mismatch is reported on the page (`digest_ok=False`) and is not an error: the payload often
decodes fine, and the caller decides.

Bounded decompression (`ReadLimits`): a few compressed megabytes can inflate to gigabytes (a gzip member of
zeros, a ``Content-Encoding: gzip`` payload, one huge HTTP chunk), and warcio reads a payload, a chunk or a
header line whole. So the payload is decoded here, block by block (de-chunked, then gzip/deflate), and a
record whose payload exceeds ``max_payload_bytes`` is skipped and reported with its URL and offset; every
header line and each record's headers are bounded by ``max_header_bytes``; and a file that inflates to more
than ``max_file_bytes`` stops there with a file-level error. Memory stays near one payload whatever the
file holds.

Truncation: after the last record, the rest of the file is checked. A gzip member cut short (its record lost,
or only its trailer gone) or bytes after the last record that are no complete record are a file-level
`WarcReadError` naming the offset, never a silent end of file.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import logging
import math
import os
import re
import socket
import uuid
import zlib
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time
from email.utils import parsedate_to_datetime
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urljoin, urlsplit

from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import DecompressingBufferedReader
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ARC2WARCHeadersParser, ArcWarcRecord, ArcWarcRecordLoader
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParserException
from warcio.utils import BUFF_SIZE
from warcio.warcwriter import WARCWriter

logger = logging.getLogger(__name__)

METADATA_CONTENT_TYPE = "application/x.mediacloud-indexer+json"
WARC_VERSION = WARCWriter.WARC_1_0  # story-indexer writes 1.0 "for maximum acceptance"
SOFTWARE = "topicmap StoryArchiveWriter (mediacloud story-indexer ArchiveWriter layout)"
HTML_MIME_TYPES = frozenset({"text/html", "application/xhtml+xml"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")

# Errors warcio (and zlib/gzip under it) raises for a stream it cannot continue reading. On malformed
# record headers warcio also fails with plain AttributeError/TypeError/KeyError/IndexError (e.g. no
# WARC-Target-URI, an unknown digest algorithm), found by fuzzing damaged files.
_STREAM_ERRORS = (
    ArchiveLoadFailed,
    StatusAndHeadersParserException,
    EOFError,
    OSError,
    zlib.error,
    ValueError,
    AttributeError,
    TypeError,
    KeyError,
    IndexError,
)

MIB = 1 << 20


@dataclass(frozen=True)
class ReadLimits:
    """Caps on what reading one drop may inflate to (see the module doc, and ``topicmap.archive.drops`` for
    CSV and Parquet).

    * ``max_payload_bytes``: one record's payload after de-chunking and Content-Encoding (50 MiB: far above
      any news page, which rarely exceed 5 MiB; a larger record is reported and skipped);
    * ``max_header_bytes``: one record's WARC or HTTP header block, and so any single header line;
    * ``max_file_bytes``: the whole file decompressed (16 GiB: a Common Crawl WARC of about 1 GiB gzipped
      inflates to about 5 GiB);
    * ``max_row_bytes``: one row: a CSV row (all its physical lines), in characters, or a Parquet row (its
      fields together), in bytes as decoded (32 Mi: a row with a whole page in its ``html`` field is rarely
      over 5 MiB). A longer CSV row is refused at its position without being read whole, so a file without
      a line break cannot fill the memory; a longer Parquet row is rejected once decoded, and a Parquet
      page holding a single value longer than this is not decoded at all (its row group is refused);
    * ``max_page_bytes``: one Parquet page, in bytes as decoded (128 MiB), and a Parquet file's metadata. A
      reader decodes a page whole: the values of a column for up to 1,024 rows with pyarrow's defaults
      (1,024 html fields of 46 KB make a 47 MB page), or a column's dictionary. A row group with a longer
      page is not decoded at all, so a small file that decompresses to gigabytes cannot fill the memory; a
      file whose ordinary rows make longer pages is written again with smaller ones (pyarrow: a smaller
      ``data_page_size`` and ``write_batch_size``) or read with a higher limit.
    """

    max_payload_bytes: int = 50 * MIB
    max_header_bytes: int = 1 * MIB
    max_file_bytes: int = 16 * 1024 * MIB
    max_row_bytes: int = 32 * MIB
    max_page_bytes: int = 128 * MIB

    def __post_init__(self) -> None:
        for name in (
            "max_payload_bytes",
            "max_header_bytes",
            "max_file_bytes",
            "max_row_bytes",
            "max_page_bytes",
        ):
            if getattr(self, name) < 1024:
                raise ValueError(f"ReadLimits.{name} = {getattr(self, name)} is below 1024 bytes")


DEFAULT_READ_LIMITS = ReadLimits()


# ---------------------------------------------------------------------------------------------------------
# Errors and records
# ---------------------------------------------------------------------------------------------------------


class ArchiveStoryError(RuntimeError):
    """A story that cannot be archived. ``args[0]`` is a short counter name ("no-url", "no-html"), as in
    story-indexer, where callers count skipped stories by it."""


class WarcReadError(Exception):
    """A WARC/ARC file, or one record in it, cannot be read. Names the file and the record offset."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        offset: int,
        reason: str,
        *,
        decompressed: bool = False,
        file_level: bool = False,
    ):
        self.path = str(path)
        self.offset = offset
        self.reason = reason
        self.decompressed = decompressed
        # the rest of the file could not be read (truncated, or over ReadLimits.max_file_bytes), as opposed
        # to one bad record that reading went past
        self.file_level = file_level
        where = f"offset {offset}" + (" of the decompressed stream" if decompressed else "")
        super().__init__(f"{self.path}: {where}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:  # keep it picklable despite the keyword-only arguments
        return (
            _rebuild_read_error,
            (self.path, self.offset, self.reason, self.decompressed, self.file_level),
        )


def _rebuild_read_error(
    path: str, offset: int, reason: str, decompressed: bool, file_level: bool = False
) -> WarcReadError:
    return WarcReadError(path, offset, reason, decompressed=decompressed, file_level=file_level)


@dataclass(frozen=True)
class WarcPage:
    """One captured page: a `response` record (HTTP) or a `resource` record holding HTML.

    `body` is the payload as the server meant it: de-chunked and de-compressed (Content-Encoding) by warcio,
    so `headers` (as recorded) may still say ``Transfer-Encoding: chunked`` or ``Content-Encoding: gzip``;
    they describe the wire form, not `body`. A `resource` record has no HTTP message: it gets status 200 and
    a single Content-Type header taken from the record.
    """

    url: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    date: datetime | None
    record_type: str
    record_id: str | None
    warc_path: str
    offset: int
    offset_is_decompressed: bool = False
    digest_ok: bool | None = None  # None: no digest recorded (or not checked)
    truncated: str | None = None  # the WARC-Truncated reason, e.g. "length"
    concurrent_to: tuple[str, ...] = ()

    def header(self, name: str) -> str | None:
        """The first header called `name` (case-insensitive), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    @property
    def content_type(self) -> str | None:
        """The MIME type without parameters, lower-cased (``text/html``), or None."""
        return _mime_type(self.header("Content-Type"))

    @property
    def charset(self) -> str | None:
        """The declared charset (``charset=`` or story-indexer's ``encoding=`` parameter), or None."""
        return _content_type_charset(self.header("Content-Type"))

    @property
    def location(self) -> str | None:
        """The redirect target as an absolute URL, or None when there is no Location header."""
        raw = self.header("Location")
        if not raw or not raw.strip():
            return None
        try:
            return urljoin(self.url, raw.strip())
        except ValueError:  # a Location urllib cannot parse is no usable redirect
            return None

    @property
    def is_redirect(self) -> bool:
        return self.status in REDIRECT_STATUSES and self.location is not None

    @property
    def is_html(self) -> bool:
        """HTML by Content-Type, or (no Content-Type at all) by the body's first bytes."""
        mime = self.content_type
        if mime is not None:
            return mime in HTML_MIME_TYPES
        head = self.body[:1024].lstrip().lower()
        return head.startswith((b"<!doctype html", b"<html"))


@dataclass
class StoryRecord:
    """A story as archived: what `StoryArchiveWriter.write_story` takes and `read_story_archive` returns.

    `metadata` holds the story-indexer sub-objects by name (``rss_entry``, ``http_metadata``,
    ``content_metadata`` and any extra top-level keys); `content_metadata` uses mcmetadata's field names
    (``article_title``, ``text_content``, ``publication_date``, ``language``, ``canonical_domain``, ``url``,
    ``normalized_url``, ``parsed_date``...). Read back, all metadata values are plain JSON (dates are ISO
    strings); the typed fields (`fetch_date` etc.) carry the parsed values.
    """

    url: str
    html: bytes
    original_url: str | None = None
    http_status: int = 200
    encoding: str | None = None
    fetch_date: datetime | None = None  # tz-aware; None → the writer's `now`
    metadata: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------


class StoryArchiveWriter:
    """Write stories as a story-indexer style WARC: ``with StoryArchiveWriter(folder) as w: w.write_story(r)``.

    File name ``<prefix>-<YYYYmmddHHMMSS UTC>-<serial>-<hostname>.warc.gz`` (WARC 1.1 Annex C naming), or
    ``<prefix>.warc.gz`` when `serial` < 0. Data goes to ``<name>.tmp`` and is renamed on `finish()`, so a
    reader never sees a half-written archive; leaving the ``with`` block by an exception (or `abort()`)
    deletes the temporary file and leaves no archive.

    ``deterministic_ids=True`` derives record ids from the file name, record position, URL and date
    (uuid5): the same stories and `now` then give a byte-identical file, for reproducible tests and
    snapshots (the warcinfo record is always dated `now`). The default is random ids, as story-indexer does.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        prefix: str = "topicmap",
        hostname: str | None = None,
        serial: int = 0,
        now: datetime | None = None,
        *,
        deterministic_ids: bool = False,
    ) -> None:
        self.timestamp = _require_aware(now, "now") if now is not None else datetime.now(UTC)
        self.hostname = hostname if hostname is not None else socket.gethostname()
        for label, value in (("prefix", prefix), ("hostname", self.hostname)):
            if not value or "/" in value or os.sep in value:
                raise ValueError(f"{label} {value!r} must be a non-empty file-name part without '/'")
        if serial < 0:
            self.filename = f"{prefix}.warc.gz"
        else:
            stamp = self.timestamp.astimezone(UTC).strftime("%Y%m%d%H%M%S")
            self.filename = f"{prefix}-{stamp}-{serial}-{self.hostname}.warc.gz"
        folder_path = Path(folder)
        folder_path.mkdir(parents=True, exist_ok=True)
        self._final_path = folder_path / self.filename
        self.temp_path = folder_path / f"{self.filename}.tmp"
        # story-indexer's os.rename silently replaces an existing archive of the same name (two writers in
        # the same second with the same serial): refuse instead of losing an archive.
        if self._final_path.exists():
            raise FileExistsError(f"archive {self._final_path} already exists")
        self.deterministic_ids = deterministic_ids
        self.stories_written = 0
        self.size = -1
        self._records_written = 0
        self._state = "open"
        self._file: BinaryIO = open(self.temp_path, "wb")  # noqa: SIM115 - closed by finish()/abort()
        try:
            self._writer = WARCWriter(self._file, gzip=True, warc_version=WARC_VERSION)
            self._write_warcinfo()
        except BaseException:
            self.abort()
            raise

    # -- context manager ---------------------------------------------------------------------------------

    def __enter__(self) -> StoryArchiveWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()

    # -- public ------------------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The finished archive. Raises RuntimeError before `finish()` (the file does not exist yet)."""
        if self._state != "finished":
            raise RuntimeError(f"archive {self.filename} is {self._state}, not finished")
        return self._final_path

    def write_story(self, story: StoryRecord, extra_metadata: dict[str, Any] | None = None) -> None:
        """Append one story as a (response, metadata) record pair.

        The URL is story-indexer's choice: `story.url`, else content_metadata.url, else `original_url`, else
        rss_entry.link. Raises `ArchiveStoryError("no-url")` / `("no-html")` when there is nothing to write.
        """
        if self._state != "open":
            raise RuntimeError(f"archive {self.filename} is {self._state}; cannot write")
        metadata = _jsonable(story.metadata or {}, "metadata")
        if not isinstance(metadata, dict):
            raise TypeError("StoryRecord.metadata must be a dict")
        rss_entry = _section(metadata, "rss_entry")
        http_metadata = _section(metadata, "http_metadata")
        content_metadata = _section(metadata, "content_metadata")

        url = story.url or content_metadata.get("url") or story.original_url or rss_entry.get("link")
        if not url:
            raise ArchiveStoryError("no-url")
        if not story.html:
            raise ArchiveStoryError("no-html")
        if not isinstance(story.html, bytes | bytearray):
            raise TypeError(f"StoryRecord.html must be bytes, not {type(story.html).__name__} ({url})")
        status = story.http_status
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError(f"http_status {status!r} is not an HTTP status code ({url})")

        encoding = story.encoding or http_metadata.get("encoding")
        fetch_date = self._fetch_date(story, http_metadata)
        warc_date = fetch_date.strftime("%Y-%m-%dT%H:%M:%SZ")  # WARC/1.0: whole seconds

        # The metadata says what the record fields say, so a reader of either gets the same story.
        http_metadata.update(
            final_url=url,
            response_code=status,
            encoding=encoding,
            fetch_timestamp=fetch_date.timestamp(),
        )
        if story.original_url:
            content_metadata["original_url"] = story.original_url
        if extra_metadata:
            clash = {"rss_entry", "http_metadata", "content_metadata"} & set(extra_metadata)
            if clash:
                raise ValueError(f"extra_metadata may not replace {sorted(clash)}")
            extra = _jsonable(extra_metadata, "extra_metadata")
            metadata.update(extra)
        body = {"rss_entry": rss_entry, "http_metadata": http_metadata, "content_metadata": content_metadata}
        body.update((key, value) for key, value in metadata.items() if key not in body)

        # story-indexer's layout: no request record, a forged HTTP/1.0 head, "<code> HUH?" for non-200, and
        # the non-standard "; encoding=" parameter (readers here accept it as well as "charset=").
        status_line = "200 OK" if status == 200 else f"{status} HUH?"
        content_type = f"text/html; encoding={encoding}" if encoding else "text/html"
        html = bytes(story.html)
        http_headers = StatusAndHeaders(
            status_line,
            [("Content-Type", content_type), ("Content-Length", str(len(html)))],
            protocol="HTTP/1.0",
        )
        response_headers = {"WARC-Date": warc_date}
        self._add_record_id(response_headers, "response", url, warc_date)
        response = self._writer.create_warc_record(
            url,
            "response",
            payload=io.BytesIO(html),
            length=len(html),
            warc_headers_dict=response_headers,
            http_headers=http_headers,
        )
        self._writer.write_record(response)

        metadata_bytes = json.dumps(body, indent=2, allow_nan=False).encode()
        metadata_headers = {
            "Content-Type": METADATA_CONTENT_TYPE,
            "WARC-Refers-To": response.rec_headers.get_header("WARC-Record-ID"),
            "WARC-Date": warc_date,
        }
        self._add_record_id(metadata_headers, "metadata", url, warc_date)
        metadata_record = self._writer.create_warc_record(
            url,
            "metadata",
            payload=io.BytesIO(metadata_bytes),
            length=len(metadata_bytes),
            warc_headers_dict=metadata_headers,
        )
        self._writer.write_record(metadata_record)
        self.stories_written += 1

    def finish(self) -> Path:
        """Close and rename the temporary file to the archive name; returns the archive path."""
        if self._state == "finished":
            return self._final_path
        if self._state != "open":
            raise RuntimeError(f"archive {self.filename} was {self._state}")
        self._file.close()
        self.size = self.temp_path.stat().st_size
        if self._final_path.exists():
            self.abort()
            raise FileExistsError(f"archive {self._final_path} appeared while writing; not replaced")
        os.replace(self.temp_path, self._final_path)
        self._state = "finished"
        logger.info("wrote %d stories to %s", self.stories_written, self._final_path)
        return self._final_path

    def abort(self) -> None:
        """Drop the archive: close and delete the temporary file. Safe to call more than once."""
        if self._state == "finished":
            return
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            self.temp_path.unlink()
        self._state = "aborted"

    # -- internals ---------------------------------------------------------------------------------------

    def _write_warcinfo(self) -> None:
        info = {
            "hostname": self.hostname,
            "software": SOFTWARE,
            "format": "WARC file version " + WARC_VERSION.split("/")[-1],
        }
        payload = "".join(f"{key}: {value}\r\n" for key, value in info.items()).encode()
        headers = {
            "WARC-Filename": self.filename,
            "Content-Type": "application/warc-fields",
            # the moment in the file name, not warcio's clock, so both agree (and tests can fix it)
            "WARC-Date": self.timestamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        self._add_record_id(headers, "warcinfo", "", headers["WARC-Date"])
        record = self._writer.create_warc_record(
            "", "warcinfo", payload=io.BytesIO(payload), length=len(payload), warc_headers_dict=headers
        )
        self._writer.write_record(record)

    def _add_record_id(self, headers: dict[str, str], record_type: str, url: str, warc_date: str) -> None:
        if self.deterministic_ids:
            name = f"{self.filename}|{self._records_written}|{record_type}|{url}|{warc_date}"
            headers["WARC-Record-ID"] = f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, name)}>"
        self._records_written += 1

    def _fetch_date(self, story: StoryRecord, http_metadata: dict[str, Any]) -> datetime:
        if story.fetch_date is not None:
            return _require_aware(story.fetch_date, "fetch_date").astimezone(UTC)
        timestamp = http_metadata.get("fetch_timestamp")
        if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
            return datetime.fromtimestamp(timestamp, UTC)
        return self.timestamp.astimezone(UTC)


def _section(metadata: dict[str, Any], name: str) -> dict[str, Any]:
    value = metadata.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"metadata[{name!r}] must be a dict, not {type(value).__name__}")
    return value


def _jsonable(value: Any, where: str) -> Any:
    """A deep JSON-ready copy: dates become ISO strings, tuples/sets lists, enums their value.

    story-indexer's `_massage_metadata` repr()s anything that is not a scalar, so a list (authors) or a
    nested dict was archived as a Python repr string; here structure survives and anything unknown is a
    TypeError naming where it is.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{where} is {value!r}, which JSON cannot hold")
        return value
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Enum):
        return _jsonable(value.value, where)
    if isinstance(value, dict):
        return {str(key): _jsonable(item, f"{where}[{key!r}]") for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [_jsonable(item, f"{where}[{index}]") for index, item in enumerate(items)]
    raise TypeError(f"{where} has a {type(value).__name__}, which cannot be archived as JSON")


def _require_aware(moment: datetime, name: str) -> datetime:
    if not isinstance(moment, datetime):
        raise TypeError(f"{name} must be a datetime, not {type(moment).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} {moment.isoformat()} must be timezone-aware (UTC)")
    return moment


# ---------------------------------------------------------------------------------------------------------
# Reading core
# ---------------------------------------------------------------------------------------------------------


class _RecordProblem(Exception):
    """A record that is readable but not usable (e.g. a response without an HTTP status line)."""


@dataclass(frozen=True)
class _MetadataRecord:
    refers_to: str | None
    url: str | None
    warc_date: str | None
    data: dict[str, Any]


@dataclass(frozen=True)
class _RequestRecord:
    record_id: str | None
    concurrent_to: tuple[str, ...]
    method: str


_Item = WarcPage | _MetadataRecord | _RequestRecord


def _existing_file(path: str | os.PathLike[str]) -> Path:
    file_path = Path(path)
    if not file_path.is_file():
        raise FileNotFoundError(f"WARC file {file_path} does not exist")
    return file_path


def _iter_items(
    path: Path,
    errors: list[WarcReadError] | None,
    check_digests: bool,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[_Item]:
    """Every usable record of the file, converted, with the repairs described in the module doc."""
    with path.open("rb") as handle:
        is_gzip = handle.read(2) == b"\x1f\x8b"
    start = 0
    inflated = 0  # across the scans of this file (one more after each resync), for max_file_bytes
    while True:
        with path.open("rb") as handle:
            handle.seek(start)
            scan = yield from _scan(
                handle, path, 0, errors, check_digests, limits, decompressed=False, inflated=inflated
            )
        inflated = scan.inflated
        failure = scan.failure
        if failure is None:
            tail = _tail_problem(path, is_gzip, scan)
            if tail is None:
                return
            # warcio can also end quietly at a corrupt gzip member in the middle: resume after it if a
            # record follows; if none does, the damage is the end of the file
            next_start = _next_record_start(path, tail.offset, is_gzip)
            if next_start is None or next_start <= start:
                _report(tail, errors)
                return
            if tail.offset != scan.problem_offset:  # one report per damaged record
                _report(WarcReadError(path, tail.offset, tail.reason), errors)
            logger.info("%s: resuming at offset %d after %s", path, next_start, tail.reason)
            start = next_start
            continue
        if start == 0 and is_gzip and scan.repairable:
            logger.info("%s: %s; re-reading as one continuous gzip stream", path, failure.reason)
            with gzip.open(path, "rb") as stream:
                again = yield from _scan(
                    stream, path, scan.consumed, errors, check_digests, limits, decompressed=True
                )
            inflated = max(inflated, again.inflated)
            if again.failure is None and again.consumed >= scan.consumed:
                # warcio takes a gzip stream that ends early (EOFError) for the end of the records
                tail = _tail_problem(path, True, _ScanResult())
                if tail is not None:
                    _report(tail, errors)
                return
            if again.consumed > scan.consumed:
                # the repair got further, so its error is the one that matters; its offset is in the
                # decompressed stream, where there is no resynchronising on the file
                _report(again.failure, errors)
                return
        next_start = None if failure.file_level else _next_record_start(path, failure.offset, is_gzip)
        if scan.short_record and next_start is None:  # the file ends inside this record: cut short
            failure = WarcReadError(
                path,
                failure.offset,
                f"{failure.reason}; the file ends inside it (cut short)",
                file_level=True,
            )
        _report(failure, errors)  # raises unless the caller collects errors
        if failure.file_level:  # cut short, or over the file's cap: nothing readable follows
            return
        if next_start is None or next_start <= start:  # never loop over the same bytes
            return
        logger.info("%s: resuming at offset %d after %s", path, next_start, failure.reason)
        start = next_start


_RESYNC_BLOCK = 1 << 20
_PLAIN_RECORD_START = re.compile(rb"\nWARC/\d\.\d+\r?\n")


def _next_record_start(path: Path, after: int, is_gzip: bool) -> int | None:
    """Where the next readable record starts after a broken one, or None.

    In a per-record gzip file, every record is its own gzip member: the next member whose first bytes
    inflate to "WARC/" (the gzip magic also occurs by chance inside compressed data, hence the check). In
    a plain WARC, the next "WARC/<version>" line.
    """
    marker = b"\x1f\x8b\x08" if is_gzip else b"\nWARC/"
    with path.open("rb") as handle:
        position = max(after, 0) + 1
        while True:
            handle.seek(position)
            block = handle.read(_RESYNC_BLOCK)
            index = block.find(marker)
            while index >= 0:
                if is_gzip and _inflates_to_warc(handle, position + index):
                    return position + index
                if not is_gzip and _PLAIN_RECORD_START.match(block, index):
                    return position + index + 1
                index = block.find(marker, index + 1)
            if len(block) < _RESYNC_BLOCK:
                return None
            position += len(block) - 16  # overlap: a marker may straddle two blocks


def _inflates_to_warc(handle: BinaryIO, offset: int) -> bool:
    handle.seek(offset)
    try:
        head = zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(handle.read(4096), 8)
    except zlib.error:
        return False
    return head.startswith(b"WARC/")


def _tail_problem(path: Path, is_gzip: bool, scan: _ScanResult) -> WarcReadError | None:
    """A file-level error when the file does not end where its last record did (module doc), else None.

    warcio ends its iteration quietly when a gzip member or a record header is cut short (EOFError is its
    "no more records"), so the records lost that way would go unreported without this check.
    """
    size = path.stat().st_size
    if not is_gzip:
        with path.open("rb") as handle:
            handle.seek(scan.end)
            rest = 0
            while block := handle.read(1 << 16):
                rest += len(block.strip(b"\r\n\t \x00"))
        if rest:
            return WarcReadError(
                path,
                scan.end,
                f"the file does not end with a complete record: {size - scan.end} byte(s) from here on "
                "are no record (the file was cut short, or damaged); whatever they held is lost",
                file_level=True,
            )
        return None
    position = scan.last_start if scan.last_start is not None else 0
    with path.open("rb") as handle:
        while position < size:
            handle.seek(position)
            inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
            fed = 0
            try:
                while not inflater.eof:
                    data = inflater.unconsumed_tail or handle.read(1 << 16)
                    if not inflater.unconsumed_tail:
                        fed += len(data)
                    if not data:
                        break
                    inflater.decompress(data, 1 << 20)  # only the end matters: output bounded, dropped
            except zlib.error as exc:
                return WarcReadError(
                    path,
                    position,
                    f"the gzip member here is corrupt ({exc}); its record is lost",
                    file_level=True,
                )
            if not inflater.eof:
                if position == scan.last_start:
                    reason = (
                        f"the file is cut short at byte {size}: the gzip member of the last record read, "
                        "which starts here, ends early, so that record may be incomplete"
                    )
                else:
                    reason = (
                        f"the file is cut short at byte {size}: the record whose gzip member starts here "
                        "is incomplete and lost"
                    )
                return WarcReadError(path, position, reason, file_level=True)
            position += fed - len(inflater.unused_data)
    return None


_FROM_ARC_HEADER = "X-Topicmap-Converted-From-ARC"


class _MarkingArcParser(ARC2WARCHeadersParser):
    """warcio's ARC → WARC header conversion, plus a marker header, so ARC records stay recognisable."""

    def _get_protocol_and_headers(
        self, headerline: str, parts: list[str]
    ) -> tuple[str, list[tuple[str, str]]]:
        protocol, headers = super()._get_protocol_and_headers(headerline, parts)
        return protocol, [*headers, (_FROM_ARC_HEADER, "1")]


class _OversizedHeaders(ValueError):
    """A record's header block is longer than ReadLimits.max_header_bytes (not a WARC, or a bomb)."""


class _OverFileLimit(Exception):
    """The file inflated past ReadLimits.max_file_bytes. Not a stream error: reading must stop, not resync."""


class _BoundedReader(DecompressingBufferedReader):
    """warcio's file reader with two bounds: a line (warcio reads header lines with no length) is at most
    `max_line` bytes, and the bytes inflated from the file (`num_read`, after `already` inflated by earlier
    scans of the same file) may not exceed `max_total`."""

    def __init__(self, stream: BinaryIO, *, max_line: int, max_total: int, already: int = 0) -> None:
        super().__init__(stream, block_size=BUFF_SIZE)
        self.max_line = max_line
        self.max_total = max_total
        self.num_read = already

    def readline(self, length: int | None = None) -> bytes:
        return super().readline(self.max_line if length is None else min(length, self.max_line))

    def _process_read(self, data: bytes) -> None:
        super()._process_read(data)
        if self.num_read > self.max_total:
            raise _OverFileLimit(f"the file inflates to more than max_file_bytes = {self.max_total} bytes")


class _HeaderBudget:
    """The stream a header block is parsed from, allowed `budget` bytes in all (header lines only)."""

    def __init__(self, stream: Any, budget: int) -> None:
        self.stream = stream
        self.remaining = budget
        self.budget = budget

    def readline(self, length: int | None = None) -> bytes:
        if self.remaining <= 0:
            raise _OversizedHeaders(f"record headers longer than max_header_bytes = {self.budget}")
        cap = self.remaining if length is None else min(length, self.remaining)
        line = self.stream.readline(cap)
        self.remaining -= len(line)
        return line

    def read(self, length: int | None = None) -> bytes:  # not used by warcio's header parsers; bounded anyway
        return self.readline(length)

    def tell(self) -> int:
        return self.stream.tell()


class _BoundedLoader(ArcWarcRecordLoader):
    """warcio's record loader with each record's WARC/ARC and HTTP header blocks parsed under a budget."""

    def __init__(self, max_header_bytes: int) -> None:
        super().__init__(verify_http=False, arc2warc=True)
        self.arc_parser = _MarkingArcParser()
        self.max_header_bytes = max_header_bytes

    def _detect_type_load_headers(self, stream: Any, statusline: Any = None, known_format: Any = None) -> Any:
        return super()._detect_type_load_headers(
            _HeaderBudget(stream, self.max_header_bytes), statusline, known_format
        )

    def load_http_headers(self, rec_type: str, uri: str, stream: Any, length: Any) -> Any:
        try:
            return super().load_http_headers(
                rec_type, uri, _HeaderBudget(stream, self.max_header_bytes), length
            )
        except _OversizedHeaders as exc:
            raise _OversizedHeaders(f"HTTP headers of {uri}: {exc}") from exc


def _archive_iterator(
    stream: BinaryIO, check_digests: bool, limits: ReadLimits = DEFAULT_READ_LIMITS, inflated: int = 0
) -> ArchiveIterator:
    iterator = ArchiveIterator(stream, arc2warc=True, check_digests=check_digests)
    # records are only read once iteration starts, so the bounded parts can still replace warcio's own
    iterator.loader = _BoundedLoader(limits.max_header_bytes)
    iterator.reader = _BoundedReader(
        iterator.fh, max_line=limits.max_header_bytes, max_total=limits.max_file_bytes, already=inflated
    )
    return iterator


@dataclass
class _ScanResult:
    consumed: int = 0  # records read (good or bad)
    failure: WarcReadError | None = None  # what stopped the scan, if anything did
    # whether reading the file as one continuous gzip stream could get past the failure: yes for warcio's
    # format errors and short records, which misplaced gzip member boundaries cause; no for corrupt
    # compressed data, which a second pass would only hit again
    repairable: bool = False
    short_record: bool = False  # the failure is a record shorter than its declared length
    problem_offset: int | None = None  # the offset of the last record reported as unusable
    last_start: int | None = None  # offset of the last record read
    end: int = 0  # where the last record read ends (its gzip member, or its block in a plain file)
    inflated: int = 0  # bytes inflated from the file so far, this scan and those before it


def _scan(
    stream: BinaryIO,
    path: Path,
    skip: int,
    errors: list[WarcReadError] | None,
    check_digests: bool,
    limits: ReadLimits,
    *,
    decompressed: bool,
    inflated: int = 0,
) -> Generator[_Item, None, _ScanResult]:
    """Read records from `stream`, skipping the first `skip`; `inflated` bytes were read by earlier scans."""
    iterator = _archive_iterator(stream, check_digests, limits, inflated)
    reader = iterator.reader  # warcio drops its reference when iteration ends
    result = yield from _scan_records(iterator, path, skip, errors, limits, decompressed)
    result.inflated = reader.num_read
    return result


def _scan_records(
    iterator: ArchiveIterator,
    path: Path,
    skip: int,
    errors: list[WarcReadError] | None,
    limits: ReadLimits,
    decompressed: bool,
) -> Generator[_Item, None, _ScanResult]:
    result = _ScanResult(end=max(iterator.offset, 0))  # where this scan started
    file_family: str | None = None

    def failed(offset: int, exc: BaseException) -> _ScanResult:
        over = isinstance(exc, _OverFileLimit)
        result.failure = WarcReadError(
            path,
            offset,
            f"{exc}; the rest of the file is not read" if over else _describe(exc),
            decompressed=decompressed,
            file_level=over,
        )
        result.repairable = isinstance(exc, ArchiveLoadFailed)
        return result

    while True:
        try:
            record = next(iterator)
        except StopIteration:
            return result
        except (*_STREAM_ERRORS, _OverFileLimit) as exc:
            return failed(iterator.offset if iterator.offset >= result.end else result.end, exc)
        # warcio's offsets go wrong (even negative) once gzip members and records disagree
        offset = iterator.offset if iterator.offset >= result.end else result.end
        item: _Item | None = None
        problem: str | None = None
        family = "ARC" if record.rec_headers.get_header(_FROM_ARC_HEADER) else "WARC"
        file_family = file_family or family
        if family != file_family and file_family == "WARC":
            # warcio reads ARC and WARC records in one pass, so a stray text line with five words in a
            # WARC file (or garbage inflated from a damaged gzip member) parses as an ARC record header
            # instead of failing. Its "length" is garbage too: reading on from where warcio would put us
            # can swallow the good records that follow, so stop here and resume at the next "WARC/" start.
            problem = f"{family} record in a {file_family} file (stray bytes read as a record header?)"
            result.failure = WarcReadError(path, offset, problem, decompressed=decompressed)
            return result
        try:
            if family != file_family:  # a WARC header inside an ARC file: its length is a real one
                problem = f"{family} record in a {file_family} file (stray bytes read as a record header?)"
            elif result.consumed >= skip:
                try:
                    item = _convert(record, path, offset, decompressed, limits)
                except _RecordProblem as exc:
                    problem = str(exc)
            missing = _drain(record)
            result.end = max(result.end, iterator.get_record_offset() + iterator.get_record_length())
        except (*_STREAM_ERRORS, _OverFileLimit) as exc:
            return failed(offset, exc)
        if missing:
            item = _complete_payload(item) if isinstance(item, WarcPage) else None
        if missing and item is None:
            reason = f"{record.rec_type} record truncated: {missing} of {record.length} bytes missing"
            result.failure = WarcReadError(path, offset, reason, decompressed=decompressed)
            result.repairable = result.short_record = True
            return result
        result.consumed += 1
        result.last_start = offset
        if problem is not None:
            result.problem_offset = offset
            _report(WarcReadError(path, offset, problem, decompressed=decompressed), errors)
        elif item is not None:
            yield item


def _complete_payload(page: WarcPage) -> WarcPage | None:
    """For a record short of its declared length: the page, if its HTTP head vouches for the body, else None.

    Lets a record count when only framing bytes are gone, e.g. an ARC whose CRs were stripped: the record
    length is then off by one byte per header line, the HTML is whole, and the reader has run on into the
    blank line after the record, which is trimmed off again here.
    """
    declared = (page.header("Content-Length") or "").strip()
    encoded = (page.header("Content-Encoding") or "identity").strip().lower() != "identity"
    if not declared.isdigit() or encoded or page.header("Transfer-Encoding") is not None:
        return None
    length = int(declared)
    if len(page.body) < length or page.body[length:].strip(b"\r\n"):
        return None
    return replace(page, body=page.body[:length])


def _report(error: WarcReadError, errors: list[WarcReadError] | None) -> None:
    if errors is None:
        raise error
    logger.warning("%s", error)
    errors.append(error)


def _drain(record: ArcWarcRecord) -> int:
    """Read the rest of the record block; return how many declared bytes the file did not have."""
    raw = record.raw_stream
    while raw.read(1 << 16):
        pass
    return max(int(getattr(raw, "limit", 0) or 0), 0)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no detail)"
    return f"{type(exc).__name__}: {text[:300]}"


def _convert(
    record: ArcWarcRecord,
    path: Path,
    offset: int,
    decompressed: bool,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> _Item | None:
    record_type = record.rec_type
    if record_type == "response":
        return _response_page(record, path, offset, decompressed, limits)
    if record_type == "resource":
        if _mime_type(record.content_type) not in HTML_MIME_TYPES:
            return None
        headers = (("Content-Type", record.content_type),)
        return _page(record, path, offset, decompressed, 200, headers, limits)
    if record_type == "metadata":
        if _mime_type(record.rec_headers.get_header("Content-Type")) != METADATA_CONTENT_TYPE:
            return None
        try:
            data = json.loads(_read_payload(record, limits.max_payload_bytes))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _RecordProblem(f"metadata record is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise _RecordProblem("metadata record JSON is not an object")
        return _MetadataRecord(
            refers_to=record.rec_headers.get_header("WARC-Refers-To"),
            url=_target_uri(record),
            warc_date=record.rec_headers.get_header("WARC-Date"),
            data=data,
        )
    if record_type == "request" and record.http_headers is not None:
        # warcio parses a request line "GET / HTTP/1.1" with the method as the "protocol"
        return _RequestRecord(
            record_id=record.rec_headers.get_header("WARC-Record-ID"),
            concurrent_to=_all_headers(record.rec_headers, "WARC-Concurrent-To"),
            method=(record.http_headers.protocol or "").upper(),
        )
    return None  # warcinfo, revisit, conversion, continuation, non-HTML resources


def _response_page(
    record: ArcWarcRecord, path: Path, offset: int, decompressed: bool, limits: ReadLimits
) -> WarcPage | None:
    url = _target_uri(record)
    if not url.lower().startswith(("http:", "https:")):
        return None  # dns:, whois:, ftp: captures are not web pages
    status = _status_code(record.http_headers)
    if status is None:
        raise _RecordProblem(f"response record for {url} has no valid HTTP status line")
    page = _page(record, path, offset, decompressed, status, tuple(record.http_headers.headers), limits)
    short = _short_body(page)
    if short is not None:
        raise _RecordProblem(f"response record for {url}: {short}")
    return page


def _short_body(page: WarcPage) -> str | None:
    """Why the page's body is cut, when its HTTP Content-Length says so: a record whose WARC Content-Length is
    too small ends inside the body (warcio then skips the rest with a warning), and a capture cut by a dropped
    connection ends early. Such a body is never stored as if it were the page. A record the crawler marked
    ``WARC-Truncated`` (its own size cap) is a page with ``truncated`` set, as before."""
    declared = (page.header("Content-Length") or "").strip()
    if not declared.isdigit() or page.truncated or page.header("Transfer-Encoding") is not None:
        return None
    if (page.header("Content-Encoding") or "identity").strip().lower() != "identity":
        return None  # the length is that of the encoded body; the decoded one is another size
    if len(page.body) < int(declared):
        return (
            f"body is {len(page.body):,} bytes, shorter than its HTTP Content-Length of {int(declared):,} "
            "(a WARC Content-Length too small, or a capture cut short); not stored cut"
        )
    return None


def _page(
    record: ArcWarcRecord,
    path: Path,
    offset: int,
    decompressed: bool,
    status: int,
    headers: tuple[tuple[str, str], ...],
    limits: ReadLimits,
) -> WarcPage:
    body = _read_payload(record, limits.max_payload_bytes)
    _drain(record)  # so the digest check has seen the whole block
    checker = getattr(record, "digest_checker", None)
    rec_headers = record.rec_headers
    return WarcPage(
        url=_target_uri(record),
        status=status,
        headers=tuple((str(key), str(value)) for key, value in headers),
        body=body,
        date=parse_warc_date(rec_headers.get_header("WARC-Date")),
        record_type=record.rec_type,
        record_id=rec_headers.get_header("WARC-Record-ID"),
        warc_path=str(path),
        offset=offset,
        offset_is_decompressed=decompressed,
        digest_ok=getattr(checker, "passed", None),
        truncated=rec_headers.get_header("WARC-Truncated"),
        concurrent_to=_all_headers(rec_headers, "WARC-Concurrent-To"),
    )


_BLOCK = 1 << 16


def _read_payload(record: ArcWarcRecord, limit: int) -> bytes:
    """The record's payload as the server meant it, like warcio's ``content_stream().read()`` (de-chunked,
    then gzip/deflate Content-Encoding undone; data that does not decode as announced is taken as it is),
    but streamed block by block with at most `limit` bytes of output: warcio reads a whole HTTP chunk and
    inflates it in one call, which is how a 1 MB file took gigabytes. Over the limit: `_RecordProblem`.
    """
    http = record.http_headers
    raw = record.raw_stream
    chunked = http is not None and (http.get_header("Transfer-Encoding") or "").strip().lower() == "chunked"
    encoding = (http.get_header("Content-Encoding") or "").strip().lower() if http is not None else ""
    pieces = _dechunked(raw) if chunked else _blocks(raw)
    out = bytearray()

    def too_large() -> _RecordProblem:
        return _RecordProblem(
            f"payload of {_target_uri(record) or record.rec_type} is larger than max_payload_bytes = {limit} "
            "once decompressed; record skipped"
        )

    if encoding not in ("gzip", "deflate"):  # identity, or one warcio does not decode either
        for piece in pieces:
            out += piece
            if len(out) > limit:
                raise too_large()
        return bytes(out)
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS)
    decoded = passthrough = False
    for piece in pieces:
        data = b"" if passthrough else piece
        while data and not inflater.eof:
            try:
                chunk = inflater.decompress(data, limit - len(out) + 1)
            except zlib.error as exc:
                if decoded:
                    raise _RecordProblem(
                        f"{encoding} payload of {_target_uri(record)} is corrupt after {len(out)} bytes: {exc}"
                    ) from exc
                if encoding == "deflate":  # warcio's fallback: "deflate" sent as a raw deflate stream
                    encoding = "raw deflate"
                    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                passthrough = True  # as warcio: not compressed after all, the bytes are the payload
                break
            decoded = True
            out += chunk
            if len(out) > limit:
                raise too_large()
            data = inflater.unconsumed_tail
        if passthrough:
            out += piece
            if len(out) > limit:
                raise too_large()
    return bytes(out)


def _blocks(raw: Any) -> Iterator[bytes]:
    while block := raw.read(_BLOCK):
        yield block


def _dechunked(raw: Any) -> Iterator[bytes]:
    """HTTP chunked transfer coding undone, streamed. As in warcio: data that is not chunked after all
    (a bad size line) is taken as it is from there on; a body cut off mid-chunk just ends."""
    while True:
        size_line = raw.readline(64)
        if not size_line:
            return
        try:
            if not size_line.endswith(b"\r\n"):
                raise ValueError("no CRLF")
            size = int(size_line[:-2].split(b";")[0], 16)
            if not 0 <= size <= 2**31:
                raise ValueError("chunk size out of range")
        except ValueError:
            yield size_line
            yield from _blocks(raw)
            return
        if size == 0:
            raw.read(2)
            return
        while size:
            data = raw.read(min(size, _BLOCK))
            if not data:
                return
            size -= len(data)
            yield data
        terminator = raw.read(2)
        if terminator != b"\r\n":
            yield terminator
            yield from _blocks(raw)
            return


def _all_headers(headers: StatusAndHeaders, name: str) -> tuple[str, ...]:
    wanted = name.lower()
    return tuple(value for key, value in headers.headers if key.lower() == wanted)


def _target_uri(record: ArcWarcRecord) -> str:
    # wget 1.x wrote "<http://...>" (pre-1.1 spec style); recent warcio strips it, older does not
    return (record.rec_headers.get_header("WARC-Target-URI") or "").strip().strip("<>").strip()


def _status_code(http_headers: StatusAndHeaders | None) -> int | None:
    if http_headers is None:
        return None
    code = (http_headers.get_statuscode() or "").strip()
    if not code.isdigit() or not 100 <= int(code) <= 599:
        return None
    return int(code)


def _mime_type(content_type: str | None) -> str | None:
    if not content_type:
        return None
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime or None


_CHARSET_PARAM = re.compile(r";\s*(?:charset|encoding)\s*=\s*[\"']?([^\s;\"']+)", re.IGNORECASE)


def _content_type_charset(content_type: str | None) -> str | None:
    match = _CHARSET_PARAM.search(content_type or "")
    return match.group(1) if match else None


def parse_warc_date(value: str | None) -> datetime | None:
    """A WARC-Date (``2024-05-01T12:00:00Z``, fractional seconds allowed) as aware UTC; None if unparsable."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


# ---------------------------------------------------------------------------------------------------------
# Public readers
# ---------------------------------------------------------------------------------------------------------


def read_warc_pages(
    path: str | os.PathLike[str],
    *,
    errors: list[WarcReadError] | None = None,
    check_digests: bool = True,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[WarcPage]:
    """Every page of a WARC or ARC file (gzipped or not): each HTTP(S) `response` record, and each
    `resource` record holding HTML. `request`, `revisit`, `warcinfo`, `metadata` and non-HTML resources
    are skipped; a revisit repeats an earlier capture's payload, so it adds no page.

    Errors follow the module policy: raised after the good pages (no `errors` list), or appended to
    `errors`. A missing file raises FileNotFoundError at once.
    """
    file_path = _existing_file(path)
    items = _iter_items(file_path, errors, check_digests, limits)
    return (item for item in items if isinstance(item, WarcPage))


def _iter_pairs(
    path: Path, errors: list[WarcReadError] | None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> Iterator[tuple[WarcPage, _MetadataRecord | None]]:
    """Each page with the story-indexer metadata record that refers to it (None for a plain crawl).

    story-indexer's reader is a strict state machine (warcinfo, then response, metadata, ...): a response
    without its metadata makes it skip the NEXT response too. Pairing by WARC-Refers-To keeps every page.
    """
    pending: WarcPage | None = None
    for item in _iter_items(path, errors, True, limits):
        if isinstance(item, WarcPage):
            if pending is not None:
                yield pending, None
            pending = item
        elif isinstance(item, _MetadataRecord):
            if pending is not None and item.refers_to in (None, pending.record_id):
                yield pending, item
                pending = None
            else:
                logger.warning("%s: metadata record for %s refers to no preceding response", path, item.url)
    if pending is not None:
        yield pending, None


def read_story_archive(
    path: str | os.PathLike[str],
    *,
    errors: list[WarcReadError] | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[StoryRecord]:
    """Stories from a story-indexer layout archive (ours or Media Cloud's), one per page.

    Tolerant of plain crawls: a page without a metadata record becomes a StoryRecord with empty metadata.
    As story-indexer's reader does, a missing ``content_metadata.parsed_date`` is filled from the metadata
    record's WARC-Date (without the Z). `fetch_date` comes from ``http_metadata.fetch_timestamp`` (full
    precision) or else the response's WARC-Date; `original_url` from ``content_metadata.original_url`` or
    else ``rss_entry.link``.
    """
    file_path = _existing_file(path)
    return (_story_record(page, meta) for page, meta in _iter_pairs(file_path, errors, limits))


def _story_record(page: WarcPage, meta: _MetadataRecord | None) -> StoryRecord:
    metadata: dict[str, Any] = dict(meta.data) if meta is not None else {}
    http_metadata = metadata.get("http_metadata") if isinstance(metadata.get("http_metadata"), dict) else {}
    rss_entry = metadata.get("rss_entry") if isinstance(metadata.get("rss_entry"), dict) else {}
    if meta is not None:
        content = metadata.get("content_metadata")
        content = dict(content) if isinstance(content, dict) else {}
        if not content.get("parsed_date") and meta.warc_date:
            content["parsed_date"] = meta.warc_date.removesuffix("Z")
        metadata["content_metadata"] = content
    content_metadata = metadata.get("content_metadata") or {}

    fetch_date = page.date
    timestamp = http_metadata.get("fetch_timestamp")
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
        with contextlib.suppress(OverflowError, OSError, ValueError):
            fetch_date = datetime.fromtimestamp(timestamp, UTC)
    encoding = http_metadata.get("encoding") or page.charset
    return StoryRecord(
        url=page.url,
        html=page.body,
        original_url=content_metadata.get("original_url") or rss_entry.get("link") or None,
        http_status=page.status,
        encoding=encoding if isinstance(encoding, str) else None,
        fetch_date=fetch_date,
        metadata=metadata,
    )


def stories_from_warc(
    path: str | os.PathLike[str],
    *,
    errors: list[WarcReadError] | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[dict[str, Any]]:
    """Story dicts for the story archive from any WARC/ARC file.

    Keys: url, title, text, publish_date (aware datetime or None), medium (always None: the caller derives
    it from the URL), html (raw bytes), encoding, fetch_date, language, canonical_domain, offset (of the
    response record, for reports).

    * A story-indexer archive (pages with a metadata record) gives title (``article_title``), text
      (``text_content``), publish_date (``publication_date``, else the RSS ``pub_date`` as story-indexer's
      importer does), language and canonical_domain from the metadata.
    * A generic crawl gives only the HTML: title, text and publish_date are None, and extracting them
      (trafilatura, htmldate) is the caller's job.

    Only 2xx captures become stories; a generic page must also be HTML (by Content-Type or sniffing).
    """
    file_path = _existing_file(path)
    for page, meta in _iter_pairs(file_path, errors, limits):
        if not 200 <= page.status < 300:
            continue
        if meta is None and not page.is_html:
            continue
        story = _story_record(page, meta)
        content = story.metadata.get("content_metadata") or {}
        rss_entry = story.metadata.get("rss_entry") or {}
        yield {
            "url": story.url,
            "title": (content.get("article_title") or content.get("title") or rss_entry.get("title"))
            if meta
            else None,
            "text": content.get("text_content") if meta else None,
            "publish_date": _publication_date(content, rss_entry) if meta else None,
            "medium": None,
            "html": story.html,
            "encoding": story.encoding,
            "fetch_date": story.fetch_date,
            "language": content.get("language"),
            "canonical_domain": content.get("canonical_domain"),
            "offset": page.offset,
        }


def _publication_date(content: dict[str, Any], rss_entry: dict[str, Any]) -> datetime | None:
    """content_metadata.publication_date (ISO date or datetime), else rss_entry.pub_date (RFC 2822)."""
    value = content.get("publication_date")
    if isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    pub_date = rss_entry.get("pub_date")
    if isinstance(pub_date, str) and pub_date.strip():
        try:
            parsed = parsedate_to_datetime(pub_date.strip())
        except (TypeError, ValueError):
            return None
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return None


# ---------------------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------------------


_EPOCH = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class _Capture:
    """Where a page is, plus what redirect following needs; the body stays on disk until asked for."""

    url: str
    date: datetime | None
    sequence: int
    status: int
    location: str | None
    warc_path: str
    offset: int
    offset_is_decompressed: bool

    @property
    def rank(self) -> tuple[datetime, int]:
        return (self.date or _EPOCH, self.sequence)


def replay_key(url: str) -> str:
    """The tolerant lookup key: no scheme (http = https), host lower-cased without a default port, no
    trailing slash, no fragment; the query is kept as is. ``www.`` is kept: it can be another site."""
    try:
        parts = urlsplit(url.strip().replace(" ", "%20"))
        host = (parts.hostname or "").rstrip(".")
    except ValueError:  # e.g. an unbalanced "[" read as a broken IPv6 host: no tolerance, just the text
        return url.strip().split("#", 1)[0].split("://", 1)[-1]
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, 80, 443) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return f"{netloc}{path}" + (f"?{parts.query}" if parts.query else "")


def _exact_key(url: str) -> str:
    return url.strip().replace(" ", "%20").split("#", 1)[0]


class WarcReplay:
    """Serve pages from one or more WARC/ARC files (or folders of them) as if fetched.

    The index maps each URL to its latest capture (by WARC-Date; on a tie the later file/record wins).
    Lookup tries the URL as given, then `replay_key` (http/https, trailing slash, host case). Responses
    whose request was not a GET (POST, HEAD: paired by WARC-Concurrent-To) are left out, since replaying a
    POST result for the spider's GET would be wrong. Bodies stay on disk; `get` reads one record.

    Files are indexed leniently: unreadable parts are skipped and listed in `errors` (``strict=True``
    raises the first instead).
    """

    def __init__(
        self,
        paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        *,
        strict: bool = False,
        max_redirects: int = 10,
        limits: ReadLimits = DEFAULT_READ_LIMITS,
    ) -> None:
        self.strict = strict
        self.limits = limits
        self.max_redirects = max_redirects
        self.errors: list[WarcReadError] = []
        self._exact: dict[str, _Capture] = {}
        self._loose: dict[str, list[_Capture]] = {}
        self._sequence = 0
        for file_path in _expand_paths(paths):
            self.add(file_path)

    def add(self, path: str | os.PathLike[str]) -> int:
        """Index one more file; returns how many captures it contributed."""
        file_path = _existing_file(path)
        captures: list[tuple[_Capture, str | None, tuple[str, ...]]] = []
        methods: dict[str, str] = {}  # record id → request method, for both ends of WARC-Concurrent-To
        for item in _iter_items(file_path, None if self.strict else self.errors, False, self.limits):
            if isinstance(item, WarcPage):
                self._sequence += 1
                capture = _Capture(
                    url=item.url,
                    date=item.date,
                    sequence=self._sequence,
                    status=item.status,
                    location=item.location if item.status in REDIRECT_STATUSES else None,
                    warc_path=item.warc_path,
                    offset=item.offset,
                    offset_is_decompressed=item.offset_is_decompressed,
                )
                captures.append((capture, item.record_id, item.concurrent_to))
            elif isinstance(item, _RequestRecord):
                for record_id in (item.record_id, *item.concurrent_to):
                    if record_id:
                        methods[record_id] = item.method
        added = 0
        for capture, record_id, concurrent_to in captures:
            linked = [methods[key] for key in (record_id, *concurrent_to) if key and key in methods]
            if any(method != "GET" for method in linked):
                continue
            self._index(capture)
            added += 1
        return added

    def _index(self, capture: _Capture) -> None:
        exact = _exact_key(capture.url)
        current = self._exact.get(exact)
        if current is None or capture.rank >= current.rank:
            self._exact[exact] = capture
        self._loose.setdefault(replay_key(capture.url), []).append(capture)

    def __len__(self) -> int:
        """How many distinct URLs have a capture."""
        return len(self._exact)

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self._lookup(url, set()) is not None

    def urls(self) -> list[str]:
        return sorted(capture.url for capture in self._exact.values())

    def get(self, url: str, *, follow_redirects: bool = True) -> WarcPage | None:
        """The latest capture of `url`, after following recorded 3xx redirects (Location resolved against
        the capture's URL), or None when the URL, or a redirect target on the way, was not captured, or the
        redirects loop or exceed `max_redirects`. The final page's `url` is the final URL."""
        visited: set[int] = set()
        current = url
        for _hop in range(self.max_redirects + 1):
            capture = self._lookup(current, visited)
            if capture is None:
                return None
            visited.add(capture.sequence)
            if not follow_redirects or capture.location is None:
                return self._load(capture)
            current = capture.location
        logger.warning("replay: more than %d redirects from %s", self.max_redirects, url)
        return None

    def _lookup(self, url: str, visited: set[int]) -> _Capture | None:
        exact = self._exact.get(_exact_key(url))
        if exact is not None and exact.sequence not in visited:
            return exact
        candidates = [c for c in self._loose.get(replay_key(url), ()) if c.sequence not in visited]
        return max(candidates, key=lambda c: c.rank) if candidates else None

    def _load(self, capture: _Capture) -> WarcPage:
        path = Path(capture.warc_path)
        opener = gzip.open if capture.offset_is_decompressed else open
        with opener(path, "rb") as stream:
            stream.seek(capture.offset)
            # digests unchecked, as when indexed, so a capture that indexed also loads
            iterator = _archive_iterator(stream, False, self.limits)
            try:
                record = next(iterator)
                item = _convert(record, path, capture.offset, capture.offset_is_decompressed, self.limits)
                if _drain(record) and isinstance(item, WarcPage):
                    item = _complete_payload(item)  # as when indexed: it passed this test then
            except (StopIteration, _RecordProblem, _OverFileLimit, *_STREAM_ERRORS) as exc:
                raise WarcReadError(
                    path, capture.offset, f"capture of {capture.url} no longer readable: {_describe(exc)}"
                ) from exc
        if not isinstance(item, WarcPage):
            raise WarcReadError(
                path, capture.offset, f"record at this offset is not the capture of {capture.url}"
            )
        return item


def _expand_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; folders become their WARC/ARC files (by suffix, sorted)."""
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    expanded: list[Path] = []
    for entry in given:
        entry_path = Path(entry)
        if entry_path.is_dir():
            expanded.extend(
                sorted(
                    p for p in entry_path.iterdir() if p.is_file() and p.name.lower().endswith(WARC_SUFFIXES)
                )
            )
        else:
            expanded.append(entry_path)
    return expanded
