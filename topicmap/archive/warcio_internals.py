"""Every use of warcio's private or undocumented API, in one place.

warcio reads a header line, a record's header block and the whole file without any bound, and has no public
hook to bound them or to mark the ARC records it converts to WARC; the reader in ``topicmap.archive.warc``
needs all three (its module doc says why). So the few parts of warcio that do it are subclassed or replaced
here, and nowhere else: ``tests/test_warc.py`` lists the names below against the installed warcio and fails
when another module uses a private name of warcio's. pyproject.toml pins warcio to the minor version tested.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import DecompressingBufferedReader
from warcio.recordloader import ARC2WARCHeadersParser, ArcWarcRecord, ArcWarcRecordLoader
from warcio.utils import BUFF_SIZE

#: warcio's private methods overridden here, as ``Class.method``.
PRIVATE_METHODS = (
    "ARC2WARCHeadersParser._get_protocol_and_headers",
    "ArcWarcRecordLoader._detect_type_load_headers",
    "DecompressingBufferedReader._process_read",
)
#: warcio's undocumented attributes read or replaced here, as ``Class.attribute``.
UNDOCUMENTED_ATTRIBUTES = (
    "ArchiveIterator.fh",
    "ArchiveIterator.loader",
    "ArchiveIterator.reader",
    "ArcWarcRecord.digest_checker",
    "DecompressingBufferedReader.num_read",
    "LimitReader.limit",
)

#: The header a converted ARC record carries, so the reader can tell ARC records from WARC ones.
FROM_ARC_HEADER = "X-Topicmap-Converted-From-ARC"


class OverFileLimit(Exception):
    """The file inflated past its cap (``ReadLimits.max_file_bytes``). Not a stream error: reading must stop,
    not resync."""


class OversizedHeaders(ValueError):
    """A record's header block is longer than its cap (``ReadLimits.max_header_bytes``): not a WARC, or a
    bomb."""


class _MarkingArcParser(ARC2WARCHeadersParser):
    """warcio's ARC → WARC header conversion, plus a marker header, so ARC records stay recognisable."""

    # no public hook adds a header to a converted ARC record
    def _get_protocol_and_headers(
        self, headerline: str, parts: list[str]
    ) -> tuple[str, list[tuple[str, str]]]:
        protocol, headers = super()._get_protocol_and_headers(headerline, parts)
        return protocol, [*headers, (FROM_ARC_HEADER, "1")]


class BoundedReader(DecompressingBufferedReader):
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

    # the one place every inflated block passes; warcio counts it in num_read but never bounds it
    def _process_read(self, data: bytes) -> None:
        super()._process_read(data)
        if self.num_read > self.max_total:
            raise OverFileLimit(f"the file inflates to more than max_file_bytes = {self.max_total} bytes")


class _HeaderBudget:
    """The stream a header block is parsed from, allowed `budget` bytes in all (header lines only)."""

    def __init__(self, stream: Any, budget: int) -> None:
        self.stream = stream
        self.remaining = budget
        self.budget = budget

    def readline(self, length: int | None = None) -> bytes:
        if self.remaining <= 0:
            raise OversizedHeaders(f"record headers longer than max_header_bytes = {self.budget}")
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

    # the WARC/ARC header block is parsed here from the raw stream; no public hook bounds it
    def _detect_type_load_headers(self, stream: Any, statusline: Any = None, known_format: Any = None) -> Any:
        return super()._detect_type_load_headers(
            _HeaderBudget(stream, self.max_header_bytes), statusline, known_format
        )

    def load_http_headers(self, rec_type: str, uri: str, stream: Any, length: Any) -> Any:
        try:
            return super().load_http_headers(
                rec_type, uri, _HeaderBudget(stream, self.max_header_bytes), length
            )
        except OversizedHeaders as exc:
            raise OversizedHeaders(f"HTTP headers of {uri}: {exc}") from exc


def bounded_archive_iterator(
    stream: BinaryIO, *, check_digests: bool, max_header_bytes: int, max_file_bytes: int, inflated: int = 0
) -> tuple[ArchiveIterator, BoundedReader]:
    """warcio's iterator over `stream` with the bounded loader and reader, and that reader (warcio drops its
    reference when iteration ends, and its ``num_read`` is what the file has inflated to so far)."""
    iterator = ArchiveIterator(stream, arc2warc=True, check_digests=check_digests)
    # records are only read once iteration starts, so the bounded parts can still replace warcio's own
    iterator.loader = _BoundedLoader(max_header_bytes)
    reader = BoundedReader(iterator.fh, max_line=max_header_bytes, max_total=max_file_bytes, already=inflated)
    iterator.reader = reader
    return iterator, reader


def drain(record: ArcWarcRecord) -> int:
    """Read the rest of the record block; return how many declared bytes the file did not have."""
    raw = record.raw_stream
    while raw.read(1 << 16):
        pass
    return max(int(getattr(raw, "limit", 0) or 0), 0)


def digest_passed(record: ArcWarcRecord) -> bool | None:
    """Whether the record's digests matched: None when none was recorded or checked."""
    checker = getattr(record, "digest_checker", None)
    return getattr(checker, "passed", None)
