"""A fetch under way, as ``topicmap.web.fetch`` carries it from slot to slot and thread to thread, and the ways a
request ends the hop it was for (each becomes the outcome's error or refusal, or a retry)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from requests.cookies import RequestsCookieJar

from topicmap.web.robots import url_origin
from topicmap.web.transport import TransferError

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


class TurnTaken(Exception):
    """The domain's turn cannot be had now (another request to it is under way, or its interval since the last
    one has not passed): the request is not sent, and the fetch asks again at wall-clock ``at``."""

    def __init__(self, at: float) -> None:
        super().__init__(f"the domain's turn comes at {at:.3f} at the earliest")
        self.at = at


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
    robots_claim: str | None = (
        None  # the origin whose robots.txt this fetch reads (or waits to read) for the rest
    )
    robots_shared: bool = False  # ... and reads for every process sharing the store
    robots_url: str | None = None  # while this fetch reads robots.txt for its origin: the URL to ask next
    robots_hops: int = 0
    interval: float = 0.0  # the interval of the domain whose slot the fetch holds
    interval_overrides: Mapping[str, float] | None = None  # the call's overrides, for hops to other domains
    cancel: threading.Event | None = None  # fetch's ``cancel``, which also cuts a request under way


class FetchLimits(Protocol):
    """The limits of a fetcher that a failed request's message names."""

    total_timeout: float
    connect_timeout: float
    read_timeout: float
    max_body_bytes: int


def request_failure(
    state: FetchState, failure: TransferError, url: str, remaining: float, limits: FetchLimits
) -> Exception:
    """A failed request as the fetch sees it: Retryable (nothing usable came), BodyError, Cancelled. ``remaining``:
    the fetch's time left when the request began."""
    if failure.headers_done:
        state.last_status = failure.status
    if failure.kind == "cancelled":
        return Cancelled(CANCELLED_IN_FLIGHT)
    limit = f"{limits.total_timeout:g}"
    if failure.kind == "connect-timeout":
        waited = min(limits.connect_timeout, remaining)
        return Retryable(f"timeout: could not connect within {waited:.3g} s ({url_origin(url)})")
    if failure.kind == "timeout" and failure.total:
        if failure.headers_done:
            return BodyError(
                f"timeout: total time limit of {limit} s exceeded while reading the body "
                f"({failure.body_bytes} bytes so far)"
            )
        return BodyError(
            f"timeout: total time limit of {limit} s reached while waiting for the response headers of {url}"
        )
    if failure.kind == "timeout":
        if failure.headers_done:
            return BodyError(
                f"timeout: body stalled for {limits.read_timeout:g} s after {failure.body_bytes} bytes"
            )
        return Retryable(f"timeout: no response within {limits.read_timeout:.3g} s ({url_origin(url)})")
    if failure.kind == "tls":
        return BodyError(f"tls error: {failure}")
    if failure.kind == "encoding":
        return BodyError(f"bad {failure.encodings or 'encoded'} body: {failure}")
    if failure.kind == "too-large":
        if failure.encodings:
            return BodyError(
                f"decompression bomb: {failure.encodings} body inflates to more than {limits.max_body_bytes} bytes"
            )
        return BodyError(f"body too large: more than {limits.max_body_bytes} bytes")
    if failure.kind == "invalid-url":
        return BodyError(f"invalid URL: {failure}")
    if failure.headers_done:
        return BodyError(f"connection error while reading the body: {failure}")
    return Retryable(f"connection error: {failure}")
