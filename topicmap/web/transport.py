"""One HTTP GET through libcurl (pycurl): the web fetcher's transport.

Why libcurl and not requests/urllib3: a spider iteration runs its fetch threads beside one thread that extracts
pages, in one process. Every byte urllib3 reads, every header http.client parses and every gzip block it inflates
runs Python under the GIL and takes it from the extracting thread: with requests a page cost 1.99-2.45 ms of
fetch CPU, with libcurl 1.22-1.42, and a spider iteration went from 0.72 to 0.81 of the extractor's own rate
in paired runs (docs/spider.md, "Inside one spider iteration"). libcurl does the connection, TLS, HTTP
parsing, decompression and timeouts in C with the GIL released; the fetcher keeps all its rules (SSRF guard,
politeness slots, redirects hop by hop, retries, robots.txt) in Python and calls :meth:`CurlTransport.get` once
per request.

What one call guarantees:

- the connection goes to an address the caller has already checked (``connect_to``: libcurl's CONNECT_TO, so
  the Host header, TLS SNI and certificate checks keep the URL's host name while the TCP connection goes to the
  pinned address; libcurl never resolves a name itself), never through a proxy, only over HTTP or HTTPS;
- no redirect is followed (the caller follows each hop itself, in the hop's own politeness slot);
- the body is read as the caller's ``plan`` says once the headers are in (:class:`BodyPlan`): not at all, up to
  a limit and then quietly stopped (a redirect's body, robots.txt), or up to a limit that fails the request.
  libcurl inflates gzip/deflate/br in C and the limit counts the *inflated* bytes, so a decompression bomb
  stops at the cap;
- connect timeout, a read timeout (no byte for ``read_timeout`` seconds), and a total timeout on the whole
  request, headers trickling in included;
- with a ``cancel`` event, the request ends within ``CANCEL_CHECK_SECONDS`` of the event being set, whatever
  it is doing (connecting, in the TLS handshake, waiting for headers, reading the body), and its connection is
  closed: such a request runs on a libcurl multi handle of the handle's own, driven from Python
  (:class:`_CancellableDriver`), because ``perform`` gives Python no say until it returns (libcurl calls its
  progress callback while a response is read, but not while it connects or shakes hands). A request without
  a ``cancel`` event (the spider's) runs in ``perform``, all in C.

Connections are kept alive in each libcurl handle's own cache (a transport has as many handles as it ever ran
requests at once), and for requests with a ``cancel`` event in the cache of that handle's multi handle; TLS sessions
are shared by all handles of one transport.
"""

from __future__ import annotations

import math
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

import certifi
import pycurl
from requests.structures import CaseInsensitiveDict

# libcurl's receive buffer (default 16 KiB): fewer, larger reads from the socket. The write callback still gets
# the body in pieces of at most 16 KiB (CURL_MAX_WRITE_SIZE, fixed when libcurl is built).
RECEIVE_BUFFER = 256 * 1024
# Idle connections each handle keeps open (libcurl closes the least recently used beyond it).
MAX_CONNECTIONS = 64
# The longest a request with a ``cancel`` event waits for the network before it looks at the event again.
CANCEL_CHECK_SECONDS = 0.1
CANCELLED_MESSAGE = "cancelled by the caller"

_TLS_ERRORS = frozenset(
    {
        pycurl.E_SSL_CONNECT_ERROR,
        pycurl.E_PEER_FAILED_VERIFICATION,
        pycurl.E_SSL_CERTPROBLEM,
        pycurl.E_SSL_CIPHER,
        pycurl.E_SSL_CACERT_BADFILE,
        pycurl.E_SSL_ENGINE_NOTFOUND,
        pycurl.E_SSL_ENGINE_SETFAILED,
        pycurl.E_SSL_SHUTDOWN_FAILED,
        getattr(pycurl, "E_SSL_PINNEDPUBKEYNOTMATCH", -1),
        getattr(pycurl, "E_SSL_INVALIDCERTSTATUS", -1),
    }
)


@dataclass(frozen=True)
class BodyPlan:
    """How much of a response body to read, decided from its status and headers.

    ``limit`` inflated bytes at most; past it the request either stops quietly (``fail`` False: the part read
    is kept and the connection is closed) or fails with :class:`TransferError` kind "too-large"."""

    limit: int
    fail: bool = False


SKIP_BODY = BodyPlan(0)


@dataclass
class Response:
    """A response whose body has been read as planned. ``headers`` are those of the final (non-1xx) header block;
    ``set_cookies`` every Set-Cookie value in it; ``sent_at`` the wall-clock time the request was sent (None if
    nothing was sent)."""

    status: int
    reason: str
    headers: CaseInsensitiveDict
    set_cookies: list[str] = field(default_factory=list)
    body: bytes = b""
    sent_at: float | None = None


class TransferError(Exception):
    """A request that failed. ``kind``: "connect-timeout", "timeout" (a read or the total time limit: see
    ``total``), "tls", "connection", "encoding", "too-large", "invalid-url", "cancelled" (the caller's
    ``cancel`` event was set). ``status`` and ``headers_done`` tell how far it got; ``body_bytes`` how much
    body had come; ``sent_at`` as in :class:`Response`."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        headers_done: bool = False,
        body_bytes: int = 0,
        total: bool = False,
        sent_at: float | None = None,
        encodings: str = "",
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.headers_done = headers_done
        self.body_bytes = body_bytes
        self.total = total
        self.sent_at = sent_at
        self.encodings = encodings


class _Exchange:
    """One request's header and body callbacks (called by libcurl on the requesting thread)."""

    __slots__ = (
        "plan",
        "status",
        "reason",
        "lines",
        "headers",
        "cookies",
        "body",
        "size",
        "body_plan",
        "over",
        "heard_at",
    )

    def __init__(self, plan: Callable[[int, CaseInsensitiveDict], BodyPlan]) -> None:
        self.plan = plan
        self.status: int | None = None
        self.reason = ""
        self.lines: list[bytes] = []
        self.headers: CaseInsensitiveDict | None = None  # set once the final header block is complete
        self.cookies: list[str] = []
        self.body: list[bytes] = []
        self.size = 0
        self.body_plan = SKIP_BODY
        self.over = False  # the body passed the plan's limit
        self.heard_at: float | None = None  # wall-clock time the first header line was seen here

    def header(self, line: bytes) -> int | None:
        if self.heard_at is None:
            self.heard_at = time.time()
        if line.startswith(b"HTTP/"):
            parts = line.split(None, 2)
            self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
            self.reason = parts[2].decode("latin-1").strip() if len(parts) > 2 else ""
            self.lines = []
            return None
        if line not in (b"\r\n", b"\n"):
            self.lines.append(line)
            return None
        if self.status is None or 100 <= self.status < 200:
            return None  # an interim response (100 Continue): the real one follows
        headers: CaseInsensitiveDict = CaseInsensitiveDict()
        for raw in self.lines:
            name, _, value = raw.decode("latin-1").partition(":")
            name, value = name.strip(), value.strip()
            if name.lower() == "set-cookie":
                self.cookies.append(value)
            # repeated headers are joined as RFC 9110 §5.3 allows (Set-Cookie is kept apart above)
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.headers = headers
        self.body_plan = self.plan(self.status, headers)
        if self.body_plan.limit == 0:
            return 0  # nothing of the body is wanted: end the request here (libcurl closes the connection)
        return None

    def write(self, data: bytes) -> int | None:
        self.size += len(data)
        if self.size > self.body_plan.limit:
            self.over = True
            keep = self.body_plan.limit - (self.size - len(data))
            if keep > 0 and not self.body_plan.fail:
                self.body.append(data[:keep])
            return 0  # stop the transfer
        self.body.append(data)
        return None


class _CancellableDriver:
    """Runs one libcurl handle's requests that carry a ``cancel`` event, on a multi handle of its own (which
    keeps their idle connections), through libcurl's socket interface: libcurl says which sockets to wait on
    and when its next timer is due, Python waits (``select.poll``, without the GIL) at most
    ``CANCEL_CHECK_SECONDS`` at a time and looks at the event between waits. A set event removes the handle
    from the multi handle, which ends the request and closes its connection."""

    def __init__(self) -> None:
        self.multi = pycurl.CurlMulti()
        self.multi.setopt(pycurl.M_MAXCONNECTS, MAX_CONNECTIONS)
        self.multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        self.multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self._sockets: dict[int, int] = {}  # socket -> what libcurl waits for on it (POLL_IN, POLL_OUT...)
        self._timer_due: float | None = None  # monotonic time libcurl's timer is due, None when it has none

    def close(self) -> None:
        self.multi.close()

    def _on_socket(self, what: int, fd: int, multi: object, socketp: object) -> None:
        if what == pycurl.POLL_REMOVE:
            self._sockets.pop(fd, None)
        else:
            self._sockets[fd] = what

    def _on_timer(self, timeout_ms: int) -> None:
        self._timer_due = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000

    def _act(self, fd: int, flags: int) -> int:
        """Let libcurl work on ``fd`` (or its due timers): how many requests are still running."""
        return self.multi.socket_action(fd, flags)[1]

    def perform(self, handle: pycurl.Curl, cancel: threading.Event) -> None:
        """``handle.perform()``, except that the request ends with ``pycurl.error(E_ABORTED_BY_CALLBACK)``
        once ``cancel`` is set."""
        if cancel.is_set():
            raise pycurl.error(pycurl.E_ABORTED_BY_CALLBACK, CANCELLED_MESSAGE)
        self.multi.add_handle(handle)
        try:
            running = self._act(pycurl.SOCKET_TIMEOUT, 0)
            while running:
                if cancel.is_set():
                    raise pycurl.error(pycurl.E_ABORTED_BY_CALLBACK, CANCELLED_MESSAGE)
                wait = CANCEL_CHECK_SECONDS
                if self._timer_due is not None:
                    wait = min(wait, max(0.0, self._timer_due - time.monotonic()))
                poller = select.poll()
                for fd, what in self._sockets.items():
                    if what in _POLL_EVENTS:  # not POLL_NONE: libcurl knows the socket but waits for nothing
                        poller.register(fd, _POLL_EVENTS[what])
                for fd, events in poller.poll(wait * 1000):
                    running = self._act(fd, _curl_flags(events))
                if self._timer_due is not None and self._timer_due <= time.monotonic():
                    self._timer_due = None
                    running = self._act(pycurl.SOCKET_TIMEOUT, 0)
            _, _, failed = self.multi.info_read()
            if failed:
                _, code, message = failed[0]
                raise pycurl.error(code, message)
        finally:
            self.multi.remove_handle(handle)  # a request under way ends here, its connection closed


_POLL_EVENTS = {
    pycurl.POLL_IN: select.POLLIN | select.POLLPRI,
    pycurl.POLL_OUT: select.POLLOUT,
    pycurl.POLL_INOUT: select.POLLIN | select.POLLPRI | select.POLLOUT,
}


def _curl_flags(events: int) -> int:
    """libcurl's CSELECT flags for ``poll``'s ``events`` on a socket (a hang-up or error is read as input, so
    that libcurl sees the end of the connection)."""
    flags = 0
    if events & (select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR):
        flags |= pycurl.CSELECT_IN
    if events & select.POLLOUT:
        flags |= pycurl.CSELECT_OUT
    if events & (select.POLLERR | select.POLLNVAL):
        flags |= pycurl.CSELECT_ERR
    return flags


class CurlTransport:
    """Thread-safe: each request runs on a libcurl handle of its own (kept for the next request, with its idle
    connections); TLS sessions are shared by all handles."""

    def __init__(self, user_agent: str, accept: str, ca_bundle: str | None = None) -> None:
        self._user_agent = user_agent
        self._accept = accept
        self._ca_bundle = ca_bundle or certifi.where()
        # TLS sessions are shared (a thread resumes a session another thread opened); connections are not: a
        # shared connection cache is locked on every request, and under that lock the fetch threads queued for
        # the GIL behind the extracting thread (a spider iteration measured 0.64 of the extractor's rate with a
        # shared cache, 0.74 with requests in the same pair). Each handle keeps its own.
        self._share = pycurl.CurlShare()
        self._share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_SSL_SESSION)
        # Handles not in use, most recently used last: a request takes one (or makes one) and gives it back,
        # so there are as many handles, and connection caches, as requests ever ran at once.
        self._idle: list[pycurl.Curl] = []
        # The multi handle a handle's requests with a ``cancel`` event run on, made at the first such request.
        self._drivers: dict[pycurl.Curl, _CancellableDriver] = {}
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            handles, self._idle = self._idle, []
        for handle in handles:
            self._close_handle(handle)
        self._share.close()

    def _close_handle(self, handle: pycurl.Curl) -> None:
        with self._lock:
            driver = self._drivers.pop(handle, None)
        if driver is not None:
            driver.close()
        handle.close()

    def _driver(self, handle: pycurl.Curl) -> _CancellableDriver:
        with self._lock:
            driver = self._drivers.get(handle)
            if driver is None:
                driver = self._drivers[handle] = _CancellableDriver()
            return driver

    def _take_handle(self) -> pycurl.Curl:
        with self._lock:
            if self._closed:
                raise RuntimeError("the transport is closed")
            if self._idle:
                return self._idle.pop()
        handle = pycurl.Curl()
        handle.setopt(pycurl.SHARE, self._share)
        handle.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM: safe in threads
        handle.setopt(pycurl.PROXY, "")  # never a proxy from the environment: the guard pins the address
        handle.setopt(pycurl.NOPROXY, "*")
        handle.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        handle.setopt(pycurl.FOLLOWLOCATION, 0)
        handle.setopt(pycurl.USERAGENT, self._user_agent)
        handle.setopt(pycurl.ACCEPT_ENCODING, "")  # every coding this libcurl inflates (gzip, deflate, br)
        handle.setopt(pycurl.CAINFO, self._ca_bundle)
        handle.setopt(pycurl.SSL_VERIFYPEER, 1)
        handle.setopt(pycurl.SSL_VERIFYHOST, 2)
        handle.setopt(pycurl.TCP_NODELAY, 1)
        handle.setopt(pycurl.BUFFERSIZE, RECEIVE_BUFFER)
        handle.setopt(pycurl.MAXCONNECTS, MAX_CONNECTIONS)
        return handle

    def _give_back(self, handle: pycurl.Curl) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(handle)
                return
        self._close_handle(handle)

    def get(
        self,
        url: str,
        connect_to: tuple[str, int],
        plan: Callable[[int, CaseInsensitiveDict], BodyPlan],
        *,
        connect_timeout: float,
        read_timeout: float,
        total_timeout: float,
        cookie: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Response:
        """GET ``url`` over a connection to ``connect_to`` (ip, port), reading the body as ``plan`` decides.

        ``cancel``: once set, the request ends within ``CANCEL_CHECK_SECONDS`` (TransferError "cancelled"),
        its connection closed."""
        handle = self._take_handle()
        ip, port = connect_to
        exchange = _Exchange(plan)
        try:
            handle.setopt(pycurl.URL, url)
            handle.setopt(pycurl.CONNECT_TO, [f"::[{ip}]:{port}" if ":" in ip else f"::{ip}:{port}"])
            handle.setopt(pycurl.HTTPHEADER, [f"Accept: {self._accept}"])
            handle.setopt(pycurl.COOKIE, cookie or "")
            handle.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(min(connect_timeout, total_timeout) * 1000)))
            handle.setopt(pycurl.TIMEOUT_MS, max(1, int(total_timeout * 1000)))
            # no byte for read_timeout seconds (libcurl counts whole seconds) ends the request
            handle.setopt(pycurl.LOW_SPEED_LIMIT, 1)
            handle.setopt(pycurl.LOW_SPEED_TIME, max(1, math.ceil(read_timeout)))
            handle.setopt(pycurl.HEADERFUNCTION, exchange.header)
            handle.setopt(pycurl.WRITEFUNCTION, exchange.write)
            if cancel is None:
                handle.perform()
            else:
                self._driver(handle).perform(handle, cancel)
            sent_at = _sent_at(handle, exchange.heard_at)
        except pycurl.error as error:
            code, message = error.args
            sent_at = _sent_at(handle, exchange.heard_at)
            if code == pycurl.E_WRITE_ERROR and exchange.headers is not None and not exchange.over:
                pass  # the header callback ended a request whose body is not wanted
            elif code == pycurl.E_WRITE_ERROR and exchange.over and not exchange.body_plan.fail:
                pass  # the body was cut at the plan's limit, as asked
            else:
                raise _transfer_error(code, message, exchange, handle, total_timeout, sent_at) from None
        finally:
            handle.setopt(pycurl.HEADERFUNCTION, _ignore)  # drop the closures (and the body they hold)
            handle.setopt(pycurl.WRITEFUNCTION, _ignore)
            self._give_back(handle)
        if exchange.headers is None or exchange.status is None:
            raise TransferError("connection", "the server sent no complete response", sent_at=sent_at)
        return Response(
            status=exchange.status,
            reason=exchange.reason or _reason(exchange.status),
            headers=exchange.headers,
            set_cookies=exchange.cookies,
            body=b"".join(exchange.body),
            sent_at=sent_at,
        )


def _ignore(data: bytes) -> None:
    return None


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase  # HTTP/2 responses carry no reason phrase
    except ValueError:
        return ""


def _sent_at(handle: pycurl.Curl, heard_at: float | None) -> float | None:
    """When the request went out, if a request was written at all: never earlier than the real moment, and
    as close to it as libcurl's timers allow.

    libcurl times a transfer from its own start, and that start is not the time Python last read the clock: a
    thread that read the clock and then waited for the GIL before ``perform`` would place the send too early,
    and the next request to the site, spaced from it, would reach the server less than an interval later. So
    the send is counted back from a wall-clock time taken *after* a moment libcurl timed: ``heard_at``, when
    the first header line reached Python, comes after libcurl's first response byte, so ``heard_at`` minus
    (first byte - last request byte sent, libcurl >= 8.10) is at or after the send. Without that timer, the
    first response byte itself bounds it; without a response, the end of the transfer does."""
    ended = time.time()
    if handle.getinfo(pycurl.REQUEST_SIZE) <= 0:
        return None
    if heard_at is None:
        return ended
    first_byte_us = handle.getinfo(pycurl.STARTTRANSFER_TIME_T)
    sent_us = handle.getinfo(_POSTTRANSFER_TIME_T) if _POSTTRANSFER_TIME_T is not None else 0
    if 0 < sent_us <= first_byte_us:
        return heard_at - (first_byte_us - sent_us) / 1e6
    return heard_at


#: libcurl's "last byte of the request sent" time in microseconds (libcurl 8.10, pycurl 7.45.4 and later)
_POSTTRANSFER_TIME_T: int | None = getattr(pycurl, "POSTTRANSFER_TIME_T", None)


def _transfer_error(
    code: int,
    message: str,
    exchange: _Exchange,
    handle: pycurl.Curl,
    total_timeout: float,
    sent_at: float | None,
) -> TransferError:
    headers_done = exchange.headers is not None
    encodings = (exchange.headers or {}).get("Content-Encoding", "")
    common = dict(
        status=exchange.status if headers_done else None,
        headers_done=headers_done,
        body_bytes=exchange.size,
        sent_at=sent_at,
        encodings=encodings,
    )
    if code == pycurl.E_WRITE_ERROR and exchange.over:
        return TransferError("too-large", message, **common)
    if code == pycurl.E_ABORTED_BY_CALLBACK:  # no callback of ours aborts: the caller's cancel event was set
        return TransferError("cancelled", message, **common)
    if code == pycurl.E_OPERATION_TIMEDOUT:
        if handle.getinfo(pycurl.CONNECT_TIME) == 0 and sent_at is None:
            return TransferError("connect-timeout", message, **common)
        # the total limit ran out, or no byte came for read_timeout seconds (libcurl's low-speed limit)
        total = handle.getinfo(pycurl.TOTAL_TIME) >= total_timeout - 0.05 or "Operation timed out" in message
        return TransferError("timeout", message, total=total, **common)
    if code in _TLS_ERRORS:
        return TransferError("tls", message, **common)
    if code == pycurl.E_BAD_CONTENT_ENCODING:
        return TransferError("encoding", message, **common)
    if code in (pycurl.E_URL_MALFORMAT, pycurl.E_UNSUPPORTED_PROTOCOL):
        return TransferError("invalid-url", message, **common)
    if code == pycurl.E_FILESIZE_EXCEEDED:
        return TransferError("too-large", message, **common)
    return TransferError("connection", message, **common)
