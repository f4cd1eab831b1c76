"""Topic stories as WARC, in Media Cloud story-indexer's layout, and stories read back from any WARC.

* **Writing** (`StoryArchiveWriter`, as story-indexer's archiver writes them): a `warcinfo` record, then per
  story a `response` (forged HTTP/1.0 head + raw HTML) and a `metadata` record
  (`application/x.mediacloud-indexer+json`, `WARC-Refers-To` the response).
* **Reading** story-indexer archives back (`read_story_archive`), and any WARC/ARC crawl as story dicts for
  the archive (`stories_from_warc`), through the reader of ``topicmap.archive.warc`` and its error policy.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from email.utils import parsedate_to_datetime
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from topicmap.archive.warc import (
    DEFAULT_READ_LIMITS,
    METADATA_CONTENT_TYPE,
    MetadataRecord,
    ReadLimits,
    WarcPage,
    WarcReadError,
    existing_file,
    iter_items,
)

logger = logging.getLogger(__name__)

WARC_VERSION = WARCWriter.WARC_1_0  # story-indexer writes 1.0 "for maximum acceptance"
SOFTWARE = "topicmap StoryArchiveWriter (mediacloud story-indexer ArchiveWriter layout)"


class ArchiveStoryError(RuntimeError):
    """A story that cannot be archived. ``args[0]`` is a short counter name ("no-url", "no-html"), as in
    story-indexer, where callers count skipped stories by it."""


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
# Reading
# ---------------------------------------------------------------------------------------------------------


def _iter_pairs(
    path: Path, errors: list[WarcReadError] | None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> Iterator[tuple[WarcPage, MetadataRecord | None]]:
    """Each page with the story-indexer metadata record that refers to it (None for a plain crawl).

    story-indexer's reader is a strict state machine (warcinfo, then response, metadata, ...): a response
    without its metadata makes it skip the NEXT response too. Pairing by WARC-Refers-To keeps every page.
    """
    pending: WarcPage | None = None
    for item in iter_items(path, errors, True, limits):
        if isinstance(item, WarcPage):
            if pending is not None:
                yield pending, None
            pending = item
        elif isinstance(item, MetadataRecord):
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
    file_path = existing_file(path)
    return (_story_record(page, meta) for page, meta in _iter_pairs(file_path, errors, limits))


def _story_record(page: WarcPage, meta: MetadataRecord | None) -> StoryRecord:
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
    file_path = existing_file(path)
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
