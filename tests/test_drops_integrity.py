"""No stored row differs from its file without a report, and no drop can fill the memory.

A WARC record whose Content-Length is too small, a NUL in a CSV title, a Parquet ``text`` column of lists, a
1 GiB CSV line (sparse files read in a subprocess whose peak memory is measured), a file name that is not
UTF-8 and a link out of the drops folder. Parquet: a row over the row limit, a page holding one value over it
(a 600 MiB text of a few kilobytes compressed, loaded in a subprocess whose peak memory is measured), a page
over the page limit, a pandas drop whose html pages are over the row limit and its rows far under it, a
dictionary value repeated in 600 rows, a dictionary of one long value and many short ones, a page of shared
prefixes, a footer over the limit; story batches handed to the store by size. What a file decodes to: a
few-kilobyte Parquet file of 200 rows of one 30 MiB dictionary value (6 GB) refused unread in bounded memory and
beside good files, a CSV over the file limit, a WARC whose gzip-encoded pages pass the file's bound.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from tests.archive_runs import archive_runs, script_report
from topicmap.archive.drop_rows import ArchiveFileError
from topicmap.archive.drops import iter_drop, load_drop, parse_drop
from topicmap.archive.warc import MIB, ReadLimits
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

ROOT = Path(__file__).resolve().parents[1]
HEADER = "url,title,text,publish_date,medium\n"
PAGE = (
    b"<html><head><title>Budget talks</title></head><body>"
    + b"<p>The president spoke about the budget and the economy today.</p>" * 24
    + b"</body></html>"
)


def _response(writer: WARCWriter, url: str, body: bytes) -> None:
    http = StatusAndHeaders(
        "200 OK",
        [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))],
        protocol="HTTP/1.1",
    )
    writer.write_record(
        writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
    )


def test_a_warc_record_shorter_than_its_page_is_rejected_with_its_offset(tmp_path: Path) -> None:
    """The first record's WARC Content-Length is 400 bytes short: its HTML would be stored cut (warcio only
    warns and skips the rest). It is rejected, named by offset and reason; the record after it loads whole."""
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=False)
    _response(writer, "https://herald.test/2026/02/01/budget", PAGE)
    _response(writer, "https://herald.test/2026/02/02/budget", PAGE)
    data = buffer.getvalue()
    declared = re.search(rb"\r\nContent-Length: (\d+)\r\n", data)
    assert declared is not None
    data = data[: declared.start(1)] + str(int(declared.group(1)) - 400).encode() + data[declared.end(1) :]
    path = tmp_path / "short.warc"
    path.write_bytes(data)

    drop = parse_drop(path)
    assert [story.url for story in drop.stories] == ["https://herald.test/2026/02/02/budget"]
    assert drop.stories[0].html == PAGE
    (error,) = drop.errors
    assert error.where == "offset 0"
    assert f"shorter than its HTTP Content-Length of {len(PAGE):,}" in error.problem


def test_a_nul_in_a_title_rejects_the_row_instead_of_storing_it_altered(tmp_path: Path) -> None:
    path = tmp_path / "nul.csv"
    path.write_text(
        HEADER
        + "https://herald.test/a,Budget\x00 talks,Text one.,2026-02-01,Herald\n"
        + "https://herald.test/b,Budget vote,Text\x00 two.,2026-02-02,Herald\n"
        + "https://herald.test/c,Budget deal,Text three.,2026-02-03,Herald\n",
        encoding="utf-8",
    )
    drop = parse_drop(path)
    assert [story.title for story in drop.stories] == ["Budget deal"]
    assert [(e.where, e.problem.split(" (")[0]) for e in drop.errors] == [
        ("line 2", "title holds a NUL character"),
        ("line 3", "text holds a NUL character"),
    ]


def test_a_parquet_text_column_of_lists_fails_the_file_naming_the_column(tmp_path: Path) -> None:
    path = tmp_path / "lists.parquet"
    table = pa.table(
        {
            "url": ["https://herald.test/a"],
            "title": ["Budget talks"],
            "text": pa.array([["The president", "spoke."]]),
            "publish_date": ["2026-02-01"],
        }
    )
    pq.write_table(table, path)
    with pytest.raises(ArchiveFileError, match=r"column .text. is of type list<.*string>, expected string"):
        parse_drop(path)


def test_a_parquet_file_with_categorical_columns_loads_like_a_plain_one(tmp_path: Path) -> None:
    """pandas writes a Categorical as an Arrow dictionary column: the file was refused whole ("is of type
    dictionary<values=string...>"), its valid stories lost."""
    frame = pd.DataFrame(
        {
            "url": [f"https://herald.test/2026/02/0{i}/story" for i in range(1, 6)],
            "title": [f"Budget talks {i}" for i in range(1, 6)],
            "text": ["The president spoke about the budget."] * 5,
            "publish_date": ["2026-02-01"] * 5,
            "medium": pd.Categorical(["Herald", "Herald", "Ledger", "Herald", "Ledger"]),
        }
    )
    frame["title"] = frame["title"].astype("category")
    path = tmp_path / "categorical.parquet"
    frame.to_parquet(path)
    assert pa.types.is_dictionary(pq.read_schema(path).field("medium").type)
    plain = tmp_path / "plain.parquet"
    frame.astype({"medium": str, "title": str}).to_parquet(plain)
    loaded, expected = parse_drop(path), parse_drop(plain)
    assert loaded.errors == [] and len(loaded.stories) == 5
    assert [(s.url, s.title, s.medium_name) for s in loaded.stories] == [
        (s.url, s.title, s.medium_name) for s in expected.stories
    ]


#: reads a drop's first row (or its refusal) and prints it with the process's peak memory
READ_IN_SUBPROCESS = textwrap.dedent(
    """
    import json, re, sys
    from pathlib import Path
    from topicmap.archive.drop_rows import ArchiveFileError
    from topicmap.archive.drops import iter_drop
    try:
        first = next(iter_drop(sys.argv[1]), None)
        outcome = f"read a {type(first).__name__}"
    except ArchiveFileError as exc:
        outcome = str(exc)
    status = Path("/proc/self/status").read_text()
    peak_mib = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024
    print(json.dumps({"outcome": outcome, "peak_mib": peak_mib}))
    """
)


def _first_row_in_subprocess(path: Path) -> dict:
    return script_report(READ_IN_SUBPROCESS, str(path))


@pytest.mark.parametrize("with_header", [False, True], ids=["no-newline-at-all", "header-then-nul-row"])
def test_a_gigabyte_csv_line_is_refused_at_its_line_in_bounded_memory(
    tmp_path: Path, with_header: bool
) -> None:
    path = tmp_path / "huge.csv"
    with path.open("wb") as handle:
        if with_header:
            handle.write(HEADER.encode())
        handle.truncate(handle.tell() + (1 << 30))  # sparse: a GiB of NUL bytes without a line break
    report = _first_row_in_subprocess(path)
    line = 2 if with_header else 1
    assert report["outcome"].startswith(f"{path}:{line}: the row starting on this line is longer than")
    assert "max_row_bytes" in report["outcome"]
    assert report["peak_mib"] < 500, report


def test_unreadable_names_and_links_out_of_the_drops_folder_are_recorded_once(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    drops = tmp_path / "drops"
    drops.mkdir()
    outside = tmp_path / "private.csv"
    outside.write_text(HEADER + "https://secret.test/a,Secret,Text.,2026-02-01,Secret\n", encoding="utf-8")
    (drops / "linked.csv").symlink_to(outside)
    good_row = "https://herald.test/a,Budget talks,Text.,2026-02-01,Herald\n"
    (drops / "good.csv").write_text(HEADER + good_row, encoding="utf-8")
    latin1_name = os.fsdecode(b"caf\xe9.csv")  # a name written by a latin-1 system
    (drops / latin1_name).write_text(HEADER + good_row.replace("/a,", "/b,"), encoding="utf-8")
    db = sqlite_store_url
    run = archive_runs(drops, db)

    meta = run()
    failed = {r.data["file"]: r.data["reason"] for r in meta["failed_files"].value.records}
    assert set(failed) == {"caf\\xe9.csv", "linked.csv"}
    assert "not valid UTF-8" in failed["caf\\xe9.csv"]
    assert "outside the drops folder: not followed" in failed["linked.csv"]
    assert meta["stories_added"].value == 1  # the good file; nothing read through the link
    store = TopicStore.open(db)
    with store.engine.connect() as conn:
        urls = set(conn.execute(select(s.stories.c.url)).scalars())
        recorded = dict(conn.execute(select(s.archive_files.c.path, s.archive_files.c.state)).all())
    assert urls == {"https://herald.test/a"}
    assert sorted(Path(p).name for p, state in recorded.items() if state == "failed") == [
        "caf\\xe9.csv",
        "linked.csv",
    ]

    meta = run()  # recorded once: not read again, reported as failed before
    assert meta["files_failed"].value == 0
    assert len(meta["files_failed_before_unchanged"].value.records) == 2
    again = load_drop(store, drops / "linked.csv", folder=drops)
    assert again.state == "failed before"
    store.dispose()


# ---------------------------------------------------------------------------------------------- Parquet bombs


def _parquet_group(first: int, texts: list[str]) -> pa.Table:
    rows = range(first, first + len(texts))
    return pa.table(
        {
            "url": [f"https://ledger.test/2026/03/{i:02d}/p" for i in rows],
            "title": [f"Parquet {i}" for i in rows],
            "text": texts,
            "publish_date": [f"2026-03-{(i - 1) % 28 + 1:02d}" for i in rows],
        }
    )


def _write_groups(path: Path, groups: list[pa.Table], **options: object) -> None:
    with pq.ParquetWriter(path, groups[0].schema, **options) as writer:
        for group in groups:
            writer.write_table(group)


BIG = "The president spoke about the budget. " * (200 * 1024 // 38)  # 200 KiB, a few hundred bytes compressed


@pytest.mark.parametrize("use_dictionary", [False, True], ids=["plain", "dictionary"])
def test_a_parquet_row_over_the_row_limit_is_rejected_with_its_line_and_the_rows_beside_it_load(
    store: TopicStore, tmp_path: Path, use_dictionary: bool
) -> None:
    """Row group 1 holds a 200 KiB text beside a short one, in one page (or dictionary) of two values: the page
    is over a 64 KiB row limit but its rows need not be, so it is decoded; the long row is rejected with its
    line, the short one beside it loads."""
    path = tmp_path / "groups.parquet"
    groups = [
        _parquet_group(1, ["Text one.", "Text two.", "Text three."]),
        _parquet_group(4, ["Text four.", BIG]),
        _parquet_group(6, ["Text six.", "Text seven.", "Text eight."]),
    ]
    _write_groups(path, groups, use_dictionary=use_dictionary)
    assert path.stat().st_size < 64 * 1024
    limits = ReadLimits(max_row_bytes=64 * 1024)

    drop = parse_drop(path, limits=limits)
    assert [story.title for story in drop.stories] == [f"Parquet {i}" for i in (1, 2, 3, 4, 6, 7, 8)]
    (error,) = drop.errors
    assert (error.where, error.rows) == ("line 6", 1)
    assert error.problem == (
        f"the row's fields decode to {len(BIG) + 51:,} bytes, more than the max_row_bytes read limit of "
        f"65,536 (its 'text' alone is {len(BIG):,} bytes); the row is rejected"
    )

    result = load_drop(store, path, limits=limits)
    assert (result.state, result.created, result.rows_rejected) == ("loaded", 7, 1)
    assert [e.where for e in result.errors] == ["line 6"]

    whole = parse_drop(path)  # under the default limit the same file reads whole, the long text unaltered
    assert whole.errors == [] and [story.text for story in whole.stories][4] == BIG


@pytest.mark.parametrize("layout", ["a page a value", "a dictionary of one value"])
def test_a_parquet_page_holding_one_value_over_the_row_limit_refuses_its_row_group_unread(
    store: TopicStore, tmp_path: Path, layout: str
) -> None:
    """A page that holds a single value over the row limit is that value alone: its row group is reported
    with its lines, column and page, without being decoded, and the other row groups load."""
    path = tmp_path / "single.parquet"
    if layout == "a page a value":
        groups = [
            _parquet_group(1, ["Text one."]),
            _parquet_group(2, ["Text two.", BIG]),
            _parquet_group(4, ["4."]),
        ]
        _write_groups(path, groups, use_dictionary=False, write_batch_size=1, data_page_size=1)
        page = "page for line 4"
    else:
        groups = [_parquet_group(1, ["Text one."]), _parquet_group(2, [BIG, BIG]), _parquet_group(4, ["4."])]
        _write_groups(path, groups, use_dictionary=True)
        page = "dictionary page (the values of the rows from line 3 on)"
    limits = ReadLimits(max_row_bytes=64 * 1024)

    drop = parse_drop(path, limits=limits)
    assert [story.title for story in drop.stories] == ["Parquet 1", "Parquet 4"]
    (error,) = drop.errors
    assert (error.where, error.rows) == ("lines 3-4", 2)
    assert re.fullmatch(
        rf"row group 1 \(lines 3-4: 2 rows\) is not read: its 'text' {re.escape(page)} holds a single value "
        r"that decodes to 204,7\d\d bytes, more than the max_row_bytes read limit of 65,536 \(a row "
        r"holding it is over the row limit\); a page is decoded whole before any value in it can be checked\. "
        r"The other row groups are read\.",
        error.problem,
    ), error.problem

    result = load_drop(store, path, limits=limits)
    assert (result.state, result.created, result.rows_rejected) == ("loaded", 2, 2)
    with store.engine.connect() as conn:
        titles = set(conn.execute(select(s.stories.c.title)).scalars())
    assert titles == {"Parquet 1", "Parquet 4"}


def test_a_parquet_page_over_the_page_limit_says_how_to_write_the_file(tmp_path: Path) -> None:
    """200 rows of 1,000 characters make one 200 KB page: over a 64 KiB row limit, it loads (no row is
    that long); over a 64 KiB page limit, its row group is refused with how to write the file."""
    path = tmp_path / "pages.parquet"
    pq.write_table(_parquet_group(1, ["x" * 1000] * 200), path, use_dictionary=False, compression="zstd")
    read = parse_drop(path, limits=ReadLimits(max_row_bytes=64 * 1024))
    assert (len(read.stories), read.errors) == (200, [])

    drop = parse_drop(path, limits=ReadLimits(max_row_bytes=64 * 1024, max_page_bytes=64 * 1024))
    (error,) = drop.errors
    assert (error.where, error.rows) == ("lines 2-201", 200)
    assert re.search(
        r"page for lines 2-201 decodes to 200,8\d\d bytes, more than the max_page_bytes read limit of 65,536",
        error.problem,
    )
    assert "The page holds 200 rows (1,004 bytes each on average): write the file with smaller pages" in (
        error.problem
    )
    assert "a smaller data_page_size and write_batch_size" in error.problem


def test_a_pandas_drop_of_46_kb_html_pages_loads_whole_at_the_default_limits(tmp_path: Path) -> None:
    """pandas (pyarrow's default pages of 1,024 values) puts the html of 1,024 rows in one page of about
    48 MB: over the 32 MiB row limit, under the 128 MiB page limit, and every row far under the row limit.
    The file loads whole."""
    para = "<p>The council met on Tuesday to discuss the budget for the coming year.</p>\n"
    frame = pd.DataFrame(
        {
            "url": [f"https://herald.test/2025/03/{i}" for i in range(1200)],
            "title": [f"Story {i}" for i in range(1200)],
            "text": [f"Story {i} text." for i in range(1200)],
            "publish_date": ["2025-03-01"] * 1200,
            "html": [f"<html><body><h1>{i}</h1>{para * (590 + i % 40)}</body></html>" for i in range(1200)],
        }
    )
    path = tmp_path / "pages.parquet"
    frame.to_parquet(path)
    column = pq.ParquetFile(path).metadata.row_group(0).column(4)
    assert column.path_in_schema == "html"
    assert column.total_uncompressed_size > 32 * 1024 * 1024 * 1.2  # a page of it is over the row limit

    drop = parse_drop(path)
    assert drop.errors == []
    assert [story.url for story in drop.stories] == list(frame["url"])
    assert [story.html for story in drop.stories][::97] == [h.encode() for h in frame["html"]][::97]


def test_a_parquet_batch_is_sized_by_the_longest_dictionary_value_not_the_average(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dictionary of one 1 MiB text and 1,000 short ones averages about 1 KB a value, but each of the 40
    rows holding the long text decodes it again: batches are sized by the longest value (31 rows, not 1,000)."""
    path = tmp_path / "skewed.parquet"
    long_text = "The budget. " * ((1 << 20) // 12)
    pq.write_table(_parquet_group(1, [long_text] * 40 + [f"Short text {i}." for i in range(1000)]), path)
    sizes: list[int] = []
    iter_batches = pq.ParquetFile.iter_batches

    def recording(self, batch_size=65536, **kwargs):  # type: ignore[no-untyped-def]
        if (
            len(kwargs["columns"]) > 1
        ):  # not the count of what the file decodes to (indices, column by column)
            sizes.append(batch_size)
        return iter_batches(self, batch_size=batch_size, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recording)
    drop = parse_drop(path)
    assert (len(drop.stories), drop.errors) == (1040, [])
    assert sizes and max(sizes) <= 32, sizes


def test_a_parquet_page_of_shared_prefixes_is_read_in_batches_sized_by_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DELTA_BYTE_ARRAY pages hold each value as a prefix of the one before and a suffix: 40 rows of one 1 MiB
    text are 1 MiB in their page and 40 MiB decoded. Any value may be as long as its page, so a batch holds 32
    MiB of them at most (it held all 40: a page of 1,000 such rows was a gigabyte at once). Under the default
    max_expansion the file stops at the row that takes it past 32 MiB, the rows before it read."""
    path = tmp_path / "prefixes.parquet"
    pq.write_table(
        _shared_text(40, 1),
        path,
        use_dictionary=False,
        column_encoding={"text": "DELTA_BYTE_ARRAY"},
        store_schema=False,
        compression="zstd",
    )
    assert path.stat().st_size < 8192
    sizes: list[int] = []
    iter_batches = pq.ParquetFile.iter_batches

    def recording(self, batch_size=65536, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(batch_size)
        return iter_batches(self, batch_size=batch_size, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recording)
    drop = parse_drop(path, limits=ReadLimits(max_expansion=1_000_000))
    assert (len(drop.stories), drop.errors) == (40, [])
    assert sizes and max(sizes) <= 32, sizes
    with pytest.raises(
        ArchiveFileError, match=r": line \d+: the rows up to this one decode to .*max_expansion"
    ):
        parse_drop(path)


def test_a_parquet_column_over_the_limit_whose_page_headers_are_unreadable_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "headers.parquet"
    groups = [
        _parquet_group(1, ["Text one."]),
        _parquet_group(2, ["x" * 100_000]),
        _parquet_group(3, ["Three."]),
    ]
    with pq.ParquetWriter(path, groups[0].schema, use_dictionary=False) as writer:
        for group in groups:
            writer.write_table(group)
    start = pq.ParquetFile(path).metadata.row_group(1).column(2).data_page_offset
    data = bytearray(path.read_bytes())
    data[start : start + 4] = b"\xff\xff\xff\xff"  # the text page header of row group 1: not Thrift
    path.write_bytes(bytes(data))
    drop = parse_drop(path, limits=ReadLimits(max_row_bytes=64 * 1024))
    assert [story.title for story in drop.stories] == ["Parquet 1", "Parquet 3"]
    (error,) = drop.errors
    assert error.where == "line 3"
    assert "its 'text' column decodes to" in error.problem
    assert "its page headers cannot be read to tell its pages' sizes" in error.problem


def test_a_parquet_footer_over_the_row_limit_fails_the_file_unread(tmp_path: Path) -> None:
    path = tmp_path / "footer.parquet"
    footer = 256 * 1024 * 1024
    with path.open("wb") as handle:  # a sparse file that is all footer: pyarrow would read it whole
        handle.write(b"PAR1")
        handle.truncate(4 + footer)
        handle.seek(0, os.SEEK_END)
        handle.write(footer.to_bytes(4, "little") + b"PAR1")
    with pytest.raises(ArchiveFileError, match=r"its Parquet metadata \(footer\) is 268,435,456 bytes"):
        parse_drop(path)


def test_a_story_batch_is_handed_to_the_store_by_size_as_well_as_count(
    store: TopicStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "long_texts.csv"
    text = "word " * 2000
    path.write_text(
        HEADER + "".join(f"https://herald.test/{n},Story {n},{text},2026-02-01,Herald\n" for n in range(7)),
        encoding="utf-8",
    )
    sizes: list[int] = []
    add_stories = store.add_stories

    def counting(stories, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(len(stories))
        return add_stories(stories, **kwargs)

    monkeypatch.setattr(store, "add_stories", counting)
    monkeypatch.setattr("topicmap.archive.drops.LOAD_BATCH_BYTES", 25_000)
    result = load_drop(store, path)
    assert result.created == 7 and sizes == [3, 3, 1]


# Thrift compact protocol (parquet.thrift's structs), just enough to write a Parquet file's page headers and footer
_I32, _I64, _BINARY, _LIST, _STRUCT = 5, 6, 8, 9, 12


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _thrift(kind: int, value: object) -> bytes:
    """``value`` in the compact protocol: an int (zigzag), a str, a list as (element kind, items), or a struct as
    [(field id, kind, value), ...] in ascending field ids."""
    if kind in (_I32, _I64):
        assert isinstance(value, int) and value >= 0
        return _varint(value << 1)
    if kind == _BINARY:
        assert isinstance(value, str)
        return _varint(len(value.encode())) + value.encode()
    if kind == _LIST:
        element, items = value  # type: ignore[misc]
        assert len(items) < 15
        return bytes([len(items) << 4 | element]) + b"".join(_thrift(element, item) for item in items)
    out, last = bytearray(), 0
    for field_id, field_kind, field_value in value:  # type: ignore[attr-defined]
        out.append((field_id - last) << 4 | field_kind)
        out += _thrift(field_kind, field_value)
        last = field_id
    return bytes(out + b"\0")


_UNCOMPRESSED, _ZSTD = 0, 6  # parquet.thrift CompressionCodec


def _write_cell_bomb(path: Path, cell_mib: int) -> None:
    """Rows 1-2, 3 and 4-5 in three row groups (as ``_parquet_group`` makes them), row 3's text ``cell_mib`` MiB
    of "The budget. " in one zstd page of kilobytes. Written by hand: pyarrow's writer would hold the text and
    its page in memory (2 GB for 600 MiB, 4 CPU seconds); here the page is a zstd frame of one 3 MiB piece of
    the text repeated (a zstd stream is any number of frames), and decodes to the same text all the same.
    Plain pages (each value a 4-byte length, then its bytes) of required columns, no statistics."""
    assert cell_mib % 3 == 0
    piece = b"The budget. " * (1 << 18)  # 3 MiB
    cell_size = 4 + cell_mib * MIB
    cell_page = pa.compress((cell_mib * MIB).to_bytes(4, "little") + piece, "zstd", asbytes=True)
    cell_page += pa.compress(piece, "zstd", asbytes=True) * (cell_mib // 3 - 1)
    names = ("url", "title", "text", "publish_date")
    data, groups = bytearray(b"PAR1"), []
    for first, texts in ((1, [b"Text one.", b"Text two."]), (3, None), (4, [b"Text four.", b"Text 5."])):
        rows = len(texts) if texts else 1
        group = _parquet_group(first, [""] * rows)
        columns, total = [], 0
        for name in names:
            if name == "text" and texts is None:
                page, size, codec = cell_page, cell_size, _ZSTD
            else:
                values = texts if name == "text" else [v.encode() for v in group[name].to_pylist()]
                page = b"".join(len(v).to_bytes(4, "little") + v for v in values)
                size, codec = len(page), _UNCOMPRESSED
            # a DATA_PAGE of `rows` PLAIN values (and RLE levels, none in required columns)
            data_page = [(1, _I32, rows), (2, _I32, 0), (3, _I32, 3), (4, _I32, 3)]
            header = _thrift(
                _STRUCT, [(1, _I32, 0), (2, _I32, size), (3, _I32, len(page)), (5, _STRUCT, data_page)]
            )
            meta = [
                (1, _I32, 6),  # BYTE_ARRAY
                (2, _LIST, (_I32, [0])),  # PLAIN
                (3, _LIST, (_BINARY, [name])),
                (4, _I32, codec),
                (5, _I64, rows),
                (6, _I64, len(header) + size),
                (7, _I64, len(header) + len(page)),
                (9, _I64, len(data)),  # the data page's offset
            ]
            columns.append([(2, _I64, len(data)), (3, _STRUCT, meta)])
            total += len(header) + size
            data += header + page
        groups.append([(1, _LIST, (_STRUCT, columns)), (2, _I64, total), (3, _I64, rows)])
    schema = [[(4, _BINARY, "schema"), (5, _I32, len(names))]] + [
        [(1, _I32, 6), (3, _I32, 0), (4, _BINARY, name), (6, _I32, 0)]  # BYTE_ARRAY, REQUIRED, UTF8
        for name in names
    ]
    footer = _thrift(
        _STRUCT,
        [
            (1, _I32, 1),
            (2, _LIST, (_STRUCT, schema)),
            (3, _I64, 5),
            (4, _LIST, (_STRUCT, groups)),
            (6, _BINARY, "topicmap tests"),
        ],
    )
    path.write_bytes(bytes(data) + footer + len(footer).to_bytes(4, "little") + b"PAR1")


LOAD_IN_SUBPROCESS = textwrap.dedent(
    """
    import json, re, sys
    from pathlib import Path
    from topicmap.archive.drops import load_drop
    from topicmap.archive.warc import ReadLimits
    from topicmap.store.topic_store import TopicStore
    store = TopicStore.open(sys.argv[2])
    limits = ReadLimits(max_expansion=int(sys.argv[3])) if len(sys.argv) > 3 else ReadLimits()
    result = load_drop(store, sys.argv[1], limits=limits)
    status = Path("/proc/self/status").read_text()
    peak_mib = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024
    print(json.dumps({
        "state": result.state, "created": result.created, "rejected": result.rows_rejected,
        "errors": [[e.where, e.problem] for e in result.errors], "peak_mib": peak_mib,
    }))
    """
)


def _load_in_subprocess(path: Path, database: str, *limits: str) -> dict:
    return script_report(LOAD_IN_SUBPROCESS, str(path), database, *limits)


def test_a_600_mib_parquet_cell_in_a_small_file_is_refused_in_bounded_memory(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    """A 600 MiB text compresses to kilobytes; read whole it takes about 2 GB. Its row group is reported
    without being decoded, the rows beside it are stored, and the reading process stays under 500 MiB. The
    text is over the 500 MiB alone, so a reader that decoded its page could not pass; the file is written by
    hand (``_write_cell_bomb``), not by pyarrow, which would take 2 GB and seconds to write it."""
    small = tmp_path / "small.parquet"  # the same pages, of two pieces: they read back as the text
    _write_cell_bomb(small, 6)
    assert pq.read_table(small).column("text")[2].as_py() == "The budget. " * (6 * MIB // 12)
    path = tmp_path / "bomb.parquet"
    _write_cell_bomb(path, 600)
    assert path.stat().st_size < 4 * 1024 * 1024
    database = sqlite_store_url
    report = _load_in_subprocess(path, database)
    assert (report["state"], report["created"], report["rejected"]) == ("loaded", 4, 1), report
    ((where, problem),) = report["errors"]
    assert where == "line 4"
    assert problem.startswith(
        "row group 1 (lines 4-4: 1 row) is not read: its 'text' page for line 4 holds a single value that "
        "decodes to "
    )
    assert f"more than the max_row_bytes read limit of {32 * 1024 * 1024:,}" in problem
    assert report["peak_mib"] < 500, report
    store = TopicStore.open(database)
    with store.engine.connect() as conn:
        titles = set(conn.execute(select(s.stories.c.title)).scalars())
    store.dispose()
    assert titles == {"Parquet 1", "Parquet 2", "Parquet 4", "Parquet 5"}


def test_a_parquet_dictionary_value_repeated_in_many_rows_loads_in_bounded_memory_when_allowed(
    tmp_path: Path,
    sqlite_store_url: str,
) -> None:
    """600 rows share one 1 MiB text through the column's dictionary: 600 MiB once decoded, from a file of
    kilobytes, far over the default max_expansion. Allowed by the user, each row is within the row limit and
    loads; batches sized by the dictionary page keep the reading process (and the stories waiting for the
    store) under 500 MiB: 600 rows, not fewer, so that a reader holding them all at once could not pass. The
    file is written in the test's process: the one 1 MiB value is all the writer holds."""
    path = _dictionary_bomb(tmp_path / "shared.parquet", 600, 1)
    assert path.stat().st_size < 1024 * 1024
    with pytest.raises(ArchiveFileError, match=r"row group 0 \(lines 2-601: 600 rows\).*max_expansion"):
        next(iter_drop(path))
    report = _load_in_subprocess(path, sqlite_store_url, str(1_000_000))
    assert (report["state"], report["created"], report["rejected"]) == ("loaded", 600, 0), report
    assert report["peak_mib"] < 500, report


# ---------------------------------------------------------------------------------------------- what a file decodes to


def _shared_text(rows: int, value_mib: int) -> pa.Table:
    """``rows`` rows whose text is one value of ``value_mib`` MiB, held once (a dictionary array)."""
    value = pa.array(["The budget. " * (value_mib * (1 << 20) // 12)])
    texts = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), value)
    return _parquet_group(1, [""] * rows).set_column(2, "text", texts)


def _dictionary_bomb(path: Path, rows: int, value_mib: int) -> Path:
    """The shared text through the column's dictionary, written without the Arrow schema (the column reads back
    as plain text): a few kilobytes on disk."""
    pq.write_table(
        _shared_text(rows, value_mib), path, store_schema=False, use_dictionary=True, compression="zstd"
    )
    return path


def test_a_kilobyte_parquet_of_200_rows_of_one_30_mib_dictionary_value_is_refused_unread(
    tmp_path: Path,
) -> None:
    """200 rows of one 30 MiB text, each under the row limit: 6 GB of stories from 5 KB. The file is refused
    before a row is read, naming the row group, its lines, the column and the limit, and the reading process
    stays far from the 6 GB (the dictionary is read once; the rows' sizes are counted from its indices)."""
    path = _dictionary_bomb(tmp_path / "bomb.parquet", 200, 30)
    assert path.stat().st_size < 8192
    report = _first_row_in_subprocess(path)
    assert report["outcome"].startswith(
        f"{path}: row group 0 (lines 2-201: 200 rows) would bring what the file's rows decode to up to "
    ), report
    assert f"its 'text' column decodes to {200 * 30 * (1 << 20) // 12 * 12:,} bytes" in report["outcome"]
    assert (
        f"more than the max_expansion read limit (1,000 times the file's {path.stat().st_size:,} bytes"
        in (report["outcome"])
    )
    assert report["outcome"].endswith("nothing of the file is read")
    assert report["peak_mib"] < 400, report


def test_a_parquet_expanding_past_its_bound_fails_alone_and_the_files_beside_it_load(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    drops = tmp_path / "drops"
    drops.mkdir()
    (drops / "a_good.csv").write_text(HEADER + "https://herald.test/a,Budget talks,Text.,2026-02-01,Herald\n")
    _dictionary_bomb(drops / "b_bomb.parquet", 200, 1)  # 200 MiB of stories from a few kilobytes
    pq.write_table(_parquet_group(1, ["Text one.", "Text two."]), drops / "c_good.parquet")
    db = sqlite_store_url
    run = archive_runs(drops, db)

    meta = run()
    assert (meta["files_loaded"].value, meta["files_failed"].value, meta["stories_added"].value) == (2, 1, 3)
    ((file, reason),) = [(r.data["file"], r.data["reason"]) for r in meta["failed_files"].value.records]
    assert file == "b_bomb.parquet"
    assert "row group 0 (lines 2-201: 200 rows)" in reason and "its 'text' column decodes to" in reason
    assert "max_expansion read limit" in reason
    assert meta["read_limits"].value["max_expansion"] == 1000
    meta = run()  # recorded: not read again, nothing added twice
    assert (meta["files_already_loaded"].value, meta["stories_added"].value) == (2, 0)
    assert len(meta["files_failed_before_unchanged"].value.records) == 1
    store = TopicStore.open(db)
    assert store.story_count() == 3
    store.dispose()


def test_a_csv_larger_than_the_file_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "large.csv"
    path.write_text(HEADER + "https://herald.test/a,Budget talks,Text.,2026-02-01,Herald\n" * 40)
    with pytest.raises(
        ArchiveFileError, match=r"more than the max_file_bytes read limit of 1,024 bytes; nothing"
    ):
        next(iter_drop(path, limits=ReadLimits(max_file_bytes=1024)))


def test_a_warc_whose_encoded_pages_expand_past_its_bound_stops_at_the_record_that_passes_it(
    store: TopicStore, tmp_path: Path
) -> None:
    """Pages sent with Content-Encoding: gzip, each within the payload limit: what the rows decode to is counted
    as they are read, and the record that takes the file past its bound stops it, the pages before it kept."""
    page = (
        b"<html><head><title>Budget</title></head><body><p>"
        + b"The budget. " * (MIB // 12)
        + b"</p></body></html>"
    )
    members = []
    for n in range(6):
        out = io.BytesIO()
        writer = WARCWriter(out, gzip=True, warc_version="WARC/1.0")
        body = gzip.compress(page)
        headers = [
            ("Content-Type", "text/html"),
            ("Content-Encoding", "gzip"),
            ("Content-Length", str(len(body))),
        ]
        http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        writer.write_record(
            writer.create_warc_record(
                f"https://herald.test/{n}", "response", payload=io.BytesIO(body), http_headers=http
            )
        )
        members.append(out.getvalue())
    path = tmp_path / "encoded.warc.gz"
    path.write_bytes(b"".join(members))
    limits = ReadLimits(max_row_bytes=3 * MIB, max_expansion=100)
    assert path.stat().st_size * 100 < 3 * MIB  # the bound is max_row_bytes: a page and its text, not two
    result = load_drop(store, path, limits=limits)
    assert (result.state, result.created) == ("failed", 1)
    assert (result.reason or "").startswith(
        f"{path}: offset {len(members[0])}: the rows up to this one decode to"
    )
    assert "max_expansion read limit" in (result.reason or "")
    assert len(parse_drop(path).stories) == 6  # within the default limits
