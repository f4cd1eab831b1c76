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

Late starts: a caller may wake up after its slot (a busy thread pool, a loaded machine, a slow database
commit). Right before its request it calls ``confirm``, which answers *when* to start: the slot itself when
the caller is on time (within ``late_tolerance``); otherwise, if the caller still holds the newest
reservation, a fresh start time ``T`` that is written as the domain's new ``T + interval`` (the caller
sleeps until ``T`` and starts exactly then); and None when someone reserved after it, because starting late
would crowd that reservation: the caller must reserve again. So the gap between two real request starts,
not merely between two reserved slots, stays at or above the interval.

Send times and the guard band: a recorded start is not the moment the request leaves; thread wake-ups,
the GIL and a loaded machine add milliseconds to tens of milliseconds that differ from one request to the
next. Within one process, ``WebFetcher`` therefore also keeps each domain's next slot at least an interval
after the moment its previous request was actually written to the socket. What one process cannot see is
another process's late send, so every non-zero interval is also widened by ``guard_band`` (20 ms by
default: 0.2% of the 10 s default, 4% of the 0.5 s accelerated interval); the largest start-to-send skew
measured on a loaded 2-core machine was ~14 ms. A zero interval stays zero (no throttling: ``SqlThrottle``
does not even touch the store for it). On the live web
a new connection also costs DNS, TCP and TLS round trips before the request leaves: intervals are kept
between requests *leaving* the crawler, which is what a crawler can control.

Database latency: a reservation or confirmation is a committed write (milliseconds; tens of milliseconds
with fsync on a loaded machine). ``SqlThrottle`` therefore hands out slots and start times at least one
"lead" in the future (twice the slowest recent commit, between 5 and 250 ms), so the commit has finished
before the promised time comes.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from topicmap.web.shorteners import URL_SHORTENER_HOSTNAMES
from topicmap.web.urls import distinctive_domain

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
SAME_SLOT_EPSILON = 1e-6
DEFAULT_GUARD_BAND = 0.02
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
    return default_interval(overrides)


def default_interval(overrides: Mapping[str, float] | None = None) -> float:
    """The interval of a site with none of its own: the "*" override, else the 10 s default."""
    if overrides and "*" in overrides:
        return _check_interval(overrides["*"], "default interval override '*'")
    return DEFAULT_INTERVAL


def throttle_domain(url: str) -> str:
    """The key a URL is throttled under: its distinctive domain (Media Cloud's rule), else its host.

    The port is not part of the key: two servers on one host share the host's budget.
    """
    host = urlsplit(url).hostname
    if not host:
        raise ValueError(f"cannot throttle {url!r}: it has no host")
    return _host_domain(host)


@functools.lru_cache(maxsize=65536)
def _host_domain(host: str) -> str:
    # The distinctive domain depends on the host alone; a spider asks for the same few thousand hosts
    # over and over, and the full URL analysis costs more than the rest of the throttle bookkeeping.
    return distinctive_domain(host) or host.lower()


@runtime_checkable
class DomainThrottle(Protocol):
    """Reserves start times so two requests to one domain are at least the domain's interval apart."""

    def reserve(self, domain: str, interval: float, earliest: float = 0.0) -> float:
        """Atomically reserve the next slot for ``domain``; return its absolute wall-clock start time.

        ``earliest`` (wall clock) keeps the slot from being earlier than a retry's backoff.
        """
        ...

    def confirm(self, domain: str, slot: float, interval: float) -> float | None:
        """Call right before the request holding ``slot``: the wall-clock time to start at (sleep until
        then if it is in the future), or None when the slot is lost and the caller must reserve again."""
        ...


def _validate_domain(domain: str) -> str:
    if not domain or len(domain) > MAX_DOMAIN_LENGTH:
        raise ValueError(f"throttle domain must be 1..{MAX_DOMAIN_LENGTH} characters, got {domain!r}")
    return domain


def same_slot(stored: float | None, expected: float) -> bool:
    return stored is not None and abs(stored - expected) <= SAME_SLOT_EPSILON


class SlotSpacing:
    """The spacing rule every throttle shares (in memory here, in the store in ``topicmap.store.throttle``)."""

    guard_band: float

    def _spacing(self, domain: str, interval: float) -> float:
        """The stored distance between two starts: the interval plus the guard band (zero stays zero)."""
        _validate_domain(domain)
        interval = _check_interval(interval, f"domain {domain!r}")
        return interval + self.guard_band if interval > 0 else 0.0


class MemoryThrottle(SlotSpacing):
    """In-process throttle for threads sharing one fetcher (not shared across processes)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        late_tolerance: float = 0.0,
        guard_band: float = DEFAULT_GUARD_BAND,
    ) -> None:
        self._clock = clock
        self.late_tolerance = late_tolerance
        self.guard_band = guard_band
        self._next_request_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def reserve(self, domain: str, interval: float, earliest: float = 0.0) -> float:
        spacing = self._spacing(domain, interval)
        with self._lock:
            slot = max(self._clock(), earliest, self._next_request_at.get(domain, 0.0))
            self._next_request_at[domain] = slot + spacing
            return slot

    def confirm(self, domain: str, slot: float, interval: float) -> float | None:
        spacing = self._spacing(domain, interval)
        now = self._clock()
        if now - slot <= self.late_tolerance:
            return max(now, slot)
        with self._lock:
            if same_slot(self._next_request_at.get(domain), slot + spacing):
                now = self._clock()
                self._next_request_at[domain] = now + spacing
                return now
            return None
