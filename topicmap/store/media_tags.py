"""Media tags: what kind of outlet a medium is, from a curated CSV (Media Cloud's tag_sets, tags, media_tags_map).

Media Cloud tagged media by hand and by collection: ``media_type`` (newspaper, digital native, broadcast, ...),
partisanship quintiles, country of publication. Researchers compared kinds of outlets with those tags and split
topics by them (media-tag foci). Here the tags are a file under version control, one row per tag of a medium::

    medium_url,tag_set,tag
    https://www.nytimes.com/,media_type,newspaper
    https://www.nytimes.com/,partisanship,center-left
    foxnews.com,partisanship,right

* ``medium_url`` finds the medium as stories find theirs: the medium with exactly that URL, else every medium
  whose lossy-normalized URL is the same (``www.``, ``m.``, the scheme and a trailing slash do not matter). A
  medium the store does not know yet (no story of it) is reported, not created; the tags apply once it is known
  and the file is loaded again (each topic's ``media_tags`` run loads it).
* ``tag_set`` is a name of lower-case letters, digits and ``_ - . :``; ``tag`` any text of at most 256
  characters without control characters. A medium may have several tags of one set.
* Rows that cannot be used are reported with their line number and skipped; the other rows load.
* The file is the source of truth for ``media_tags_map``: loading it adds the rows it names and removes the rows
  it no longer names. Tag sets and tags keep their ids once created.
* A tag on a duplicate medium (``media.dup_media_id``) counts for the medium its chain ends at, as every stage
  counts a duplicate medium's stories for its final medium: ``final_media_tags``.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select

from topicmap.store import schema as s
from topicmap.store.names import StoreError
from topicmap.store.tag_names import tag_problem, tag_set_problem
from topicmap.store.topic_store import TopicStore, chunks
from topicmap.store.version_stories import in_current_version
from topicmap.web.urls import normalize_url_lossy

MEDIA_TAGS_COLUMNS: tuple[str, ...] = ("medium_url", "tag_set", "tag")


@dataclass(frozen=True, slots=True)
class MediaTagRow:
    """One usable row of the tags file (``line``: its line number, the header being line 1)."""

    line: int
    medium_url: str
    tag_set: str
    tag: str
    #: the medium URL lossy-normalized, as media are found by it (computed once, when the row is read)
    normalized_url: str


@dataclass
class MediaTagsFile:
    """What a tags file holds: the usable rows and one message per row that was skipped."""

    path: Path
    rows: list[MediaTagRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _row_problem(medium_url: str, tag_set: str, tag: str, normalized_url: str | None) -> str | None:
    """Why a row cannot be used, or None."""
    missing = [
        name for name, value in zip(MEDIA_TAGS_COLUMNS, (medium_url, tag_set, tag), strict=True) if not value
    ]
    if missing:
        return f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} empty"
    if normalized_url is None:
        return f"medium_url {medium_url!r} is not a web address"
    return tag_set_problem(tag_set) or tag_problem(tag)


#: the largest tags file read (a row per tag of a medium: 2 million rows are about 70 MB)
MAX_FILE_BYTES = 512 * 1024 * 1024
#: the longest line of a tags file, in bytes: a medium URL is at most 1,024 characters (the store's URL limit),
#: a tag 256
MAX_LINE_BYTES = 8 * 1024


def _bounded_lines(handle: io.BufferedIOBase, path: Path) -> Iterator[str]:
    """The file's lines as text, each read only up to MAX_LINE_BYTES: a longer one is no row of a tags file and
    stops the read (a field of hundreds of MiB is never held). Decoded line by line, so a byte that is not UTF-8
    is named by its line."""
    number = 0
    while line := handle.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(line) > MAX_LINE_BYTES:
            raise StoreError(
                f"media tags file {path}:{number}: a line of more than {MAX_LINE_BYTES:,} bytes, which no row of "
                "medium_url, tag_set and tag needs: nothing of the file is loaded"
            )
        try:
            yield line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise StoreError(
                f"media tags file {path}:{number}: not UTF-8 text ({exc}): nothing of the file is loaded"
            ) from exc


def read_media_tags_csv(path: str | Path) -> MediaTagsFile:
    """The rows of a tags file (columns ``medium_url``, ``tag_set``, ``tag``; others are ignored), streamed.

    A row that cannot be used is reported as ``<file>:<line>: <why>`` and skipped. A missing column makes every
    row unusable (one problem, line 1). Raises ``StoreError``, naming the file and the line, when the file cannot
    be read whole as a tags file: not UTF-8 text, broken CSV quoting, a line over MAX_LINE_BYTES, a file over
    MAX_FILE_BYTES. Nothing of such a file is loaded (the file is the source of truth, so half of it would remove
    the tags of the other half).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        handle = path.open("rb")
    except OSError as exc:
        raise StoreError(f"media tags file {path}: cannot be read ({exc})") from exc
    if size > MAX_FILE_BYTES:
        handle.close()
        raise StoreError(
            f"media tags file {path}: {size:,} bytes, more than the {MAX_FILE_BYTES:,} a tags file may hold"
        )
    found = MediaTagsFile(path)
    with handle:
        # strict: a quote in the middle of a field is an error, not a guess at what the row meant
        reader = csv.reader(_bounded_lines(handle, path), strict=True)
        done = 0  # the line the last row read ends on: a row that cannot be read starts on the next one
        try:
            for line in _read_rows(reader, path, found):
                done = line
        except csv.Error as exc:
            raise StoreError(
                f"media tags file {path}:{done + 1}: cannot be read ({exc}): nothing of the file is loaded"
            ) from exc
    return found


def _read_rows(reader: Any, path: Path, found: MediaTagsFile) -> Iterator[int]:
    """The rows of ``reader`` (a ``csv.reader``), the header first, into ``found``; yields the line each row (the
    header, a blank line) ends on as it is read.

    A file holds a few hundred tags and tag sets and ten or so tags per medium in up to millions of rows, so each
    distinct value is kept once (the rows share it), and checked and normalized once."""
    fieldnames = next(reader, None)
    yield reader.line_num
    header = [name.strip() for name in fieldnames or []]
    absent = [column for column in MEDIA_TAGS_COLUMNS if column not in header]
    if absent:
        found.problems.append(
            f"{path}:1: expected the columns {', '.join(MEDIA_TAGS_COLUMNS)}; missing {', '.join(absent)} "
            f"(header: {fieldnames})"
        )
        return
    index = {name: position for position, name in enumerate(header)}  # a repeated name: its last column
    positions = [index[column] for column in MEDIA_TAGS_COLUMNS]
    seen: dict[tuple[str, str, str], int] = {}
    normalized: dict[str, str | None] = {}  # a medium's URL recurs on each of its tags: normalized once
    shared: dict[str, str] = {}
    tag_problems: dict[tuple[str, str], str | None] = {}
    for fields in reader:
        line = reader.line_num  # the row's (last) line: a quoted tag may span lines
        yield line
        if not fields:  # a blank line
            continue
        if len(fields) > len(header):  # more fields than the header names: a comma inside an unquoted tag
            found.problems.append(f"{path}:{line}: more fields than columns (quote a tag that holds a comma)")
            continue
        medium_url, tag_set, tag = (
            shared.setdefault(value, value)
            for value in (fields[i].strip() if i < len(fields) else "" for i in positions)
        )
        if medium_url not in normalized:
            normalized[medium_url] = normalize_url_lossy(medium_url) if medium_url else None
        if medium_url and tag_set and tag and normalized[medium_url] is not None:
            pair = (tag_set, tag)
            if pair not in tag_problems:
                tag_problems[pair] = _row_problem(medium_url, tag_set, tag, normalized[medium_url])
            problem = tag_problems[pair]
        else:
            problem = _row_problem(medium_url, tag_set, tag, normalized[medium_url])
        if problem is not None:
            found.problems.append(f"{path}:{line}: {problem}")
            continue
        key = (medium_url, tag_set, tag)
        if key in seen:  # harmless, but a sign of a copy-paste slip: said once
            found.problems.append(f"{path}:{line}: repeats line {seen[key]}")
            continue
        seen[key] = line
        found.rows.append(
            MediaTagRow(line, medium_url, tag_set, tag, normalized_url=normalized[medium_url] or "")
        )


# --------------------------------------------------------------------------------------------- loading


@dataclass
class MediaTagsLoad:
    """What loading a tags file did."""

    rows: int = 0
    media_tagged: int = 0  # distinct media the rows found
    added: int = 0  # media_tags_map rows added now
    removed: int = 0  # media_tags_map rows the file no longer names, removed now
    unknown_media: list[str] = field(default_factory=list)  # medium URLs no medium of the store has
    tags_by_set: dict[str, int] = field(default_factory=dict)  # distinct tags per tag set


def _media_by_url(conn: Connection, rows: Iterable[MediaTagRow]) -> dict[str, list[int]]:
    """Each medium URL's media: the medium with exactly that URL, else all with its lossy-normalized URL."""
    md = s.media
    normalized_of = {row.medium_url: row.normalized_url for row in rows}
    wanted = sorted(normalized_of)
    exact: dict[str, list[int]] = {}
    for chunk in chunks(wanted):
        for media_id, url in conn.execute(select(md.c.media_id, md.c.url).where(md.c.url.in_(chunk))):
            exact.setdefault(url, []).append(int(media_id))
    normalized = {url: normalized_of[url] for url in wanted if url not in exact}
    by_normalized: dict[str, list[int]] = {}
    for chunk in chunks(sorted({n for n in normalized.values() if n})):
        for media_id, key in conn.execute(
            select(md.c.media_id, md.c.normalized_url).where(md.c.normalized_url.in_(chunk))
        ):
            by_normalized.setdefault(key, []).append(int(media_id))
    found = dict(exact)
    for url, key in normalized.items():
        if key in by_normalized:
            found[url] = sorted(by_normalized[key])
    return found


def _ensure_tags(
    store: TopicStore, conn: Connection, pairs: set[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """tags_id of each (tag_set, tag), creating the tag sets and tags that do not exist yet."""
    ts, tg = s.tag_sets, s.tags
    set_names = sorted({tag_set for tag_set, _ in pairs})
    store.insert_ignore(conn, ts, [{"name": name} for name in set_names], ["name"])
    set_ids: dict[str, int] = {}
    for chunk in chunks(set_names):
        set_ids.update(
            (name, int(i))
            for i, name in conn.execute(select(ts.c.tag_sets_id, ts.c.name).where(ts.c.name.in_(chunk)))
        )
    rows = [{"tag_sets_id": set_ids[tag_set], "tag": tag} for tag_set, tag in sorted(pairs)]
    store.insert_ignore(conn, tg, rows, ["tag_sets_id", "tag"])
    names = {i: name for name, i in set_ids.items()}
    tag_ids: dict[tuple[str, str], int] = {}
    for chunk in chunks(sorted(set_ids.values())):
        for tags_id, tag_sets_id, tag in conn.execute(
            select(tg.c.tags_id, tg.c.tag_sets_id, tg.c.tag).where(tg.c.tag_sets_id.in_(chunk))
        ):
            key = (names[int(tag_sets_id)], tag)
            if key in pairs:
                tag_ids[key] = int(tags_id)
    return tag_ids


#: the table a load stages the file's (media_id, tags_id) pairs in: temporary, so only the loading connection sees
#: it, and dropped before the load commits (on PostgreSQL also by ON COMMIT DROP), or rolled back with the load
STAGING_TABLE = "media_tags_staging"
#: pairs written to the staging table per statement: the parameters held at once stay bounded
STAGE_BATCH = 10_000


def _packed_pairs(
    usable: Sequence[MediaTagRow], media_of: dict[str, list[int]], tag_ids: dict[tuple[str, str], int]
) -> tuple[list[int], int]:
    """The distinct (media_id, tags_id) pairs of the rows, each packed in one int (``media_id << shift | tags_id``),
    sorted: sorting ints is a C loop where tuples cost a Python comparison each, and ``media_tags_map``'s key order
    is the pairs' order, so the staging table and the map are written in index order. Returns them and ``shift``."""
    shift = max(tag_ids.values(), default=0).bit_length()
    packed = {
        media_id << shift | tag_ids[(row.tag_set, row.tag)]
        for row in usable
        for media_id in media_of[row.medium_url]
    }
    return sorted(packed), shift


def _stage(conn: Connection, packed: list[int], shift: int, dialect: str) -> None:
    """``packed`` pairs into a fresh, index-free staging table (through the driver: SQLAlchemy's per-row
    parameter handling costs more than the insert), its unique index built after."""
    mask = (1 << shift) - 1
    if dialect == "postgresql":
        conn.exec_driver_sql(
            f"CREATE TEMPORARY TABLE {STAGING_TABLE} (media_id BIGINT NOT NULL, tags_id BIGINT NOT NULL) "
            "ON COMMIT DROP"
        )
    else:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{STAGING_TABLE}")
        conn.exec_driver_sql(
            f"CREATE TEMPORARY TABLE {STAGING_TABLE} (media_id INTEGER NOT NULL, tags_id INTEGER NOT NULL)"
        )
    cursor = conn.connection.cursor()
    try:
        for batch in chunks(packed, STAGE_BATCH):
            values = [(pair >> shift, pair & mask) for pair in batch]
            if dialect == "postgresql":
                lines = "".join(f"{media_id}\t{tags_id}\n" for media_id, tags_id in values)
                cursor.copy_expert(f"COPY {STAGING_TABLE} (media_id, tags_id) FROM STDIN", io.StringIO(lines))
            else:
                cursor.executemany(f"INSERT INTO {STAGING_TABLE} (media_id, tags_id) VALUES (?, ?)", values)
    finally:
        cursor.close()
    conn.exec_driver_sql(f"CREATE UNIQUE INDEX {STAGING_TABLE}_key ON {STAGING_TABLE} (media_id, tags_id)")
    if dialect == "postgresql":
        conn.exec_driver_sql(f"ANALYZE {STAGING_TABLE}")  # a temporary table has no statistics of its own


def _merge_staged(conn: Connection) -> tuple[int, int]:
    """Make ``media_tags_map`` hold exactly the staged pairs, set-based: (rows added, rows removed). The rows added
    go in key order; a row both hold is left as it is (its id kept, no sequence value spent)."""
    removed = conn.exec_driver_sql(
        "DELETE FROM media_tags_map WHERE NOT EXISTS (SELECT 1 FROM "
        f"{STAGING_TABLE} st WHERE st.media_id = media_tags_map.media_id AND st.tags_id = media_tags_map.tags_id)"
    ).rowcount
    added = conn.exec_driver_sql(
        f"INSERT INTO media_tags_map (media_id, tags_id) SELECT st.media_id, st.tags_id FROM {STAGING_TABLE} st "
        "WHERE NOT EXISTS (SELECT 1 FROM media_tags_map mt WHERE mt.media_id = st.media_id "
        "AND mt.tags_id = st.tags_id) ORDER BY st.media_id, st.tags_id "
        "ON CONFLICT (media_id, tags_id) DO NOTHING"
    ).rowcount
    return max(added or 0, 0), max(removed or 0, 0)


def load_media_tags(store: TopicStore, rows: Sequence[MediaTagRow]) -> MediaTagsLoad:
    """Make ``media_tags_map`` hold exactly the tags of ``rows`` (one transaction; idempotent).

    Rows naming a medium the store does not know are reported in ``unknown_media`` and otherwise skipped. The
    pairs are staged in a temporary table and merged by two statements, so the load's time follows the file's
    size: no row of the map is read into Python, and the rows added go in the order of the map's key.
    """
    report = MediaTagsLoad(rows=len(rows))

    def work(conn: Connection) -> None:
        media_of = _media_by_url(conn, rows)
        report.unknown_media = sorted({row.medium_url for row in rows if row.medium_url not in media_of})
        usable = [row for row in rows if row.medium_url in media_of]
        tag_ids = _ensure_tags(store, conn, {(row.tag_set, row.tag) for row in usable})
        packed, shift = _packed_pairs(usable, media_of, tag_ids)
        report.media_tagged = len({pair >> shift for pair in packed})
        try:
            _stage(conn, packed, shift, store.dialect)
            del packed
            report.added, report.removed = _merge_staged(conn)
        finally:
            if store.dialect != "postgresql":  # PostgreSQL drops it with the transaction, done or rolled back
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{STAGING_TABLE}")
        report.tags_by_set = dict(sorted(Counter(tag_set for tag_set, _ in tag_ids).items()))

    store.in_transaction(work)
    return report


# --------------------------------------------------------------------------------------------- reading


def declared_media_tags(conn: Connection) -> list[tuple[int, str, str]]:
    """Every (media_id, tag_set, tag) of ``media_tags_map``, on the medium the file named, sorted."""
    mt, tg, ts = s.media_tags_map, s.tags, s.tag_sets
    rows = conn.execute(
        select(mt.c.media_id, ts.c.name, tg.c.tag)
        .join(tg, tg.c.tags_id == mt.c.tags_id)
        .join(ts, ts.c.tag_sets_id == tg.c.tag_sets_id)
    ).all()
    return sorted((int(media_id), tag_set, tag) for media_id, tag_set, tag in rows)


def final_media(dup_of: dict[int, int | None]) -> dict[int, int]:
    """Each medium's final medium (itself when it is no duplicate), following dup_media_id chains; a cycle
    raises ``StoreError`` naming its media."""
    final: dict[int, int] = {}
    for start in dup_of:
        path = [start]
        node = start
        while node not in final and dup_of.get(node) is not None:
            node = int(dup_of[node])  # type: ignore[arg-type]
            if node in path:
                cycle = " -> ".join(str(m) for m in [*path[path.index(node) :], node])
                raise StoreError(f"duplicate-media cycle: media {cycle}")
            path.append(node)
        end = final.get(node, node)
        for medium in path:
            final[medium] = end
    return final


def final_media_tags(conn: Connection) -> list[tuple[int, str, str]]:
    """Every (media_id, tag_set, tag) with the tag moved to the medium's final medium, distinct and sorted: a
    tag a curator gave an old name or a mobile site of an outlet counts for the outlet."""
    declared = declared_media_tags(conn)
    if not declared:
        return []
    final = final_media(dict(conn.execute(select(s.media.c.media_id, s.media.c.dup_media_id)).all()))
    return sorted({(final.get(media_id, media_id), tag_set, tag) for media_id, tag_set, tag in declared})


@dataclass
class TopicTagCoverage:
    """How the tags cover a topic's media: per (tag_set, tag) its media and stories, per tag set the media
    without any of its tags."""

    media: int = 0  # final media with a topic story
    stories: int = 0
    by_tag: list[dict[str, object]] = field(default_factory=list)  # tag_set, tag, media, stories
    untagged_media: dict[str, int] = field(default_factory=dict)  # per tag set


def topic_tag_coverage(store: TopicStore, topics_id: int) -> TopicTagCoverage:
    """The tags of a topic's media (final media, as snapshots count them)."""
    with store.engine.connect() as conn:
        final = final_media(dict(conn.execute(select(s.media.c.media_id, s.media.c.dup_media_id)).all()))
        story_media = [
            final.get(int(m), int(m))
            for (m,) in conn.execute(
                select(s.stories.c.media_id)
                .join(s.topic_stories, s.topic_stories.c.stories_id == s.stories.c.stories_id)
                .where(in_current_version(topics_id))
            )
        ]
        tags = final_media_tags(conn)
    stories_of = Counter(story_media)
    coverage = TopicTagCoverage(media=len(stories_of), stories=len(story_media))
    in_topic = [(m, tag_set, tag) for m, tag_set, tag in tags if m in stories_of]
    grouped: dict[tuple[str, str], list[int]] = {}
    for media_id, tag_set, tag in in_topic:
        grouped.setdefault((tag_set, tag), []).append(media_id)
    coverage.by_tag = [
        {"tag_set": tag_set, "tag": tag, "media": len(media), "stories": sum(stories_of[m] for m in media)}
        for (tag_set, tag), media in sorted(grouped.items())
    ]
    tagged: dict[str, set[int]] = {}
    for media_id, tag_set, _ in in_topic:
        tagged.setdefault(tag_set, set()).add(media_id)
    all_sets = sorted({tag_set for _, tag_set, _ in tags})
    coverage.untagged_media = {
        tag_set: len(stories_of) - len(tagged.get(tag_set, ())) for tag_set in all_sets
    }
    return coverage
