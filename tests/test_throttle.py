"""Per-domain throttling: intervals, domain turns claimed and released in memory and in the topic store (SQLite
and PostgreSQL), and several spider processes sharing sites without ever crowding one or reading its robots.txt
twice."""

from __future__ import annotations

import multiprocessing
import queue
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from tests.faultserver import FaultServer
from topicmap.store.throttle import LINE_GRACE, SqlThrottle, shared_politeness
from topicmap.store.topic_store import TopicStore
from topicmap.web.throttle import (
    DEFAULT_INTERVAL,
    HELD_POLL,
    Lease,
    MemoryThrottle,
    domain_interval,
    throttle_domain,
    validate_interval_overrides,
)

SPIDER_INTERVAL = 0.2
SPIDERS = 4
SITES = ("alpha.test", "beta.test", "gamma.test")
PAGES_PER_SITE = 2  # per spider
LATE_SEND = 0.06  # the most a spider's request leaves after its turn (three times the old 20 ms guard band)


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- intervals


@pytest.mark.parametrize(
    ("domain", "seconds"),
    [
        ("nytimes.com", DEFAULT_INTERVAL),
        ("wikipedia.org", 0.5),
        ("twitter.com", 0.5),
        ("nih.gov", 0.5),
        ("youtube.com", 2.0),
        ("trib.al", 0.1),
        ("bit.ly", 1.0),
        ("goo.gl", 1.0),
        ("NYTimes.com.", DEFAULT_INTERVAL),
    ],
)
def test_media_cloud_default_intervals(domain: str, seconds: float) -> None:
    assert domain_interval(domain) == seconds


def test_interval_overrides() -> None:
    overrides = {"nytimes.com": 30.0, "*": 2.0, "youtube.com": 0.0}
    assert domain_interval("nytimes.com", overrides) == 30.0
    assert domain_interval("example.org", overrides) == 2.0  # "*" replaces the default ...
    assert domain_interval("wikipedia.org", overrides) == 0.5  # ... not the accelerated list
    assert domain_interval("youtube.com", overrides) == 0.0
    with pytest.raises(ValueError, match="interval override for 'x.com'"):
        domain_interval("x.com", {"x.com": float("nan")})
    with pytest.raises(ValueError, match="must be a finite number"):
        validate_interval_overrides({"*": -1})


def test_throttle_key_is_the_distinctive_domain() -> None:
    assert throttle_domain("https://www.nytimes.com/2024/a.html") == "nytimes.com"
    assert throttle_domain("http://cooking.nytimes.com/r") == "nytimes.com"
    assert throttle_domain("http://news.bbc.co.uk/x") == "bbc.co.uk"
    assert throttle_domain("http://127.0.0.1:8080/x") == throttle_domain("http://127.0.0.1:9090/y")
    with pytest.raises(ValueError, match="no host"):
        throttle_domain("http:///x")


# ---------------------------------------------------------------- reservation semantics, every backend


@pytest.fixture
def sqlite_engine(tmp_path) -> Iterator[Engine]:
    engine = create_engine(f"sqlite:///{tmp_path / 'throttle.sqlite3'}")
    yield engine
    engine.dispose()


@pytest.fixture
def postgres_engine(pg_schema) -> Iterator[Engine]:
    url, schema = pg_schema
    with create_engine(url).begin() as conn:
        conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    engine = create_engine(url, connect_args={"options": f"-csearch_path={schema}"})
    yield engine
    engine.dispose()


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def throttle_factory(request):
    """Builds a throttle of each kind on a given clock."""
    if request.param == "memory":
        return lambda clock: MemoryThrottle(clock=clock)
    engine = request.getfixturevalue("sqlite_engine" if request.param == "sqlite" else "postgres_engine")
    return lambda clock: SqlThrottle(engine, clock=clock)


def test_a_turn_is_an_interval_after_the_last_request_went_out(throttle_factory) -> None:
    clock = FakeClock()
    throttle = throttle_factory(clock)
    lease = throttle.claim("a.com", 10.0, hold=30.0)
    assert isinstance(lease, Lease)
    assert isinstance(throttle.claim("b.com", 10.0, hold=30.0), Lease)  # domains are independent
    clock.now += 0.3  # the request leaves late (a thread waiting for the GIL): the interval counts from then
    throttle.release(lease, sent_at=clock.now)
    assert throttle.claim("a.com", 10.0, hold=30.0) == pytest.approx(clock.now + 10.0)
    clock.now += 9.99
    assert throttle.claim("a.com", 0.5, hold=30.0) == pytest.approx(clock.now + 0.01)  # the sender's interval
    clock.now += 0.01
    lease = throttle.claim("a.com", 10.0, hold=30.0)
    assert isinstance(lease, Lease)
    throttle.release(lease, sent_at=None)  # nothing went out (refused, could not connect): free at once
    assert isinstance(throttle.claim("a.com", 10.0, hold=30.0), Lease)


def test_a_turn_is_held_until_its_request_went_out(throttle_factory) -> None:
    clock = FakeClock()
    throttle = throttle_factory(clock)
    mine = throttle.claim("a.com", 1.0, hold=30.0)
    assert isinstance(mine, Lease)
    # Another caller asks while the request is under way: not before the holder's claim plus the interval ...
    assert throttle.claim("a.com", 1.0, hold=30.0) == pytest.approx(clock.now + 1.0)
    clock.now += 2.0  # ... and, once that has passed with the request still under way, after a short poll
    assert throttle.claim("a.com", 1.0, hold=30.0) == pytest.approx(clock.now + HELD_POLL)
    throttle.release(mine, sent_at=clock.now - 1.5)
    assert isinstance(throttle.claim("a.com", 1.0, hold=30.0), Lease)  # sent 1.5 s ago: the interval passed


def test_a_turn_whose_holder_died_lapses_after_its_hold(throttle_factory) -> None:
    clock = FakeClock()
    throttle = throttle_factory(clock)
    dead = throttle.claim("a.com", 1.0, hold=5.0)
    assert isinstance(dead, Lease)
    clock.now += 4.9
    assert not isinstance(throttle.claim("a.com", 1.0, hold=5.0), Lease)
    clock.now += 0.2
    alive = throttle.claim("a.com", 1.0, hold=5.0)
    assert isinstance(alive, Lease)
    throttle.release(dead, sent_at=None)  # a late release of a lapsed lease frees nothing of the new holder's
    assert not isinstance(throttle.claim("a.com", 1.0, hold=5.0), Lease)
    throttle.release(alive, sent_at=clock.now)
    assert throttle.claim("a.com", 1.0, hold=5.0) == pytest.approx(clock.now + 1.0)


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_turns_go_round_between_processes(database: str, request: pytest.FixtureRequest) -> None:
    """The process that just sent knows when the site's next turn comes; the one refused first is next in line
    all the same, and a process that stalls in line holds the turn up for LINE_GRACE at most."""
    engine = request.getfixturevalue(f"{database}_engine")
    clock = FakeClock()
    first, second = SqlThrottle(engine, clock=clock), SqlThrottle(engine, clock=clock, create_table=False)
    lease = first.claim("a.com", 1.0, hold=30.0)
    assert isinstance(lease, Lease)
    first.release(lease, sent_at=clock.now)
    clock.now += 0.5
    assert second.claim("a.com", 1.0, hold=30.0) == pytest.approx(clock.now + 0.5)  # refused: now in line
    clock.now += 0.5
    # the turn is second's, though first asks right when it comes
    assert first.claim("a.com", 1.0, hold=30.0) == pytest.approx(clock.now + HELD_POLL)
    lease = second.claim("a.com", 1.0, hold=30.0)
    assert isinstance(lease, Lease)
    assert first.claim("a.com", 1.0, hold=30.0) == pytest.approx(clock.now + 1.0)  # now first is in line
    second.release(lease, sent_at=clock.now)
    clock.now += 1.0
    assert not isinstance(second.claim("a.com", 1.0, hold=30.0), Lease)
    clock.now += LINE_GRACE  # first stalled in line: its place lapses
    assert isinstance(second.claim("a.com", 1.0, hold=30.0), Lease)


def test_concurrent_claims_never_share_a_turn(throttle_factory) -> None:
    throttle = throttle_factory(time.time)
    interval = 0.01
    sends: list[float] = []
    lock = threading.Lock()

    def send_many() -> None:
        for _ in range(10):
            while not isinstance(lease := throttle.claim("busy.com", interval, hold=30.0), Lease):
                time.sleep(max(0.0, lease - time.time()))
            sent_at = time.time()
            with lock:
                sends.append(sent_at)
            throttle.release(lease, sent_at)

    threads = [threading.Thread(target=send_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sends.sort()
    gaps = [b - a for a, b in zip(sends, sends[1:], strict=False)]
    assert len(sends) == 40 and min(gaps) >= interval


def test_bad_domains_intervals_and_holds_are_rejected() -> None:
    throttle = MemoryThrottle()
    with pytest.raises(ValueError, match="1..256 characters"):
        throttle.claim("", 1.0, hold=30.0)
    with pytest.raises(ValueError, match="finite number"):
        throttle.claim("a.com", float("inf"), hold=30.0)
    with pytest.raises(ValueError, match="hold must be > 0"):
        throttle.claim("a.com", 1.0, hold=0.0)


# ---------------------------------------------------------------- several spiders of one topic at once


def _send_late(send: Callable, seed: int) -> Callable:
    """``send`` (the transport's request), started up to LATE_SEND seconds after it was called: what a fetch
    thread does when it has its turn but waits for the GIL, behind an extracting thread or a loaded machine,
    before its request leaves."""
    delays = random.Random(seed)

    def late(*args, **kwargs):  # noqa: ANN002, ANN003 - the transport's arguments, passed on
        time.sleep(delays.uniform(0, LATE_SEND))
        return send(*args, **kwargs)

    return late


def _spider(database: tuple[str, str | None] | None, port: int, spider: int, barrier, results) -> None:
    """One spider of the topic: fetch its pages of every site, sharing politeness through the topic store as
    the spider's page source does (``database`` None: a private throttle and robots.txt cache), its requests
    leaving late."""
    from topicmap.store.topic_store import TopicStore
    from topicmap.web.fetch import WebFetcher
    from topicmap.web.netguard import AddressPolicy

    politeness = {}
    if database is not None:
        url, schema = database
        politeness = shared_politeness(TopicStore.open(url, schema=schema, upgrade=False).engine)
    fetcher = WebFetcher(
        policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
        host_overrides={"*.test": f"127.0.0.1:{port}"},
        interval_overrides={"*": SPIDER_INTERVAL},
        connect_timeout=2,
        read_timeout=2,
        **politeness,
    )
    fetcher._transport.get = _send_late(fetcher._transport.get, spider)  # type: ignore[method-assign]
    urls = [f"http://{site}/page?spider={spider}&n={n}" for n in range(PAGES_PER_SITE) for site in SITES]
    urls += [f"http://{site}/private/{spider}" for site in SITES]  # robots.txt disallows these
    barrier.wait(timeout=60)
    outcomes = list(fetcher.fetch_many(urls, max_workers=4))
    results.put([(outcome.url, outcome.ok, outcome.error or outcome.refused_reason) for outcome in outcomes])


def _run_spiders(database: tuple[str, str | None] | None, processes: bool = True) -> tuple[dict, Counter]:
    """SPIDERS spiders at once (processes, or threads of this one), each fetching every site.

    Returns the server-side arrival times of every request per site, with the spider that sent each page
    (None for robots.txt), and how often each site's robots.txt was asked for."""
    context = multiprocessing.get_context("spawn") if processes else _ThreadContext()
    with FaultServer() as server:
        barrier = context.Barrier(SPIDERS)
        results = context.Queue()
        runners = [
            context.Process(target=_spider, args=(database, server.port, spider, barrier, results))
            for spider in range(SPIDERS)
        ]
        for runner in runners:
            runner.start()
        reports = [results.get(timeout=120) for _ in runners]
        for runner in runners:
            runner.join(timeout=30)
            assert getattr(runner, "exitcode", 0) == 0
        hits = server.hits
    for report in reports:
        pages = [(url, ok, problem) for url, ok, problem in report if "/private/" not in url]
        assert len(pages) == len(SITES) * PAGES_PER_SITE and all(ok for _, ok, _ in pages), pages
        refused = [problem for url, _, problem in report if "/private/" in url]
        assert len(refused) == len(SITES) and all(problem.startswith("robots: ") for problem in refused)
    arrivals: dict[str, list] = defaultdict(list)
    robots: Counter = Counter()
    for hit in hits:
        site = hit.host.split(":")[0]
        assert "/private/" not in hit.path, hit
        arrivals[site].append((hit.at, hit.path.split("spider=")[1][0] if "spider=" in hit.path else None))
        robots[site] += hit.path == "/robots.txt"
    return {site: sorted(records) for site, records in arrivals.items()}, robots


def _smallest_gap(records: list) -> float:
    return min(later[0] - earlier[0] for earlier, later in zip(records, records[1:], strict=False))


@pytest.mark.deployment
def test_several_spiders_of_a_topic_keep_every_sites_interval_and_read_robots_once(
    store: TopicStore, request: pytest.FixtureRequest
) -> None:
    """Four spiders of one topic (processes sharing the topic store, their requests leaving up to 60 ms after
    their turn, as a fetch thread waiting for the GIL sends) fetch the same three sites. The server sees every
    site's requests at least the interval apart, with no tolerance: a site's next turn is counted from a send
    time that is never earlier than the real one, and the server stamps arrivals with the kernel's receive
    time, on the same clock.
    Each site's robots.txt is read once, and its rules keep every spider off the disallowed pages."""
    if store.engine.dialect.name == "sqlite":
        database = (str(store.engine.url), None)
    else:
        worker = request.getfixturevalue("pg_worker_schema")
        database = (worker.url, worker.schema)
    arrivals, robots = _run_spiders(database)
    assert set(arrivals) == set(SITES)
    for site, records in arrivals.items():
        assert robots[site] == 1, (site, robots)
        assert len(records) == 1 + SPIDERS * PAGES_PER_SITE
        # the spiders really fetched each site at the same time: two of them were between their first and
        # last requests to it at once
        periods = [
            [at for at, who in records if who == spider] for spider in {who for _, who in records} - {None}
        ]
        assert any(
            max(one[0], other[0]) < min(one[-1], other[-1])
            for one in periods
            for other in periods
            if one != other
        ), (site, records)
        assert _smallest_gap(records) >= SPIDER_INTERVAL, (site, records)


class _ThreadContext:
    """The bits of a multiprocessing context the harness uses, with threads (for the cheap control run)."""

    Barrier = threading.Barrier

    @staticmethod
    def Queue() -> queue.Queue:  # noqa: N802 - mirrors multiprocessing's API
        return queue.Queue()

    @staticmethod
    def Process(target, args) -> threading.Thread:  # noqa: N802
        return threading.Thread(target=target, args=args)


def test_the_harness_detects_crowding_and_repeated_robots_reads_when_nothing_is_shared() -> None:
    """Control: spiders with private throttles and robots.txt caches do crowd the sites and read each robots.txt
    once each, so the test above would fail if the store did not coordinate them."""
    arrivals, robots = _run_spiders(None, processes=False)
    assert min(_smallest_gap(records) for records in arrivals.values()) < SPIDER_INTERVAL / 2
    assert all(robots[site] == SPIDERS for site in SITES), robots
