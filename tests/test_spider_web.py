"""The spider over real HTTP on loopback: fault answers end in the right states, a killed run resumes,
and two topics spidering at once share each domain's politeness budget through the store."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.faultserver import FaultServer
from tests.linkweb import LinkWeb, page_url
from topicmap.spider.iteration import Spider
from topicmap.spider.sources import FetcherSource
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore
from topicmap.topics.declarations import TopicConfig
from topicmap.web.fetch import WebFetcher
from topicmap.web.netguard import AddressPolicy

WORKER = Path(__file__).resolve().parent / "spider_worker.py"


def seed_topic(store: TopicStore, name: str, links: list[str], query: str = "climate") -> TopicConfig:
    topic = TopicConfig(name=name, query=query, start_date=date(2026, 1, 1), end_date=date(2026, 3, 31))
    topics_id = store.upsert_topic(topic)
    anchors = " ".join(f'<a href="{u}">link</a>' for u in links)
    html = (
        f"<html><head><title>Climate seed {name}</title></head><body><article><h1>Climate seed</h1>"
        f"<p>The seed story of the climate topic, long enough to be an article body. {anchors}</p></article></body></html>"
    ).encode()
    seed_url = f"https://seed.example/{name}"
    added = store.add_stories(
        [NewStory(seed_url, f"Climate seed {name}", "climate", datetime(2026, 2, 1, tzinfo=UTC), html=html)],
        source="test",
    )
    store.add_seed_urls(
        topics_id, [{"url": seed_url, "source": "archive query", "stories_id": added.stories_ids[0]}]
    )
    return topic


def fetch_states(store: TopicStore) -> dict[str, tuple[str, int | None, str | None]]:
    f = s.topic_fetch_urls
    with store.engine.connect() as conn:
        return {
            r.url: (r.state, r.code, r.message)
            for r in conn.execute(select(f.c.url, f.c.state, f.c.code, f.c.message))
        }


def test_fault_answers_end_in_the_right_states_with_useful_messages(tmp_path: Path) -> None:
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    with FaultServer() as server:
        links = {
            "404": server.url("/status/404"),
            "flaky": server.url("/flaky/a"),
            "ratelimited": server.url("/ratelimited/a"),
            "blackhole": server.blackhole_url("/"),
            "stall": server.url("/stall"),
            "loop": server.url("/loop/a"),
            "other-port": server.url("/redirect/other-port"),
            "metadata": server.url("/redirect/metadata"),
            "big": server.url("/big"),
            "pdf": server.url("/doc.pdf"),
            "bomb": server.url("/bomb"),
            "private": server.url("/private/page"),
            "direct-metadata": "http://169.254.169.254/latest/meta-data/",
        }
        topic = seed_topic(store, "faults", list(links.values()), query="climate OR café OR page")
        fetcher = WebFetcher(
            policy=AddressPolicy(allow=server.allow_list),
            connect_timeout=1,
            read_timeout=2,
            total_timeout=4,
            max_retries=2,
            backoff_base=0.05,
            interval_overrides={"*": 0.0},
        )
        spider = Spider(
            store,
            topic,
            FetcherSource(fetcher, max_workers=8, interval_overrides={"*": 0.0}),
            log=lambda _: None,
        )
        spider.run_iteration()
        spider.run_iteration()
        assert server.other_hits == []  # the redirect to another loopback port was never followed
    states = fetch_states(store)
    by_name = {name: states[url] for name, url in links.items()}
    assert by_name["404"][:2] == ("request failed", 404)
    assert by_name["flaky"][0] != "request failed"  # 500 then 200: the retry got the page
    assert by_name["ratelimited"][0] != "request failed"  # 429 with Retry-After, then 200
    for name in ("blackhole", "stall", "loop", "big", "bomb"):
        assert by_name[name][0] == "request failed", (name, by_name[name])
        assert by_name[name][2], name  # with a message saying why
    for name in ("other-port", "metadata", "direct-metadata"):
        assert by_name[name][0] == "skipped" and "refused" in by_name[name][2], (name, by_name[name])
    assert by_name["pdf"][0] == "skipped" and "application/pdf" in by_name["pdf"][2]
    assert by_name["private"][0] == "skipped" and "robots" in by_name["private"][2].lower()


@pytest.mark.deployment
def test_a_run_killed_mid_iteration_resumes_without_duplicates_or_losses(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    store = TopicStore.open(db)
    n = 40
    with LinkWeb(n=n, hosts=4, delay=0.05) as web:
        topic = seed_topic(store, "resume", [page_url(0, 4)])
        topic_json = json.dumps(
            {"name": topic.name, "query": topic.query, "start_date": "2026-01-01", "end_date": "2026-03-31"}
        )
        # The killed worker's claims are taken again once their lease runs out (no run ends to release them):
        # a lease of 10 s (renewed every 2.5 s while it lives) instead of the default 120 s the resume waits for.
        worker = subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                db,
                "",
                topic_json,
                json.dumps(web.page_source_settings()),
                "0",
                "10",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        f = s.topic_fetch_urls
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with store.engine.connect() as conn:
                done = conn.execute(select(func.count()).where(f.c.state != "pending")).scalar_one()
            if done >= 12:
                break
            time.sleep(0.05)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        assert done >= 12, worker.stdout.read().decode()[-2000:]
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).where(f.c.state == "pending")).scalar_one() > 0, (
                "killed too late"
            )
        fetcher = WebFetcher(
            policy=AddressPolicy(allow=web.page_source_settings()["allow_networks"]),
            host_overrides=web.page_source_settings()["host_overrides"],
            interval_overrides={"*": 0.0},
        )
        spider = Spider(
            store, topic, FetcherSource(fetcher, interval_overrides={"*": 0.0}), log=lambda _: None
        )
        for _ in range(20):
            if spider.run_iteration().done:
                break
    states = fetch_states(store)
    story_urls = [page_url(i, 4) for i in range(n)]
    assert all(states[u][0] == "story added" for u in story_urls), {
        u: states[u] for u in story_urls if states[u][0] != "story added"
    }
    with store.engine.connect() as conn:
        stories = conn.execute(select(s.stories.c.url)).scalars().all()
        links = conn.execute(select(s.topic_links.c.stories_id, s.topic_links.c.url)).all()
        topic_stories = conn.execute(select(s.topic_stories.c.stories_id)).scalars().all()
    assert len(stories) == len(set(stories)) == n + 1  # every page once, plus the seed
    assert len(topic_stories) == len(set(topic_stories)) == n + 1
    assert len(links) == len(set(links))
    # every tree edge and off-topic link is recorded exactly once: n-1 tree edges + ceil(n/3) off-topic + 1 seed link
    assert len(links) == (n - 1) + len(range(0, n, 3)) + 1


@pytest.mark.deployment
@pytest.mark.postgres
def test_two_topics_spidering_at_once_never_break_a_domain_interval(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    store = TopicStore.open(url, schema=schema)
    interval = 0.3
    with LinkWeb(n=24, hosts=3, delay=0.0) as web:
        workers = []
        for name in ("alpha", "beta"):
            topic = seed_topic(store, name, [page_url(0, 3), page_url(1, 3), page_url(2, 3)])
            topic_json = json.dumps(
                {
                    "name": topic.name,
                    "query": topic.query,
                    "start_date": "2026-01-01",
                    "end_date": "2026-03-31",
                }
            )
            workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(WORKER),
                        url,
                        schema,
                        topic_json,
                        json.dumps(web.page_source_settings()),
                        str(interval),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
        outputs = [w.communicate(timeout=180)[0].decode() for w in workers]
        assert all("DONE" in out for out in outputs), outputs
        hits = web.story_hits()
    by_domain: dict[str, list[float]] = defaultdict(list)
    for when, host, _path in hits:
        by_domain[host].append(when)
    assert len(hits) >= 2 * 24 - 2  # both topics fetched (almost) every page
    smallest = min(
        b - a for times in by_domain.values() for a, b in zip(sorted(times), sorted(times)[1:], strict=False)
    )
    # arrivals are the kernel's receive times, and each next turn counts from an upper bound of the send: no slack
    assert smallest >= interval, f"smallest gap {smallest:.3f}s < {interval}s"


def test_spidering_from_a_warc_replay_is_offline_and_reproducible(tmp_path: Path) -> None:
    """A crawl recorded as WARC is re-spidered with no network: the same states, the same stories."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from tests.linkweb import page_html
    from topicmap.spider.sources import WarcReplaySource

    n, hosts = 12, 3
    warc = tmp_path / "crawl.warc.gz"
    with warc.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for i in range(n):
            body = page_html(i, n, hosts)
            headers = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1"
            )
            writer.write_record(
                writer.create_warc_record(
                    page_url(i, hosts), "response", payload=io.BytesIO(body), http_headers=headers
                )
            )
        # a redirect captured in the crawl: the short URL leads to page 1
        redirect = StatusAndHeaders(
            "301 Moved Permanently", [("Location", page_url(1, hosts))], protocol="HTTP/1.1"
        )
        writer.write_record(
            writer.create_warc_record(
                "http://short.web.test/x", "response", payload=io.BytesIO(b""), http_headers=redirect
            )
        )

    def spider_once(db_name: str) -> dict[str, tuple[str, int | None, str | None]]:
        store = TopicStore.open(f"sqlite:///{tmp_path / db_name}")
        topic = seed_topic(
            store, "replay", [page_url(0, hosts), "http://short.web.test/x", "http://never.web.test/gone"]
        )
        spider = Spider(store, topic, WarcReplaySource([warc]), log=lambda _: None)
        for _ in range(10):
            if spider.run_iteration().done:
                break
        return fetch_states(store)

    first = spider_once("a.sqlite3")
    assert all(first[page_url(i, hosts)][0] in ("story added", "story match") for i in range(n))
    assert first["http://never.web.test/gone"][0] == "request failed"
    assert "not captured" in first["http://never.web.test/gone"][2]
    assert first["http://short.web.test/x"][0] in ("story added", "story match")
    assert spider_once("b.sqlite3") == first  # reproducible
