"""Polite per-domain throttling: a minimum interval between two requests to one distinctive domain.

Media Cloud kept one lock per *distinctive domain* (``nytimes.com`` for ``www.nytimes.com`` and
``cooking.nytimes.com``) in PostgreSQL and gave up with "requeued" when the lock was busy, so a busy domain
was retried by the job queue until its turn came. topicmap instead *reserves a slot*: ``reserve`` atomically
returns the wall-clock time at which the caller may start and pushes the domain's next free time forward by
the interval. The caller sleeps (or schedules other domains) until then; nothing polls.

Semantics of the shared row ``domain_web_requests(domain, next_request_at)``: ``next_request_at`` is the
earliest wall-clock time (seconds since the epoch) at which the next request to that domain may start.
A reservation takes ``slot = max(now, earliest, next_request_at)`` and stores ``slot + interval``, so the
interval of the caller that made a request is the gap that protects the domain after that request.

Clock: slots are compared with the *caller's* ``time.time()``, not the database server's clock, because the
caller sleeps on its own clock; reading ``now()`` from the server would mix two clocks in every
comparison. Hosts spidering against one store must therefore run NTP: clock skew between two hosts shrinks
(or widens) the gap between their requests by the skew.

Late starts: a caller may wake up after its slot (a busy thread pool, a loaded machine). If it still holds
the newest reservation it ``confirm``\\ s the real start time, which moves the domain's next slot to
``started + interval``; if someone reserved after it and it is later than ``late_tolerance``, ``confirm``
returns False and the caller must reserve again. This keeps the real gap between two starts at or above the
interval instead of merely the gap between two reserved slots.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from sqlalchemy import Table, and_, func, literal, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from topicmap.schema import domain_web_requests
from topicmap.shorteners import URL_SHORTENER_HOSTNAMES
from topicmap.urls import distinctive_domain

#: Media Cloud's default wait between two requests to one distinctive domain.
DEFAULT_INTERVAL = 10.0
#: Media Cloud's "accelerated" domains: big sites that tolerate (and whose links need) faster fetching.
ACCELERATED_INTERVAL = 0.5
ACCELERATED_DOMAINS = frozenset(
    {
        "twitter.com",
        "wikipedia.org",
        "feeds.feedburner.com",
        "facebook.com",
        "wp.com",
        "amazonaws.com",
        "t.co",
        "google.com",
        "doi.org",
        "archive.org",
        "reddit.com",
        "instagram.com",
        "yahoo.com",
        "yimg.com",
        "congress.gov",
        "goldfish.me",
        "nih.gov",
    }
)
SPECIAL_INTERVALS: Mapping[str, float] = {"youtube.com": 2.0, "trib.al": 0.1}
#: URL shorteners answer with a redirect only, so they are cheap to hit.
SHORTENER_INTERVAL = 1.0
#: Two floats written by the same computation compare within this (seconds since the epoch have ~0.2 us ulp).
_SAME_SLOT_EPSILON = 1e-6
MAX_DOMAIN_LENGTH = 256


def _check_interval(interval: float, what: str) -> float:
    value = float(interval)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what}: interval must be a finite number of seconds >= 0, got {interval!r}")
    return value


def validate_interval_overrides(overrides: Mapping[str, float] | None) -> dict[str, float]:
    """A checked copy of per-topic interval overrides ({"nytimes.com": 30, "*": 2}); ValueError names the bad one."""
    checked: dict[str, float] = {}
    for domain, seconds in (overrides or {}).items():
        if not isinstance(domain, str) or not domain:
            raise ValueError(f"interval override keys must be domains or '*', got {domain!r}")
        checked[domain.lower()] = _check_interval(seconds, f"interval override for {domain!r}")
    return checked


def domain_interval(domain: str, overrides: Mapping[str, float] | None = None) -> float:
    """Minimum seconds between two requests to ``domain`` (a distinctive domain, e.g. "nytimes.com").

    ``overrides`` (per topic) maps a domain to its interval; the key "*" replaces the 10 s default for every
    domain that has no interval of its own (it does not slow down or speed up the accelerated list).
    """
    name = domain.lower().rstrip(".")
    if overrides and name in overrides:
        return _check_interval(overrides[name], f"interval override for {name!r}")
    if name in SPECIAL_INTERVALS:
        return SPECIAL_INTERVALS[name]
    if name in ACCELERATED_DOMAINS:
        return ACCELERATED_INTERVAL
    if name in URL_SHORTENER_HOSTNAMES:
        return SHORTENER_INTERVAL
    if overrides and "*" in overrides:
        return _check_interval(overrides["*"], "default interval override '*'")
    return DEFAULT_INTERVAL


def throttle_domain(url: str) -> str:
    """The key a URL is throttled under: its distinctive domain (Media Cloud's rule), else its host.

    The port is not part of the key: two servers on one host share the host's budget.
    """
    domain = distinctive_domain(url)
    if domain:
        return domain
    host = urlsplit(url).hostname
    if not host:
        raise ValueError(f"cannot throttle {url!r}: it has no host")
    return host.lower()


@runtime_checkable
class DomainThrottle(Protocol):
    """Reserves start times so two requests to one domain are at least the domain's interval apart."""

    def reserve(self, domain: str, interval: float, earliest: float = 0.0) -> float:
        """Atomically reserve the next slot for ``domain``; return its absolute wall-clock start time.

        ``earliest`` (wall clock) keeps the slot from being earlier than a retry's backoff.
        """
        ...

    def confirm(self, domain: str, slot: float, interval: float, started_at: float) -> bool:
        """Record that the holder of ``slot`` starts at ``started_at``; False means the slot is lost.

        Call it right before the request. False: the caller is later than its tolerance and a newer
        reservation exists, so starting now would crowd that one; reserve again.
        """
        ...


def _validate_domain(domain: str) -> str:
    if not domain or len(domain) > MAX_DOMAIN_LENGTH:
        raise ValueError(f"throttle domain must be 1..{MAX_DOMAIN_LENGTH} characters, got {domain!r}")
    return domain


class MemoryThrottle:
    """In-process throttle for threads sharing one fetcher (not shared across processes)."""

    def __init__(self, clock: Callable[[], float] = time.time, late_tolerance: float = 0.0) -> None:
        self._clock = clock
        self.late_tolerance = late_tolerance
        self._next_request_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def reserve(self, domain: str, interval: float, earliest: float = 0.0) -> float:
        _validate_domain(domain)
        interval = _check_interval(interval, f"domain {domain!r}")
        with self._lock:
            slot = max(self._clock(), earliest, self._next_request_at.get(domain, 0.0))
            self._next_request_at[domain] = slot + interval
            return slot

    def confirm(self, domain: str, slot: float, interval: float, started_at: float) -> bool:
        if started_at - slot <= self.late_tolerance:
            return True
        with self._lock:
            current = self._next_request_at.get(domain)
            if current is not None and abs(current - (slot + interval)) <= _SAME_SLOT_EPSILON:
                self._next_request_at[domain] = max(current, started_at + interval)
                return True
            return False


class SqlThrottle:
    """Throttle shared by every process using one topic store (PostgreSQL or SQLite).

    Each reservation is ONE upsert statement (``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``), which both
    databases execute atomically: PostgreSQL locks the conflicting row for the update, and SQLite takes its
    write lock when the statement starts, before it reads the existing row. So no explicit
    ``SELECT ... FOR UPDATE`` or SQLite ``BEGIN IMMEDIATE`` is needed: those are for read-then-write
    sequences, and there is no separate read here.
    """

    def __init__(
        self,
        engine: Engine,
        clock: Callable[[], float] = time.time,
        late_tolerance: float = 0.002,
        create_table: bool = True,
    ) -> None:
        if engine.dialect.name not in ("postgresql", "sqlite"):
            raise ValueError(f"SqlThrottle supports PostgreSQL and SQLite, not {engine.dialect.name!r}")
        self.engine = engine
        self._clock = clock
        # A DB round trip per request costs more than memory: a start this close to the slot skips it.
        self.late_tolerance = late_tolerance
        self.table: Table = domain_web_requests
        if engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        self._insert = insert
        self._greatest = func.greatest if engine.dialect.name == "postgresql" else func.max
        if create_table:
            self._create_table()

    def _create_table(self) -> None:
        try:
            self.table.create(self.engine, checkfirst=True)
        except (OperationalError, ProgrammingError):
            # Another process created it between the check and the CREATE: fine if it exists now.
            from sqlalchemy import inspect

            if not inspect(self.engine).has_table(self.table.name):
                raise

    def reserve(self, domain: str, interval: float, earliest: float = 0.0) -> float:
        _validate_domain(domain)
        interval = _check_interval(interval, f"domain {domain!r}")
        start = max(self._clock(), earliest)
        table = self.table
        statement = (
            self._insert(table)
            .values(domain=domain, next_request_at=start + interval)
            .on_conflict_do_update(
                index_elements=[table.c.domain],
                set_={"next_request_at": self._greatest(literal(start), table.c.next_request_at) + interval},
            )
            .returning(table.c.next_request_at)
        )
        with self.engine.begin() as conn:
            next_request_at = float(conn.execute(statement).scalar_one())
        return next_request_at - interval

    def confirm(self, domain: str, slot: float, interval: float, started_at: float) -> bool:
        if started_at - slot <= self.late_tolerance:
            return True
        table = self.table
        expected = slot + interval
        statement = (
            update(table)
            .where(
                and_(
                    table.c.domain == domain,
                    table.c.next_request_at.between(
                        expected - _SAME_SLOT_EPSILON * 4, expected + _SAME_SLOT_EPSILON * 4
                    ),
                )
            )
            .values(next_request_at=started_at + interval)
        )
        with self.engine.begin() as conn:
            return conn.execute(statement).rowcount == 1
