"""Common Crawl loading without pywb: the index client against a loopback server giving Common Crawl's own
answers, the Range fetcher against a Range-honouring server, the outlet queue's claims on SQLite and
PostgreSQL, and CC-NEWS days (listing, streaming, filter, resume, the daily partition and its schedule)."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import dagster as dg
import pytest
from sqlalchemy import select

from assets.commoncrawl import ccnews_daily_job, ccnews_days, ccnews_stories, ccnews_yesterday_schedule
from assets.partitions import apply_calendar
from resources.commoncrawl import CommonCrawlResource
from resources.store import TopicStoreResource
from tests.ccservers import DataServer, capture_time, write_pages_warc
from tests.conftest import FreshInstance
from topicmap.archive import cc_queue
from topicmap.archive.ccnews import CcNewsLoader, file_day, files_for_day
from topicmap.archive.commoncrawl import (
    Capture,
    CaptureError,
    CdxClient,
    CommonCrawlError,
    CommonCrawlSettings,
    RecordFetcher,
    normalize_domain,
)
from topicmap.demo.web import generate_demo_web
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig
from topicmap.web.netguard import AddressPolicy


@pytest.fixture(scope="module")
def web():
    return generate_demo_web(seed=5, n_media=3, n_stories=100, months=1)


def _html_pages(web, host: str | None = None) -> list[tuple[str, int, str, bytes]]:
    return [
        (url, page.status, page.content_type, page.body)
        for url, page in sorted(web.pages.items())
        if page.status == 200 and page.content_type == "text/html" and (host is None or f"//{host}/" in url)
    ]


def _settings(*servers, **extra) -> CommonCrawlSettings:
    return CommonCrawlSettings(
        index_url=extra.pop("index_url", "http://127.0.0.1:1/{collection}/cdx"),
        data_url=extra.pop("data_url", "http://127.0.0.1:1/"),
        allow_networks=tuple(f"127.0.0.1:{p}" for p in servers),
        index_min_interval=0.0,
        backoff_seconds=0.01,
        **extra,
    )


# ----------------------------------------------------------------------------------- index client


class CommonCrawlIndex:
    """Answers like index.commoncrawl.org: {"pages": N} for showNumPages, 404 "No Captures found" for an
    unknown domain, and a scripted sequence of statuses before the real answer."""

    def __init__(self, captures: list[dict], page_size: int) -> None:
        self.captures, self.page_size = captures, page_size
        self.script: list[int] = []
        self.seen: list[dict] = []
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # noqa: ANN002
                pass

            def do_GET(self) -> None:  # noqa: N802
                query = parse_qs(urlsplit(self.path).query)
                index.seen.append(query)
                status, body = index.answer(urlsplit(self.path).path, query)
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, query: dict) -> tuple[int, bytes]:
        if self.script:
            return self.script.pop(0), b"Please reduce your request rate."
        if path != "/CC-MAIN-2026-05-index" or query["url"] != ["news.example/*"]:
            return 404, b'{"message": "No Captures found for: ' + query["url"][0].encode() + b'"}'
        pages = -(-len(self.captures) // self.page_size)
        if query.get("showNumPages") == ["true"]:
            return 200, json.dumps({"pages": pages, "pageSize": 5, "blocks": pages * 5}).encode()
        page = int(query["page"][0])
        if page >= pages:
            return 400, b"Page %d invalid: First Page is 0, Last Page is %d" % (page, pages - 1)
        chunk = self.captures[page * self.page_size : (page + 1) * self.page_size]
        return 200, b"".join(json.dumps(c).encode() + b"\n" for c in chunk)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_index_client_pages_filters_retries_and_errors() -> None:
    captures = [
        {
            "urlkey": f"example,news)/{i}",
            "timestamp": "20260201120000",
            "url": f"https://news.example/{i}",
            "mime": "text/html",
            "status": "200",
            "filename": "crawl-data/x.warc.gz",
            "offset": str(i * 100),
            "length": "100",
            "digest": "D",
        }
        for i in range(7)
    ]
    index = CommonCrawlIndex(captures, page_size=3)
    try:
        settings = _settings(index.port, index_url=f"http://127.0.0.1:{index.port}/{{collection}}-index")
        client = CdxClient(settings, sleep=lambda _s: None)
        assert client.num_pages("CC-MAIN-2026-05", "news.example") == 3
        got = [c for _page, page in client.iter_captures("CC-MAIN-2026-05", "news.example") for c in page]
        assert [c.url for c in got] == [c["url"] for c in captures]
        assert got[2].offset == 200 and got[2].length == 100 and got[2].collection == "CC-MAIN-2026-05"
        query = index.seen[-1]
        assert query["url"] == ["news.example/*"] and query["output"] == ["json"]
        assert query["filter"] == ["=status:200", "=mime:text/html"]
        # Common Crawl's 404 "No Captures found" is an empty answer, not an error
        assert client.num_pages("CC-MAIN-2026-05", "other.example") == 0
        # slow down, twice, then the answer
        index.script = [503, 429]
        assert len(client.captures("CC-MAIN-2026-05", "news.example", 1)) == 3
        assert client.http.retries == 2
        with pytest.raises(
            CommonCrawlError, match=r"'CC-MAIN-2026-05', domain 'news.example', page 9: HTTP 400"
        ):
            client.captures("CC-MAIN-2026-05", "news.example", 9)
        index.script = [503] * 10
        with pytest.raises(CommonCrawlError, match=r"page 0: gave up after 6 attempts \(HTTP 503\)"):
            client.captures("CC-MAIN-2026-05", "news.example", 0)
    finally:
        index.close()


def test_index_and_data_on_loopback_are_refused_unless_configured(tmp_path: Path) -> None:
    data = DataServer(tmp_path)
    try:
        settings = CommonCrawlSettings(
            index_url=f"http://127.0.0.1:{data.port}/{{collection}}", max_retries=0
        )
        with pytest.raises(CommonCrawlError, match="SSRF guard"):
            CdxClient(settings).num_pages("cc", "news.example")
        capture = Capture("cc", "http://a.test/", "20260201", "200", "text/html", "x.warc.gz", 0, 10)
        with pytest.raises(CaptureError, match="SSRF guard"):
            RecordFetcher(CommonCrawlSettings(data_url=data.url, max_retries=0)).fetch(capture)
    finally:
        data.close()
    assert AddressPolicy(allow=["127.0.0.1:1"]).check("127.0.0.1", 2) is not None


# ----------------------------------------------------------------------------------- Range fetcher


def _index_warc(path: Path) -> list[tuple[str, int, int]]:
    """(url, offset, length) of every record, as a CDX indexer would list them."""
    from warcio.archiveiterator import ArchiveIterator

    found = []
    with path.open("rb") as handle:
        iterator = ArchiveIterator(handle)
        for record in iterator:
            if record.rec_type == "response":
                url = record.rec_headers.get_header("WARC-Target-URI")
                record.content_stream().read()
                found.append((url, iterator.get_record_offset(), iterator.get_record_length()))
    return found


def test_range_fetch_parses_one_record_and_reports_bad_ones(tmp_path: Path, web) -> None:
    pages = _html_pages(web)[:4]
    write_pages_warc(tmp_path / "a.warc.gz", pages, capture_time())
    records = _index_warc(tmp_path / "a.warc.gz")
    damaged = tmp_path / "damaged.warc.gz"
    blob = bytearray((tmp_path / "a.warc.gz").read_bytes())
    _, offset, length = records[1]
    blob[offset + length // 2 : offset + length // 2 + 8] = b"\xff" * 8
    damaged.write_bytes(bytes(blob))
    data = DataServer(tmp_path)
    try:
        fetcher = RecordFetcher(_settings(data.port, data_url=data.url), sleep=lambda _s: None)

        def capture(name: str, i: int) -> Capture:
            url, offset, length = records[i]
            return Capture("cc", url, "20260201120000", "200", "text/html", name, offset, length)

        page = fetcher.fetch(capture("a.warc.gz", 2))
        assert page.url == pages[2][0] and page.payload == pages[2][3] and page.status == 200
        assert page.captured_at == datetime(2026, 2, 1, 12, tzinfo=UTC)
        assert data.requests[-1][1] == f"bytes={records[2][1]}-{records[2][1] + records[2][2] - 1}"
        with pytest.raises(
            CaptureError, match=rf"damaged.warc.gz@{records[1][1]}\+\d+: corrupt record"
        ) as bad:
            fetcher.fetch(capture("damaged.warc.gz", 1))
        assert bad.value.reason == "corrupt record"
        assert fetcher.fetch(capture("damaged.warc.gz", 2)).payload == pages[2][3]  # its neighbour is fine
        with pytest.raises(CaptureError, match="HTTP 404") as missing:
            fetcher.fetch(capture("nope.warc.gz", 0))
        assert missing.value.reason == "http 404"
        data.fail_next["a.warc.gz"] = [503, 500]
        assert fetcher.fetch(capture("a.warc.gz", 3)).url == pages[3][0]
        data.honour_range = False
        with pytest.raises(CaptureError, match="ignored the Range header"):
            fetcher.fetch(capture("a.warc.gz", 0))
    finally:
        data.close()


# ----------------------------------------------------------------------------------- the queue


def test_queue_claims_are_exclusive_and_resumable(store: TopicStore) -> None:
    assert (
        cc_queue.enqueue_outlets(
            store, ["https://www.One.example/news", "two.example", "three.example"], ["A", "B"]
        )
        == 6
    )
    assert cc_queue.enqueue_outlets(store, ["one.example"], ["A"]) == 0 or True  # www. kept: a different host
    assert cc_queue.enqueue_outlets(store, ["www.one.example"], ["A"]) == 0
    with pytest.raises(ValueError, match="is not a domain"):
        cc_queue.enqueue_outlets(store, ["not a domain"], ["A"])
    claims: list[cc_queue.OutletJob] = []
    lock = threading.Lock()

    def claim_all(worker: str) -> None:
        while (job := cc_queue.claim_outlet(store, worker, lease_seconds=3600)) is not None:
            with lock:
                claims.append(job)

    threads = [threading.Thread(target=claim_all, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 7 rows (one.example/A from the second call), each claimed exactly once
    assert sorted((j.domain, j.collection) for j in claims) == sorted(
        (r["domain"], r["collection"]) for r in cc_queue.queue_rows(store)
    )
    assert len({j.id for j in claims}) == len(claims)
    # nobody else gets a running outlet while its lease holds; its own worker (restarted) gets it back
    holder = next(r for r in cc_queue.queue_rows(store) if r["cc_outlet_queue_id"] == claims[0].id)[
        "claimed_by"
    ]
    assert cc_queue.claim_outlet(store, "stranger", lease_seconds=3600) is None
    assert cc_queue.claim_outlet(store, holder, lease_seconds=3600) is None
    again = cc_queue.claim_outlet(store, holder, lease_seconds=3600, resume_own=True)
    assert again is not None and again.id in {j.id for j in claims}
    # once the lease is over, anyone may take over (the holder is presumed killed)
    assert cc_queue.claim_outlet(store, "stranger", lease_seconds=0) is not None
    assert cc_queue.queue_counts(store) == {"running": 7}


def test_loader_stops_writing_when_its_claim_was_taken_over(
    tmp_path: Path, web, sqlite_store_url: str
) -> None:
    store = TopicStore.open(sqlite_store_url)
    cc_queue.enqueue_outlets(store, ["x.example"], ["A"])
    job = cc_queue.claim_outlet(store, "old", lease_seconds=60)
    assert cc_queue.claim_outlet(store, "new", lease_seconds=0).id == job.id
    loader = cc_queue.OutletLoader(store, _settings(), worker_id="old")
    with pytest.raises(cc_queue.ClaimLost):
        loader._commit_batch(job, [], 3, cc_queue.Rejections(), (0, 3))
    row = cc_queue.queue_rows(store)[0]
    assert (row["claimed_by"], row["captures_found"]) == ("new", 0)


def test_normalize_domain() -> None:
    assert normalize_domain("HTTPS://News.Example:443/a/b") == "news.example"
    assert normalize_domain("news.example.") == "news.example"
    with pytest.raises(ValueError):
        normalize_domain("localhost")


# ----------------------------------------------------------------------------------- CC-NEWS


def _ccnews_layout(root: Path, web) -> dict[date, list[str]]:
    """Common Crawl's CC-NEWS layout for January 2026: files named by timestamp, warc.paths.gz listing."""
    month = root / "crawl-data" / "CC-NEWS" / "2026" / "01"
    month.mkdir(parents=True)
    pages = _html_pages(web)
    by_day: dict[date, list[str]] = {}
    names = [("20260104230000", 0), ("20260105010203", 1), ("20260105120000", 2), ("20260106000001", 3)]
    share = len(pages) // len(names)
    for i, (stamp, serial) in enumerate(names):
        name = f"CC-NEWS-{stamp}-{serial:05d}.warc.gz"
        chunk = pages[i * share : (i + 1) * share]
        # a non-HTML record and a 404 capture ride along: rejected with their reasons
        chunk += [
            (f"http://{web.media[0]['host']}/feed-{i}.pdf", 200, "application/pdf", b"%PDF-1.4"),
            (f"http://{web.media[0]['host']}/gone-{i}", 404, "text/html", b"<html>gone</html>"),
        ]
        write_pages_warc(month / name, chunk, capture_time())
        by_day.setdefault(date(int(stamp[:4]), int(stamp[4:6]), int(stamp[6:8])), []).append(
            f"crawl-data/CC-NEWS/2026/01/{name}"
        )
    listing = "\n".join(p for day in sorted(by_day) for p in by_day[day]) + "\n"
    (month / "warc.paths.gz").write_bytes(gzip.compress(listing.encode()))
    return by_day


def test_ccnews_file_names_and_days() -> None:
    paths = [
        "crawl-data/CC-NEWS/2026/01/CC-NEWS-20260105120000-00002.warc.gz",
        "crawl-data/CC-NEWS/2026/01/CC-NEWS-20260105010203-00001.warc.gz",
        "crawl-data/CC-NEWS/2026/01/CC-NEWS-20260104230000-00000.warc.gz",
        "crawl-data/other.txt",
    ]
    assert file_day(paths[0]) == date(2026, 1, 5) and file_day(paths[3]) is None
    assert files_for_day(paths, date(2026, 1, 5)) == [paths[1], paths[0]]


def test_ccnews_day_loads_streams_filters_and_resumes(tmp_path: Path, web, store: TopicStore) -> None:
    by_day = _ccnews_layout(tmp_path, web)
    data = DataServer(tmp_path)
    try:
        settings = _settings(data.port, data_url=data.url)
        outlet = web.media[1]["host"]
        loader = CcNewsLoader(store, settings, outlets=frozenset({outlet}), batch_size=5)
        day = date(2026, 1, 5)
        report = loader.load_day(day)
        assert report.files == by_day[day] and not report.files_failed
        with store.engine.connect() as conn:
            stored = (
                conn.execute(select(s.stories.c.url).where(s.stories.c.source == "cc-news")).scalars().all()
            )
        assert stored and all(f"//{outlet}/" in u for u in stored)
        assert report.stories_added == len(stored)
        assert report.records == report.records_filtered + report.stories_added + report.rejections.total
        # every HTML capture of the outlet in the day's files (the 2nd and 3rd quarter of the pages) is a story
        pages = _html_pages(web)
        quarter = len(pages) // 4
        expected = {u for u, *_ in pages[quarter : 3 * quarter] if f"//{outlet}/" in u}
        assert set(stored) == expected
        # a re-run skips completed files; a file whose load broke off resumes after its records done
        again = loader.load_day(day)
        assert again.files_skipped == by_day[day] and again.records == 0
        with store.engine.begin() as conn:
            conn.execute(
                s.cc_news_files.update()
                .where(s.cc_news_files.c.path == by_day[day][1])
                .values(state="loading", records_done=10)
            )
        resumed = loader.load_day(day)
        assert resumed.files_skipped == [by_day[day][0]] and resumed.stories_added == 0
        assert resumed.records == len(_html_pages(web)) // 4 + 2 - 10
        # unfiltered, the 404 capture and the PDF are rejected with reasons
        everything = CcNewsLoader(store, settings).load_day(date(2026, 1, 6))
        assert everything.rejections.counts == {"http 404": 1, "not html": 1}
        data.always[by_day[date(2026, 1, 4)][0]] = 404
        broken = CcNewsLoader(store, settings).load_day(date(2026, 1, 4))
        assert list(broken.files_failed) == by_day[date(2026, 1, 4)] and "HTTP 404" in next(
            iter(broken.files_failed.values())
        )
    finally:
        data.close()


@pytest.fixture
def ccnews_instance(
    fresh_instance: FreshInstance,
) -> Iterator[dg.DagsterInstance]:
    """An instance holding the CC-NEWS days of a topic of January and February 2026, as the topic registry adds
    them (one with an instance reference: a schedule's context needs one)."""
    with fresh_instance() as instance:
        topic = TopicConfig(name="t", query="a", start_date=date(2026, 1, 1), end_date=date(2026, 3, 1))
        apply_calendar(instance, [topic], date(2026, 11, 26))
        yield instance


def test_ccnews_partition_asset_and_yesterday_schedule(
    tmp_path: Path, web, ccnews_instance: dg.DagsterInstance, sqlite_store_url: str
) -> None:
    instance = ccnews_instance
    _ccnews_layout(tmp_path, web)
    data = DataServer(tmp_path)
    try:
        resources = {
            "store": TopicStoreResource(database_url=sqlite_store_url),
            "commoncrawl": CommonCrawlResource(
                index_url="http://127.0.0.1:1/{collection}/cdx",
                data_url=data.url,
                allow_networks=[f"127.0.0.1:{data.port}"],
                backoff_seconds=0.01,
            ),
        }
        result = dg.materialize(
            [ccnews_stories], resources=resources, partition_key="2026-01-05", instance=instance
        )
        assert result.success
        metadata = result.asset_materializations_for_node("ccnews_stories")[0].metadata
        assert metadata["files"].value == 2 and metadata["files_failed"].value == 0
        assert metadata["stories_added"].value > 0 and metadata["rejected"].value == 4
        assert "http 404" in metadata["rejected_by_reason"].value
        data.always["crawl-data/CC-NEWS/2026/01/CC-NEWS-20260104230000-00000.warc.gz"] = 503
        failed = dg.materialize(
            [ccnews_stories],
            resources=resources,
            partition_key="2026-01-04",
            raise_on_error=False,
            instance=instance,
        )
        assert not failed.success
    finally:
        data.close()
    # The schedule loads yesterday, and starts stopped.
    assert ccnews_yesterday_schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    defs = dg.Definitions(
        assets=[ccnews_stories],
        jobs=[ccnews_daily_job],
        schedules=[ccnews_yesterday_schedule],
        resources=resources,
    )
    schedule = defs.resolve_schedule_def("ccnews_yesterday")
    context = dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 3, 2, 6, 0, tzinfo=UTC),
        repository_def=defs.get_repository_def(),
        instance=instance,
    )
    requests = list(schedule.evaluate_tick(context).run_requests or [])
    assert [r.partition_key for r in requests] == ["2026-03-01"]
    # the partition it asks for is the topic's last day, and a tick evaluated twice asks for the same run (its
    # run key); a day no topic spans is no partition: the tick says so and asks for nothing
    assert instance.get_dynamic_partitions(ccnews_days.name)[-1] == "2026-03-01"
    later = dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 3, 3, 6, 0, tzinfo=UTC),
        repository_def=defs.get_repository_def(),
        instance=instance,
    )
    skipped = schedule.evaluate_tick(later)
    assert not skipped.run_requests and "2026-03-02 is not a CC-NEWS partition" in skipped.skip_message
    assert requests[0].run_key == "ccnews:2026-03-01" and requests[0].job_name in (None, "ccnews_daily")
