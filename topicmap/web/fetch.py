"""The web fetcher: polite, bounded, SSRF-guarded HTTP for the spider (usable without Dagster).

``WebFetcher(...).fetch(url)`` returns a :class:`FetchOutcome` (status, final URL, content and text, or why
it was refused / what failed); ``fetch_many(urls)`` fetches many URLs with a thread pool while keeping each
distinctive domain's minimum interval, without busy waiting: a heap of reserved slots decides what runs next,
so while one domain waits, the workers fetch others.

What every fetch guarantees:

- the SSRF guard (:mod:`topicmap.web.netguard`) checks every resolved address of the host of every request,
  redirect hops and robots.txt included, and the connection goes to a checked address (libcurl never resolves a
  name itself: :mod:`topicmap.web.transport`);
- a connect timeout, a read timeout (no body byte for ``read_timeout`` seconds), plus ``total_timeout`` on the
  whole fetch: every hop's and retry's network time and the back-off waits between retries (not the waits for
  politeness slots, which depend on the rest of the crawl). Each request ends when the fetch's remaining time
  runs out, headers trickling in or a body that never ends alike, and a retry whose back-off would pass the
  limit is not made;
- a cap on the *inflated* bytes of a body (libcurl inflates gzip, deflate and br in C and the cap counts its
  output), so a small gzip that inflates to gigabytes stops at the cap with "decompression bomb" instead of
  filling memory; an uncompressed body stops at the same cap with "body too large";
- only HTML is read: other content types are refused from their headers, without reading the body;
- HTTP redirects and HTML ``<meta http-equiv="refresh">`` redirects, both counted against ``max_redirects``;
- retries with exponential backoff on 429, 5xx and connection failures, honouring ``Retry-After``;
- robots.txt (RFC 9309) fetched once per origin, cached (up to a day, for the MAX_CACHED_ROBOTS origins used
  last; with ``shared_robots``, once per origin for every process using the store), and obeyed unless
  ``obey_robots=False``;
- ``fetch(url, cancel=event)``: once the event is set the fetch ends, whether it waits for a slot or a request
  is under way (that request is cut within a fraction of a second and its connection closed), with an error
  that starts with "cancelled:" (not retried, and nothing about the site).

``fetch_many`` takes a list of URLs, or a :class:`UrlFeed` it asks for more URLs as it has room: the spider's
feed claims pending URLs from the topic store a few dozen at a time, so many processes share one frontier.

Throttling rules (see :mod:`topicmap.web.throttle`): every request takes a turn of the distinctive domain it is
sent to, as Heritrix and Scrapy schedule them: the first request of a fetch, each redirect hop (to the same
domain or another), each retry, and robots.txt, which takes the slot of the page that needs it (the page then
waits for the domain's next slot) and, when it redirects, a slot of the domain of each hop. The turn is claimed
right before the request is sent and released with the moment it went out, so no two requests to one domain
leave closer than its interval, whichever thread or process sends them. Media Cloud throttled only a fetch's
first request (one page load, one slot): a topic full of bit.ly links hit their targets at the shortener's 1 s
pace whatever the target's own interval, and a site's bare-to-www redirect doubled its request rate.

The parts: the schedule of ``fetch_many`` and the send times that space a domain's slots
(:mod:`topicmap.web.fetch_scheduler`), robots.txt read and kept (:mod:`topicmap.web.fetch_robots`,
:mod:`topicmap.web.robots`), a fetch's state between slots and the failures that end a hop
(:mod:`topicmap.web.fetch_state`), what is read from a response's head (:mod:`topicmap.web.http_head`), and the
guarded transfer itself (:mod:`topicmap.web.transport`).
"""

from __future__ import annotations

import contextlib
import email.message
import email.utils
import logging
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import urljoin, urlsplit

import requests
from requests.cookies import MockRequest, MockResponse, get_cookie_header
from requests.structures import CaseInsensitiveDict

from topicmap.web.expiring_cache import ExpiringCache
from topicmap.web.extract import decode_html
from topicmap.web.fetch_limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_REDIRECTS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TOTAL_TIMEOUT,
    check_retry_budget,
)
from topicmap.web.fetch_robots import RobotsReader
from topicmap.web.fetch_scheduler import DomainScheduler, DomainWaits, NeedSlot
from topicmap.web.fetch_state import (
    CANCELLED,
    BodyError,
    Cancelled,
    FetchState,
    Redirect,
    Refused,
    Retryable,
    TurnTaken,
    request_failure,
)
from topicmap.web.http_head import (
    DRAIN_LIMIT,
    HTML_CONTENT_TYPES,
    REDIRECT_STATUSES,
    looks_like_html,
    meta_refresh_target,
    parse_content_type,
    retry_after_seconds,
)
from topicmap.web.netguard import AddressPolicy, AddressRefused
from topicmap.web.robots import (
    RobotsCache,
    SharedRobots,
    product_token,
    robots_refusal,
    url_origin,
)
from topicmap.web.throttle import (
    DomainThrottle,
    Lease,
    MemoryThrottle,
    domain_interval,
    throttle_domain,
    validate_interval_overrides,
)
from topicmap.web.transport import SKIP_BODY, BodyPlan, CurlTransport, Response, TransferError

log = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "topicmap/0.1 (+https://github.com/topicmap; research crawler)"
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"
# A turn lapses this long after the request's own time limit (a process that stalled or died holding it).
TURN_HOLD_MARGIN = 10.0
RESOLVE_TTL = 60.0  # seconds a name's checked addresses are used before it is resolved (and checked) again
# Host names whose checked addresses one fetcher keeps at most (as robots.txt rules: MAX_CACHED_ROBOTS).
MAX_CACHED_ADDRESSES = 10_000

_IP_LITERAL = re.compile(r"^(?:[\d.]+|.*:.*)$")  # IPv4 dotted digits, or IPv6 (urlsplit strips brackets)


@dataclass
class FetchOutcome:
    """What happened to one URL. Exactly one of: success (``ok``), ``refused_reason``, ``error``.

    ``refused_reason`` is set when the fetcher chose not to fetch/read (prefix "ssrf:", "robots:",
    "non-html content-type:", "too-large:", "unsupported scheme:"), ``error`` when the fetch failed
    ("HTTP 404 Not Found", "timeout: ...", "connection error: ...", "too many redirects: ...",
    "body too large: ...", "decompression bomb: ..."). ``charset`` is the charset the Content-Type header
    declared (``text`` is decoded from header, then <meta>, then content sniffing).
    """

    url: str
    final_url: str
    status: int | None = None
    content: bytes | None = None
    text: str | None = None
    content_type: str | None = None
    charset: str | None = None
    redirects: list[Redirect] = field(default_factory=list)
    refused_reason: str | None = None
    error: str | None = None
    elapsed: float = 0.0
    throttle_wait_seconds: float = 0.0
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.refused_reason is None and self.content is not None


@runtime_checkable
class UrlFeed(Protocol):
    """URLs handed to ``fetch_many`` as it has room for them, instead of a list given up front.

    ``take(room, idle)`` returns up to ``room`` URLs, ``[]`` when none is ready now (``fetch_many`` asks again
    once another outcome has been taken), or None when the feed is finished. ``idle`` is True when nothing
    is being fetched: then the feed must wait until it has URLs, or finish (None), rather than answer ``[]``.
    """

    def take(self, room: int, idle: bool) -> list[str] | None: ...


def _wire_url(url: str) -> str:
    """``url`` as sent: libcurl takes a URL as is, so an international host name is IDNA-encoded and the rest
    percent-encoded here, as requests (and browsers) do."""
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
    return prepared.url or url


class WebFetcher:
    """Polite, SSRF-guarded page fetcher. Thread-safe: one instance can serve a whole thread pool.

    ``policy`` None refuses every non-public address; the demo passes ``AddressPolicy(allow=["127.0.0.0/8"])``
    and ``host_overrides={"*.test": "127.0.0.1:PORT"}``. ``throttle`` None means a private
    :class:`MemoryThrottle` (polite by default); pass a :class:`~topicmap.store.throttle.SqlThrottle` to share
    domain budgets with other processes and runs (and a :class:`~topicmap.store.robots_txt.SqlRobots` as
    ``shared_robots`` to share their robots.txt reads), and ``interval_overrides`` (e.g. {"*": 0.0}) to change
    the intervals (see ``domain_interval``). ``sleep``, ``clock`` (monotonic, for elapsed times and
    timeouts) and ``wall_clock`` (for throttle slots) can be replaced in tests. ``ca_bundle`` replaces the
    trusted CA certificates (TLS is always verified).
    """

    def __init__(
        self,
        user_agent: str = DEFAULT_USER_AGENT,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_base: float = 1.0,
        max_retry_after: float = 120.0,
        obey_robots: bool = True,
        policy: AddressPolicy | None = None,
        host_overrides: Mapping[str, str] | None = None,
        throttle: DomainThrottle | None = None,
        interval_overrides: Mapping[str, float] | None = None,
        shared_robots: SharedRobots | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        ca_bundle: str | None = None,
    ) -> None:
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("read_timeout", read_timeout),
            ("total_timeout", total_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {value!r}")
        if max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes must be > 0, got {max_body_bytes!r}")
        if max_redirects < 0 or max_retries < 0 or backoff_base < 0 or max_retry_after < 0:
            raise ValueError("max_redirects, max_retries, backoff_base and max_retry_after must be >= 0")
        check_retry_budget(max_retries, backoff_base, total_timeout)
        self.user_agent = user_agent
        self.robots_token = product_token(user_agent)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.total_timeout = total_timeout
        self.max_body_bytes = max_body_bytes
        self.max_redirects = max_redirects
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.max_retry_after = max_retry_after
        self.obey_robots = obey_robots
        base_policy = policy if policy is not None else AddressPolicy()
        self.policy = base_policy.with_overrides(host_overrides) if host_overrides else base_policy
        self.throttle: DomainThrottle = throttle if throttle is not None else MemoryThrottle(clock=wall_clock)
        self.interval_overrides = validate_interval_overrides(interval_overrides)
        self._sleep = sleep
        self._clock = clock
        self._wall = wall_clock
        self._transport = CurlTransport(user_agent, ACCEPT, ca_bundle)
        # (host, port) -> the checked addresses: see _resolve
        self._resolved: ExpiringCache[tuple[str, int], list[tuple[str, int]]] = ExpiringCache(
            MAX_CACHED_ADDRESSES, clock
        )
        # per throttle domain, when this fetcher asks for its turn next (see _reserve)
        self._waits = DomainWaits(wall_clock)
        self._robots = RobotsReader(
            RobotsCache(clock),
            send=self._send,
            precheck=self._precheck,
            wall_clock=wall_clock,
            shared=shared_robots,
        )

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> WebFetcher:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ public API

    def interval_for(self, domain: str, interval_overrides: Mapping[str, float] | None = None) -> float:
        """Seconds between two requests to ``domain``: per-call overrides, then the fetcher's, then defaults."""
        overrides = {**self.interval_overrides, **validate_interval_overrides(interval_overrides)}
        return domain_interval(domain, overrides)

    def fetch(
        self,
        url: str,
        interval_overrides: Mapping[str, float] | None = None,
        cancel: threading.Event | None = None,
    ) -> FetchOutcome:
        """Fetch one URL, waiting (sleeping) for its domain's throttle slot. Never raises for web failures.

        ``cancel``: once set, the fetch sends no further request: it ends at once if it waits for a slot (a
        politeness wait, a retry's back-off, a redirect hop) with the error ``CANCELLED``, and a request under
        way (connecting, waiting for the headers, reading the body) ends within a fraction of a second, its
        connection closed, with the error ``CANCELLED_IN_FLIGHT``. Either error starts with "cancelled:" and
        says nothing about the site: the fetch is not retried."""
        state_or_outcome = self._new_state(url, interval_overrides)
        if isinstance(state_or_outcome, FetchOutcome):
            return state_or_outcome
        state = state_or_outcome
        state.cancel = cancel
        need = NeedSlot(state.domain)
        while True:
            if cancel is not None and cancel.is_set():
                return self._outcome(state, error=CANCELLED)
            interval = self.interval_for(need.domain, interval_overrides)
            slot = self._reserve(need.domain, interval, need.earliest)
            wait = slot - self._wall()
            if wait > 0:
                if cancel is None:
                    self._sleep(wait)
                elif cancel.wait(wait):  # woken by the cancel, not the slot
                    return self._outcome(state, error=CANCELLED)
            state.throttle_wait += max(0.0, slot - max(need.earliest, state.queued_at))
            result = self._run_slot(state, need.domain, interval)
            if isinstance(result, FetchOutcome):
                return result
            need = result
            state.queued_at = self._wall()

    def refusal(self, url: str) -> FetchOutcome | None:
        """The outcome of fetching ``url`` when it is decided without the network (a bad URL or scheme, a
        refused address literal or host override, a robots.txt rule already cached), else None."""
        state_or_outcome = self._new_state(url)
        return state_or_outcome if isinstance(state_or_outcome, FetchOutcome) else None

    def fetch_many(
        self,
        urls: Iterable[str] | UrlFeed,
        max_workers: int = 8,
        interval_overrides: Mapping[str, float] | None = None,
        max_ready: int | None = None,
        max_queued: int | None = None,
    ) -> Iterator[FetchOutcome]:
        """Fetch ``urls`` with ``max_workers`` threads; yield each outcome as it completes (any order).

        Scheduling (see :mod:`topicmap.web.fetch_scheduler`): every domain with queued URLs holds at most one reserved
        slot; a heap orders those slots and each idle worker takes the URL whose slot comes first, or waits
        on a condition variable until the earliest slot is due (no polling). The next slot of a domain is
        set once its previous request has been sent, never earlier than ``interval`` after it.

        Backpressure: at most ``max_ready`` fetched pages (default 4 per worker) wait for the caller; once
        that many are waiting, no new fetch starts until the caller has taken half of them. Without it, a
        caller slower than the web (a spider extracting 40 pages/s from sites that serve 600) would hold
        every page of an iteration in memory. Resuming at half, not at the first page taken, makes the
        workers refill in bursts: each worker that wakes must take the GIL from the caller, and one wake-up
        of all of them per page taken cost an extracting caller a tenth of its speed (benchmarks/RESULTS.md).
        One exception: a slot already reserved for a non-zero interval is used on time while held back (at
        most one page per domain), and no further such slot is reserved until the caller catches up, so a
        shared domain's slot is never held for the caller and lost to a late start.

        ``urls`` may be a :class:`UrlFeed`: then at most ``max_queued`` URLs (default 8 per worker) are taken
        and not yet handed back as outcomes at any time, and the feed is asked for more, on the caller's
        thread, whenever a quarter of that room is free.
        """
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers!r}")
        max_ready = 4 * max_workers if max_ready is None else max_ready
        if max_ready < 1:
            raise ValueError(f"max_ready must be >= 1, got {max_ready!r}")
        max_queued = 8 * max_workers if max_queued is None else max_queued
        if max_queued < 1:
            raise ValueError(f"max_queued must be >= 1, got {max_queued!r}")
        scheduler: DomainScheduler[FetchState, FetchOutcome] = DomainScheduler(
            interval_for=lambda domain: self.interval_for(domain, interval_overrides),
            wall_clock=self._wall,
            reserve=self._reserve,
            run_slot=self._run_slot,
            failed=lambda state, error: self._outcome(state, error=error),
            max_ready=max_ready,
            max_workers=max_workers,
        )
        feed = urls if isinstance(urls, UrlFeed) else None
        if feed is None:
            for url in urls:
                prepared = self._new_state(url, interval_overrides)
                if isinstance(prepared, FetchOutcome):
                    yield prepared
                else:
                    scheduler.add(prepared)
            if not scheduler.pending:
                return
            scheduler.close_input()
        workers = [
            threading.Thread(target=scheduler.work, name=f"topicmap-fetch-{n}", daemon=True)
            for n in range(max_workers)
        ]
        for worker in workers:
            worker.start()
        try:
            while True:
                if feed is not None:
                    outstanding = scheduler.outstanding()
                    room = max_queued - outstanding
                    if room >= max(1, max_queued // 4) or outstanding == 0:
                        taken = feed.take(room, outstanding == 0)
                        if taken is None:
                            feed = None
                            scheduler.close_input()
                        else:
                            if not taken and outstanding == 0:
                                time.sleep(0.05)  # a feed that breaks its contract must not make us spin
                            for url in taken:
                                prepared = self._new_state(url, interval_overrides)
                                if isinstance(prepared, FetchOutcome):
                                    yield prepared
                                else:
                                    scheduler.add(prepared)
                            if scheduler.outstanding() == 0:
                                continue  # nothing to wait for: ask the feed again
                try:
                    outcome = scheduler.results.get_nowait()
                except queue.Empty:
                    scheduler.starved()
                    outcome = scheduler.results.get()
                if outcome is None:
                    break
                scheduler.taken()
                yield outcome
        finally:
            scheduler.stop()
            for worker in workers:
                worker.join()
            for (
                state
            ) in scheduler.unfinished():  # a caller that stopped early: let others read their robots.txt
                self._robots.stop(state)

    # ------------------------------------------------------------------ one fetch, hop by hop

    def _reserve(self, domain: str, interval: float, earliest: float = 0.0) -> float:
        """When to ask for ``domain``'s turn: not before ``earliest``, nor before this fetcher knows it cannot
        have it (its last request there plus the interval, or when the throttle said to ask again)."""
        if interval > 0:
            earliest = self._waits.earliest(domain, earliest)
        return max(self._wall(), earliest)

    def _claim_turn(self, state: FetchState) -> Lease | None:
        """The turn of the domain the fetch holds a slot of (None for a zero interval: no turn is taken), or
        TurnTaken with when to ask again."""
        if state.interval == 0:
            return None
        hold = self._remaining(state) + TURN_HOLD_MARGIN  # the request ends within its remaining time
        turn = self.throttle.claim(state.domain, state.interval, hold)
        if not isinstance(turn, Lease):
            self._waits.note(state.domain, turn)
            raise TurnTaken(turn)
        return turn

    def _note_sent(self, state: FetchState, sent_at: float | None) -> None:
        """The slot's request went out at ``sent_at`` (None: nothing was sent): its domain's next turn is an
        interval later, and the domain's next slot may be set."""
        if sent_at is None:
            return  # refused, or could not connect
        if state.interval > 0:
            self._waits.note(state.domain, sent_at + state.interval)
        if state.on_sent is not None:
            callback, state.on_sent = state.on_sent, None
            callback()

    def _new_state(
        self, url: str, interval_overrides: Mapping[str, float] | None = None
    ) -> FetchState | FetchOutcome:
        now = self._clock()
        state = FetchState(
            url=url,
            current_url=url,
            domain="",
            started=now,
            queued_at=self._wall(),
            interval_overrides=interval_overrides,
        )
        problem = self._precheck(url, state)
        if problem is not None:
            kind, message = problem
            return self._outcome(state, **{kind: message})
        state.domain = throttle_domain(url)
        return state

    def _precheck(self, url: str, state: FetchState | None = None) -> tuple[str, str] | None:
        """Refusals that need no network: bad URL, scheme, literal/overridden address, cached robots."""
        if not isinstance(url, str):
            return "error", f"invalid URL: expected a string, got {type(url).__name__}"
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as error:
            return "error", f"invalid URL: {error}"
        if parts.scheme.lower() not in ("http", "https"):
            return "refused_reason", f"unsupported scheme: {parts.scheme or '(none)'}"
        if not parts.hostname:
            return "error", f"invalid URL: no host in {url!r}"
        port = port or (443 if parts.scheme.lower() == "https" else 80)
        target = self.policy.override_for(parts.hostname)
        ip = target[0] if target else parts.hostname
        reason = None  # a name is checked when it is resolved, at connection time
        if target or _IP_LITERAL.match(ip):
            try:
                reason = self.policy.check(ip, target[1] if target else port)
            except ValueError:
                reason = None
        if reason is not None:
            via = " (host override)" if target else ""
            return "refused_reason", f"ssrf: {parts.hostname}{via}: {reason}"
        if self.obey_robots:
            cached = self._robots.cached(url_origin(url))
            if cached is not None:
                if not cached.allows(url, self.robots_token):
                    return "refused_reason", robots_refusal(url, cached)
                if state is not None:
                    state.robots_allowed_url = url  # the hop need not ask again
        return None

    def _outcome(self, state: FetchState, **fields) -> FetchOutcome:
        self._robots.stop(state)  # a fetch that ends while reading robots.txt lets another try
        fields.setdefault("status", state.last_status)
        return FetchOutcome(
            url=state.url,
            final_url=state.current_url,
            redirects=list(state.redirects),
            elapsed=self._clock() - state.started,
            throttle_wait_seconds=state.throttle_wait,
            attempts=state.attempts,
            **fields,
        )

    def _run_slot(
        self,
        state: FetchState,
        domain: str,
        interval: float,
        on_start: Callable[[], None] | None = None,
    ) -> FetchOutcome | NeedSlot:
        """Use one slot of ``domain``: one request, then the outcome or the slot the next one needs.

        ``on_start`` (fetch_many's cue to set the domain's next slot) fires once the slot's request has been
        *sent* (its send time then bounds the next slot), or at once for a zero interval.
        """
        state.interval = interval
        if interval == 0:
            if on_start is not None:
                on_start()
        else:
            state.on_sent = on_start
        try:
            return self._use_slot(state, domain)
        finally:
            if state.on_sent is not None:  # nothing was sent (refused, failed to connect, turn taken...)
                callback, state.on_sent = state.on_sent, None
                callback()

    def _use_slot(self, state: FetchState, domain: str) -> FetchOutcome | NeedSlot:
        while True:
            try:
                next_url = self._hop(state)
            except Refused as refusal:
                return self._outcome(state, refused_reason=str(refusal))
            except (BodyError, Cancelled) as failure:
                return self._outcome(state, error=str(failure))
            except TurnTaken:  # a request to the domain is under way, or left less than an interval ago
                return NeedSlot(domain)
            except Retryable as failure:
                if state.retries >= self.max_retries:
                    attempts = f"after {state.retries + 1} attempts" if state.retries else "not retried"
                    return self._outcome(state, status=failure.status, error=f"{failure} ({attempts})")
                if failure.delay is not None and failure.delay > self.max_retry_after:
                    return self._outcome(
                        state,
                        status=failure.status,
                        error=f"{failure} (Retry-After {failure.delay:.0f} s exceeds the "
                        f"{self.max_retry_after:.0f} s cap; not retried)",
                    )
                delay = failure.delay if failure.delay is not None else self.backoff_base * 2**state.retries
                if state.network_seconds + delay >= self.total_timeout:
                    return self._outcome(
                        state,
                        status=failure.status,
                        error=f"{failure} (a retry in {delay:g} s would pass the total time limit of "
                        f"{self.total_timeout:g} s; not retried)",
                    )
                # the back-off is part of the fetch's time budget (the politeness wait after it is not)
                state.network_seconds += delay
                state.retries += 1
                state.last_failure = str(failure)
                log.debug("retrying %s in %.2f s: %s", state.current_url, delay, failure)
                return NeedSlot(domain, earliest=self._wall() + delay)
            if isinstance(next_url, FetchOutcome | NeedSlot):
                return next_url
            # A redirect (HTTP or meta refresh) to next_url.
            if len(state.redirects) > self.max_redirects:
                chain = [hop.from_url for hop in state.redirects] + [next_url]
                looping = " (the chain loops)" if len(set(chain)) < len(chain) else ""
                return self._outcome(
                    state,
                    error=f"too many redirects: more than {self.max_redirects}{looping}; "
                    f"last {state.redirects[-1].from_url} -> {next_url}",
                )
            state.current_url = next_url
            problem = self._precheck(next_url, state)
            if problem is not None:
                kind, message = problem
                return self._outcome(state, **{kind: message})
            # every hop is a request of its own and waits for a slot of its domain, the same domain too
            state.domain = throttle_domain(next_url)
            return NeedSlot(state.domain)

    def _remaining(self, state: FetchState) -> float:
        remaining = self.total_timeout - state.network_seconds
        if remaining <= 0:
            last = f"; last failure: {state.last_failure}" if state.last_failure else ""
            raise BodyError(
                f"timeout: total time limit of {self.total_timeout:g} s reached after {state.attempts} attempts "
                f"(at {state.current_url}){last}"
            )
        return remaining

    def _send(
        self,
        state: FetchState,
        url: str,
        plan: Callable[[int, CaseInsensitiveDict], BodyPlan],
        page: bool = False,
    ) -> Response:
        """One guarded GET (no redirect following) to ``url``, in the turn of the domain the fetch holds a slot
        of (claimed here, right before it is sent; TurnTaken when it cannot be had), its body read as ``plan``
        decides from the status and headers. ``page``: a page request, counted in the fetch's attempts (not
        robots.txt). Network time is charged to ``state``; the request ends when the fetch's total time runs
        out."""
        remaining = self._remaining(state)
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
            targets = self._resolve(host, port)
        except AddressRefused as refusal:
            raise Refused(f"ssrf: {refusal.reason}") from None
        except (socket.gaierror, UnicodeError):
            raise BodyError(f"dns error: cannot resolve {host}") from None
        except ValueError as error:
            raise BodyError(f"invalid URL: {error}") from None
        if not url.isascii() or " " in url:
            url = _wire_url(url)
        cookie = self._cookie_header(state, url) if state.cookies else None
        if state.cancel is not None and state.cancel.is_set():
            raise Cancelled(CANCELLED)
        lease = self._claim_turn(state)
        if page:
            state.attempts += 1
        sent_at: float | None = None
        began = self._clock()
        try:
            for index, target in enumerate(targets):
                try:
                    response = self._transport.get(
                        url,
                        target,
                        plan,
                        connect_timeout=self.connect_timeout,
                        read_timeout=self.read_timeout,
                        total_timeout=remaining - (self._clock() - began),
                        cookie=cookie,
                        cancel=state.cancel,
                    )
                    sent_at = response.sent_at
                    break
                except TransferError as failure:
                    sent_at = failure.sent_at
                    could_not_connect = (
                        failure.kind in ("connection", "connect-timeout") and failure.sent_at is None
                    )
                    if could_not_connect and index + 1 < len(targets):
                        continue  # the name's next address, as a browser does
                    raise request_failure(state, failure, url, remaining, self) from None
        finally:
            state.network_seconds += self._clock() - began
            if lease is not None:
                self.throttle.release(lease, sent_at)
            self._note_sent(state, sent_at)
        if response.set_cookies:
            self._keep_cookies(state, url, response.set_cookies)
        return response

    def _resolve(self, host: str, port: int) -> list[tuple[str, int]]:
        """The checked addresses to connect to for ``host``:``port`` (the guard's answer, kept for a minute:
        libcurl connects only to these, so a name that changes its answer cannot slip past the check)."""
        cached = self._resolved.get((host, port))
        if cached is not None:
            return cached
        targets = self.policy.resolve(host, port)
        self._resolved.put((host, port), targets, RESOLVE_TTL)
        return targets

    def _cookie_header(self, state: FetchState, url: str) -> str | None:
        return get_cookie_header(state.cookies, requests.Request("GET", url).prepare())

    def _keep_cookies(self, state: FetchState, url: str, set_cookies: list[str]) -> None:
        headers = email.message.Message()
        for value in set_cookies:
            headers["Set-Cookie"] = value
        state.cookies.extract_cookies(
            MockResponse(headers), MockRequest(requests.Request("GET", url).prepare())
        )

    def _page_plan(self, status: int, headers: CaseInsensitiveDict) -> BodyPlan:
        """A page's body: a small drain for redirects and errors (keeps the connection), none for what
        :meth:`_handle_response` refuses from its headers, else up to ``max_body_bytes`` (more fails)."""
        if not 200 <= status < 300:
            return BodyPlan(DRAIN_LIMIT)
        if self._refusal_from_headers(headers) is not None:
            return SKIP_BODY
        return BodyPlan(self.max_body_bytes, fail=True)

    def _refusal_from_headers(self, headers: CaseInsensitiveDict) -> str | None:
        """Why a 2xx page is refused from its headers alone (not HTML, too large), or None."""
        mime, _ = parse_content_type(headers.get("Content-Type"))
        if mime is not None and mime not in HTML_CONTENT_TYPES:
            return f"non-html content-type: {mime}"
        declared_length = headers.get("Content-Length", "")
        if declared_length.isdigit() and int(declared_length) > self.max_body_bytes:
            return f"too-large: Content-Length {int(declared_length)} exceeds {self.max_body_bytes} bytes"
        return None

    def _hop(self, state: FetchState) -> str | FetchOutcome | NeedSlot:
        """Request ``state.current_url``: return the next URL of a redirect, or the final outcome; or, when
        robots.txt had to be fetched first (in this slot), the next slot of the domain, for the page."""
        url = state.current_url
        if self.obey_robots and state.robots_allowed_url != url:
            rules = self._robots.cached(url_origin(url))
            if rules is None:
                # robots.txt is a request of its own: it uses this slot, the page waits for another
                step = self._robots.read(state, url_origin(url))
                if isinstance(step, NeedSlot):
                    return step
                rules = step
                if not rules.allows(url, self.robots_token):
                    raise Refused(robots_refusal(url, rules))
                state.robots_allowed_url = url
                state.domain = throttle_domain(url)
                return NeedSlot(state.domain)
            if not rules.allows(url, self.robots_token):
                raise Refused(robots_refusal(url, rules))
            state.robots_allowed_url = url
        response = self._send(state, url, self._page_plan, page=True)
        return self._handle_response(state, url, response)

    def _handle_response(self, state: FetchState, url: str, response: Response) -> str | FetchOutcome:
        status = response.status
        state.last_status = status
        if status in REDIRECT_STATUSES and response.headers.get("Location"):
            location = response.headers["Location"]
            with contextlib.suppress(UnicodeError):  # requests' rule: latin-1 on the wire, usually UTF-8
                location = location.encode("latin1").decode("utf8")
            target = urljoin(url, location.strip())
            state.redirects.append(Redirect(url, target, status, "http"))
            return target
        if status in RETRYABLE_STATUSES:
            delay = retry_after_seconds(response.headers.get("Retry-After"), self._wall())
            raise Retryable(f"HTTP {status} {response.reason or ''}".strip(), status=status, delay=delay)
        if not 200 <= status < 300:
            return self._outcome(state, status=status, error=f"HTTP {status} {response.reason or ''}".strip())
        mime, charset = parse_content_type(response.headers.get("Content-Type"))
        refusal = self._refusal_from_headers(response.headers)
        if refusal is not None:
            return self._outcome(state, status=status, content_type=mime, refused_reason=refusal)
        content = response.body
        if mime is None and not looks_like_html(content):
            return self._outcome(
                state,
                status=status,
                refused_reason="non-html content-type: none declared and the body is not HTML",
            )
        text = decode_html(content, charset)
        target = meta_refresh_target(text, url)
        if target is not None:
            state.redirects.append(Redirect(url, target, status, "meta-refresh"))
            return target
        return self._outcome(
            state,
            status=status,
            content=content,
            text=text,
            content_type=mime or "text/html",
            charset=charset,
        )
