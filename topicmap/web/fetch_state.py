"""A fetch under way, as ``topicmap.web.fetch`` carries it from slot to slot and thread to thread, and the ways a
request ends the hop it was for (each becomes the outcome's error or refusal, or a retry)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from requests.cookies import RequestsCookieJar

CANCELLED = "cancelled: the caller gave up before the request was sent"
CANCELLED_IN_FLIGHT = "cancelled: the caller gave up while the request was under way"


@dataclass(frozen=True)
class Redirect:
    """One hop: ``kind`` is "http" (``status`` is the 3xx code) or "meta-refresh" (``status`` 200)."""

    from_url: str
    to_url: str
    status: int
    kind: str


class BodyError(Exception):
    """Reading the body failed in a way that ends the fetch (message is the outcome's error)."""


class Refused(Exception):
    """The fetch is refused (message is the outcome's refused_reason)."""


class Cancelled(Exception):
    """The caller's ``cancel`` event was set (message is the outcome's error): the fetch ends, not retried."""


class Retryable(Exception):
    """A failure worth retrying: ``delay`` (seconds) is the server's Retry-After if it sent one."""

    def __init__(self, message: str, status: int | None = None, delay: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.delay = delay


@dataclass
class FetchState:
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
