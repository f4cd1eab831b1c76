"""The lookup service's bounds on its clients (:class:`ClientGuard`), so that many, slow or hostile clients cost it
a bounded amount of memory and never shut out a small lookup:

- connections: at most ``max_connections`` open at once; one more is answered 503 with ``Retry-After`` as it
  connects, and closed (:class:`GuardedH11Protocol`, uvicorn's h11 protocol with the bounds below);
- read timeout: a request must arrive whole, headers and body, within ``read_timeout`` seconds of its connection
  (or of the answer before it on the connection); a slower one is answered 408 and its connection closed, and a
  lookup waiting for its body sees its client gone;
- body budget: request bodies held at once, all requests together, are at most ``body_budget_bytes``
  (:class:`BodyBudget`); a body that does not fit is answered 503 with ``Retry-After`` at once, unread, rather
  than queued: a queued upload would hold its connection and its socket buffers while it waits, and the
  client is better told when to come back. A quarter of the budget is kept for bodies of at most
  ``SMALL_BODY_BYTES``, so that large uploads never shut out a lookup of an article;
- JSON nested deeper than ``MAX_JSON_DEPTH`` is answered 400 naming the limit (``parse_json_body``).

A request answered before its body arrived whole (refused, or too slow) has its connection closed rather than
kept for the next request: what the client still sends is read and dropped first (until it closes, stops
sending for ``LINGER_SECONDS``, or ``read_timeout`` passes), so that the client reads the answer rather than a
reset connection. Everything here runs on the event loop's thread."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

import h11
from starlette.requests import Request
from uvicorn.protocols.http.h11_impl import H11Protocol

from topicmap import settings
from topicmap.dedup.catalog import BadRequest
from topicmap.dedup.service_limits import (
    BUSY_RETRY_AFTER_SECONDS,
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    MIB,
    SMALL_BODY_BYTES,
    ClientLimits,
)

# The client's side of an h11 connection once its request has arrived whole.
_REQUEST_WHOLE = frozenset({h11.DONE, h11.MUST_CLOSE, h11.CLOSED})
# After an answer sent before its request came whole, how long the client may send nothing before the connection
# is closed (see GuardedH11Protocol._linger).
LINGER_SECONDS = 2.0


class ClientsBusy(RuntimeError):
    """A request the service cannot take now for a bound on its clients (503 with ``Retry-After``)."""


class ClientGone(RuntimeError):
    """The client went away, or was cut off, before its request's body arrived whole."""


def raw_response(status: int, message: str, retry_after: int | None = None) -> bytes:
    """An HTTP/1.1 answer with a JSON error, that closes the connection: written straight to the transport where
    no request is under way to answer through the app."""
    body = json.dumps({"error": message}).encode()
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if retry_after is not None:
        lines.append(f"retry-after: {retry_after}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class BodyBudget:
    """Request body bytes held at once, all requests together: ``take`` grows one body's share, ``give_back``
    returns it whole. Bodies other than small ones (a declared length of at most ``SMALL_BODY_BYTES``) may hold
    at most three quarters of the budget: a body of undeclared length counts as large from its first byte, or
    slow uploads, each small for its first seconds, could fill the quarter kept for small bodies."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.large_budget_bytes = budget_bytes * 3 // 4
        self.held = 0
        self.held_large = 0

    def take(self, more: int, small: bool) -> bool:
        """Grow a body's share by ``more`` bytes; False (nothing taken) when that does not fit."""
        large_more = 0 if small else more
        if self.held + more > self.budget_bytes or self.held_large + large_more > self.large_budget_bytes:
            return False
        self.held += more
        self.held_large += large_more
        return True

    def give_back(self, held: int, small: bool) -> None:
        self.held -= held
        if not small:
            self.held_large -= held


class ClientGuard:
    """The bounds of one service on its clients (``limits``), shared by its HTTP protocol (connections, the read
    timeout: ``protocol_class``) and its app (the body budget: ``body_of``), with what they hold and refuse
    (``counts``, shown by ``/health``)."""

    def __init__(self, limits: ClientLimits | None = None) -> None:
        self.limits = limits if limits is not None else ClientLimits()
        self.bodies = BodyBudget(self.limits.body_budget_bytes)
        self.connections = 0
        self.refused: Counter[str] = Counter()

    def counts(self) -> dict[str, Any]:
        return {
            "connections": self.connections,
            "max_connections": self.limits.max_connections,
            "body_bytes_held": self.bodies.held,
            "body_budget_bytes": self.bodies.budget_bytes,
            "read_timeout_seconds": self.limits.read_timeout,
            "refused": {
                reason: self.refused[reason] for reason in ("connections", "body_budget", "read_timeout")
            },
        }

    def protocol_class(self) -> type[GuardedH11Protocol]:
        """uvicorn's ``http`` protocol for a server of this guard's service."""
        return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": self})

    # -- bodies -------------------------------------------------------------------------------------

    def _budget_full(self, size: str) -> ClientsBusy:
        self.refused["body_budget"] += 1
        return ClientsBusy(
            f"request bodies held now leave no room for {size}: the service holds at most "
            f"{self.bodies.budget_bytes // MIB} MiB of them at once ({settings.SERVICE_BODY_BUDGET_MB.name}); "
            "retry later"
        )

    @asynccontextmanager
    async def body_of(self, request: Request) -> AsyncIterator[bytes]:
        """The request's body, held within the budget until the block ends. Raises :class:`ClientsBusy` when it
        does not fit (a declared length is taken whole before any byte is read, a chunked body as it comes),
        ``BadRequest`` (413) past ``MAX_BODY_BYTES``, :class:`ClientGone` when the client leaves or is cut off."""
        held = 0
        small = False
        try:
            declared = request.headers.get("content-length")
            if declared is not None:
                if not declared.strip().isdigit():
                    raise BadRequest("content-length is not a number")
                if int(declared) > MAX_BODY_BYTES:
                    raise BadRequest(
                        f"request body is {declared} bytes; at most {MAX_BODY_BYTES} are accepted", 413
                    )
                small = int(declared) <= SMALL_BODY_BYTES
                if not self.bodies.take(int(declared), small):
                    raise self._budget_full(f"a body of {declared} bytes")
                held = int(declared)
            chunks: list[bytes] = []
            received = 0
            more_body = True
            while more_body:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone("the client left before its request's body arrived whole")
                chunk = message.get("body", b"")
                more_body = message.get("more_body", False)
                if not chunk:
                    continue
                received += len(chunk)
                if received > MAX_BODY_BYTES:
                    raise BadRequest(f"request body exceeds {MAX_BODY_BYTES} bytes", 413)
                if received > held:  # a body of undeclared length: its share grows as it comes
                    if not self.bodies.take(received - held, small):
                        raise self._budget_full(f"{received} bytes of body")
                    held = received
                chunks.append(chunk)
            body = b"".join(chunks)
            chunks.clear()  # one copy held while the lookup runs, not two
            yield body
        finally:
            self.bodies.give_back(held, small)


def json_depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and objects more than ``limit`` deep (the outermost is 1)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_json_body(text: str) -> Any:
    """The JSON document ``text``; ``BadRequest`` (400) when it is not JSON or nests deeper than
    ``MAX_JSON_DEPTH`` (a document nested hundreds deep fails the parser's recursion, a shallower one the check)."""
    too_deep = BadRequest(
        f"the request body's JSON is nested more than {MAX_JSON_DEPTH} levels deep, the most the service reads "
        "(MAX_JSON_DEPTH)"
    )
    try:
        payload = json.loads(text)
    except RecursionError:
        raise too_deep from None
    except ValueError as error:
        raise BadRequest(f"the request body is not valid JSON: {error}") from None
    if isinstance(payload, dict | list) and json_depth_over(payload, MAX_JSON_DEPTH):
        raise too_deep
    return payload


class _TransportSeenByUvicorn:
    """A connection's transport as uvicorn's protocol code holds it: every call goes to ``transport``, but
    ``close`` goes through the protocol's ``close_connection`` (which may linger first), and a lingering
    connection counts as closing. It refers to its protocol weakly: the protocol holds it."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        self._transport = transport
        self._protocol = weakref.ref(protocol)

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - whatever the transport holds
        return getattr(self._transport, name)

    def close(self) -> None:
        protocol = self._protocol()
        if protocol is None:
            self._transport.close()
        else:
            protocol.close_connection()

    def is_closing(self) -> bool:
        protocol = self._protocol()
        return (protocol is not None and protocol.lingering) or self._transport.is_closing()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol bounded by ``guard`` (a subclass per service: :meth:`ClientGuard.protocol_class`):
    a connection beyond ``max_connections`` is answered 503 and closed as it is made; each request must arrive
    whole within ``read_timeout`` of the connection or of the answer before it (else 408, connection closed); a
    request answered before it arrived whole has its connection closed, after a linger (``_linger``)."""

    guard: ClientGuard

    def connection_made(self, transport: Any) -> None:  # noqa: ANN401 - asyncio's transport
        self._socket_transport: asyncio.Transport = transport
        self._deadline: asyncio.TimerHandle | None = None
        self._counted = False
        self.lingering = False
        guard = self.guard
        if guard.connections >= guard.limits.max_connections:
            guard.refused["connections"] += 1
            self.transport = transport
            transport.write(
                raw_response(
                    503,
                    f"the service has {guard.connections} connections open, its limit "
                    f"({settings.SERVICE_MAX_CONNECTIONS.name}); retry later",
                    BUSY_RETRY_AFTER_SECONDS,
                )
            )
            self._linger()
            return
        guard.connections += 1
        self._counted = True
        super().connection_made(transport)
        self.transport = _TransportSeenByUvicorn(transport, self)  # type: ignore[assignment]
        self._start_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted:
            self.guard.connections -= 1
            self._counted = False
        self._stop_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self._last_heard = self.loop.time()
            return  # the rest of a request already answered: dropped
        super().data_received(data)
        if self.conn.their_state in _REQUEST_WHOLE:
            self._stop_deadline()

    def on_response_complete(self) -> None:
        answered_early = self.conn.their_state is h11.SEND_BODY  # before its body came whole: a refusal
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if answered_early:  # close rather than read the rest of the body and drop it, waiting for the next
            self._linger()
            return
        self._start_deadline()  # the next request's
        if self.conn.their_state in _REQUEST_WHOLE:  # already in, pipelined
            self._stop_deadline()

    def close_connection(self) -> None:
        """Close the connection (uvicorn's ``transport.close()``): at once, or after a linger when the client may
        still be sending the request just answered."""
        if self.lingering or self._socket_transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY:
            self._linger()
        else:
            self._socket_transport.close()

    def _start_deadline(self) -> None:
        self._stop_deadline()
        self._deadline = self.loop.call_later(self.guard.limits.read_timeout, self._read_timed_out)

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _linger(self) -> None:
        """End the connection after an answer sent before its request came whole. The client may still be
        sending: a close with its bytes unread would reset the connection, and the client would often lose the
        answer with it. So the service ends its side (FIN) once the answer is out, and reads and drops what comes
        until the client closes its side, sends nothing for ``LINGER_SECONDS``, or ``read_timeout`` passes."""
        if self.lingering:
            return
        self.lingering = True
        self._stop_deadline()
        transport = self._socket_transport
        transport.resume_reading()
        if transport.can_write_eof():  # a plain socket (the service serves no TLS of its own)
            transport.write_eof()
        self._last_heard = self.loop.time()
        self._linger_ends = self._last_heard + self.guard.limits.read_timeout
        self._deadline = self.loop.call_later(LINGER_SECONDS, self._linger_on)

    def _linger_on(self) -> None:
        quiet_ends = self._last_heard + LINGER_SECONDS
        if self.loop.time() >= min(quiet_ends, self._linger_ends):
            self._deadline = None
            self._socket_transport.close()
        else:
            self._deadline = self.loop.call_at(min(quiet_ends, self._linger_ends), self._linger_on)

    def _read_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state in _REQUEST_WHOLE:
            return
        cycle = self.cycle
        reading_body = self.conn.their_state is h11.SEND_BODY
        # some of a request is in: its headers, or the first bytes of them (h11 holds those unparsed)
        begun = reading_body or bool(self.conn.trailing_data[0])
        answered = reading_body and cycle is not None and cycle.response_started
        if begun and not answered:
            self.guard.refused["read_timeout"] += 1
            if reading_body and cycle is not None:
                cycle.disconnected = True  # the app reading the body sees its client gone, and sends nothing
                cycle.message_event.set()
            timeout = self.guard.limits.read_timeout
            self._socket_transport.write(
                raw_response(
                    408,
                    f"the request did not arrive whole within {timeout:g} s, the service's read timeout "
                    f"({settings.SERVICE_READ_TIMEOUT.name})",
                )
            )
            self._linger()
        else:
            self._socket_transport.close()  # an idle connection is closed without a word
