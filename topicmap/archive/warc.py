"""Reading WARC and ARC files: every page of a crawl, with its problems reported, in bounded memory.

`read_warc_pages` yields the pages of any WARC/ARC file (gzipped or not). The story-indexer layout (pages with
their metadata records) is read by ``topicmap.archive.warc_stories``, which also writes it; offline replay of a
crawl is ``topicmap.archive.warc_replay``. Both read through `iter_items` here. The parts of warcio this
reading bounds are replaced in ``topicmap.archive.warcio_internals``, and a payload is decoded by
``topicmap.archive.warc_payload``.

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

import gzip
import json
import logging
import os
import re
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urljoin

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParserException

from topicmap.archive.warc_payload import RecordProblem, read_payload
from topicmap.archive.warcio_internals import (
    FROM_ARC_HEADER,
    OverFileLimit,
    bounded_archive_iterator,
    digest_passed,
    drain,
)

logger = logging.getLogger(__name__)

METADATA_CONTENT_TYPE = "application/x.mediacloud-indexer+json"
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
    """Caps on what reading one drop may inflate to (see the module doc, and ``topicmap.archive.drop_csv`` and
    ``topicmap.archive.drop_parquet`` for CSV and Parquet).

    * ``max_payload_bytes``: one record's payload after de-chunking and Content-Encoding (50 MiB: far above
      any news page, which rarely exceed 5 MiB; a larger record is reported and skipped);
    * ``max_header_bytes``: one record's WARC or HTTP header block, and so any single header line;
    * ``max_file_bytes``: the whole file decompressed (16 GiB: a Common Crawl WARC of about 1 GiB gzipped
      inflates to about 5 GiB), and what the rows of any drop file decode to together;
    * ``max_expansion``: what the rows of one drop file may decode to, per byte the file holds on disk (1,000),
      but never less than ``max_row_bytes`` (so a small file of one long row loads). Text compresses about 3 to
      10 times; a file of kilobytes whose rows repeat one long value from a Parquet dictionary (or share it as a
      prefix) does not become gigabytes of stories. ``topicmap.archive.drop_rows.file_decoded_bound``;
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
    max_expansion: int = 1000

    def __post_init__(self) -> None:
        if self.max_expansion < 1:
            raise ValueError(f"ReadLimits.max_expansion = {self.max_expansion} is below 1")
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


@dataclass(frozen=True)
class MetadataRecord:
    refers_to: str | None
    url: str | None
    warc_date: str | None
    data: dict[str, Any]


@dataclass(frozen=True)
class RequestRecord:
    record_id: str | None
    concurrent_to: tuple[str, ...]
    method: str


Item = WarcPage | MetadataRecord | RequestRecord


def existing_file(path: str | os.PathLike[str]) -> Path:
    file_path = Path(path)
    if not file_path.is_file():
        raise FileNotFoundError(f"WARC file {file_path} does not exist")
    return file_path


def iter_items(
    path: Path,
    errors: list[WarcReadError] | None,
    check_digests: bool,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[Item]:
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
) -> Generator[Item, None, _ScanResult]:
    """Read records from `stream`, skipping the first `skip`; `inflated` bytes were read by earlier scans."""
    iterator, reader = bounded_archive_iterator(
        stream,
        check_digests=check_digests,
        max_header_bytes=limits.max_header_bytes,
        max_file_bytes=limits.max_file_bytes,
        inflated=inflated,
    )
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
) -> Generator[Item, None, _ScanResult]:
    result = _ScanResult(end=max(iterator.offset, 0))  # where this scan started
    file_family: str | None = None

    def failed(offset: int, exc: BaseException) -> _ScanResult:
        over = isinstance(exc, OverFileLimit)
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
        except (*_STREAM_ERRORS, OverFileLimit) as exc:
            return failed(iterator.offset if iterator.offset >= result.end else result.end, exc)
        # warcio's offsets go wrong (even negative) once gzip members and records disagree
        offset = iterator.offset if iterator.offset >= result.end else result.end
        item: Item | None = None
        problem: str | None = None
        family = "ARC" if record.rec_headers.get_header(FROM_ARC_HEADER) else "WARC"
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
                except RecordProblem as exc:
                    problem = str(exc)
            missing = drain(record)
            result.end = max(result.end, iterator.get_record_offset() + iterator.get_record_length())
        except (*_STREAM_ERRORS, OverFileLimit) as exc:
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


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no detail)"
    return f"{type(exc).__name__}: {text[:300]}"


def _convert(
    record: ArcWarcRecord,
    path: Path,
    offset: int,
    decompressed: bool,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Item | None:
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
            data = json.loads(read_payload(record, limits.max_payload_bytes, _target_uri(record)))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RecordProblem(f"metadata record is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise RecordProblem("metadata record JSON is not an object")
        return MetadataRecord(
            refers_to=record.rec_headers.get_header("WARC-Refers-To"),
            url=_target_uri(record),
            warc_date=record.rec_headers.get_header("WARC-Date"),
            data=data,
        )
    if record_type == "request" and record.http_headers is not None:
        # warcio parses a request line "GET / HTTP/1.1" with the method as the "protocol"
        return RequestRecord(
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
        raise RecordProblem(f"response record for {url} has no valid HTTP status line")
    page = _page(record, path, offset, decompressed, status, tuple(record.http_headers.headers), limits)
    short = _short_body(page)
    if short is not None:
        raise RecordProblem(f"response record for {url}: {short}")
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
    body = read_payload(record, limits.max_payload_bytes, _target_uri(record))
    drain(record)  # so the digest check has seen the whole block
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
        digest_ok=digest_passed(record),
        truncated=rec_headers.get_header("WARC-Truncated"),
        concurrent_to=_all_headers(rec_headers, "WARC-Concurrent-To"),
    )


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
    file_path = existing_file(path)
    items = iter_items(file_path, errors, check_digests, limits)
    return (item for item in items if isinstance(item, WarcPage))


def read_page_at(
    path: Path, offset: int, *, decompressed: bool, url: str, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> WarcPage:
    """The page whose record starts at `offset` (in the decompressed stream when `decompressed`), read again
    as when it was first read; a WarcReadError when it is no longer readable or is not the capture of `url`."""
    opener = gzip.open if decompressed else open
    with opener(path, "rb") as stream:
        stream.seek(offset)
        # digests unchecked, as when indexed, so a capture that indexed also loads
        iterator, _reader = bounded_archive_iterator(
            stream,
            check_digests=False,
            max_header_bytes=limits.max_header_bytes,
            max_file_bytes=limits.max_file_bytes,
        )
        try:
            record = next(iterator)
            item = _convert(record, path, offset, decompressed, limits)
            if drain(record) and isinstance(item, WarcPage):
                item = _complete_payload(item)  # as when indexed: it passed this test then
        except (StopIteration, RecordProblem, OverFileLimit, *_STREAM_ERRORS) as exc:
            raise WarcReadError(
                path, offset, f"capture of {url} no longer readable: {_describe(exc)}"
            ) from exc
    if not isinstance(item, WarcPage):
        raise WarcReadError(path, offset, f"record at this offset is not the capture of {url}")
    return item
