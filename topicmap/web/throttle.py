"""Polite per-domain throttling: a minimum interval between two requests to one distinctive domain.

Media Cloud kept one lock per *distinctive domain* (``nytimes.com`` for ``www.nytimes.com`` and
``cooking.nytimes.com``) in PostgreSQL and gave up with "requeued" when the lock was busy, so a busy domain
was retried by the job queue until its turn came. topicmap keeps the same kind of row per domain and hands out
*turns*: right before it sends a request, a fetcher ``claim``s the domain's turn, sends, and ``release``s the
turn with the moment the request actually went out; the domain's next request may go ``interval`` after that
moment. The interval is therefore counted between requests *leaving* the crawler, which is what the server
sees, and not between times that were planned for them: a request that leaves late (its thread waited for the
GIL behind an extracting thread, a loaded machine, a slow database commit) pushes the next one back instead of
crowding it.

A claim succeeds only when the interval since the domain's last request has passed *and* no other request to
it is being sent: the turn is a lease. A second fetcher (another thread, process or machine) asking meanwhile is
told when to ask again: the end of the interval, or, while a request is under way, the earliest moment its
interval could end (then a short poll, ``HELD_POLL``). So at most one request per domain is on its way at a
time, and its successor waits for its real send time. A lease lapses after ``hold`` seconds (the longest the
request may take), so a process that died holding one blocks the domain for that long at most. Between
processes, turns go round: the first process refused a turn is next in line (``SqlThrottle``), so the process
that just sent, which knows to the microsecond when the next turn comes, does not take every turn while it has
URLs of the domain.

Semantics of the shared row ``domain_web_requests``: ``next_request_at`` is the earliest wall-clock time (seconds
since the epoch) the next request may be sent (the last request's send time plus its interval); ``held_by``
names the lease of the request being sent, taken at ``held_since`` and lapsing at ``held_until``; ``waiting``
names the process next in line, until ``waiting_until``.

Send times: the transport reports when the last byte of the request was written, counted back from a clock
reading taken after the response began (``topicmap.web.transport``), so the reported time is never earlier than
the real one: the gap the server sees between two requests is at least the interval, with no guard band to
guess.

Clock: turns are compared with the *caller's* ``time.time()``, not the database server's clock, as the send
times they are counted from are the caller's. Hosts spidering against one store must therefore run NTP: clock
skew between two hosts shrinks (or widens) the gap between their requests by the skew.

A zero interval is no throttling: such requests take no turn (``SqlThrottle`` does not even touch the store).
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
MAX_DOMAIN_LENGTH = 256
#: While another request to a domain is under way past the earliest end of its interval (a slow response), a
#: fetcher waiting for the domain asks again this often.
HELD_POLL = 0.05


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


@dataclass(frozen=True)
class Lease:
    """A domain's turn, held by one request: ``release`` it with the moment the request went out."""

    domain: str
    token: str
    interval: float


@runtime_checkable
class DomainThrottle(Protocol):
    """Hands out each domain's turns so two requests to it are at least the domain's interval apart."""

    def claim(self, domain: str, interval: float, hold: float) -> Lease | float:
        """The domain's turn, now: a :class:`Lease` to send one request under, or the wall-clock time at which
        to ask again (the interval since its last request has not passed, or another request is under way).
        ``hold``: the longest the request may take; the lease lapses after it."""
        ...

    def release(self, lease: Lease, sent_at: float | None) -> None:
        """The request under ``lease`` went out at wall-clock ``sent_at`` (None: nothing was sent); the domain's
        next request may go ``lease.interval`` after it."""
        ...


def check_turn(domain: str, interval: float, hold: float) -> None:
    """ValueError naming what is wrong with a claim's domain, interval or hold."""
    if not domain or len(domain) > MAX_DOMAIN_LENGTH:
        raise ValueError(f"throttle domain must be 1..{MAX_DOMAIN_LENGTH} characters, got {domain!r}")
    _check_interval(interval, f"domain {domain!r}")
    if not hold > 0:
        raise ValueError(f"domain {domain!r}: a turn's hold must be > 0 seconds, got {hold!r}")


def ask_again_at(
    now: float,
    interval: float,
    next_request_at: float,
    held_since: float | None,
    held_until: float | None,
    other_in_line: bool = False,
) -> float | None:
    """When a claim made at ``now`` on a domain in this state may succeed: None when it succeeds now.

    Free (no lease, or a lapsed one): at ``next_request_at``, and while another claimant is in line for that
    turn (``other_in_line``), after a short poll. Held: not before the holder's claim plus the interval (its
    request cannot have left earlier), and while that has passed, after a short poll."""
    if held_since is not None and held_until is not None and held_until > now:
        return max(held_since + interval, now + HELD_POLL)
    if next_request_at > now:
        return next_request_at
    return now + HELD_POLL if other_in_line else None


class MemoryThrottle:
    """In-process throttle for threads sharing one fetcher (not shared across processes)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        # domain -> [next_request_at, held_by, held_since, held_until]
        self._rows: dict[str, list] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()

    def claim(self, domain: str, interval: float, hold: float) -> Lease | float:
        check_turn(domain, interval, hold)
        with self._lock:
            now = self._clock()
            row = self._rows.setdefault(domain, [0.0, None, None, None])
            again = ask_again_at(now, interval, row[0], row[2], row[3])
            if again is not None:
                return again
            lease = Lease(domain, str(next(self._tokens)), interval)
            row[1:] = [lease.token, now, now + hold]
            return lease

    def release(self, lease: Lease, sent_at: float | None) -> None:
        with self._lock:
            row = self._rows[lease.domain]
            if sent_at is not None:
                row[0] = max(row[0], sent_at + lease.interval)
            if row[1] == lease.token:
                row[1:] = [None, None, None]
