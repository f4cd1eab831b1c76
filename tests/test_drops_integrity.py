"""No stored row differs from its file without a report, and no drop can fill the memory.

A WARC record whose Content-Length is too small, a NUL in a CSV title, a Parquet ``text`` column of lists, a
1 GiB CSV line (sparse files read in a subprocess whose peak memory is measured), a file name that is not
UTF-8 and a link out of the drops folder.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from assets.archive import archive_stories
from resources.archive import ArchiveDropsResource
from resources.store import TopicStoreResource
from topicmap.archive.drops import ArchiveFileError, load_drop, parse_drop
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


READ_CSV_IN_SUBPROCESS = textwrap.dedent(
    """
    import json, re, sys
    from pathlib import Path
    from topicmap.archive.drops import ArchiveFileError, parse_drop
    try:
        parse_drop(sys.argv[1])
        outcome = "read"
    except ArchiveFileError as exc:
        outcome = str(exc)
    status = Path("/proc/self/status").read_text()
    peak_mib = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024
    print(json.dumps({"outcome": outcome, "peak_mib": peak_mib}))
    """
)


@pytest.mark.parametrize("with_header", [False, True], ids=["no-newline-at-all", "header-then-nul-row"])
def test_a_gigabyte_csv_line_is_refused_at_its_line_in_bounded_memory(
    tmp_path: Path, with_header: bool
) -> None:
    path = tmp_path / "huge.csv"
    with path.open("wb") as handle:
        if with_header:
            handle.write(HEADER.encode())
        handle.truncate(handle.tell() + (1 << 30))  # sparse: a GiB of NUL bytes without a line break
    done = subprocess.run(
        [sys.executable, "-c", READ_CSV_IN_SUBPROCESS, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)
    line = 2 if with_header else 1
    assert report["outcome"].startswith(f"{path}:{line}: the row starting on this line is longer than")
    assert "max_row_bytes" in report["outcome"]
    assert report["peak_mib"] < 500, report


def test_unreadable_names_and_links_out_of_the_drops_folder_are_recorded_once(tmp_path: Path) -> None:
    drops = tmp_path / "drops"
    drops.mkdir()
    outside = tmp_path / "private.csv"
    outside.write_text(HEADER + "https://secret.test/a,Secret,Text.,2026-02-01,Secret\n", encoding="utf-8")
    (drops / "linked.csv").symlink_to(outside)
    good_row = "https://herald.test/a,Budget talks,Text.,2026-02-01,Herald\n"
    (drops / "good.csv").write_text(HEADER + good_row, encoding="utf-8")
    latin1_name = os.fsdecode(b"caf\xe9.csv")  # a name written by a latin-1 system
    (drops / latin1_name).write_text(HEADER + good_row.replace("/a,", "/b,"), encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    resources = {
        "store": TopicStoreResource(database_url=db),
        "drops": ArchiveDropsResource(drops_dir=str(drops)),
    }
    instance = dg.DagsterInstance.ephemeral()

    def run() -> dict:
        result = dg.materialize([archive_stories], instance=instance, resources=resources)
        return result.asset_materializations_for_node("archive_stories")[0].metadata

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
