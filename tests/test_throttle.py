"""Per-domain throttling: intervals, atomic slot reservation in memory and in the topic store (SQLite and
PostgreSQL), and two processes spidering topics that share domains without ever crowding a domain."""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from tests.faultserver import FaultServer
from topicmap.store.throttle import SqlThrottle
from topicmap.web.throttle import (
    DEFAULT_INTERVAL,
    MemoryThrottle,
    domain_interval,
    throttle_domain,
    validate_interval_overrides,
)

# Server-side arrival times carry scheduling jitter on both ends (client thread wake-up, server thread
# picking up the request, GIL hand-offs on a busy 2-core machine); 5 ms is far above the sub-millisecond
# jitter seen when idle and far below any real crowding (which shows up as gaps near 0).
CLOCK_TOLERANCE = 0.005
SPIDER_INTERVAL = 0.3


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
        return lambda clock, guard_band=0.0: MemoryThrottle(clock=clock, guard_band=guard_band)
    engine = request.getfixturevalue("sqlite_engine" if request.param == "sqlite" else "postgres_engine")
    return lambda clock, guard_band=0.0: SqlThrottle(engine, clock=clock, guard_band=guard_band)


def test_reserve_spaces_slots_by_the_interval(throttle_factory) -> None:
    clock = FakeClock()
    throttle = throttle_factory(clock)
    first = throttle.reserve("a.com", 10.0)
    assert clock.now <= first <= clock.now + SqlThrottle.MAX_LEAD  # now (plus a database's commit lead)
    assert throttle.reserve("a.com", 10.0) == pytest.approx(first + 10)
    assert throttle.reserve("b.com", 10.0) == pytest.approx(first, abs=SqlThrottle.MAX_LEAD)  # independent
    # The previous reserver's interval protects the domain, whatever the next one's interval.
    assert throttle.reserve("a.com", 0.5) == pytest.approx(first + 20)
    clock.now += 100  # an idle domain's next slot is now again
    assert clock.now <= throttle.reserve("a.com", 10.0) <= clock.now + SqlThrottle.MAX_LEAD
    later = clock.now + 150
    assert throttle.reserve("a.com", 10.0, earliest=later) == pytest.approx(later)  # a retry's backoff


def test_late_start_moves_the_next_slot_or_gives_the_slot_up(throttle_factory) -> None:
    clock = FakeClock()
    throttle = throttle_factory(clock)
    lead = throttle.lead() if isinstance(throttle, SqlThrottle) else 0.0
    slot = throttle.reserve("a.com", 1.0)
    assert throttle.confirm("a.com", slot, 1.0) == slot  # on time: start at the slot
    # 0.4 s late while still the newest reservation: a fresh start time, and the next slot follows it.
    clock.now = slot + 1.0 + 0.4
    late = throttle.reserve("a.com", 1.0)
    assert late == pytest.approx(slot + 1.0)
    start = throttle.confirm("a.com", late, 1.0)
    assert start is not None and start >= clock.now
    assert throttle.reserve("a.com", 1.0) == pytest.approx(start + 1.0)
    # Late while someone reserved after us: starting now would crowd them, so the slot is lost.
    clock.now += 100
    mine = throttle.reserve("a.com", 1.0)
    theirs = throttle.reserve("a.com", 1.0)
    assert theirs == pytest.approx(mine + 1.0)
    clock.now = mine + 0.5
    assert throttle.confirm("a.com", mine, 1.0) is None
    clock.now = theirs
    assert throttle.confirm("a.com", theirs, 1.0) == theirs
    assert lead >= SqlThrottle.MIN_LEAD or not isinstance(throttle, SqlThrottle)


def test_guard_band_widens_non_zero_intervals_only(throttle_factory) -> None:
    clock = FakeClock()
    throttle = throttle_factory(clock, guard_band=0.01)
    first = throttle.reserve("a.com", 0.5)
    assert throttle.reserve("a.com", 0.5) == pytest.approx(first + 0.51)
    unthrottled = throttle.reserve("b.com", 0.0)
    assert throttle.reserve("b.com", 0.0) == pytest.approx(unthrottled)


def test_concurrent_reservations_never_share_a_slot(throttle_factory) -> None:
    throttle = throttle_factory(time.time)
    interval = 0.01
    slots: list[float] = []
    lock = threading.Lock()

    def reserve_many() -> None:
        mine = [throttle.reserve("busy.com", interval) for _ in range(15)]
        with lock:
            slots.extend(mine)

    threads = [threading.Thread(target=reserve_many) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    slots.sort()
    gaps = [b - a for a, b in zip(slots, slots[1:], strict=False)]
    assert len(slots) == 90 and min(gaps) >= interval - 1e-6


def test_bad_domains_and_intervals_are_rejected() -> None:
    throttle = MemoryThrottle()
    with pytest.raises(ValueError, match="1..256 characters"):
        throttle.reserve("", 1.0)
    with pytest.raises(ValueError, match="finite number"):
        throttle.reserve("a.com", float("inf"))


# ---------------------------------------------------------------- two processes spidering at once


def _spider_topic(
    database: tuple[str, str | None] | None,
    port: int,
    urls: list[str],
    interval: float,
    barrier,
    results,
) -> None:
    """One "topic run": fetch ``urls`` through the store's throttle (or a private in-memory one)."""
    from topicmap.web.fetch import WebFetcher
    from topicmap.web.netguard import AddressPolicy

    if database is None:
        throttle = MemoryThrottle()
    else:
        url, schema = database
        connect_args = {"options": f"-csearch_path={schema}"} if schema else {}
        throttle = SqlThrottle(create_engine(url, connect_args=connect_args), create_table=False)
    fetcher = WebFetcher(
        policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
        host_overrides={"*.test": f"127.0.0.1:{port}"},
        interval_overrides={"*": interval},
        throttle=throttle,
        obey_robots=False,
        connect_timeout=2,
        read_timeout=2,
    )
    fetcher.fetch("http://warmup.test/page")  # imports, first connection: not part of the contest
    barrier.wait(timeout=60)
    outcomes = list(fetcher.fetch_many(urls, max_workers=4))
    results.put([(outcome.url, outcome.ok, outcome.error or outcome.refused_reason) for outcome in outcomes])


def _run_two_topics(
    database: tuple[str, str | None] | None, pages_per_domain: int, processes: bool = True
) -> dict[str, list]:
    """Spider topics A and B (sharing shared1.test and shared2.test) at once, in two processes (or threads).

    Returns the server-side arrival records per Host: (monotonic time, topic).
    """
    context = multiprocessing.get_context("spawn") if processes else _ThreadContext()
    with FaultServer() as server:
        topics = {
            topic: [
                f"http://{site}.test/page?topic={topic}&n={n}"
                for n in range(pages_per_domain)
                for site in ("shared1", "shared2", f"only{topic.lower()}")
            ]
            for topic in ("A", "B")
        }
        barrier = context.Barrier(2)
        results = context.Queue()
        runners = [
            context.Process(
                target=_spider_topic,
                args=(database, server.port, urls, SPIDER_INTERVAL, barrier, results),
            )
            for urls in topics.values()
        ]
        for runner in runners:
            runner.start()
        reports = [results.get(timeout=120) for _ in runners]
        for runner in runners:
            runner.join(timeout=30)
            assert getattr(runner, "exitcode", 0) == 0
        hits = server.hits
    for report in reports:
        assert len(report) == 3 * pages_per_domain
        assert all(ok for _, ok, _ in report), [problem for _, ok, problem in report if not ok]
    arrivals: dict[str, list] = defaultdict(list)
    for hit in hits:
        if "topic=" in hit.path:
            arrivals[hit.host].append((hit.at, hit.path.split("topic=")[1][0]))
    return arrivals


def _smallest_gap(records: list) -> float:
    times = sorted(at for at, _ in records)
    return min(later - earlier for earlier, later in zip(times, times[1:], strict=False))


def _assert_polite_and_contended(arrivals: dict[str, list], pages_per_domain: int) -> None:
    for host in ("shared1.test", "shared2.test"):
        records = arrivals[host]
        assert len(records) == 2 * pages_per_domain
        by_topic = {topic: [at for at, who in records if who == topic] for topic in "AB"}
        # The two runs really competed for the shared domain (their request periods overlap) ...
        assert max(min(by_topic["A"]), min(by_topic["B"])) < min(max(by_topic["A"]), max(by_topic["B"]))
    for host, records in arrivals.items():
        # ... and no domain ever saw two requests closer than the interval.
        assert _smallest_gap(records) >= SPIDER_INTERVAL - CLOCK_TOLERANCE, (host, sorted(records))


def test_two_processes_share_domain_budgets_through_sqlite(tmp_path) -> None:
    path = tmp_path / "store.sqlite3"
    SqlThrottle(create_engine(f"sqlite:///{path}"))  # creates domain_web_requests
    arrivals = _run_two_topics((f"sqlite:///{path}", None), pages_per_domain=4)
    _assert_polite_and_contended(arrivals, 4)


@pytest.mark.postgres
def test_two_processes_share_domain_budgets_through_postgresql(postgres_engine: Engine, pg_schema) -> None:
    SqlThrottle(postgres_engine)
    url, schema = pg_schema
    arrivals = _run_two_topics((url, schema), pages_per_domain=4)
    _assert_polite_and_contended(arrivals, 4)


class _ThreadContext:
    """The bits of a multiprocessing context the harness uses, with threads (for the cheap control run)."""

    Barrier = threading.Barrier

    @staticmethod
    def Queue() -> queue.Queue:  # noqa: N802 - mirrors multiprocessing's API
        return queue.Queue()

    @staticmethod
    def Process(target, args) -> threading.Thread:  # noqa: N802
        return threading.Thread(target=target, args=args)


def test_the_harness_detects_crowding_when_budgets_are_not_shared() -> None:
    """Control: two runs with private in-memory throttles do crowd the shared domains, so the two tests
    above would fail if the store did not coordinate the runs."""
    arrivals = _run_two_topics(None, pages_per_domain=3, processes=False)
    crowded = [_smallest_gap(arrivals[host]) for host in ("shared1.test", "shared2.test")]
    assert min(crowded) < SPIDER_INTERVAL / 2
