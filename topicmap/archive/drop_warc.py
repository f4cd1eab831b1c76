"""WARC and ARC drops: the stories of a story-indexer archive or a generic crawl, as rows.

* WARC/ARC: see ``topicmap.archive.warc`` (bounded decompression, truncation reported with its offset);
  a story's place is its record offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from topicmap.archive.drop_rows import ArchiveFileError, RowError, SourceRow
from topicmap.archive.warc import ReadLimits, WarcReadError
from topicmap.archive.warc_stories import stories_from_warc
from topicmap.web.extract import extract_story


def warc_rows(path: Path, limits: ReadLimits) -> Iterator[SourceRow | RowError]:
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
