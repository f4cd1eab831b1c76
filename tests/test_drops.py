"""Drops that never lose or invent a row, on real files generated here.

CSV: a 300 KiB html field, multi-line quoted fields, invalid UTF-8, a broken quote. Parquet: a truncated and
a misnamed file beside good ones, through the asset, re-run, then changed. WARC: decompression bombs read in
a subprocess whose peak memory is measured, a file over its cap, a .warc.gz cut at every byte. URLs over
1024 characters in drops and seed lists.
"""

from __future__ import annotations

import io
import os
import struct
import textwrap
import zipfile
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import select
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from tests.archive_runs import archive_runs, script_report
from tests.shared_data import WARC_DIR, require_shared
from topicmap.archive.drop_rows import ArchiveFileError
from topicmap.archive.drops import iter_drop, load_drop, parse_drop
from topicmap.archive.store import archive_file_record
from topicmap.archive.warc import MIB, ReadLimits, WarcReadError, read_warc_pages
from topicmap.archive.warc_stories import StoryArchiveWriter, StoryRecord, read_story_archive
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore
from topicmap.topics.seeding import read_seed_url_csv

HEADER = "url,title,text,publish_date,medium,html\n"


def csv_row(n: int, html: str = "<p>short</p>", title: str | None = None) -> str:
    title = title or f"Story {n}"
    return f'https://www.herald.test/2026/02/{n:02d}/s,{title},Text {n}.,2026-02-{n:02d},Herald,"{html}"\n'


# ---------------------------------------------------------------------------------------------- CSV


def test_a_300_kib_html_field_loads_whole_and_the_reader_keeps_its_place(tmp_path: Path) -> None:
    # an ordinary page: many lines, commas, quotes (doubled in CSV) and lines that look like CSV rows
    line = '<p class=""x"">Paris, 2026 - a sentence, with commas</p>\nhttps://evil.test/x,Invented,Row,2026-02-01,Evil\n'
    html_csv = line * (320 * 1024 // len(line))
    html = html_csv.replace('""', '"')
    assert len(html.encode()) > 300 * 1024
    path = tmp_path / "long.csv"
    path.write_text(HEADER + csv_row(1) + csv_row(2, html_csv) + csv_row(3), encoding="utf-8")

    drop = parse_drop(path)
    assert drop.errors == []
    assert [st.title for st in drop.stories] == ["Story 1", "Story 2", "Story 3"]  # none lost, none invented
    assert drop.stories[1].html == html.encode()  # the field, whole


def test_rejected_rows_name_their_exact_physical_lines(tmp_path: Path) -> None:
    rows = (
        HEADER
        + csv_row(1, "<p>one\ntwo\nthree</p>")  # lines 2-4
        + 'not a url,Bad,Text,2026-02-02,Herald,"<p>a\nb</p>"\n'  # lines 5-6
        + "\n"  # line 7: blank
        + csv_row(3)  # line 8
        + "https://ledger.test/x,Bad date,Text,yesterday,Ledger,\n"  # line 9
        + "https://ledger.test/y,Too,many,2026-02-03,Ledger,,extra\n"  # line 10
        + csv_row(4, "<p>\r\nwindows\r\nlines</p>")  # lines 11-13
        + "https://ledger.test/z,Short row\n"  # line 14
    )
    path = tmp_path / "lines.csv"
    path.write_bytes(rows.encode())
    drop = parse_drop(path)
    assert [st.title for st in drop.stories] == ["Story 1", "Story 3", "Story 4"]
    assert [(e.where, e.problem.split(" ")[0]) for e in drop.errors] == [
        ("lines 5-6", "url"),
        ("line 9", "publish_date"),
        ("line 10", "row"),
        ("line 14", "row"),
    ]
    assert str(drop.errors[0]) == f"{path}: lines 5-6: url 'not a url' is not an absolute http(s) URL"
    assert str(drop.errors[1]).startswith(f"{path}:9: ")
    assert "row has 7 fields, header has 6" in drop.errors[2].problem


def test_invalid_utf8_rejects_the_row_with_its_line_and_count(tmp_path: Path) -> None:
    good = csv_row(1).encode()
    latin1 = "https://ledger.test/2026/02/02/cafe,Caf\u00e9 cr\u00e8me,Text,2026-02-02,Ledger,\n".encode(
        "latin-1"
    )
    path = tmp_path / "mixed.csv"
    path.write_bytes(b"\xef\xbb\xbf" + HEADER.encode() + good + latin1 + csv_row(3).encode())  # with a BOM
    drop = parse_drop(path)
    assert [st.title for st in drop.stories] == ["Story 1", "Story 3"]
    (error,) = drop.errors
    assert error.line == 3 and error.path == str(path)
    assert error.problem.startswith("2 invalid UTF-8 byte(s) (the first is b'\\xe9')")
    assert all("\ufffd" not in (st.title or "") + st.text for st in drop.stories)  # nothing replaced


def test_a_csv_syntax_error_fails_the_file_at_its_line_keeping_the_rows_before(
    store: TopicStore, tmp_path: Path
) -> None:
    path = tmp_path / "quote.csv"
    # the unclosed quote of line 3 would swallow lines 3-5 into one field (the csv module's lenient mode)
    path.write_text(
        HEADER + csv_row(1) + 'https://a.test/2,"Unclosed,Text,2026-02-02,A,\n' + csv_row(4) + csv_row(5),
        encoding="utf-8",
    )
    with pytest.raises(ArchiveFileError, match=r"quote.csv:3: CSV syntax error in the row starting on this"):
        parse_drop(path)
    result = load_drop(store, path)
    assert (result.state, result.stories_read, result.created) == ("failed", 1, 1)
    assert store.table_count(s.stories) == 1  # the row before; no row guessed from the lines after
    record = archive_file_record(store, result.sha256)
    assert (
        record is not None and record.state == "failed" and "quote.csv:3: CSV syntax error" in record.reason
    )

    again = load_drop(store, path)  # unchanged: not read again, its reason kept
    assert again.state == "failed before" and again.reason == record.reason
    assert load_drop(store, path, retry_failed=True).state == "failed"  # asked to: read again

    # an unclosed quote in the last row would otherwise swallow the rest of the file without a word
    path.write_text(
        HEADER
        + csv_row(1)
        + 'https://a.test/2,"Unclosed,x,2026-02-02,A,\nhttps://a.test/3,T,x,2026-02-03,A,\n'
    )
    with pytest.raises(ArchiveFileError, match=r"quote.csv:3: .*unexpected end of data"):
        parse_drop(path)


def test_over_long_urls_are_rejected_with_a_reason_never_cut(store: TopicStore, tmp_path: Path) -> None:
    long_url = "https://www.herald.test/2026/02/01/story?" + "&".join(f"utm_{i}=x" for i in range(250))
    assert len(long_url) > s.MAX_URL_LENGTH
    path = tmp_path / "long_url.csv"
    path.write_text(HEADER + f"{long_url},Long,Text,2026-02-01,Herald,\n" + csv_row(2), encoding="utf-8")
    result = load_drop(store, path)
    assert result.created == 1 and result.rows_rejected == 1
    assert f"url is {len(long_url)} characters, longer than the store's 1024" in result.errors[0].problem
    with store.engine.connect() as conn:
        stored = [row.url for row in conn.execute(select(s.stories.c.url))]
    assert stored == ["https://www.herald.test/2026/02/02/s"]  # no cut form of the long URL

    seeds = tmp_path / "seeds.csv"
    seeds.write_text(f"url,note\n{long_url},long\nhttps://a.test/ok,fine\n", encoding="utf-8")
    rows, errors = read_seed_url_csv(seeds)
    assert [r["url"] for r in rows] == ["https://a.test/ok"]
    assert errors[0].line == 2 and "longer than the store's 1024" in errors[0].problem


def test_seed_url_lists_report_invalid_utf8_and_missing_columns(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.csv"
    seeds.write_bytes(b"url\nhttps://a.test/caf\xe9\nhttps://a.test/ok\n")
    rows, errors = read_seed_url_csv(seeds)
    assert [r["url"] for r in rows] == ["https://a.test/ok"]
    assert errors[0].line == 2 and "1 invalid UTF-8 byte(s)" in errors[0].problem
    seeds.write_text("link\nhttps://a.test/\n", encoding="utf-8")
    rows, errors = read_seed_url_csv(seeds)
    assert rows == [] and "missing column(s) ['url']" in errors[0].problem


# ---------------------------------------------------------------------------------------------- files fail alone


def parquet_drop(path: Path, n: int, start: int = 1) -> Path:
    frame = pd.DataFrame(
        {
            "url": [f"https://ledger.test/2026/03/{i:02d}/p" for i in range(start, start + n)],
            "title": [f"Parquet {i}" for i in range(start, start + n)],
            "text": ["text"] * n,
            "publish_date": [f"2026-03-{i:02d}" for i in range(start, start + n)],
            "medium": ["Ledger"] * n,
        }
    )
    frame.to_parquet(path)
    return path


def test_broken_files_fail_alone_and_are_retried_only_when_they_change(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    drops = tmp_path / "drops"
    drops.mkdir()
    (drops / "a_good.csv").write_text(HEADER + csv_row(1) + csv_row(2), encoding="utf-8")
    full = parquet_drop(tmp_path / "full.parquet", 5).read_bytes()
    (drops / "b_truncated.parquet").write_bytes(full[: len(full) // 2])
    (drops / "c_misnamed.parquet").write_text(HEADER + csv_row(3), encoding="utf-8")
    parquet_drop(drops / "d_good.parquet", 3, start=10)
    db = sqlite_store_url
    run = archive_runs(drops, db)

    meta = run()
    assert (meta["files_loaded"].value, meta["files_failed"].value) == (2, 2)
    assert meta["stories_added"].value == 5 and meta["dagster/row_count"].value == 5
    failed = {r.data["file"]: r.data["reason"] for r in meta["failed_files"].value.records}
    assert set(failed) == {"b_truncated.parquet", "c_misnamed.parquet"}
    assert all("not a readable Parquet file" in reason for reason in failed.values())
    store = TopicStore.open(db)
    with store.engine.connect() as conn:
        states = dict(conn.execute(select(s.archive_files.c.path, s.archive_files.c.state)).all())
    assert {Path(p).name: st for p, st in states.items()} == {
        "a_good.csv": "loaded",
        "b_truncated.parquet": "failed",
        "c_misnamed.parquet": "failed",
        "d_good.parquet": "loaded",
    }

    meta = run()  # nothing changed: nothing read again, the failures stay reported
    assert (meta["files_already_loaded"].value, meta["files_failed"].value, meta["stories_added"].value) == (
        2,
        0,
        0,
    )
    assert len(meta["files_failed_before_unchanged"].value.records) == 2

    (drops / "b_truncated.parquet").write_bytes(full)  # the whole file arrives
    meta = run()
    assert (meta["files_loaded"].value, meta["stories_added"].value, meta["dagster/row_count"].value) == (
        1,
        5,
        10,
    )
    assert len(meta["files_failed_before_unchanged"].value.records) == 1
    store.dispose()


def test_files_holding_the_same_bytes_each_have_their_own_row_and_load_once(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    """Files are known by their content: a copy of a failed file was reported under the first file's reason, and
    a copy had no record of its own. Each file is recorded and reported under its own name, a copy naming the
    file it copies and that file's outcome, and is not read again; a second run adds and records nothing. A file
    of no drop format (a zip archive) is refused unread under its own name, a copy of it too."""
    drops = tmp_path / "drops"
    drops.mkdir()
    good = HEADER + csv_row(1) + csv_row(2)
    (drops / "a_good.csv").write_text(good, encoding="utf-8")
    (drops / "b_copy.csv").write_text(good, encoding="utf-8")
    full = parquet_drop(tmp_path / "full.parquet", 5).read_bytes()
    (drops / "c_truncated.parquet").write_bytes(full[: len(full) // 2])
    (drops / "d_truncated_too.parquet").write_bytes(full[: len(full) // 2])
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("stories.csv", good)
    (drops / "e_stories.zip").write_bytes(zipped.getvalue())
    (drops / "f_stories_copy.zip").write_bytes(zipped.getvalue())
    db = sqlite_store_url
    run = archive_runs(drops, db)

    meta = run()
    assert (meta["files_loaded"].value, meta["files_failed"].value, meta["stories_added"].value) == (1, 3, 2)
    failed, *refused = meta["failed_files"].value.records
    assert failed.data["file"] == "c_truncated.parquet"
    assert [r.data["file"] for r in refused] == ["e_stories.zip", "f_stories_copy.zip"]
    assert all("not a drop format (expected one of .csv," in r.data["reason"] for r in refused)
    copies = {r.data["file"]: r.data for r in meta["files_same_bytes"].value.records}
    assert set(copies) == {"b_copy.csv", "d_truncated_too.parquet"}
    assert (copies["b_copy.csv"]["same_as"], copies["b_copy.csv"]["outcome"]) == ("a_good.csv", "loaded")
    assert copies["d_truncated_too.parquet"]["same_as"] == "c_truncated.parquet"
    assert copies["d_truncated_too.parquet"]["outcome"] == f"failed: {failed.data['reason']}"
    store = TopicStore.open(db)

    def recorded() -> dict[str, tuple[str, str | None]]:
        af = s.archive_files
        with store.engine.connect() as conn:
            rows = conn.execute(select(af.c.path, af.c.state, af.c.reason)).all()
        return {Path(path).name: (state, reason) for path, state, reason in rows}

    first = recorded()
    assert {name: state for name, (state, _) in first.items()} == {
        "a_good.csv": "loaded",
        "b_copy.csv": "same bytes",
        "c_truncated.parquet": "failed",
        "d_truncated_too.parquet": "same bytes",
        "e_stories.zip": "failed",
        "f_stories_copy.zip": "failed",
    }
    assert first["b_copy.csv"][1] == f"same bytes as {drops / 'a_good.csv'}"

    meta = run()  # nothing read again, nothing recorded twice
    assert (meta["files_already_loaded"].value, meta["files_failed"].value, meta["stories_added"].value) == (
        1,
        0,
        0,
    )
    assert len(meta["files_same_bytes"].value.records) == 2
    assert len(meta["files_failed_before_unchanged"].value.records) == 3
    assert recorded() == first and store.story_count() == 2
    store.dispose()


# ---------------------------------------------------------------------------------------------- WARC bombs


def _gzip_member_of_repeats(prefix: bytes, fill: bytes, mib: int, suffix: bytes) -> bytes:
    """A gzip member of prefix + `mib` MiB of `fill` + suffix, built without compressing every MiB: after a
    full flush the deflate output of the same MiB is the same bytes, so it is repeated as compressed data."""
    block = fill * (MIB // len(fill))
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    head = deflate.compress(prefix) + deflate.flush(zlib.Z_FULL_FLUSH)
    one = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    two = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert one == two
    tail = deflate.compress(suffix) + deflate.flush(zlib.Z_FINISH)
    crc = zlib.crc32(prefix)
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(suffix, crc)
    size = len(prefix) + mib * MIB + len(suffix)
    gzip_header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return gzip_header + head + one * mib + tail + struct.pack("<II", crc, size & 0xFFFFFFFF)


def _response_member(url: str, body: bytes, headers: list[tuple[str, str]]) -> bytes:
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True, warc_version="WARC/1.0")
    http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
    record = writer.create_warc_record(
        url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http
    )
    writer.write_record(record)
    return out.getvalue()


def _raw_response_member(url: str, http_head: bytes, fill: bytes, mib: int) -> bytes:
    """A response record whose block is `http_head` + `mib` MiB of `fill` (Content-Length says so)."""
    length = len(http_head) + mib * MIB
    warc_head = (
        f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: {url}\r\nWARC-Date: 2026-02-01T00:00:00Z\r\n"
        f"WARC-Record-ID: <urn:uuid:{abs(hash(url)):032x}>\r\nContent-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()
    return _gzip_member_of_repeats(warc_head + http_head, fill, mib, b"\r\n\r\n")


GOOD_HTML = b"<html><head><title>Good</title></head><body><p>A good page.</p></body></html>"
BOMB_MIB = 384


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int]]:
    """Per kind: a file of a good record, the bomb, a good record; and the bomb's offset."""
    folder = tmp_path_factory.mktemp("bombs")
    html_head = [("Content-Type", "text/html; charset=utf-8")]

    def good(n: int) -> bytes:
        return _response_member(f"https://good.test/{n}", GOOD_HTML, html_head)

    # 1. the payload gzip-encoded in ONE HTTP chunk (warcio reads a chunk whole and inflates it in one call)
    encoded = _gzip_member_of_repeats(b"<html>", b"\0", BOMB_MIB, b"</html>")
    chunked = f"{len(encoded):x}\r\n".encode() + encoded + b"\r\n0\r\n\r\n"
    content_bomb = _response_member(
        "https://bomb.test/content-encoding",
        chunked,
        [("Content-Type", "text/html"), ("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")],
    )
    # 2. the record itself: a block of zeros inside the file's own gzip member
    block_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
    block_bomb = _raw_response_member("https://bomb.test/block", block_head, b"\0", BOMB_MIB)
    # 3. an HTTP header line that never ends
    header_bomb = _raw_response_member(
        "https://bomb.test/header", b"HTTP/1.1 200 OK\r\nX-Bomb: ", b"a", BOMB_MIB
    )
    files = {}
    for kind, bomb in (("content", content_bomb), ("block", block_bomb), ("header", header_bomb)):
        first = good(1)
        path = folder / f"{kind}-bomb.warc.gz"
        path.write_bytes(first + bomb + good(2))
        assert path.stat().st_size < 2 * MIB  # and it inflates to more than 384 MiB
        files[kind] = (path, len(first))
    return files


READ_IN_SUBPROCESS = textwrap.dedent(
    """
    import json, re, sys
    from pathlib import Path
    from topicmap.archive.warc import read_warc_pages
    errors = []
    pages = [page.url for page in read_warc_pages(sys.argv[1], errors=errors)]
    # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec
    status = Path("/proc/self/status").read_text()
    peak_mib = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024
    print(json.dumps({"pages": pages, "errors": [[e.offset, e.reason] for e in errors], "peak_mib": peak_mib}))
    """
)


@pytest.mark.parametrize("kind", ["content", "block", "header"])
def test_decompression_bombs_are_skipped_and_named_in_bounded_memory(
    bombs: dict[str, tuple[Path, int]], kind: str
) -> None:
    path, bomb_offset = bombs[kind]
    report = script_report(READ_IN_SUBPROCESS, str(path))
    assert report["pages"] == ["https://good.test/1", "https://good.test/2"]  # the records beside it survive
    ((offset, reason),) = report["errors"]
    assert offset == bomb_offset  # the offending record's own offset
    if kind == "header":
        assert (
            "HTTP headers of https://bomb.test/header: record headers longer than max_header_bytes" in reason
        )
    else:
        assert (
            f"payload of https://bomb.test/{'content-encoding' if kind == 'content' else 'block'}" in reason
        )
        assert f"larger than max_payload_bytes = {50 * MIB}" in reason
    # 384 MiB would be read whole without the caps (several copies of it with warcio's chunk reader); the
    # bound is loose: the interpreter, warcio and one 50 MiB payload
    assert report["peak_mib"] < 200, report


def test_a_file_over_its_decompression_cap_fails_there(store: TopicStore, tmp_path: Path) -> None:
    html_head = [("Content-Type", "text/html")]
    members = [
        _response_member(f"https://big.test/{n}", b"<html>" + bytes(MIB) + b"</html>", html_head)
        for n in range(4)
    ]
    path = tmp_path / "big.warc.gz"
    path.write_bytes(b"".join(members))
    limits = ReadLimits(max_file_bytes=int(2.5 * MIB))
    errors: list[WarcReadError] = []
    pages = list(read_warc_pages(path, errors=errors, limits=limits))
    assert [p.url for p in pages] == ["https://big.test/0", "https://big.test/1"]
    (error,) = errors
    assert error.file_level and error.offset == len(members[0]) + len(members[1])
    assert "more than max_file_bytes = 2621440 bytes; the rest of the file is not read" in error.reason
    result = load_drop(store, path, limits=limits)
    assert result.state == "failed" and "max_file_bytes" in (result.reason or "")
    assert list(read_warc_pages(path)) and len(list(read_warc_pages(path))) == 4  # the default cap is far


# ---------------------------------------------------------------------------------------------- truncation


@dataclass(frozen=True)
class CutArchive:
    """A story archive of three stories (``data``, its records starting at ``starts``), read cut at every byte:
    the sizes read without an error, and those whose last error did not name the cut record's start."""

    data: bytes
    starts: list[int]
    silent: list[int]
    misplaced: list[tuple[int, int | None]]  # (size, the offset the last error named)


@pytest.fixture(scope="module")
def cut_archive(tmp_path_factory: pytest.TempPathFactory) -> CutArchive:
    """Read once per module: reading cuts at every byte involves no store, and takes seconds."""
    folder = tmp_path_factory.mktemp("cut_archive")
    with StoryArchiveWriter(folder, prefix="full", serial=-1, deterministic_ids=True) as writer:
        for n in range(3):
            writer.write_story(
                StoryRecord(
                    url=f"https://www.herald.test/2026/02/0{n + 1}/s",
                    html=GOOD_HTML,
                    fetch_date=datetime(2026, 2, 1, tzinfo=UTC),
                    metadata={"content_metadata": {"article_title": f"Story {n}", "text_content": "Text."}},
                )
            )
    data = (folder / "full.warc.gz").read_bytes()
    from warcio.archiveiterator import ArchiveIterator

    with (folder / "full.warc.gz").open("rb") as handle:
        iterator = ArchiveIterator(handle)
        starts = [iterator.get_record_offset() for _ in iterator]
    boundaries = set(starts[1:])
    cut = folder / "cut.warc.gz"
    cut.write_bytes(data)
    silent, misplaced = [], []
    # cut shorter and shorter in place: rewriting the file for each size waits on the disk (ext4 flushes a file
    # truncated to nothing and written again) for seconds
    for size in range(len(data) - 1, 0, -1):
        os.truncate(cut, size)
        errors: list[WarcReadError] = []
        list(read_story_archive(cut, errors=errors))
        if not errors:
            silent.append(size)
        elif size not in boundaries and errors[-1].offset != max(start for start in starts if start < size):
            misplaced.append((size, errors[-1].offset))
    return CutArchive(data, starts, silent, misplaced)


def test_a_warc_gz_cut_anywhere_but_between_records_is_reported_with_its_offset(
    store: TopicStore, tmp_path: Path, cut_archive: CutArchive
) -> None:
    data, starts = cut_archive.data, cut_archive.starts
    # the last error names where the cut record starts
    assert cut_archive.misplaced == []
    assert set(cut_archive.silent) == set(starts[1:])  # a cut between records leaves a valid, shorter WARC

    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(data[: starts[-1] + 40])  # into the last story's metadata record
    result = load_drop(store, cut)
    assert result.state == "failed" and result.created == 3
    assert f"offset {starts[-1]}: the file is cut short at byte {starts[-1] + 40}" in (result.reason or "")


def test_real_files_read_clean_under_the_caps_and_report_when_cut(tmp_path: Path) -> None:
    require_shared(WARC_DIR / "example.warc.gz")
    for name in ("example.warc.gz", "example.warc", "example.arc", "example.arc.gz", "post-test.warc.gz"):
        errors: list[WarcReadError] = []
        assert list(read_warc_pages(WARC_DIR / name, errors=errors)), name
        assert errors == [], (name, errors)  # the end-of-file check raises no false alarm
    data = (WARC_DIR / "example.warc.gz").read_bytes()
    cut = tmp_path / "example-cut.warc.gz"
    for size in (len(data) - 1, len(data) - 9, len(data) // 2, 100):
        cut.write_bytes(data[:size])
        errors = []
        list(read_warc_pages(cut, errors=errors))
        assert errors and errors[-1].file_level, size


def test_a_generic_crawl_page_keeps_its_own_day_and_how_it_was_read(tmp_path: Path) -> None:
    """A WARC drop of a generic crawl goes through the spider's extraction: the story keeps the page's own
    UTC offset (its calendar day) and records how its title, date and language were found."""
    html = (
        b"<html lang='en'><head><title>Storm hits the coast | Daily Bugle</title>"
        b'<meta property="og:title" content="Storm hits the coast">'
        b'<meta property="article:published_time" content="2026-02-03T23:30:00+09:00"></head>'
        b"<body><article><h1>Storm hits the coast</h1><p>"
        + b"The storm reached the coast late on Tuesday and cut power to thousands of homes. " * 6
        + b"</p></article></body></html>"
    )
    drop = tmp_path / "crawl.warc.gz"
    drop.write_bytes(
        _response_member("https://bugle.test/2026/02/03/storm", html, [("Content-Type", "text/html")])
    )
    stories = [item for item in iter_drop(drop) if isinstance(item, NewStory)]
    assert len(stories) == 1
    story = stories[0]
    assert story.title == "Storm hits the coast"
    assert story.publish_date is not None and story.publish_date.isoformat() == "2026-02-03T23:30:00+09:00"
    assert story.title_method and story.date_guess_method and story.language_method
    assert story.language == "en"


def test_archive_titles_lose_the_medium_name_in_every_format(tmp_path: Path) -> None:
    """CSV, Parquet and story-indexer WARC rows pass through the extractor's title rule: the medium's name
    (the row's, the page's og:site_name, the URL's domain) comes off the title's edges; other colons stay."""
    page = '<html><head><meta property="og:site_name" content="The Evening Lamp"></head><body></body></html>'
    titles = [
        ("Herald: Council debates transit plan", "Herald", ""),
        ("Council debates transit plan | Herald", "Herald", ""),
        ("Brexit: what happens next", "Herald", ""),
        ("Storm hits the coast - The Evening Lamp", "", page),  # named by the page only
        ("Storm hits the coast – herald.test", "", ""),  # the domain
    ]
    expected = [
        "Council debates transit plan",
        "Council debates transit plan",
        "Brexit: what happens next",
        "Storm hits the coast",
        "Storm hits the coast",
    ]
    rows = [
        {
            "url": f"https://www.herald.test/2026/02/{n:02d}/s",
            "title": title,
            "text": f"Text {n}.",
            "publish_date": f"2026-02-{n:02d}",
            "medium": medium or None,
            "html": html or None,
        }
        for n, (title, medium, html) in enumerate(titles, start=1)
    ]
    csv_path = tmp_path / "rows.csv"
    pd.DataFrame(rows).to_csv(csv_path, index=False)
    parquet_path = tmp_path / "rows.parquet"
    pd.DataFrame(rows).to_parquet(parquet_path)
    for path in (csv_path, parquet_path):
        drop = parse_drop(path)
        assert drop.errors == []
        assert [story.title for story in drop.stories] == expected, path.name
    with StoryArchiveWriter(tmp_path, prefix="rows", serial=-1, deterministic_ids=True) as writer:
        for row in rows:
            writer.write_story(
                StoryRecord(
                    url=row["url"],
                    html=(row["html"] or "<html></html>").encode(),
                    fetch_date=datetime(2026, 2, 1, tzinfo=UTC),
                    metadata={
                        "content_metadata": {"article_title": row["title"], "text_content": row["text"]}
                    },
                )
            )
    assert (
        [st.title for st in iter_drop(tmp_path / "rows.warc.gz") if isinstance(st, NewStory)]
        == [
            "Herald: Council debates transit plan",  # a story-indexer archive names no medium, and the domain
            *expected[1:],  # alone does not cut before a colon
        ]
    )
