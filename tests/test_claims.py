"""Claimed work: a pending URL is claimed atomically before it is fetched, so several processes
spidering one topic fetch each URL once and end with the store one process makes; a claim whose holder died
expires and is taken again; no URL is left behind in a claimed state. On SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from tests.spider_demo_topic import (
    SMALL_WEB,
    demo_topic,
    differences,
    seed_demo_topic,
    store_summary,
    topic_json,
)
from topicmap.demo.server import serve_demo_web
from topicmap.demo.web import DemoWeb, generate_demo_web
from topicmap.spider.claims import (
    ClaimQueue,
    ReleasedClaims,
    Shard,
    claim_keys,
    fill_claim_keys,
    release_run_claims,
    run_holder,
    site_arcs,
    site_hash,
    site_holder,
    url_domain,
    url_shard_key,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig

WORKER = Path(__file__).resolve().parent / "spider_worker.py"
F = s.topic_fetch_urls


# ---------------------------------------------------------------- the claim queue itself


def _topic_with_urls(store: TopicStore, urls: list[str], iteration: int = 1) -> int:
    from datetime import date

    topics_id = store.upsert_topic(
        TopicConfig(name="claims", query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 2, 1))
    )
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            F,
            [
                {"topics_id": topics_id, "url": url, "iteration": iteration, "state": "pending"}
                | claim_keys(url)
                for url in urls
            ],
            ["topics_id", "url"],
        )
    return topics_id


def _urls(sites: int, per_site: int) -> list[str]:
    return [f"http://site{site}.test/story/{n}" for site in range(sites) for n in range(per_site)]


def test_a_claim_interleaves_sites_and_takes_few_of_each(store: TopicStore) -> None:
    topics_id = _topic_with_urls(store, _urls(3, 10))
    claims = ClaimQueue(store, topics_id, 1, "worker-a", per_domain=2)
    rows = claims.claim(100)
    assert len(rows) == 6  # two of each of the three sites, however much room there is
    assert [row["domain"] for row in rows[:3]] != [rows[0]["domain"]] * 3  # sites interleaved
    assert Counter(row["domain"] for row in rows) == {"site0.test": 2, "site1.test": 2, "site2.test": 2}
    more = claims.claim(100, saturated={"site0.test"})
    assert Counter(row["domain"] for row in more) == {"site1.test": 2, "site2.test": 2}
    assert not {r["topic_fetch_urls_id"] for r in rows} & {r["topic_fetch_urls_id"] for r in more}


def test_claims_by_two_holders_never_overlap_and_expired_claims_are_taken_again(store: TopicStore) -> None:
    clock = [1000.0]
    topics_id = _topic_with_urls(store, _urls(4, 5))
    a = ClaimQueue(store, topics_id, 1, "worker-a", lease=60, clock=lambda: clock[0])
    b = ClaimQueue(store, topics_id, 1, "worker-b", lease=60, clock=lambda: clock[0])
    first = a.claim(12)
    second = b.claim(100)
    assert len(first) == 12 and len(second) == 8
    assert not {r["url"] for r in first} & {r["url"] for r in second}
    assert b.claim(100) == []  # everything is held
    assert b.others().count == 12 and b.others().next_expiry == 1060.0
    clock[0] = 1050.0
    assert a.renew() == 12 and b.renew() == 8  # both alive: leases end at 1110
    clock[0] = 1100.0
    assert b.claim(100) == [] and b.renew() == 8
    clock[0] = 1111.0  # a stopped renewing (it died): its claims expired
    taken_over = b.claim(100)
    assert {r["url"] for r in taken_over} == {r["url"] for r in first}
    # a's late renewal no longer touches them: b holds them now
    assert a.renew() == 0


def test_a_redelivered_holder_takes_its_claims_back_at_once_and_release_frees_them(store: TopicStore) -> None:
    topics_id = _topic_with_urls(store, _urls(2, 5))
    dead = ClaimQueue(store, topics_id, 1, "run-1/shard-0", lease=3600)
    held = dead.claim(6)
    other = ClaimQueue(store, topics_id, 1, "someone-else", lease=3600)
    assert len(other.claim(100)) == 4  # the dead holder's six stay out of reach for an hour...
    again = ClaimQueue(store, topics_id, 1, "run-1/shard-0", lease=3600)
    assert again.take_back() == 6  # ... but the same task, redelivered, frees them at once
    assert {r["url"] for r in again.claim(100)} == {r["url"] for r in held}
    assert again.release() == 6 and other.release() == 4
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).where(F.c.claimed_by.is_not(None))).scalar_one() == 0


def test_a_dead_runs_claims_are_released_by_its_run_id_and_no_one_elses(store: TopicStore) -> None:
    """What a run that ended failed or canceled held is free at once (the Dagster sensor's call), to the byte:
    not the claims of a run whose id starts the same or differs in case, nor a URL another holder took over."""
    clock = [1000.0]
    topics_id = _topic_with_urls(store, _urls(3, 6))
    dead_run = "6f1e-run-1"

    def holder(run_id: str, part: str, lease: float = 3600.0) -> ClaimQueue:
        queue = ClaimQueue(store, topics_id, 1, run_holder(run_id, part), lease=lease, clock=lambda: clock[0])
        queue.join()
        return queue

    expired = holder(dead_run, "shard-0-of-2", lease=60.0)
    expired_urls = {r["url"] for r in expired.claim(3)}
    held = {r["url"] for r in holder(dead_run, "shard-1-of-2").claim(3)}
    others = [holder("6f1e-run-10", "spider_iteration"), holder("6F1E-RUN-1", "spider_iteration")]
    kept = {queue.holder: {r["url"] for r in queue.claim(3)} for queue in others}
    clock[0] = 1061.0  # shard 0 stopped renewing: another run takes its URLs over with the unclaimed ones
    taker = holder("another-run", "spider_iteration")
    taken = {r["url"] for r in taker.claim(100)}
    assert expired_urls <= taken and len(taken) == 18 - 3 - 3 - 3

    released = release_run_claims(store, dead_run)
    assert released.urls == 3
    assert released.holders == (run_holder(dead_run, "shard-0-of-2"), run_holder(dead_run, "shard-1-of-2"))
    with store.engine.connect() as conn:
        claims = dict(conn.execute(select(F.c.url, F.c.claimed_by).where(F.c.topics_id == topics_id)).all())
        live = set(conn.execute(select(s.topic_spider_holders.c.holder)).scalars())
    assert {url for url, by in claims.items() if by is None} == held
    assert {url for url, by in claims.items() if by == taker.holder} == taken
    assert all({url for url, by in claims.items() if by == q.holder} == kept[q.holder] for q in others)
    assert live == {queue.holder for queue in others} | {taker.holder}
    assert release_run_claims(store, dead_run) == ReleasedClaims(0, ())  # idempotent
    with pytest.raises(ValueError, match="no '/'"):
        run_holder("a/b", "shard-0-of-1")
    with pytest.raises(ValueError, match="needs a name"):
        run_holder(dead_run, "")


def test_shards_split_an_iteration_by_url_hash(store: TopicStore) -> None:
    urls = _urls(5, 20)
    topics_id = _topic_with_urls(store, urls)
    parts = [
        {
            r["url"]
            for r in ClaimQueue(store, topics_id, 1, f"s{i}", shard=Shard(i, 3), per_domain=100).claim(1000)
        }
        for i in range(3)
    ]
    assert set().union(*parts) == set(urls) and sum(map(len, parts)) == len(urls)
    assert all(url_shard_key(url) % 3 == i for i, part in enumerate(parts) for url in part)
    assert min(map(len, parts)) >= 20  # a hash spreads 100 URLs over three shards
    with pytest.raises(ValueError, match="shard index must be in 0..2"):
        Shard(3, 3)


def test_live_holders_claim_their_own_sites_first_and_the_others_at_the_tail(store: TopicStore) -> None:
    # site affinity: two workers on one iteration rarely use one site's politeness slots at once
    urls = _urls(10, 6)
    topics_id = _topic_with_urls(store, urls)
    owner = {url_domain(url): site_holder(["a", "b"], site_hash(url_domain(url))) for url in urls}
    assert set(owner.values()) == {"a", "b"}
    a = ClaimQueue(store, topics_id, 1, "a", per_domain=2)
    b = ClaimQueue(store, topics_id, 1, "b", per_domain=2)
    a.join()
    assert len({r["domain"] for r in a.claim(10)}) == 10  # alone, "a" interleaves every site
    b.join()
    assert a.live_holders() == b.live_holders() == ["a", "b"]
    own = Counter(owner.values())
    # as many URLs as two of each own site: all of them from the holder's own sites
    b_sites = {r["domain"] for r in b.claim(2 * own["b"])}
    a_sites = {r["domain"] for r in a.claim(2 * own["a"])}
    assert {owner[d] for d in b_sites} == {"b"} and {owner[d] for d in a_sites} == {"a"}
    assert len(b_sites) == own["b"] and len(a_sites) == own["a"]
    # "b" runs out of its own sites and takes the rest of "a"'s: nothing waits on a busy holder's choice
    taken = [row for rows in iter(lambda: b.claim(100), []) for row in rows]
    assert {owner[r["domain"]] for r in taken} == {"a", "b"}
    assert len(taken) + 10 + 2 * own["a"] + 2 * own["b"] == len(urls)
    b.leave()
    assert a.live_holders() == ["a"]  # and "a" would take every site again


def test_a_holder_that_joins_or_leaves_moves_only_the_sites_it_takes_or_hands_on() -> None:
    # the politeness slots a worker is using stay with it when others come and go (consistent hashing)
    keys = [site_hash(f"site{i}.example") for i in range(3000)]
    holders = [f"host:{pid}:worker" for pid in (101, 102, 103)]
    before = {key: site_holder(holders, key) for key in keys}
    assert min(Counter(before.values()).values()) > 3000 / 3 / 2  # each holder gets a fair part of the sites
    joined = {key: site_holder([*holders, "host:104:worker"], key) for key in keys}
    moved = [key for key in keys if joined[key] != before[key]]
    assert {joined[key] for key in moved} == {"host:104:worker"}  # it takes sites only for itself
    assert len(moved) < 3000 / 4 * 1.6  # about a quarter of them, from each holder, not most
    assert {before[key] for key in moved} == set(holders)
    left = {key: site_holder(holders[1:], key) for key in keys}
    assert {key for key in keys if left[key] != before[key]} == {k for k in keys if before[k] == holders[0]}
    # the ranges a claim tests cover the key space once: every site falls to exactly one holder
    covered = sorted(arc for h in holders for arc in site_arcs(holders, h))
    assert covered[0][0] == 0 and covered[-1][1] == 1 << 31
    assert all(low_next == high for (_, high), (low_next, _) in itertools.pairwise(covered))
    arcs = {holder: site_arcs(holders, holder) for holder in holders}
    assert all(any(low <= key < high for low, high in arcs[before[key]]) for key in keys)


def test_a_polite_claimer_keeps_off_the_sites_another_live_holder_is_fetching(store: TopicStore) -> None:
    # taking a busy site would not make it faster (its slots bound it) and would lose slots between the two
    urls = _urls(2, 4)
    topics_id = _topic_with_urls(store, urls)
    a = ClaimQueue(store, topics_id, 1, "a", per_domain=1, exclusive_sites=True)
    b = ClaimQueue(store, topics_id, 1, "b", per_domain=100, exclusive_sites=True)
    a.join()
    held = a.claim(2)  # one URL of each site: "a" is fetching both
    b.join()
    assert b.claim(100) == []
    assert b.others().count == 8  # a's two, and the six it waits for
    _write(store, [held[0]["topic_fetch_urls_id"]])  # "a" is done with the first site
    free = held[0]["domain"]
    taken = b.claim(100)
    assert {r["domain"] for r in taken} == {free} and len(taken) == 3
    # without politeness an idle worker helps with any site
    c = ClaimQueue(store, topics_id, 1, "c", per_domain=100)
    c.join()
    assert {r["domain"] for r in c.claim(100)} == {held[1]["domain"]}


def _write(store: TopicStore, ids: list[int]) -> None:
    with store.engine.begin() as conn:
        conn.execute(update(F).where(F.c.topic_fetch_urls_id.in_(ids)).values(state="story added"))


def test_rows_written_before_version_4_get_their_claim_keys(store: TopicStore) -> None:
    topics_id = _topic_with_urls(store, _urls(2, 3))
    with store.engine.begin() as conn:
        conn.execute(update(F).values(domain=None, shard_key=None, site_key=None))
    assert fill_claim_keys(store, topics_id) == 6
    with store.engine.connect() as conn:
        keys = {r.url: (r.domain, r.shard_key, r.site_key) for r in conn.execute(select(F))}
    assert keys == {url: tuple(claim_keys(url).values()) for url in keys}
    assert len(ClaimQueue(store, topics_id, 1, "w").claim(100)) == 6


def test_concurrent_claimers_never_get_the_same_url(store: TopicStore) -> None:
    urls = _urls(10, 30)
    topics_id = _topic_with_urls(store, urls)
    got: list[list[str]] = [[] for _ in range(4)]
    # every claimer holds its first claim before any goes on, so the work is shared however the threads are
    # scheduled (on a busy machine one thread could otherwise claim and process everything before the others start)
    first_claims_held = threading.Barrier(4)

    def claimer(n: int) -> None:
        queue = ClaimQueue(store, topics_id, 1, f"thread-{n}", per_domain=3)
        rows = queue.claim(7)
        first_claims_held.wait()
        while rows:
            got[n].extend(r["url"] for r in rows)
            with store.engine.begin() as conn:  # "process" them, as the spider's batch write would
                conn.execute(
                    update(F)
                    .where(F.c.topic_fetch_urls_id.in_([r["topic_fetch_urls_id"] for r in rows]))
                    .values(state="story added")
                )
            rows = queue.claim(7)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [url for part in got for url in part]
    assert sorted(everything) == sorted(urls)  # each URL claimed exactly once
    assert all(got), [len(part) for part in got]  # and the work was really shared: every claimer got URLs


# ---------------------------------------------------------------- spiders in several processes


@pytest.fixture(scope="module")
def small_web() -> DemoWeb:
    return generate_demo_web(**SMALL_WEB)


def _open_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, name: str
) -> tuple[TopicStore, str, str]:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / f'{name}.sqlite3'}"
        return TopicStore.open(url), url, ""
    url, schema = request.getfixturevalue("pg_schema")
    schema = f"{schema}_{name}"
    store = TopicStore.open(url, schema=schema)
    request.addfinalizer(lambda: _drop_schema(store, schema))
    return store, url, schema


def _drop_schema(store: TopicStore, schema: str) -> None:
    from sqlalchemy import text

    with store.engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    store.dispose()


def _spider_with(
    processes: int, url: str, schema: str, topic: TopicConfig, port: int, barrier: Path
) -> list[subprocess.Popen]:
    """``processes`` spider workers started together: each says it is ready in the empty folder ``barrier``."""
    settings = json.dumps(
        {"allow_networks": [f"127.0.0.1:{port}"], "host_overrides": {"*.test": f"127.0.0.1:{port}"}}
    )
    barrier.mkdir()
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, schema, topic_json(topic), settings],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TOPICMAP_TEST_START_BARRIER": str(barrier)},
        )
        for _ in range(processes)
    ]
    # start them together once every one is ready (progress, not a deadline: a worker that died is reported)
    while len(list(barrier.glob("ready-*"))) < processes:
        if any(worker.poll() is not None for worker in workers):
            break
        time.sleep(0.02)
    (barrier / "go").touch()
    return workers


def _page_requests(server, since: int) -> Counter:  # noqa: ANN001 - a DemoServer
    return Counter((host, path) for _, host, path in server.request_log[since:] if path != "/robots.txt")


@pytest.mark.deployment
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_two_and_four_spiders_fetch_each_page_once_and_make_the_store_one_spider_makes(
    kind: str, small_web: DemoWeb, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    topic = demo_topic(small_web)
    results = {}
    with serve_demo_web(small_web) as server:
        for processes in (1, 2, 4):
            store, url, schema = _open_store(kind, tmp_path, request, f"p{processes}")
            seed_demo_topic(store, small_web, topic, tmp_path)
            since = len(server.request_log)
            workers = _spider_with(
                processes, url, schema, topic, server.port, tmp_path / f"barrier-{processes}"
            )
            outputs = [worker.communicate(timeout=600)[0].decode() for worker in workers]
            assert all(
                worker.returncode == 0 and "DONE" in out for worker, out in zip(workers, outputs, strict=True)
            ), [
                (worker.returncode, _worker_trouble(out))
                for worker, out in zip(workers, outputs, strict=True)
            ]
            requests = _page_requests(server, since)
            with store.engine.connect() as conn:
                left = conn.execute(select(func.count()).where(F.c.state.in_(("pending",)))).scalar_one()
            results[processes] = (store_summary(store, topic.name), requests, outputs, left)
            store.dispose()
    single, single_requests, _, _ = results[1]
    assert len(single["topic_stories"]) > 50 and sum(single_requests.values()) > 80  # a real crawl
    for processes in (2, 4):
        summary, requests, outputs, left = results[processes]
        assert left == 0
        assert differences(single, summary) == [], processes
        # each page asked for once, as by one spider (a page several pending URLs redirect to is asked for
        # once per such URL, by one spider as by four)
        assert requests == single_requests, (
            processes,
            requests - single_requests,
            single_requests - requests,
        )
        # every URL was processed by exactly one of them (how the work was shared depends on timing: on a quiet
        # machine the first spider can take everything before the others claim; the Celery test shows sharing)
        shares = [int(out.split("PROCESSED ")[1].split()[0]) for out in outputs]
        assert sum(shares) == sum(int(out.split("PROCESSED ")[1].split()[0]) for out in results[1][2]), shares


def _worker_trouble(output: str) -> str:
    """What a failed worker said: its first traceback (where it went wrong) and how it ended."""
    first = output.find("Traceback")
    head = output[max(0, first - 300) : first + 4000] if first >= 0 else ""
    return f"{head}\n...\n{output[-1500:]}"
