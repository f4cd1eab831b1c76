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
  last), and obeyed unless ``obey_robots=False``;
- ``fetch(url, cancel=event)``: once the event is set the fetch ends, whether it waits for a slot or a request
  is under way (that request is cut within a fraction of a second and its connection closed), with an error
  that starts with "cancelled:" (not retried, and nothing about the site).

``fetch_many`` takes a list of URLs, or a :class:`UrlFeed` it asks for more URLs as it has room: the spider's
feed claims pending URLs from the topic store a few dozen at a time, so many processes share one frontier.

Throttling rules (see :mod:`topicmap.web.throttle`): every request takes a slot of the distinctive domain it is
sent to, as Heritrix and Scrapy schedule them: the first request of a fetch, each redirect hop (to the same
domain or another), each retry, and robots.txt, which takes the slot of the page that needs it (the page then
waits for the domain's next slot) and, when it redirects, a slot of the domain of each hop. So no two requests
to one domain are closer than its interval. Media Cloud throttled only a fetch's first request (one page load,
one slot): a topic full of bit.ly links hit their targets at the shortener's 1 s pace whatever the target's
own interval, and a site's bare-to-www redirect doubled its request rate.
"""

from __future__ import annotations

import contextlib
import email.message
import email.utils
import heapq
import html
import itertools
import logging
import queue
import re
import socket
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Generic, Protocol, TypeVar, runtime_checkable
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests
from requests.cookies import MockRequest, MockResponse, RequestsCookieJar, get_cookie_header
from requests.structures import CaseInsensitiveDict

from topicmap.web.extract import decode_html
from topicmap.web.fetch_limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_REDIRECTS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TOTAL_TIMEOUT,
)
from topicmap.web.netguard import AddressPolicy, AddressRefused
from topicmap.web.robots import MAX_ROBOTS_BYTES, RobotsRules, product_token
from topicmap.web.throttle import (
    DomainThrottle,
    MemoryThrottle,
    domain_interval,
    throttle_domain,
    validate_interval_overrides,
)
from topicmap.web.transport import SKIP_BODY, BodyPlan, CurlTransport, Response, TransferError

log = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "topicmap/0.1 (+https://github.com/topicmap; research crawler)"
HTML_CONTENT_TYPES = frozenset({"text/html", "application/xhtml+xml"})
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Interstitial redirect pages refresh within seconds; a long delay is a page reloading itself (news
# front pages), which must not replace the article we asked for.
MAX_META_REFRESH_DELAY = 10.0
META_REFRESH_SCAN_CHARS = 64 * 1024
SNIFF_BYTES = 1024
# Bodies of redirects and error pages are drained up to this to keep the connection alive, else dropped.
DRAIN_LIMIT = 64 * 1024
ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"
RESOLVE_TTL = 60.0  # seconds a name's checked addresses are used before it is resolved (and checked) again
ROBOTS_MAX_REDIRECTS = 5  # RFC 9309 §2.3.1.2
ROBOTS_TTL = 24 * 3600.0  # RFC 9309 §2.4: do not use a cached robots.txt for more than 24 hours
ROBOTS_UNREACHABLE_TTL = 600.0  # a 5xx robots.txt means "disallow all" for a while, then ask again
# A fetch whose origin's robots.txt another fetch is reading looks again after this long.
ROBOTS_WAIT_POLL = 0.05
# Origins whose robots.txt rules, and host names whose checked addresses, one fetcher keeps at most: an
# iteration of a large topic meets tens of thousands of sites, most of them once (StormCrawler's robots cache
# holds 10,000 too). Past the bound the least recently used goes first; it is read again if its site returns.
MAX_CACHED_ROBOTS = 10_000
MAX_CACHED_ADDRESSES = 10_000
# Send times kept before the old ones are dropped: a send time only matters until its domain's interval has
# passed, so past this many the fetcher forgets those (the ones still inside an interval are kept).
MAX_KEPT_SEND_TIMES = 10_000
CANCELLED = "cancelled: the caller gave up before the request was sent"
CANCELLED_IN_FLIGHT = "cancelled: the caller gave up while the request was under way"

_SNIFF_HTML = re.compile(
    rb"^\s*(?:<!doctype\s+html|<html|<head|<body|<title|<meta|<!--|<script|<div|<p[\s>]|<h1|<a\s|<table|<br)",
    re.IGNORECASE,
)
_IP_LITERAL = re.compile(r"^(?:[\d.]+|.*:.*)$")  # IPv4 dotted digits, or IPv6 (urlsplit strips brackets)
_META_TAG = re.compile(r"<meta\b[^>]*>", re.IGNORECASE)
_REFRESH_WORD = re.compile("refresh", re.IGNORECASE)
# On the ASCII-lower-cased bytes of the scanned text: a page without it has no refresh tag (0.19 ms per 180 KB
# page, against 0.53 ms for a case-insensitive search of the text, which 1 page in 4 passes anyway: "refresh"
# is a common word in scripts).
_HTTP_EQUIV_REFRESH = re.compile(rb"""http-equiv\s*=\s*["']?\s*refresh""")
_ATTRIBUTE = re.compile(r"""([a-zA-Z_:][-\w:.]*)\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+)""")
_REFRESH_CONTENT = re.compile(
    r"^\s*(\d+(?:\.\d*)?)?\s*[;,]?\s*(?:url\s*=\s*)?(.*?)\s*$", re.IGNORECASE | re.DOTALL
)


@dataclass(frozen=True)
class Redirect:
    """One hop: ``kind`` is "http" (``status`` is the 3xx code) or "meta-refresh" (``status`` 200)."""

    from_url: str
    to_url: str
    status: int
    kind: str


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


class _BodyError(Exception):
    """Reading the body failed in a way that ends the fetch (message is the outcome's error)."""


class _Refused(Exception):
    """The fetch is refused (message is the outcome's refused_reason)."""


class _Cancelled(Exception):
    """The caller's ``cancel`` event was set (message is the outcome's error): the fetch ends, not retried."""


class _Retryable(Exception):
    """A failure worth retrying: ``delay`` (seconds) is the server's Retry-After if it sent one."""

    def __init__(self, message: str, status: int | None = None, delay: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.delay = delay


@dataclass
class _NeedSlot:
    """The fetch must continue in a (new) slot of ``domain``, not before wall-clock ``earliest``."""

    domain: str
    earliest: float = 0.0


@dataclass
class _FetchState:
    """A fetch in progress; it can move between worker threads (cookies travel with it)."""

    url: str
    current_url: str
    domain: str
    started: float
    cookies: RequestsCookieJar = field(default_factory=RequestsCookieJar)
    redirects: list[Redirect] = field(default_factory=list)
    attempts: int = 0
    retries: int = 0
    network_seconds: float = 0.0
    throttle_wait: float = 0.0
    queued_at: float = 0.0
    last_status: int | None = None
    last_failure: str | None = None
    on_sent: Callable[[], None] | None = None
    robots_allowed_url: str | None = None
    robots_url: str | None = None  # while this fetch reads robots.txt for its origin: the URL to ask next
    robots_hops: int = 0
    interval_overrides: Mapping[str, float] | None = None  # the call's overrides, for hops to other domains
    cancel: threading.Event | None = None  # fetch's ``cancel``, which also cuts a request under way


@runtime_checkable
class UrlFeed(Protocol):
    """URLs handed to ``fetch_many`` as it has room for them, instead of a list given up front.

    ``take(room, idle)`` returns up to ``room`` URLs, ``[]`` when none is ready now (``fetch_many`` asks again
    once another outcome has been taken), or None when the feed is finished. ``idle`` is True when nothing
    is being fetched: then the feed must wait until it has URLs, or finish (None), rather than answer ``[]``.
    """

    def take(self, room: int, idle: bool) -> list[str] | None: ...


def _parse_content_type(value: str | None) -> tuple[str | None, str | None]:
    if not value:
        return None, None
    mime, *params = value.split(";")
    charset = None
    for param in params:
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip("\"'") or None
    return mime.strip().lower() or None, charset


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if absent/invalid."""
    if value is None:
        return None
    text = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    current = datetime.now(UTC).timestamp() if now is None else now
    return max(0.0, moment.timestamp() - current)


def meta_refresh_target(text: str, base_url: str) -> str | None:
    """The absolute URL an HTML meta refresh sends to (within MAX_META_REFRESH_DELAY), else None."""
    scan = text[:META_REFRESH_SCAN_CHARS]
    if _HTTP_EQUIV_REFRESH.search(scan.encode("utf-8", "surrogatepass").lower()) is None:
        return None  # most pages: no tag to parse at all
    for tag in _META_TAG.finditer(scan):
        if _REFRESH_WORD.search(tag.group(0)) is None:
            continue
        attributes = {name.lower(): value.strip("\"'") for name, value in _ATTRIBUTE.findall(tag.group(0))}
        if attributes.get("http-equiv", "").strip().lower() != "refresh":
            continue
        match = _REFRESH_CONTENT.match(html.unescape(attributes.get("content", "")))
        if not match:
            continue
        delay_text, target = match.groups()
        target = target.strip().strip("\"'").strip()
        if not target:
            continue  # "refresh: 30" reloads the same page
        if delay_text and float(delay_text) > MAX_META_REFRESH_DELAY:
            continue
        absolute = urljoin(base_url, target)
        if urlsplit(absolute).scheme in ("http", "https") and absolute != base_url:
            return absolute
    return None


def _wire_url(url: str) -> str:
    """``url`` as sent: libcurl takes a URL as is, so an international host name is IDNA-encoded and the rest
    percent-encoded here, as requests (and browsers) do."""
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
    return prepared.url or url


def check_retry_budget(max_retries: int, backoff_base: float, total_timeout: float) -> None:
    """Retries are bounded by the total timeout: their back-off waits alone must leave time for requests.

    Raises ValueError naming the settings when ``max_retries`` back-offs (``backoff_base`` * 1, 2, 4, ...
    seconds) would use up ``total_timeout`` before the last retry could be sent."""
    backoff = backoff_base * (2**max_retries - 1)
    if max_retries and backoff >= total_timeout:
        raise ValueError(
            f"max_retries={max_retries} waits {backoff:g} s in back-off (backoff_base={backoff_base:g} s, "
            f"doubling), which does not fit in total_timeout={total_timeout:g} s: lower max_retries or "
            "raise total_timeout"
        )


def _robots_refusal(url: str, rules: RobotsRules) -> str:
    where = f"{_origin(url)}/robots.txt"
    if rules.disallow_all and rules.note:
        return f"robots: {where} {rules.note}"
    return f"robots: {where} disallows {urlsplit(url).path or '/'}"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), "", "", ""))


_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


class ExpiringCache(Generic[_Key, _Value]):
    """At most ``max_entries`` values, each until its expiry on ``clock``; past the bound the least recently
    used is dropped. Thread-safe (the fetch threads share one)."""

    def __init__(self, max_entries: int, clock: Callable[[], float]) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries!r}")
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[_Key, tuple[float, _Value]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: _Key) -> _Value | None:
        """The value kept for ``key``, or None when there is none or it has expired (then it is dropped)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: _Key, value: _Value, ttl: float) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)


class WebFetcher:
    """Polite, SSRF-guarded page fetcher. Thread-safe: one instance can serve a whole thread pool.

    ``policy`` None refuses every non-public address; the demo passes ``AddressPolicy(allow=["127.0.0.0/8"])``
    and ``host_overrides={"*.test": "127.0.0.1:PORT"}``. ``throttle`` None means a private
    :class:`MemoryThrottle` (polite by default); pass a :class:`~topicmap.web.throttle.SqlThrottle` to share
    domain budgets with other processes and runs, and ``interval_overrides`` (e.g. {"*": 0.0}) to change
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
        # Per throttle domain, when this fetcher's last request to it went out (see _reserve), and the longest
        # spacing (interval + guard band) asked for: a send time older than that constrains nothing.
        self._last_sent: dict[str, float] = {}
        self._last_sent_lock = threading.Lock()
        self._longest_spacing = 0.0
        self._send_times_bound = MAX_KEPT_SEND_TIMES
        self._robots: ExpiringCache[str, RobotsRules] = ExpiringCache(MAX_CACHED_ROBOTS, clock)
        # origin -> the fetch reading its robots.txt (one per origin even when many threads ask at once)
        self._robots_readers: dict[str, int] = {}
        self._robots_guard = threading.Lock()

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
        need = _NeedSlot(state.domain)
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
            result = self._run_slot(state, need.domain, slot, interval)
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

        Scheduling (see :class:`_DomainScheduler`): every domain with queued URLs holds at most one reserved
        slot; a heap orders those slots and each idle worker takes the URL whose slot comes first, or waits
        on a condition variable until the earliest slot is due (no polling). The next slot of a domain is
        reserved once its previous request has been sent, never earlier than ``interval`` after it.

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
        scheduler = _DomainScheduler(self, interval_overrides, max_ready, max_workers)
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

    # ------------------------------------------------------------------ one fetch, hop by hop

    def _reserve(self, domain: str, interval: float, earliest: float = 0.0) -> float:
        """A throttle slot, never earlier than ``interval`` after this fetcher's last request to ``domain``
        actually went out (a request delayed after its slot must not crowd the next one)."""
        if interval > 0:
            spacing = interval + getattr(self.throttle, "guard_band", 0.0)
            with self._last_sent_lock:
                last_sent = self._last_sent.get(domain)
                self._longest_spacing = max(self._longest_spacing, spacing)
            if last_sent is not None:
                earliest = max(earliest, last_sent + spacing)
        return self.throttle.reserve(domain, interval, earliest)

    def _note_sent(self, state: _FetchState, sent_at: float | None, domain: str) -> None:
        """A request to ``domain`` went out at ``sent_at`` (None: nothing was sent): record when, and, if it
        used the slot the fetch holds (``domain`` is the slot's), let the domain's next slot be reserved."""
        if sent_at is None:
            return  # refused, or could not connect
        with self._last_sent_lock:
            if sent_at > self._last_sent.get(domain, 0.0):
                self._last_sent[domain] = sent_at
            if len(self._last_sent) > self._send_times_bound:
                self._forget_old_send_times()
        if domain == state.domain and state.on_sent is not None:
            callback, state.on_sent = state.on_sent, None
            callback()

    def _forget_old_send_times(self) -> None:
        """Drop the send times no slot can be bound by any more (called holding ``_last_sent_lock``). A crawl
        of many sites sends to most of them once; the ones still inside an interval are kept, and the bound
        grows with them, so a crawl of many sites at once does not scan on every request."""
        horizon = time.time() - self._longest_spacing  # the clock of the transport's send times
        self._last_sent = {domain: sent for domain, sent in self._last_sent.items() if sent > horizon}
        self._send_times_bound = max(MAX_KEPT_SEND_TIMES, 2 * len(self._last_sent))

    def _new_state(
        self, url: str, interval_overrides: Mapping[str, float] | None = None
    ) -> _FetchState | FetchOutcome:
        now = self._clock()
        state = _FetchState(
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

    def _precheck(self, url: str, state: _FetchState | None = None) -> tuple[str, str] | None:
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
            cached = self._robots.get(_origin(url))
            if cached is not None:
                if not cached.allows(url, self.robots_token):
                    return "refused_reason", _robots_refusal(url, cached)
                if state is not None:
                    state.robots_allowed_url = url  # the hop need not ask again
        return None

    def _outcome(self, state: _FetchState, **fields) -> FetchOutcome:
        self._stop_reading_robots(state)  # a fetch that ends while reading robots.txt lets another try
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
        state: _FetchState,
        domain: str,
        slot: float,
        interval: float,
        on_start: Callable[[], None] | None = None,
    ) -> FetchOutcome | _NeedSlot:
        """Use one throttle slot of ``domain``: one request, then the outcome or the slot the next one needs.

        ``on_start`` (fetch_many's cue to reserve the domain's next slot) fires once the slot's first request
        has been *sent* (its send time then bounds the next slot), or at once for a zero interval.
        """
        start_at = self.throttle.confirm(domain, slot, interval)
        if start_at is not None:
            wait = start_at - self._wall()
            if wait > 0:
                self._sleep(wait)  # a late start was given a fresh start time, a few ms ahead
        if start_at is None or interval == 0:
            if on_start is not None:
                on_start()
            if start_at is None:
                return _NeedSlot(domain)  # started too late, someone reserved after us: queue again
        else:
            state.on_sent = on_start
        try:
            return self._use_slot(state, domain)
        finally:
            if state.on_sent is not None:  # nothing was sent (refused, failed to connect...)
                callback, state.on_sent = state.on_sent, None
                callback()

    def _use_slot(self, state: _FetchState, domain: str) -> FetchOutcome | _NeedSlot:
        while True:
            try:
                next_url = self._hop(state)
            except _Refused as refusal:
                return self._outcome(state, refused_reason=str(refusal))
            except (_BodyError, _Cancelled) as failure:
                return self._outcome(state, error=str(failure))
            except _Retryable as failure:
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
                return _NeedSlot(domain, earliest=self._wall() + delay)
            if isinstance(next_url, FetchOutcome | _NeedSlot):
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
            return _NeedSlot(state.domain)

    def _remaining(self, state: _FetchState) -> float:
        remaining = self.total_timeout - state.network_seconds
        if remaining <= 0:
            last = f"; last failure: {state.last_failure}" if state.last_failure else ""
            raise _BodyError(
                f"timeout: total time limit of {self.total_timeout:g} s reached after {state.attempts} attempts "
                f"(at {state.current_url}){last}"
            )
        return remaining

    def _send(
        self,
        state: _FetchState,
        url: str,
        plan: Callable[[int, CaseInsensitiveDict], BodyPlan],
        domain: str | None = None,
    ) -> Response:
        """One guarded GET (no redirect following) to ``url``, a URL of throttle ``domain`` (default: the domain
        of the slot the fetch holds), its body read as ``plan`` decides from the status and headers. Network
        time is charged to ``state``; the request ends when the fetch's total time runs out."""
        remaining = self._remaining(state)
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
            targets = self._resolve(host, port)
        except AddressRefused as refusal:
            raise _Refused(f"ssrf: {refusal.reason}") from None
        except (socket.gaierror, UnicodeError):
            raise _BodyError(f"dns error: cannot resolve {host}") from None
        except ValueError as error:
            raise _BodyError(f"invalid URL: {error}") from None
        if not url.isascii() or " " in url:
            url = _wire_url(url)
        cookie = self._cookie_header(state, url) if state.cookies else None
        if state.cancel is not None and state.cancel.is_set():
            raise _Cancelled(CANCELLED)
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
                    break
                except TransferError as failure:
                    self._note_sent(state, failure.sent_at, domain or state.domain)
                    could_not_connect = (
                        failure.kind in ("connection", "connect-timeout") and failure.sent_at is None
                    )
                    if could_not_connect and index + 1 < len(targets):
                        continue  # the name's next address, as a browser does
                    raise self._send_error(state, failure, url, remaining) from None
        finally:
            state.network_seconds += self._clock() - began
        self._note_sent(state, response.sent_at, domain or state.domain)
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

    def _cookie_header(self, state: _FetchState, url: str) -> str | None:
        return get_cookie_header(state.cookies, requests.Request("GET", url).prepare())

    def _keep_cookies(self, state: _FetchState, url: str, set_cookies: list[str]) -> None:
        headers = email.message.Message()
        for value in set_cookies:
            headers["Set-Cookie"] = value
        state.cookies.extract_cookies(
            MockResponse(headers), MockRequest(requests.Request("GET", url).prepare())
        )

    def _send_error(
        self, state: _FetchState, failure: TransferError, url: str, remaining: float
    ) -> Exception:
        """A failed request as the fetch sees it: _Retryable (nothing usable came), _BodyError, _Cancelled."""
        if failure.headers_done:
            state.last_status = failure.status
        if failure.kind == "cancelled":
            return _Cancelled(CANCELLED_IN_FLIGHT)
        limit = f"{self.total_timeout:g}"
        if failure.kind == "connect-timeout":
            waited = min(self.connect_timeout, remaining)
            return _Retryable(f"timeout: could not connect within {waited:.3g} s ({_origin(url)})")
        if failure.kind == "timeout" and failure.total:
            if failure.headers_done:
                return _BodyError(
                    f"timeout: total time limit of {limit} s exceeded while reading the body "
                    f"({failure.body_bytes} bytes so far)"
                )
            return _BodyError(
                f"timeout: total time limit of {limit} s reached while waiting for the response headers of {url}"
            )
        if failure.kind == "timeout":
            if failure.headers_done:
                return _BodyError(
                    f"timeout: body stalled for {self.read_timeout:g} s after {failure.body_bytes} bytes"
                )
            return _Retryable(f"timeout: no response within {self.read_timeout:.3g} s ({_origin(url)})")
        if failure.kind == "tls":
            return _BodyError(f"tls error: {failure}")
        if failure.kind == "encoding":
            return _BodyError(f"bad {failure.encodings or 'encoded'} body: {failure}")
        if failure.kind == "too-large":
            if failure.encodings:
                return _BodyError(
                    f"decompression bomb: {failure.encodings} body inflates to more than {self.max_body_bytes} bytes"
                )
            return _BodyError(f"body too large: more than {self.max_body_bytes} bytes")
        if failure.kind == "invalid-url":
            return _BodyError(f"invalid URL: {failure}")
        if failure.headers_done:
            return _BodyError(f"connection error while reading the body: {failure}")
        return _Retryable(f"connection error: {failure}")

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
        mime, _ = _parse_content_type(headers.get("Content-Type"))
        if mime is not None and mime not in HTML_CONTENT_TYPES:
            return f"non-html content-type: {mime}"
        declared_length = headers.get("Content-Length", "")
        if declared_length.isdigit() and int(declared_length) > self.max_body_bytes:
            return f"too-large: Content-Length {int(declared_length)} exceeds {self.max_body_bytes} bytes"
        return None

    def _hop(self, state: _FetchState) -> str | FetchOutcome | _NeedSlot:
        """Request ``state.current_url``: return the next URL of a redirect, or the final outcome; or, when
        robots.txt had to be fetched first (in this slot), the next slot of the domain, for the page."""
        url = state.current_url
        if self.obey_robots and state.robots_allowed_url != url:
            rules = self._robots.get(_origin(url))
            if rules is None:
                # robots.txt is a request of its own: it uses this slot, the page waits for another
                step = self._read_robots(state, _origin(url))
                if isinstance(step, _NeedSlot):
                    return step
                rules = step
                if not rules.allows(url, self.robots_token):
                    raise _Refused(_robots_refusal(url, rules))
                state.robots_allowed_url = url
                state.domain = throttle_domain(url)
                return _NeedSlot(state.domain)
            if not rules.allows(url, self.robots_token):
                raise _Refused(_robots_refusal(url, rules))
            state.robots_allowed_url = url
        state.attempts += 1
        response = self._send(state, url, self._page_plan)
        return self._handle_response(state, url, response)

    def _handle_response(self, state: _FetchState, url: str, response: Response) -> str | FetchOutcome:
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
            raise _Retryable(f"HTTP {status} {response.reason or ''}".strip(), status=status, delay=delay)
        if not 200 <= status < 300:
            return self._outcome(state, status=status, error=f"HTTP {status} {response.reason or ''}".strip())
        mime, charset = _parse_content_type(response.headers.get("Content-Type"))
        refusal = self._refusal_from_headers(response.headers)
        if refusal is not None:
            return self._outcome(state, status=status, content_type=mime, refused_reason=refusal)
        content = response.body
        if mime is None and not _SNIFF_HTML.match(content[:SNIFF_BYTES].lstrip(b"\xef\xbb\xbf")):
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

    # ------------------------------------------------------------------ robots.txt

    def _stop_reading_robots(self, state: _FetchState) -> None:
        if state.robots_url is None:
            return
        state.robots_url = None
        with self._robots_guard:
            origin = _origin(state.current_url)
            if self._robots_readers.get(origin) == id(state):
                del self._robots_readers[origin]

    def _read_robots(self, state: _FetchState, origin: str) -> RobotsRules | _NeedSlot:
        """Read ``origin``'s robots.txt, one request per slot of the domain each request goes to.

        RFC 9309: 2xx parse; 4xx allow all; 5xx disallow all for a while; up to 5 redirects. Network failures
        propagate (retried like a page request). Returns the rules (cached), or the slot this fetch needs next:
        a redirect to another domain continues in a slot of that domain, and while another fetch reads the
        same robots.txt, this one looks again a moment later."""
        with self._robots_guard:
            reader = self._robots_readers.setdefault(origin, id(state))
        if reader != id(state):
            return _NeedSlot(state.domain, earliest=self._wall() + ROBOTS_WAIT_POLL)
        if state.robots_url is None:
            cached = self._robots.get(origin)
            if cached is not None:  # another fetch finished reading it meanwhile
                self._stop_reading_robots(state)
                return cached
            state.robots_url, state.robots_hops = origin + "/robots.txt", 0
        while True:
            url = state.robots_url
            domain = throttle_domain(url)
            if domain != state.domain:
                state.domain = domain
                return _NeedSlot(domain)  # a redirect to another domain: wait for its slot, like a page's
            try:
                response = self._send(state, url, _robots_plan)
            except _Refused as refusal:
                if state.robots_hops == 0:
                    raise  # the page's own origin is refused: so is the page
                # robots.txt redirects somewhere we may not go: no rules can be read (RFC 9309: unavailable).
                return self._robots_found(
                    state, origin, RobotsRules.allowing_all(f"redirects to a refused address ({refusal})")
                )
            status = response.status
            if status in REDIRECT_STATUSES and response.headers.get("Location"):
                target = urljoin(url, response.headers["Location"])
                state.robots_hops += 1
                if state.robots_hops > ROBOTS_MAX_REDIRECTS:
                    # RFC 9309 §2.3.1.2: more redirects than that count as "unavailable".
                    return self._robots_found(
                        state, origin, RobotsRules.allowing_all("redirects too many times")
                    )
                if urlsplit(target).scheme not in ("http", "https"):
                    return self._robots_found(
                        state, origin, RobotsRules.allowing_all("redirects to a non-HTTP URL")
                    )
                problem = self._precheck(target)
                if problem is not None:
                    note = f"redirects to a refused address ({problem[1]})"
                    return self._robots_found(state, origin, RobotsRules.allowing_all(note))
                state.robots_url = target
                state.domain = throttle_domain(target)
                return _NeedSlot(state.domain)  # the next hop is a request of its own: a slot of its domain
            if 200 <= status < 300:
                return self._robots_found(
                    state, origin, RobotsRules.parse(response.body.decode("utf-8", "replace"))
                )
            if 400 <= status < 500:
                return self._robots_found(
                    state, origin, RobotsRules.allowing_all(f"answered HTTP {status}: no rules")
                )
            note = f"answered HTTP {status}: unreachable, so everything is disallowed for now (RFC 9309)"
            return self._robots_found(
                state, origin, RobotsRules.disallowing_all(note), ttl=ROBOTS_UNREACHABLE_TTL
            )

    def _robots_found(
        self, state: _FetchState, origin: str, rules: RobotsRules, ttl: float = ROBOTS_TTL
    ) -> RobotsRules:
        self._robots.put(origin, rules, ttl)
        self._stop_reading_robots(state)
        return rules


def _robots_plan(status: int, headers: CaseInsensitiveDict) -> BodyPlan:
    """robots.txt: up to MAX_ROBOTS_BYTES of a 2xx body, the rest ignored (RFC 9309 §2.5); a small drain else."""
    return BodyPlan(MAX_ROBOTS_BYTES) if 200 <= status < 300 else BodyPlan(DRAIN_LIMIT)


class _DomainScheduler:
    """fetch_many's shared schedule; every worker thread runs :meth:`work` and schedules for itself.

    There is no coordinator thread: with dozens of workers contending for the GIL, a coordinator that must
    be scheduled between every two requests becomes the bottleneck. Workers take due slots from the heap,
    run them, and (outside the lock) reserve the next slot of a domain whose previous request has been sent.
    """

    def __init__(
        self,
        fetcher: WebFetcher,
        interval_overrides: Mapping[str, float] | None,
        max_ready: int,
        max_workers: int,
    ) -> None:
        self.fetcher = fetcher
        self.interval_overrides = interval_overrides
        self.max_ready = max_ready
        self.ready = 0  # outcomes put in ``results`` and not yet taken by the caller
        self.resume_at = max_ready // 2  # a full buffer holds new fetches back until it has drained to this
        self.held_back = False
        # Fetches under way at once, at most ``active_limit``: halved each time the buffer fills (the caller is
        # the bottleneck, and every extra fetch thread running takes the GIL from it), one more each time the
        # caller finds the buffer empty. On the live web, where the caller waits, it stays at max_workers.
        self.max_workers = max_workers
        self.active_limit = max_workers
        self.active = 0
        self.condition = threading.Condition()
        self.results: queue.SimpleQueue[FetchOutcome | None] = queue.SimpleQueue()
        self.queues: dict[str, deque[_FetchState]] = {}
        # (slot, seq, domain, interval, reserved_at): a heap of the slot each domain holds
        self.slots: list[tuple[float, int, str, float, float]] = []
        self.delayed: list[tuple[float, int, _FetchState, str]] = []  # retries waiting for their backoff
        self.holding: set[str] = set()  # domains with a slot reserved (or being reserved) and not yet used
        self.needs_slot: deque[str] = deque()
        self.intervals: dict[str, float] = {}
        self.sequence = itertools.count()
        self.pending = 0  # fetches not finished
        self.input_closed = False  # no URL will be added any more: the workers end once pending is 0
        self.stopped = False

    def interval_of(self, domain: str) -> float:
        if domain not in self.intervals:
            self.intervals[domain] = self.fetcher.interval_for(domain, self.interval_overrides)
        return self.intervals[domain]

    # All methods below whose name starts with "_" run with the condition's lock held.

    def add(self, state: _FetchState) -> None:
        with self.condition:
            self.pending += 1
            self._enqueue(state, state.domain)
            self.condition.notify()  # a worker may be waiting for work (fed from a UrlFeed)

    def close_input(self) -> None:
        with self.condition:
            self.input_closed = True
            if not self.pending:
                self.results.put(None)
            self.condition.notify_all()

    def outstanding(self) -> int:
        """URLs added and not yet taken by the caller (being fetched, queued, or waiting in ``results``)."""
        with self.condition:
            return self.pending + self.ready

    def _enqueue(self, state: _FetchState, domain: str, front: bool = False) -> None:
        state.queued_at = self.fetcher._wall()
        bucket = self.queues.setdefault(domain, deque())
        if front:  # a fetch already under way (redirect hop, retry) goes before new URLs
            bucket.appendleft(state)
        else:
            bucket.append(state)
        if domain not in self.holding:
            self.needs_slot.append(domain)

    def stop(self) -> None:
        with self.condition:
            self.stopped = True
            self.condition.notify_all()

    def starved(self) -> None:
        """The caller found no outcome waiting: allow one more fetch at once (up to max_workers)."""
        if self.active_limit >= self.max_workers:
            return  # the usual case on the web, and no lock to take (an unlocked read is enough for a hint)
        with self.condition:
            if self.active_limit < self.max_workers:
                self.active_limit += 1
                self.condition.notify()

    def taken(self) -> None:
        """The caller took an outcome: if the buffer was full, the workers held back may fetch again."""
        with self.condition:
            self.ready -= 1
            if self.held_back and self.ready <= self.resume_at:
                self.held_back = False
                self.condition.notify_all()

    def _next_job(self) -> tuple[str, object] | None:
        """("reserve", domain) or ("fetch", (state, domain, slot, interval)); None when finished. Waits."""
        while not self.stopped and (self.pending or not self.input_closed):
            now = self.fetcher._wall()
            while self.delayed and self.delayed[0][0] <= now:
                _, _, state, domain = heapq.heappop(self.delayed)
                self._enqueue(state, domain, front=True)
            if self.ready >= self.max_ready and not self.held_back:
                self.held_back = True
                self.active_limit = max(1, self.active_limit // 2)
            # No polite slot is reserved while the caller is behind: a slot that came due while its fetch was
            # held back would be used late, and a late start loses the slot whenever another process has
            # reserved the domain's next one since (SqlThrottle.confirm): the domain's budget is wasted for every
            # worker. (A zero-interval slot cannot be lost: those are reserved as before.)
            deferred: list[str] = []
            job: tuple[str, object] | None = None
            while self.needs_slot:
                domain = self.needs_slot.popleft()
                if not self.queues.get(domain) or domain in self.holding:
                    continue
                if self.held_back and self.interval_of(domain) > 0:
                    deferred.append(domain)
                    continue
                self.holding.add(domain)
                job = ("reserve", domain)
                break
            self.needs_slot.extendleft(reversed(deferred))
            if job is not None:
                return job
            if self.slots and self.slots[0][0] <= now:
                # A slot already reserved for a polite (non-zero) interval is used on time even when held back:
                # at most one such fetch per domain, and only domains reserved before the hold.
                polite = self.slots[0][3] > 0
                if not polite and (self.held_back or self.active >= self.active_limit):
                    self.condition.wait()  # backpressure: woken by ``taken``, ``starved``, a fetch's end, ``stop``
                    continue
                slot, _, domain, interval, reserved_at = heapq.heappop(self.slots)
                state = self.queues[domain].popleft()
                # Waiting on the throttle is the part of the wait the slot imposed: from when the slot was
                # reserved (or the URL queued, if later) to the slot. Time spent behind other URLs of the
                # domain, or held back by a slow caller, is not the throttle's.
                state.throttle_wait += max(0.0, slot - max(state.queued_at, reserved_at))
                if (self.slots and self.slots[0][0] <= now) or self.needs_slot:
                    self.condition.notify()  # more is due: wake another worker
                self.active += 1
                return "fetch", (state, domain, slot, interval)
            waits = [self.slots[0][0] - now] if self.slots else []
            if self.delayed:
                waits.append(self.delayed[0][0] - now)
            self.condition.wait(max(0.0, min(waits)) if waits else None)
        return None

    def work(self) -> None:
        while True:
            with self.condition:
                job = self._next_job()
            if job is None:
                return
            kind, payload = job
            if kind == "reserve":
                self._reserve(payload)  # type: ignore[arg-type]
            else:
                self._fetch(*payload)  # type: ignore[misc]

    def _reserve(self, domain: str) -> None:
        interval = self.interval_of(domain)
        reserved_at = self.fetcher._wall()
        try:
            slot = self.fetcher._reserve(domain, interval)
        except Exception as error:  # noqa: BLE001 - a broken throttle fails the URLs, not the run
            log.exception("throttle reservation for %s failed", domain)
            with self.condition:
                self.holding.discard(domain)
                for state in self.queues.pop(domain, deque()):
                    self._finish(self.fetcher._outcome(state, error=f"internal error: throttle: {error}"))
            return
        with self.condition:
            heapq.heappush(self.slots, (slot, next(self.sequence), domain, interval, reserved_at))
            if self.slots[0][2] == domain:
                self.condition.notify()  # the earliest slot changed: a waiting worker must recompute

    def _fetch(self, state: _FetchState, domain: str, slot: float, interval: float) -> None:
        def slot_used() -> None:
            # Reserve the domain's next slot right here (no hand-off to another thread): while workers
            # keep finding due slots in the heap, none of them ever has to be woken up.
            with self.condition:
                if not self.queues.get(domain):
                    self.holding.discard(domain)
                    return
                if self.held_back and interval > 0:  # reserved once the caller has caught up (see _next_job)
                    self.holding.discard(domain)
                    self.needs_slot.append(domain)
                    return
            self._reserve(domain)

        try:
            result: FetchOutcome | _NeedSlot = self.fetcher._run_slot(
                state, domain, slot, interval, slot_used
            )
        except Exception as error:  # noqa: BLE001 - a bug must not hang the other fetches
            log.exception("fetch of %s crashed", state.url)
            result = self.fetcher._outcome(state, error=f"internal error: {type(error).__name__}: {error}")
            slot_used()
        with self.condition:
            self.active -= 1
            if self.active == self.active_limit - 1:
                self.condition.notify()  # a worker may be waiting for a fetch to end
            if isinstance(result, FetchOutcome):
                self._finish(result)
            elif result.earliest > self.fetcher._wall():
                heapq.heappush(self.delayed, (result.earliest, next(self.sequence), state, result.domain))
                self.condition.notify()
            else:
                self._enqueue(state, result.domain, front=True)
                self.condition.notify()

    def _finish(self, outcome: FetchOutcome) -> None:
        self.results.put(outcome)
        self.ready += 1
        self.pending -= 1
        if not self.pending and self.input_closed:
            self.results.put(None)
            self.condition.notify_all()
