"""The Common Crawl loader against real servers on loopback: pywb (from PyPI, in its own virtualenv) serving a
collection built from the demo web's pages and the shared test WARC files (tests/shared_data.py), both as a plain cdxj index (``cc``) and as
a ZipNum cluster index (``cc-zip``, Common Crawl's paged layout), plus a Range-honouring data server.

The pywb virtualenv is built once under .topicmap/pywb-venv and reused. Outside CI a machine that cannot build
it skips these tests with the reason; under CI=true it must work.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select

from tests.ccservers import (
    REPO,
    DataServer,
    IndexProxy,
    PywbServer,
    capture_time,
    ensure_pywb_venv,
    write_pages_warc,
)
from tests.conftest import postgres_url, require_postgres
from tests.shared_data import WARC_DIR, optional_shared
from topicmap.archive import cc_queue
from topicmap.archive.commoncrawl import CdxClient, CommonCrawlError, CommonCrawlSettings
from topicmap.demo.web import generate_demo_web
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

OUTLET = "dailyherald.test"
MISSING_FILE = "demo-missing.warc.gz"
FLAKY_FILE = "demo-00000.warc.gz"  # holds the outlet's captures (URLs sort first)


class Collection:
    """The served collection and what the tests expect of it."""

    def __init__(self, tmp: Path) -> None:
        venv, reason = ensure_pywb_venv()
        if venv is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI=true requires pywb: {reason}")
            pytest.skip(reason)
        self.web = generate_demo_web(seed=3, n_media=4, n_stories=120, months=1)
        source = tmp / "warcs"
        source.mkdir()
        html = {
            url: page
            for url, page in sorted(self.web.pages.items())
            if page.status == 200 and page.content_type == "text/html"
        }
        outlet_urls = [u for u in html if u.startswith(f"http://{OUTLET}/")]
        self.missing_url = outlet_urls[3]  # its file answers 404 on the data endpoint
        self.corrupt_url = outlet_urls[5]  # its record is damaged in the served copy
        everything = [
            (u, p.status, p.content_type, p.body)
            for u, p in sorted(self.web.pages.items())
            if u != self.missing_url
        ]
        half = len(everything) // 2
        write_pages_warc(source / FLAKY_FILE, everything[:half], capture_time())
        write_pages_warc(source / "demo-00001.warc.gz", everything[half:], capture_time())
        missing = self.web.pages[self.missing_url]
        write_pages_warc(
            source / MISSING_FILE, [(self.missing_url, 200, "text/html", missing.body)], capture_time()
        )
        warcs = sorted(source.glob("*.warc.gz"))
        self.shared = optional_shared(WARC_DIR / "example.warc.gz")
        if self.shared is not None:
            warcs.append(self.shared)
        self.outlet_html = outlet_urls
        self.pywb = PywbServer(tmp / "pywb", venv)
        self.pywb.root.mkdir()
        self.pywb.build(warcs, lines_per_block=3)
        # The data endpoint serves its own copy, so the damage below does not touch what pywb indexed.
        self.data_root = tmp / "data"
        shutil.copytree(self.pywb.archive_dir, self.data_root)
        self.pywb.start()
        self.data = DataServer(self.data_root)
        self.data.always[MISSING_FILE] = 404

    def corrupt(self, settings: CommonCrawlSettings) -> None:
        capture = next(c for c in CdxClient(settings).captures("cc", OUTLET, 0) if c.url == self.corrupt_url)
        path = self.data_root / capture.filename
        data = bytearray(path.read_bytes())
        middle = capture.offset + capture.length // 2
        data[middle : middle + 16] = b"\x00" * 16
        path.write_bytes(bytes(data))

    def settings(self, index_url: str | None = None, **extra) -> CommonCrawlSettings:
        return CommonCrawlSettings(
            index_url=index_url or self.pywb.index_url(),
            data_url=self.data.url,
            allow_networks=(
                f"127.0.0.1:{self.pywb.port}",
                f"127.0.0.1:{self.data.port}",
                *extra.pop("allow", ()),
            ),
            index_min_interval=0.0,
            backoff_seconds=0.01,
            **extra,
        )

    def close(self) -> None:
        self.pywb.stop()
        self.data.close()


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory):
    coll = Collection(tmp_path_factory.mktemp("cc"))
    coll.corrupt(coll.settings())
    yield coll
    coll.close()


def _stories_by_url(store: TopicStore) -> dict[str, dict]:
    with store.engine.connect() as conn:
        rows = (
            conn.execute(select(s.stories).where(s.stories.c.source.like("commoncrawl:%"))).mappings().all()
        )
    return {row["url"]: dict(row) for row in rows}


def test_every_capture_of_an_outlet_becomes_a_story(collection: Collection, tmp_path: Path) -> None:
    settings = collection.settings()
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    collection.data.fail_next[FLAKY_FILE] = [503, 503]  # "slow down" twice, then the record
    cc_queue.enqueue_outlets(store, [f"https://{OUTLET}/", "example.com"], ["cc"])
    report = cc_queue.OutletLoader(store, settings, worker_id="w1", batch_size=7).run()

    assert [o.state for o in report.outlets] == ["completed", "completed"]
    stories = _stories_by_url(store)
    expected = set(collection.outlet_html) - {collection.missing_url, collection.corrupt_url}
    assert expected <= set(stories), sorted(expected - set(stories))[:5]
    outlet = report.outlets[0]
    # The two damaged captures are reported with their reasons, and nothing else was lost.
    assert outlet.rejections.counts == {"corrupt record": 1, "http 404": 1}
    assert outlet.captures == len(collection.outlet_html)
    assert outlet.stories_added == len(expected)
    # The headline is kept (the seed's readability lost it) and dates, language and medium come through.
    for url in expected:
        truth = collection.web.story_for_url(url)
        if truth is not None and truth.url == url:
            assert stories[url]["title"] == truth.headline, url
            assert stories[url]["publish_date"] is not None or truth.date_form == "none", url
    assert {stories[u]["language"] for u in expected} == {"en"}
    with store.engine.connect() as conn:
        media = (
            conn.execute(
                select(s.media.c.name).where(
                    s.media.c.media_id.in_({stories[u]["media_id"] for u in expected})
                )
            )
            .scalars()
            .all()
        )
    assert media == ["Daily Herald"]  # named by the pages' og:site_name, not by the host
    # The flaky file answered 503 twice and was then read: retries, not rejections.
    assert [r[2] for r in collection.data.requests if r[0] == FLAKY_FILE][:3] == [503, 503, 206]
    if collection.shared is not None:
        assert any(url.startswith("http://example.com/") for url in stories)
    row = next(r for r in cc_queue.queue_rows(store) if r["domain"] == OUTLET)
    assert (row["state"], row["captures_found"], row["stories_stored"], row["captures_rejected"]) == (
        "completed",
        len(collection.outlet_html),
        len(expected),
        2,
    )
    assert row["completed_at"] is not None and row["started_at"] is not None
    # Loading again adds nothing (the queue is done; re-queued, the stories are already known).
    assert cc_queue.OutletLoader(store, settings, worker_id="w2").run().outlets == []
    assert len(_stories_by_url(store)) == len(stories)


def test_zipnum_pages_give_exactly_the_plain_answer(collection: Collection) -> None:
    settings = collection.settings()
    client = CdxClient(settings)
    plain = client.captures("cc", OUTLET, 0)
    assert client.num_pages("cc", OUTLET) == 1  # a plain index ignores showNumPages
    pages = client.num_pages("cc-zip", OUTLET)
    assert pages > 2
    paged = [c for page in range(pages) for c in client.captures("cc-zip", OUTLET, page)]
    assert Counter((c.url, c.offset) for c in paged) == Counter((c.url, c.offset) for c in plain)
    assert client.num_pages("cc-zip", "nothing-here.test") == 0
    with pytest.raises(CommonCrawlError, match=r"'cc-zip', domain 'dailyherald.test', page 99"):
        client.captures("cc-zip", OUTLET, 99)


def test_index_slow_down_is_retried_and_exhaustion_names_collection_and_page(collection: Collection) -> None:
    proxy = IndexProxy(collection.pywb.base, fail_first=2)
    try:
        settings = collection.settings(proxy.base + "/{collection}/cdx", allow=[proxy.base.split("//")[1]])
        client = CdxClient(settings)
        assert len(client.captures("cc-zip", OUTLET, 1)) > 0
        assert client.http.retries == 2
        proxy.fail_first = 100
        with pytest.raises(
            CommonCrawlError, match=r"CDX index 'cc-zip', domain 'dailyherald.test', page 2: gave up"
        ):
            client.captures("cc-zip", OUTLET, 2)
    finally:
        proxy.close()


def _worker(collection: Collection, schema: str, worker_id: str, *extra: str) -> subprocess.Popen:
    settings = collection.settings()
    command = [
        sys.executable,
        "-m",
        "topicmap.archive.cc_queue",
        "--index-url",
        collection.pywb.index_url().replace("{collection}", "{collection}"),
        "--data-url",
        settings.data_url,
        "--schema",
        schema,
        "--worker-id",
        worker_id,
        "--index-min-interval",
        "0",
        "--backoff-seconds",
        "0.01",
        *[arg for net in settings.allow_networks for arg in ("--allow-network", net)],
        *extra,
    ]
    env = {**os.environ, "TOPICMAP_DATABASE_URL": postgres_url()}
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


@pytest.mark.postgres
def test_workers_share_the_queue_and_resume_after_kill_9(collection: Collection, pg_schema) -> None:
    require_postgres()
    url, schema = pg_schema
    store = TopicStore.open(url, schema=schema)
    outlets = sorted({m["host"].removeprefix("www.").removeprefix("m.") for m in collection.web.media})
    cc_queue.enqueue_outlets(store, outlets, ["cc-zip"])
    q = s.cc_outlet_queue

    # A worker is killed (SIGKILL) once it has committed part of an outlet: mid-outlet, not between outlets.
    collection.data.delay = 0.02
    victim = _worker(collection, schema, "victim", "--batch-size", "4")
    try:
        while True:
            with store.engine.connect() as conn:
                moved = conn.execute(
                    select(func.count()).where(
                        q.c.claimed_by == "victim", q.c.captures_found > 0, q.c.state == "running"
                    )
                ).scalar_one()
            assert victim.poll() is None, "the worker finished before it could be killed"
            if moved:
                break
            time.sleep(0.05)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
    finally:
        collection.data.delay = 0.0
        if victim.poll() is None:
            victim.kill()
    with store.engine.connect() as conn:
        abandoned = conn.execute(select(q).where(q.c.state == "running")).mappings().one()
    assert abandoned["claimed_by"] == "victim" and abandoned["captures_found"] > 0

    # Two workers share the other outlets; the killed one's outlet stays claimed while its lease holds.
    workers = [_worker(collection, schema, f"w{n}") for n in (1, 2)]
    reports = [json.loads(w.communicate()[0]) for w in workers]
    assert [w.returncode for w in workers] == [0, 0]
    loaded = [o["domain"] for r in reports for o in r["outlets"]]
    assert sorted(loaded) == sorted(set(outlets) - {abandoned["domain"]})
    # The killed worker, restarted under its name, resumes its outlet from the committed cursor.
    restarted = _worker(collection, schema, "victim")
    report = json.loads(restarted.communicate()[0])
    assert [o["domain"] for o in report["outlets"]] == [abandoned["domain"]]

    rows = cc_queue.queue_rows(store)
    assert {r["state"] for r in rows} == {"completed"}
    client = CdxClient(collection.settings())
    with store.engine.connect() as conn:
        for row in rows:
            captures = [
                c
                for p in range(client.num_pages("cc-zip", row["domain"]))
                for c in client.captures("cc-zip", row["domain"], p)
            ]
            assert row["captures_found"] == len(captures), row["domain"]
            assert row["stories_stored"] + row["captures_rejected"] + row["stories_existing"] == len(captures)
        urls = conn.execute(select(s.stories.c.url)).scalars().all()
    assert len(urls) == len(set(urls)), "a story was stored twice"
    assert sum(r["stories_stored"] for r in rows) == len(urls)
    resumed = next(r for r in rows if r["domain"] == abandoned["domain"])
    assert resumed["attempts"] == 2 and resumed["claimed_by"] == "victim"
    # the restart did not start over: it processed only what the killed worker had not committed
    assert report["outlets"][0]["captures"] == resumed["captures_found"] - abandoned["captures_found"]
    store.dispose()


def _demo_outlets(collection: Collection) -> list[str]:
    return sorted(
        {
            urlsplit(url).hostname or ""
            for url, page in collection.web.pages.items()
            if page.status == 200 and page.content_type == "text/html"
        }
    )


def test_breadth_mode_takes_every_outlets_first_index_page_before_any_second(
    collection: Collection, tmp_path: Path
) -> None:
    settings = collection.settings()
    outlets = _demo_outlets(collection)
    client = CdxClient(settings)
    pages = {outlet: client.num_pages("cc-zip", outlet) for outlet in outlets}
    assert len(outlets) >= 3 and all(n >= 2 for n in pages.values()), pages
    loaded: dict[str, set[str]] = {}
    claims: dict[str, list[str]] = {}
    for mode in ("depth", "breadth"):
        store = TopicStore.open(f"sqlite:///{tmp_path / f'{mode}.sqlite3'}")
        cc_queue.enqueue_outlets(store, outlets, ["cc-zip"])
        report = cc_queue.OutletLoader(store, settings, worker_id=mode, breadth=mode == "breadth").run()
        claims[mode] = [o.domain for o in report.outlets]
        loaded[mode] = set(_stories_by_url(store))
        assert cc_queue.queue_counts(store) == {"completed": len(outlets)}
        store.dispose()
    # depth drains one outlet after the other; breadth claims an outlet once per index page, a round at a time
    assert claims["depth"] == outlets
    assert len(claims["breadth"]) == sum(pages.values())
    assert claims["breadth"][: len(outlets)] == outlets
    rounds = max(pages.values())
    expected_order = [o for page in range(rounds) for o in outlets if page < pages[o]]
    assert claims["breadth"] == expected_order
    # the same stories either way
    assert loaded["breadth"] == loaded["depth"] and loaded["depth"]
