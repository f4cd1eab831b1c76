"""Tests for the WARC modules of topicmap.archive: story-indexer layout writer/reader, generic WARC/ARC reading,
replay, and warcio's private API kept to one module."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import pickle
import random
import re
import socket
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from tests.shared_data import WARC_DIR, require_shared
from topicmap.archive.warc import METADATA_CONTENT_TYPE, WarcReadError, read_warc_pages
from topicmap.archive.warc_replay import WarcReplay, replay_key
from topicmap.archive.warc_stories import (
    ArchiveStoryError,
    StoryArchiveWriter,
    StoryRecord,
    read_story_archive,
    stories_from_warc,
)

REAL_WARC_DIR = WARC_DIR
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def real_file(name: str) -> Path:
    return require_shared(REAL_WARC_DIR / name)


def three_stories() -> list[StoryRecord]:
    return [
        StoryRecord(
            url="https://news.example/2024/05/01/story-one",
            original_url="http://news.example/story-one?utm_source=rss",
            html="<html><head><title>Un été</title></head><body>é</body></html>".encode(),
            http_status=200,
            encoding="utf-8",
            fetch_date=datetime(2024, 5, 1, 10, 30, 15, 654321, tzinfo=UTC),
            metadata={
                "rss_entry": {"link": "http://news.example/story-one?utm_source=rss", "title": "Un été"},
                "content_metadata": {
                    "article_title": "Un été",
                    "text_content": "Body text one.",
                    "publication_date": "2024-04-30",
                    "language": "fr",
                    "canonical_domain": "news.example",
                    "parsed_date": "2024-05-01 10:31:00.000001",
                    "authors": ["A. Writer", "B. Writer"],
                },
            },
        ),
        StoryRecord(
            url="https://blog.example/post",
            original_url="https://blog.example/post",
            html=b"<html><body>latin-1 \xe9</body></html>",
            http_status=200,
            encoding=None,
            # not UTC on purpose: stored and returned as the same instant in UTC
            fetch_date=datetime(2024, 5, 1, 14, 0, 1, tzinfo=timezone(timedelta(hours=2))),
            metadata={
                "rss_entry": {
                    "link": "https://blog.example/post",
                    "pub_date": "Tue, 30 Apr 2024 08:00:00 GMT",
                },
                "content_metadata": {"article_title": "Post", "parsed_date": "2024-05-01 12:00:02.000000"},
            },
        ),
        StoryRecord(
            url="https://gone.example/missing",
            original_url="https://gone.example/missing",
            html=b"<html><body>Not found</body></html>",
            http_status=404,
            encoding="iso-8859-1",
            fetch_date=datetime(2024, 5, 1, 11, 0, 0, tzinfo=UTC),
            metadata={"content_metadata": {"parsed_date": "2024-05-01 11:00:00.000000"}},
        ),
    ]


def write_archive(folder: Path, stories: list[StoryRecord], **kwargs) -> Path:
    with StoryArchiveWriter(folder, hostname="testhost", now=NOW, **kwargs) as writer:
        for story in stories:
            writer.write_story(story)
    return writer.path


def warc_records(path: Path) -> list[tuple[str, StatusAndHeaders, StatusAndHeaders | None, bytes]]:
    """(type, WARC headers, HTTP headers, payload) of every record, read by warcio itself."""
    with path.open("rb") as handle:
        return [
            (rec.rec_type, rec.rec_headers, rec.http_headers, rec.content_stream().read())
            for rec in ArchiveIterator(handle)
        ]


# ---------------------------------------------------------------------------------------------------------
# Writer and story reader
# ---------------------------------------------------------------------------------------------------------


def test_three_stories_read_back_identical(tmp_path: Path) -> None:
    stories = three_stories()
    path = write_archive(tmp_path, stories)
    back = list(read_story_archive(path))
    assert len(back) == 3
    for written, read in zip(stories, back, strict=True):
        assert read.url == written.url
        assert read.original_url == written.original_url
        assert read.html == written.html
        assert read.http_status == written.http_status
        assert read.encoding == written.encoding
        assert read.fetch_date == written.fetch_date  # full microsecond precision, same instant
        assert read.fetch_date.tzinfo is not None
    # metadata comes back as written, plus the http_metadata the writer fills from the record fields
    first = back[0].metadata
    assert first["rss_entry"] == stories[0].metadata["rss_entry"]
    assert first["content_metadata"] == {
        **stories[0].metadata["content_metadata"],
        "original_url": "http://news.example/story-one?utm_source=rss",
    }
    assert first["http_metadata"] == {
        "final_url": stories[0].url,
        "response_code": 200,
        "encoding": "utf-8",
        "fetch_timestamp": stories[0].fetch_date.timestamp(),
    }
    assert back[2].metadata["http_metadata"]["response_code"] == 404


def test_file_name_format_and_serial(tmp_path: Path) -> None:
    path = write_archive(tmp_path / "a", three_stories()[:1], prefix="mc", serial=7)
    assert path.name == "mc-20240501120000-7-testhost.warc.gz"
    with StoryArchiveWriter(tmp_path / "b", prefix="topicmap", serial=-1, now=NOW) as writer:
        writer.write_story(three_stories()[0])
    assert writer.path.name == "topicmap.warc.gz"
    with StoryArchiveWriter(tmp_path / "c", now=NOW) as writer:
        pass
    assert writer.path.name == f"topicmap-20240501120000-0-{socket.gethostname()}.warc.gz"
    # the timestamp in the name is UTC whatever zone `now` is given in
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
    with StoryArchiveWriter(tmp_path / "d", hostname="h", now=plus_two) as writer:
        pass
    assert re.fullmatch(r"topicmap-20240501120000-0-h\.warc\.gz", writer.path.name)


def test_written_to_tmp_then_renamed_and_abort_leaves_nothing(tmp_path: Path) -> None:
    writer = StoryArchiveWriter(tmp_path, hostname="h", now=NOW)
    writer.write_story(three_stories()[0])
    assert [p.name for p in tmp_path.iterdir()] == ["topicmap-20240501120000-0-h.warc.gz.tmp"]
    with pytest.raises(RuntimeError, match="not finished"):
        _ = writer.path
    final = writer.finish()
    assert [p.name for p in tmp_path.iterdir()] == [final.name]

    aborted = tmp_path / "aborted"
    with pytest.raises(KeyError), StoryArchiveWriter(aborted, hostname="h", now=NOW) as writer:
        writer.write_story(three_stories()[0])
        raise KeyError("pipeline failed mid-archive")
    assert list(aborted.iterdir()) == []


def test_existing_archive_is_never_replaced(tmp_path: Path) -> None:
    path = write_archive(tmp_path, three_stories()[:1])
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match=path.name):
        StoryArchiveWriter(tmp_path, hostname="testhost", now=NOW)
    assert path.read_bytes() == before


def test_record_layout_readable_by_warcio(tmp_path: Path) -> None:
    path = write_archive(tmp_path, three_stories())
    records = warc_records(path)
    assert [r[0] for r in records] == ["warcinfo"] + ["response", "metadata"] * 3

    info_type, info_headers, _, info_body = records[0]
    assert info_headers.protocol == "WARC/1.0"
    assert info_headers.get_header("WARC-Filename") == path.name
    fields = dict(line.split(": ", 1) for line in info_body.decode().strip().splitlines())
    assert fields["hostname"] == "testhost"
    assert "story-indexer" in fields["software"]
    assert fields["format"] == "WARC file version 1.0"

    stories = three_stories()
    for index, story in enumerate(stories):
        _, response_headers, http, payload = records[1 + 2 * index]
        _, meta_headers, _, meta_body = records[2 + 2 * index]
        assert response_headers.protocol == "WARC/1.0"
        assert response_headers.get_header("WARC-Target-URI") == story.url
        expected_date = story.fetch_date.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert response_headers.get_header("WARC-Date") == expected_date
        assert http.protocol == "HTTP/1.0"
        assert http.get_header("Content-Length") == str(len(story.html))
        assert payload == story.html
        assert meta_headers.get_header("Content-Type") == METADATA_CONTENT_TYPE
        assert meta_headers.get_header("WARC-Refers-To") == response_headers.get_header("WARC-Record-ID")
        assert meta_headers.get_header("WARC-Date") == expected_date
        assert meta_headers.get_header("WARC-Target-URI") == story.url
        assert meta_body.startswith(b'{\n  "rss_entry": ')  # JSON, indent 2, rss_entry first
        assert list(json.loads(meta_body))[:3] == ["rss_entry", "http_metadata", "content_metadata"]

    assert records[1][2].statusline == "200 OK"
    assert records[1][2].get_header("Content-Type") == "text/html; encoding=utf-8"
    assert records[3][2].get_header("Content-Type") == "text/html"  # encoding unknown
    assert records[5][2].statusline == "404 HUH?"
    raw = gzip.decompress(path.read_bytes())
    assert b"\r\nHTTP/1.0 404 HUH?\r\n" in raw
    assert b"WARC-Type: request" not in raw

    # every digest warcio wrote checks out when warcio reads it back
    with path.open("rb") as handle:
        iterator = ArchiveIterator(handle, check_digests="raise")
        assert sum(1 for rec in iterator if rec.content_stream().read() is not None) == 7


def test_archive_story_errors_and_bad_input(tmp_path: Path) -> None:
    with StoryArchiveWriter(tmp_path, hostname="h", now=NOW) as writer:
        with pytest.raises(ArchiveStoryError) as no_url:
            writer.write_story(StoryRecord(url="", html=b"<html></html>"))
        assert no_url.value.args[0] == "no-url"
        with pytest.raises(ArchiveStoryError) as no_html:
            writer.write_story(StoryRecord(url="https://x.example/", html=b""))
        assert no_html.value.args[0] == "no-html"
        with pytest.raises(TypeError, match="must be bytes"):
            writer.write_story(StoryRecord(url="https://x.example/", html="<html></html>"))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timezone-aware"):
            writer.write_story(
                StoryRecord(url="https://x.example/", html=b"x", fetch_date=datetime(2024, 1, 1))
            )
        with pytest.raises(ValueError, match="http_status"):
            writer.write_story(StoryRecord(url="https://x.example/", html=b"x", http_status=0))
        with pytest.raises(TypeError, match=r"metadata\['content_metadata'\]\['blob'\]"):
            writer.write_story(
                StoryRecord(
                    url="https://x.example/", html=b"x", metadata={"content_metadata": {"blob": object()}}
                )
            )
        # story-indexer's URL fallback: no final url → content url → original url → rss link
        writer.write_story(
            StoryRecord(url="", html=b"<p>a</p>", metadata={"rss_entry": {"link": "https://rss.example/a"}})
        )
        assert writer.stories_written == 1
    stories = list(read_story_archive(writer.path))
    assert [s.url for s in stories] == ["https://rss.example/a"]  # the failed stories left no records


def test_metadata_values_become_plain_json(tmp_path: Path) -> None:
    published = datetime(2024, 4, 30, 9, 15, tzinfo=UTC)
    story = StoryRecord(
        url="https://x.example/a",
        html=b"<p>x</p>",
        fetch_date=NOW,
        metadata={
            "content_metadata": {"publication_date": published, "tags": ("a", "b"), "nested": {"k": [1.5]}}
        },
    )
    path = write_archive(tmp_path, [story])
    content = next(read_story_archive(path)).metadata["content_metadata"]
    # story-indexer repr()s tuples and nested dicts into strings; structure survives here
    assert content["publication_date"] == "2024-04-30T09:15:00+00:00"
    assert content["tags"] == ["a", "b"]
    assert content["nested"] == {"k": [1.5]}
    assert story.metadata["content_metadata"]["publication_date"] is published  # caller's dict untouched


def test_deterministic_ids_give_byte_identical_files(tmp_path: Path) -> None:
    first = write_archive(tmp_path / "one", three_stories(), deterministic_ids=True)
    second = write_archive(tmp_path / "two", three_stories(), deterministic_ids=True)
    assert first.read_bytes() == second.read_bytes()
    random_a = write_archive(tmp_path / "three", three_stories())
    random_b = write_archive(tmp_path / "four", three_stories())
    assert random_a.read_bytes() != random_b.read_bytes()
    ids = [h.get_header("WARC-Record-ID") for _, h, _, _ in warc_records(first)]
    assert len(set(ids)) == len(ids) == 7


def build_warc(path: Path, records: list[dict], *, gzip_records: bool = True) -> Path:
    """A generic crawl WARC from simple record specs (warcio does the writing)."""
    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=gzip_records, warc_version="WARC/1.0")
        for spec in records:
            kind = spec.get("type", "response")
            headers = {"WARC-Date": spec.get("date", "2024-05-01T00:00:00Z")}
            headers.update(spec.get("warc_headers", {}))
            if kind in ("response", "request"):
                # a request line is "<method> <path> HTTP/1.1": warcio keeps the method as "protocol"
                status = spec.get("status", "200 OK") + (" HTTP/1.1" if kind == "request" else "")
                http = StatusAndHeaders(
                    status,
                    spec.get("headers", [("Content-Type", "text/html; charset=utf-8")]),
                    protocol=spec.get("protocol", "HTTP/1.1"),
                )
                body = spec.get("body", b"")
                record = writer.create_warc_record(
                    spec["url"],
                    kind,
                    payload=io.BytesIO(body),
                    length=len(body),
                    http_headers=http,
                    warc_headers_dict=headers,
                )
            else:
                body = spec.get("body", b"")
                headers["Content-Type"] = spec.get("content_type", "text/html")
                record = writer.create_warc_record(
                    spec["url"], kind, payload=io.BytesIO(body), length=len(body), warc_headers_dict=headers
                )
            writer.write_record(record)
    return path


def test_story_reader_keeps_responses_without_metadata(tmp_path: Path) -> None:
    # story-indexer's reader would skip c's response while waiting for b's metadata and then pair b's HTML
    # with c's metadata; pairing by WARC-Refers-To keeps all three right
    path = write_archive(tmp_path, three_stories()[:1])
    mixed = tmp_path / "mixed.warc.gz"
    with mixed.open("wb") as handle:
        handle.write(path.read_bytes())  # warcinfo + story one
    extra = build_warc(
        tmp_path / "extra.warc.gz",
        [{"url": "https://b.example/", "body": b"<html>b</html>", "date": "2024-05-02T03:04:05Z"}],
    )
    with mixed.open("ab") as handle:
        handle.write(extra.read_bytes())
        handle.write(write_archive(tmp_path / "c", three_stories()[1:2]).read_bytes())
    stories = list(read_story_archive(mixed))
    assert [s.url for s in stories] == [
        "https://news.example/2024/05/01/story-one",
        "https://b.example/",
        "https://blog.example/post",
    ]
    plain = stories[1]
    assert plain.metadata == {}
    assert plain.encoding == "utf-8"  # from the Content-Type charset
    assert plain.fetch_date == datetime(2024, 5, 2, 3, 4, 5, tzinfo=UTC)
    assert stories[2].metadata["content_metadata"]["article_title"] == "Post"


def test_parsed_date_falls_back_to_metadata_warc_date(tmp_path: Path) -> None:
    story = StoryRecord(
        url="https://x.example/a",
        html=b"<p>x</p>",
        fetch_date=datetime(2024, 3, 2, 1, 0, 59, 999999, tzinfo=UTC),
        metadata={"content_metadata": {"article_title": "A"}},
    )
    back = next(read_story_archive(write_archive(tmp_path, [story])))
    assert back.metadata["content_metadata"]["parsed_date"] == "2024-03-02T01:00:59"


def test_stories_from_story_archive(tmp_path: Path) -> None:
    path = write_archive(tmp_path, three_stories())
    stories = list(stories_from_warc(path))
    assert [s["url"] for s in stories] == [
        "https://news.example/2024/05/01/story-one",
        "https://blog.example/post",
    ]  # the 404 is not a story
    one, two = stories
    assert one["title"] == "Un été"
    assert one["text"] == "Body text one."
    assert one["publish_date"] == datetime(2024, 4, 30, tzinfo=UTC)
    assert one["language"] == "fr"
    assert one["canonical_domain"] == "news.example"
    assert one["medium"] is None
    assert one["html"] == three_stories()[0].html
    # no publication_date: the RSS pub_date, as story-indexer's importer does
    assert two["publish_date"] == datetime(2024, 4, 30, 8, 0, tzinfo=UTC)
    assert two["text"] is None


def test_stories_from_generic_crawl_leave_extraction_to_caller(tmp_path: Path) -> None:
    path = build_warc(
        tmp_path / "crawl.warc.gz",
        [
            {"url": "https://a.example/", "body": b"<html><title>A</title></html>"},
            {
                "url": "https://a.example/data.json",
                "body": b"{}",
                "headers": [("Content-Type", "application/json")],
            },
            {"url": "https://a.example/gone", "status": "410 Gone", "body": b"<html>gone</html>"},
            {"url": "https://a.example/untyped", "body": b"  <!DOCTYPE html><html>u</html>", "headers": []},
        ],
    )
    stories = list(stories_from_warc(path))
    assert [s["url"] for s in stories] == ["https://a.example/", "https://a.example/untyped"]
    assert stories[0]["title"] is None and stories[0]["text"] is None and stories[0]["publish_date"] is None
    assert stories[0]["html"] == b"<html><title>A</title></html>"


# ---------------------------------------------------------------------------------------------------------
# Generic pages and bad files
# ---------------------------------------------------------------------------------------------------------


def test_read_warc_pages_generic_records(tmp_path: Path) -> None:
    path = build_warc(
        tmp_path / "crawl.warc",
        [
            {
                "type": "warcinfo",
                "url": "",
                "content_type": "application/warc-fields",
                "body": b"software: t\r\n",
            },
            {
                "url": "http://a.example/",
                "body": b"<html>a</html>",
                "headers": [("Content-Type", "text/html; encoding=koi8-r")],
            },
            {"type": "request", "url": "http://a.example/", "status": "/", "protocol": "GET", "headers": []},
            {"type": "resource", "url": "http://a.example/file.html", "body": b"<html>r</html>"},
            {
                "type": "resource",
                "url": "http://a.example/img.png",
                "content_type": "image/png",
                "body": b"\x89PNG",
            },
            {"url": "dns:a.example", "body": b"a.example. 300 IN A 10.0.0.1", "headers": []},
        ],
        gzip_records=False,
    )
    pages = list(read_warc_pages(path))
    assert [(p.url, p.record_type, p.status, p.body) for p in pages] == [
        ("http://a.example/", "response", 200, b"<html>a</html>"),
        ("http://a.example/file.html", "resource", 200, b"<html>r</html>"),
    ]
    assert pages[0].charset == "koi8-r"  # story-indexer's "encoding=" parameter is understood
    assert pages[0].date == datetime(2024, 5, 1, tzinfo=UTC)
    assert pages[0].digest_ok is True
    assert pages[1].content_type == "text/html"


def test_missing_file_fails_at_call_time(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.warc"):
        read_warc_pages(tmp_path / "nope.warc")
    with pytest.raises(FileNotFoundError):
        read_story_archive(tmp_path / "nope.warc")


def test_truncated_gzip_archive_keeps_the_stories_before_the_damage(tmp_path: Path) -> None:
    path = write_archive(tmp_path, three_stories())
    data = path.read_bytes()
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(data[: len(data) - 200])  # into the last story's metadata record

    seen: list[str] = []
    with pytest.raises(WarcReadError) as caught:
        for story in read_story_archive(cut):
            seen.append(story.url)
    assert seen == [s.url for s in three_stories()[:2]]
    assert caught.value.path == str(cut)
    assert str(cut) in str(caught.value)
    assert caught.value.offset > 0

    errors: list[WarcReadError] = []
    pages = list(read_warc_pages(cut, errors=errors))
    assert len(pages) == 3  # the last response survived; only its metadata record is cut
    # the metadata record (its header cut, read as an empty payload), then the cut itself, at that offset
    assert len(errors) == 2 and {e.path for e in errors} == {str(cut)}
    assert errors[1].file_level and errors[1].offset == errors[0].offset
    assert f"cut short at byte {len(data) - 200}" in errors[1].reason


def test_garbage_in_uncompressed_warc_reports_file_and_offset(tmp_path: Path) -> None:
    good = build_warc(
        tmp_path / "good.warc",
        [{"url": f"http://a.example/{n}", "body": f"<html>{n}</html>".encode()} for n in range(2)],
        gzip_records=False,
    )
    bad = tmp_path / "bad.warc"
    bad.write_bytes(good.read_bytes() + b"GARBAGE\r\n\r\n" + good.read_bytes())
    seen: list[str] = []
    with pytest.raises(WarcReadError) as caught:  # strict: the pages before, then the error
        for page in read_warc_pages(bad):
            seen.append(page.url)
    assert seen == ["http://a.example/0", "http://a.example/1"]
    assert caught.value.offset == len(good.read_bytes())
    assert "ArchiveLoadFailed" in caught.value.reason

    errors: list[WarcReadError] = []  # lenient: resumes at the next "WARC/1.0" line
    pages = list(read_warc_pages(bad, errors=errors))
    assert [p.url for p in pages] == [f"http://a.example/{n}" for n in (0, 1, 0, 1)]
    assert [e.offset for e in errors] == [len(good.read_bytes())]

    # a five-word line looks like an ARC record header to warcio: one bad record, then reading goes on
    stray = tmp_path / "stray.warc"
    stray.write_bytes(good.read_bytes() + b"this is not a WARC record\r\n\r\n" + good.read_bytes())
    errors = []
    pages = list(read_warc_pages(stray, errors=errors))
    assert [p.url for p in pages] == [f"http://a.example/{n}" for n in (0, 1, 0, 1)]
    assert len(errors) == 1 and "ARC record in a WARC file" in errors[0].reason
    assert errors[0].offset == len(good.read_bytes())


def test_corrupt_gzip_member_loses_only_that_record(tmp_path: Path) -> None:
    # fixed record ids: with random ones, the garbage the damaged member inflates to changed from run to run
    path = write_archive(tmp_path, three_stories(), deterministic_ids=True)
    with path.open("rb") as handle:
        iterator = ArchiveIterator(handle)
        offsets = [(rec.rec_type, iterator.get_record_offset()) for rec in iterator]
    second_response = [offset for kind, offset in offsets if kind == "response"][1]
    data = bytearray(path.read_bytes())
    for index in range(second_response + 30, second_response + 60):  # inside the deflate data
        data[index] ^= 0xFF
    corrupt = tmp_path / "corrupt.warc.gz"
    corrupt.write_bytes(bytes(data))

    errors: list[WarcReadError] = []
    stories = list(read_story_archive(corrupt, errors=errors))
    assert [s.url for s in stories] == [three_stories()[0].url, three_stories()[2].url]
    assert stories[1].metadata["content_metadata"]["parsed_date"] == "2024-05-01 11:00:00.000000"
    assert [e.offset for e in errors] == [second_response]


def test_garbage_read_as_an_arc_header_does_not_swallow_the_records_after_it(tmp_path: Path) -> None:
    # a damaged gzip member can inflate to a line warcio takes for an ARC header, whose "length" then runs
    # on through the good members behind it: those records must still be read, and the error point at it
    first = build_warc(tmp_path / "1.warc.gz", [{"url": "http://a.example/0", "body": b"<html>0</html>"}])
    rest = build_warc(
        tmp_path / "2.warc.gz",
        [{"url": f"http://a.example/{n}", "body": f"<html>{n}</html>".encode()} for n in (1, 2)],
    )
    stray = gzip.compress(b"this is not a 900\n" + b"x" * 40, mtime=0)
    bad = tmp_path / "bad.warc.gz"
    bad.write_bytes(first.read_bytes() + stray + rest.read_bytes())

    errors: list[WarcReadError] = []
    pages = list(read_warc_pages(bad, errors=errors))
    assert [p.url for p in pages] == [f"http://a.example/{n}" for n in range(3)]
    assert [e.offset for e in errors] == [len(first.read_bytes())]
    assert "ARC record in a WARC file" in errors[0].reason


def test_record_shorter_than_declared_is_an_error_not_a_page(tmp_path: Path) -> None:
    good = build_warc(
        tmp_path / "g.warc",
        [{"url": "http://a.example/", "body": b"<html>" + b"x" * 500 + b"</html>"}],
        gzip_records=False,
    )
    cut = tmp_path / "cut.warc"
    cut.write_bytes(good.read_bytes()[:-100])
    with pytest.raises(WarcReadError, match=r"offset 0: response record truncated"):
        list(read_warc_pages(cut))


def test_damaged_files_only_ever_raise_warc_read_error(tmp_path: Path) -> None:
    """Seeded mutations (cuts, flipped bytes, deleted spans) of a gzip and a plain WARC: every reader either
    reads or raises WarcReadError, never warcio's internal errors (seen by fuzzing: AttributeError on a lost
    WARC-Target-URI, TypeError on a garbled digest name, negative offsets)."""
    gz = write_archive(tmp_path, three_stories())
    plain = build_warc(
        tmp_path / "plain.warc",
        [{"url": f"http://a.example/{n}", "body": b"<html>" + b"x" * 300 + b"</html>"} for n in range(3)],
        gzip_records=False,
    )
    sources = [gz.read_bytes(), plain.read_bytes()]
    rng = random.Random(5)
    damaged = tmp_path / "damaged.warc"
    for _case in range(100):
        data = bytearray(rng.choice(sources))
        choice = rng.random()
        if choice < 0.3:
            data = data[: rng.randrange(len(data))]
        elif choice < 0.7:
            for _ in range(rng.randint(1, 20)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        else:
            start = rng.randrange(len(data))
            del data[start : start + rng.randint(1, 200)]
        damaged.write_bytes(bytes(data))
        errors: list[WarcReadError] = []
        list(read_warc_pages(damaged, errors=errors))
        list(stories_from_warc(damaged, errors=errors))
        replay = WarcReplay(damaged)
        for url in replay.urls():
            replay.get(url)
        assert all(error.path == str(damaged) for error in errors + replay.errors)
        with contextlib.suppress(WarcReadError):
            list(read_story_archive(damaged))


def test_read_error_pickles() -> None:
    error = WarcReadError("/x/y.warc.gz", 42, "bad", decompressed=True)
    clone = pickle.loads(pickle.dumps(error))
    assert (clone.path, clone.offset, clone.reason, clone.decompressed) == ("/x/y.warc.gz", 42, "bad", True)
    assert str(clone) == "/x/y.warc.gz: offset 42 of the decompressed stream: bad"


# Pages and errors per real test file, verified by inspecting each file (see warc_index.json descriptions):
#   bad.arc: 3 ARC "response" records with length -1 / "abc", no HTTP message → 3 record errors, 0 pages
#   example-bad-non-chunked.warc.gz, example-bad.warc.gz.bad: whole file is ONE gzip member; warcio stops
#       after the first record, the continuous-gzip re-read recovers 1 and 2 responses (200; 200 + 302)
#   example-digest.warc: only request records → 0 pages
#   example-iana.org-chunked.warc: 1 chunked response, 7223 bytes de-chunked
#   example-resource.warc.gz: 1 text/html resource record
#   example-space-in-target-uri.warc.gz: only an image/png resource → 0 pages
#   example-space-in-url.arc: 1 response (CRs stripped: record 12 bytes short, HTML complete)
#   example-trunc.warc: 1 response whose digests fail (gzip body still decodes to 1270 bytes)
#   example-wget-bad-target-uri.warc.gz: 1 response (<angle-bracketed> target URIs)
#   example-wrong-chunks.warc.gz: response split across gzip members → recovered, but its body is 1270 bytes
#       against an HTTP Content-Length of 1271: a cut body is reported, never stored (0 pages, 1 error)
#   example.arc, example.arc.gz, example.warc, example.warc.gz: 1 response each (revisit not a page)
#   post-test.warc.gz: 3 responses to POSTs (application/json)
EXPECTED_REAL = {
    "bad.arc": (0, 3),
    "example-bad-non-chunked.warc.gz": (1, 0),
    "example-bad.warc.gz.bad": (2, 0),
    "example-digest.warc": (0, 0),
    "example-iana.org-chunked.warc": (1, 0),
    "example-resource.warc.gz": (1, 0),
    "example-space-in-target-uri.warc.gz": (0, 0),
    "example-space-in-url.arc": (1, 0),
    "example-trunc.warc": (1, 0),
    "example-wget-bad-target-uri.warc.gz": (1, 0),
    "example-wrong-chunks.warc.gz": (0, 1),
    "example.arc": (1, 0),
    "example.arc.gz": (1, 0),
    "example.warc": (1, 0),
    "example.warc.gz": (1, 0),
    "post-test.warc.gz": (3, 0),
}


def test_every_real_file_reads_with_expected_pages() -> None:
    index_path = real_file("warc_index.json")
    names = sorted(json.loads(index_path.read_text()))
    assert names, "warc_index.json lists no files"
    for name in names:
        path = REAL_WARC_DIR / name
        if not path.is_file():
            continue
        errors: list[WarcReadError] = []
        pages = list(read_warc_pages(path, errors=errors))
        for error in errors:
            assert error.path == str(path)
        if name in EXPECTED_REAL:
            assert (len(pages), len(errors)) == EXPECTED_REAL[name], name
        for page in pages:
            assert page.url.startswith("http") and 100 <= page.status <= 599
            assert page.date is not None and page.date.tzinfo is not None


def test_real_file_details() -> None:
    iana = next(read_warc_pages(real_file("example-iana.org-chunked.warc")))
    assert iana.header("Transfer-Encoding") == "chunked"
    assert len(iana.body) == 7223 and iana.body.rstrip().endswith(b"</html>")

    # read across its misplaced gzip members (offsets in the decompressed stream), then refused as cut
    wrong_chunks: list[WarcReadError] = []
    assert list(read_warc_pages(real_file("example-wrong-chunks.warc.gz"), errors=wrong_chunks)) == []
    assert [(e.offset, e.decompressed) for e in wrong_chunks] == [(0, True)]
    assert "body is 1,270 bytes, shorter than its HTTP Content-Length of 1,271" in wrong_chunks[0].reason

    one_member = list(read_warc_pages(real_file("example-bad.warc.gz.bad")))
    assert [(p.url, p.status) for p in one_member] == [
        ("http://example.com?example=1", 200),
        ("http://www.iana.org/domains/example", 302),
    ]
    assert one_member[1].location == "http://www.iana.org/domains/reserved"

    trunc = next(read_warc_pages(real_file("example-trunc.warc")))
    assert trunc.digest_ok is False and len(trunc.body) == 1270

    wget = next(read_warc_pages(real_file("example-wget-bad-target-uri.warc.gz")))
    assert wget.url == "http://example.com/"

    arc = next(read_warc_pages(real_file("example-space-in-url.arc")))
    assert " " not in arc.url and len(arc.body) == 1270

    with pytest.raises(WarcReadError, match=r"bad\.arc: offset 134: response record .* no valid HTTP status"):
        list(read_warc_pages(real_file("bad.arc")))


# ---------------------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------------------


def test_replay_key_tolerance() -> None:
    assert replay_key("http://Example.COM/a/") == replay_key("https://example.com/a")
    assert replay_key("https://example.com:443/a?x=1#frag") == "example.com/a?x=1"
    assert replay_key("http://example.com:8080/") == "example.com:8080"
    assert replay_key("http://www.example.com/a") != replay_key("http://example.com/a")


def test_replay_lookups_redirects_and_latest_capture(tmp_path: Path) -> None:
    crawl = build_warc(
        tmp_path / "crawl.warc.gz",
        [
            {"url": "http://a.example/old", "status": "301 Moved", "headers": [("Location", "/new")]},
            {
                "url": "https://a.example/new",
                "body": b"<html>old capture</html>",
                "date": "2024-05-01T00:00:00Z",
            },
            {
                "url": "http://b.example/loop1",
                "status": "302 Found",
                "headers": [("Location", "http://b.example/loop2")],
            },
            {
                "url": "http://b.example/loop2",
                "status": "302 Found",
                "headers": [("Location", "http://b.example/loop1")],
            },
            {
                "url": "http://c.example/away",
                "status": "302 Found",
                "headers": [("Location", "http://never.example/")],
            },
            {"url": "http://e.example/dir/", "body": b"<html>dir</html>"},
        ],
    )
    specs_second = [
        {"url": "https://a.example/new", "body": b"<html>new capture</html>", "date": "2024-05-03T00:00:00Z"},
        {"url": "https://a.example/new", "body": b"<html>older still</html>", "date": "2024-04-01T00:00:00Z"},
    ]
    later = build_warc(tmp_path / "later.warc", specs_second, gzip_records=False)
    replay = WarcReplay([crawl, later])

    page = replay.get("http://a.example/old")
    assert page is not None
    assert page.url == "https://a.example/new"
    assert page.body == b"<html>new capture</html>"  # latest WARC-Date wins, whatever the file order
    redirect = replay.get("http://a.example/old", follow_redirects=False)
    assert redirect is not None and redirect.status == 301 and redirect.location == "http://a.example/new"

    assert replay.get("http://a.example/new/").body == b"<html>new capture</html>"  # trailing slash, http
    assert replay.get("HTTPS://A.EXAMPLE/new#top").url == "https://a.example/new"
    assert replay.get("https://e.example/dir").body == b"<html>dir</html>"
    assert replay.get("http://b.example/loop1") is None  # redirect loop
    assert replay.get("http://c.example/away") is None  # target never captured
    assert replay.get("http://nowhere.example/") is None
    assert "http://a.example/old" in replay and "http://nowhere.example/" not in replay
    assert len(replay) == 6


def test_replay_leaves_out_post_responses(tmp_path: Path) -> None:
    response_id = "<urn:uuid:0b1f7a52-6f1e-4d8e-9a53-2f0c8e1d0a01>"
    path = build_warc(
        tmp_path / "post.warc",
        [
            {
                "url": "http://d.example/form",
                "body": b"<html>posted</html>",
                "warc_headers": {"WARC-Record-ID": response_id},
            },
            {
                "type": "request",
                "url": "http://d.example/form",
                "status": "/form",
                "protocol": "POST",
                "headers": [],
                "warc_headers": {"WARC-Concurrent-To": response_id},
            },
            {"url": "http://d.example/page", "body": b"<html>got</html>"},
            {
                "type": "request",
                "url": "http://d.example/page",
                "status": "/page",
                "protocol": "GET",
                "headers": [],
            },
        ],
        gzip_records=False,
    )
    replay = WarcReplay(path)
    assert replay.get("http://d.example/form") is None
    assert replay.get("http://d.example/page").body == b"<html>got</html>"

    real = real_file("post-test.warc.gz")
    assert len(WarcReplay(real)) == 0  # httpbin.org/post captures are all POST results


def test_replay_serves_story_archives_and_real_files(tmp_path: Path) -> None:
    archive = write_archive(tmp_path, three_stories())
    replay = WarcReplay(tmp_path)  # a folder: every WARC in it
    page = replay.get("http://news.example/2024/05/01/story-one/")
    assert page is not None and page.body == three_stories()[0].html
    missing = replay.get("https://gone.example/missing")
    assert missing is not None and missing.status == 404
    assert page.warc_path == str(archive)

    real_replay = WarcReplay(
        [
            real_file("example.warc.gz"),
            real_file("example-space-in-url.arc"),
            real_file("example-bad-non-chunked.warc.gz"),
        ]
    )
    spaced = real_replay.get(
        "http://example.com/index.cfm?FuseAction=Email&EmailTitle=Examples From The Live Web&IsPopUp=False"
    )
    assert spaced is not None and len(spaced.body) == 1270  # loaded back from the middle of an ARC
    example = real_replay.get("https://example.com")
    assert example is not None and example.status == 200 and example.body.rstrip().endswith(b"</html>")
    assert real_replay.errors == []


def test_replay_collects_errors_unless_strict(tmp_path: Path) -> None:
    path = write_archive(tmp_path, three_stories())
    data = path.read_bytes()
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(data[: len(data) - 200])
    os.remove(path)
    replay = WarcReplay(cut)
    # the cut metadata record, then the cut itself (file-level)
    assert len(replay) == 3 and [e.file_level for e in replay.errors] == [False, True]
    with pytest.raises(WarcReadError):
        WarcReplay(cut, strict=True)


# warcio's private API is used in one module only (topicmap.archive.warcio_internals), and it lists what it uses.

ROOT = Path(__file__).resolve().parents[1]
WARCIO_INTERNALS = ROOT / "topicmap" / "archive" / "warcio_internals.py"
CODE_LAYERS = ("topicmap", "assets", "resources", "sensors", "orchestration", "benchmarks")


def _warcio_classes() -> dict[str, type]:
    import importlib
    import inspect
    import pkgutil

    import warcio

    classes: dict[str, type] = {}
    for info in pkgutil.walk_packages(warcio.__path__, "warcio."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__.startswith("warcio"):
                classes[name] = value
    return classes


def _warcio_private_names() -> set[str]:
    """The private names warcio's classes define (single leading underscore, not dunder)."""
    return {
        name
        for cls in _warcio_classes().values()
        for name in vars(cls)
        if name.startswith("_") and not name.startswith("__")
    }


def _names_used(path: Path) -> list[tuple[int, str]]:
    """(line, name) for every attribute read or method defined in a file, and every name it imports."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.FunctionDef):
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "warcio":
            found += [(node.lineno, part) for part in node.module.split(".")[1:]]
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def test_warcio_private_api_is_used_only_in_warcio_internals() -> None:
    private = _warcio_private_names()
    offenders = [
        f"{path.relative_to(ROOT)}:{line} uses warcio's {name}"
        for layer in CODE_LAYERS
        for path in sorted((ROOT / layer).rglob("*.py"))
        if path != WARCIO_INTERNALS
        for line, name in _names_used(path)
        if name in private
    ]
    assert offenders == [], "warcio's private API belongs in topicmap/archive/warcio_internals.py"


def test_warcio_internals_lists_the_private_names_it_uses_and_warcio_has_them() -> None:
    from topicmap.archive import warcio_internals

    classes = _warcio_classes()
    private = _warcio_private_names()
    used = {name for _, name in _names_used(WARCIO_INTERNALS) if name in private}
    listed = {entry.split(".")[1] for entry in warcio_internals.PRIVATE_METHODS}
    assert used == listed, "warcio_internals.PRIVATE_METHODS lists every private name of warcio's it uses"
    for entry in warcio_internals.PRIVATE_METHODS:
        class_name, method = entry.split(".")
        assert callable(getattr(classes[class_name], method, None)), f"warcio no longer has {entry}"


def test_the_undocumented_warcio_attributes_used_are_there() -> None:
    from warcio.limitreader import LimitReader

    from topicmap.archive import warcio_internals

    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True)
    body = b"<html>page</html>"
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    writer.write_record(
        writer.create_warc_record(
            "http://a.example/", "response", payload=io.BytesIO(body), length=len(body), http_headers=http
        )
    )
    buffer.seek(0)
    iterator, reader = warcio_internals.bounded_archive_iterator(
        buffer, check_digests=True, max_header_bytes=1 << 20, max_file_bytes=1 << 30
    )
    record = next(iterator)
    instances = {
        "ArchiveIterator": iterator,
        "ArcWarcRecord": record,
        "DecompressingBufferedReader": reader,
        "LimitReader": record.raw_stream,
    }
    assert isinstance(record.raw_stream, LimitReader)
    for entry in warcio_internals.UNDOCUMENTED_ATTRIBUTES:
        class_name, attribute = entry.split(".")
        assert hasattr(instances[class_name], attribute), f"warcio no longer has {entry}"
    assert warcio_internals.drain(record) == 0
    assert warcio_internals.digest_passed(record) is True
