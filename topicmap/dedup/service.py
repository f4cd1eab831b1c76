"""The near-duplicate lookup service: "which stored stories are copies of this URL or text, or contain it?".

``topicmap serve`` runs it (Starlette + uvicorn):

- ``GET /near-duplicates?url=URL``: a story the store knows by that URL (any of its URL variants) is looked
  up by its stored text; an unknown URL is fetched through the spider's fetcher (SSRF guard, size cap,
  timeouts, robots.txt, the site's politeness interval) and its article text extracted. An unreachable or
  refused URL answers 502 with the fetch state.
- ``POST /near-duplicates`` with ``{"text": "..."}`` (JSON) or a text/plain body.
- Both take ``max_distance`` (simhash bits, 0..6), ``min_similarity`` (word-bigram Jaccard, 0..1),
  ``min_containment`` (0..1) and ``limit``.
- ``GET /health``: how many fingerprints are loaded, the size of the containment index, and the URL lookups
  queued and running.

Lookups that fetch a page can wait minutes (a site's requests are its politeness interval apart, 10 s by
default), so they never hold the threads of the other lookups: they go to a queue of their own
(:class:`~topicmap.dedup.url_lookups.UrlLookupQueue`) of at most ``max_pending_urls``
(``--max-pending-urls``; one more answers 503 with ``Retry-After``), run by ``url_workers`` threads, one lookup
per site at a time. A lookup whose client goes away
is dropped from the queue, or, when its fetch has begun, ends at once if the fetch waits for a slot, and
within a fraction of a second if a request is under way (connecting, waiting for headers, reading a slow body:
the request is cut and its connection closed), so its worker is free for the next lookup. Stored URLs,
refusals decided without the network (an address literal the SSRF guard refuses, a robots.txt rule already
read) and texts are answered without the queue, so they stay fast however many URL lookups wait. At shutdown
(:class:`LookupServer`) the pending URL lookups are answered 503 at once, and a request still open
``SHUTDOWN_GRACE_SECONDS`` later is cancelled.

Each match: stories_id, url, title, medium, hamming_distance, shingle_similarity (whole-document word-bigram
Jaccard) and containment (the share of the looked-up text's word bigrams the story holds); the stories holding
most of the text first, then the most similar. Candidates come two ways: simhash fingerprints within
``max_distance`` bits (whole-document copies, as the ``near_duplicates`` asset finds them) and stories sharing
the text's winnowed word 4-grams (:mod:`topicmap.dedup.containment`: a paragraph or a quote of a longer story,
whose fingerprint is far from the story's and whose Jaccard with it is a few percent). A candidate is a match
when its similarity reaches ``min_similarity`` or its containment reaches ``min_containment``. A text must have
``MIN_QUERY_WORDS`` to ``MAX_QUERY_WORDS`` words (422 otherwise, saying why).

The fingerprints of every stored story (archive and topics) are held in memory
(:class:`~topicmap.dedup.catalog.FingerprintCatalog`, a :class:`~topicmap.dedup.simhash.NearDuplicateIndex`),
beside the containment keys of their texts (a :class:`~topicmap.dedup.containment.ContainmentIndex`, ~8 bytes
per 6.5 words of text: ~0.8 KB for a 655-word article), and refreshed every ``refresh_seconds``: stories added
since the last refresh are fingerprinted if they have no fingerprint yet (stored, so the assets reuse them),
their texts read and keyed (~2 ms of CPU for an 800-word article with its fingerprint, mostly tokenizing), and
added to both indexes. Texts, titles and URLs stay in the database and are read only for the candidates. A
lookup tokenizes its text once (fingerprint, shingles and containment keys); the candidates' shingle arrays are
kept in a memory-bounded cache (:class:`~topicmap.dedup.catalog.ShingleCache`) that is used only for the very
text it was computed from.

Modules: this one is the HTTP side (``LookupHandlers``, its endpoints; ``LookupService``, the token check;
``LookupServer``, the shutdown); ``catalog`` is what a lookup searches and the lookup itself; ``url_lookups``
the queue of lookups that fetch; ``service_guard`` the bounds on clients.

Safety: the service binds to 127.0.0.1 unless told otherwise, and any other address requires a bearer token
(from the environment, never logged); request bodies and fetched pages are size-capped. Its clients are bounded
(:class:`~topicmap.dedup.service_guard.ClientGuard`, limits from ``TOPICMAP_SERVICE_*``): connections open at
once and request body bytes held at once, all requests together (beyond either: 503 with ``Retry-After``), the
time a request may take to arrive (408), and the nesting of a JSON body (400).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from topicmap import settings
from topicmap.dedup.catalog import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_QUERY_WORDS,
    BadRequest,
    FingerprintCatalog,
    Match,
)
from topicmap.dedup.containment import DEFAULT_MIN_CONTAINMENT
from topicmap.dedup.service_guard import ClientGone, ClientGuard, ClientsBusy, parse_json_body
from topicmap.dedup.service_limits import (
    BUSY_RETRY_AFTER_SECONDS,
    DEFAULT_MAX_PENDING_URLS,
    DEFAULT_URL_WORKERS,
    MAX_BODY_BYTES,
    ClientLimits,
)
from topicmap.dedup.simhash import DEFAULT_MIN_JACCARD
from topicmap.dedup.tokens import TOKEN_RE
from topicmap.dedup.url_lookups import RETRY_AFTER_SECONDS, ServiceBusy, UrlLookupQueue
from topicmap.web.extract import extract_story
from topicmap.web.fetch import WebFetcher
from topicmap.web.throttle import throttle_domain
from topicmap.web.urls import is_http_url

log = logging.getLogger(__name__)

MAX_FETCH_BYTES = 5 * 1024 * 1024  # a fetched page (the spider's default is 10 MiB; one lookup needs less)
MAX_URL_CHARS = 2048
# How long a shutdown waits for open requests once the pending URL lookups are answered, before cancelling them.
SHUTDOWN_GRACE_SECONDS = 2
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class FetchFailed(RuntimeError):
    """The URL could not be fetched or read (answered 502 with the fetch state)."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__(state.get("reason") or "fetch failed")
        self.state = state


async def _until_disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the request's body, if any, is read and ignored)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


# ---------------------------------------------------------------------------------------------------
# HTTP


def _number_param(request: Request, name: str, default: float, low: float, high: float, kind: type = int):  # noqa: ANN202
    """The query parameter ``name`` as ``kind`` (int or float) within [low, high], ``default`` when absent."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise BadRequest(f"{name} must be {what}, got {raw!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}, got {value}")
    return value


def posted_content_type(request: Request) -> str:
    """The POST's content type, "application/json" or "text/plain" ("" counts as text); 415 for another."""
    content_type = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type not in ("application/json", "text/plain", ""):
        raise BadRequest(f"post application/json or text/plain, not {content_type!r}", 415)
    return content_type


def text_of_body(body: bytes, content_type: str) -> str:
    """The text a POST's body carries: ``{"text": "..."}`` (JSON) or the body itself (text/plain)."""
    try:
        decoded = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the request body is not UTF-8") from None
    if content_type == "application/json":
        payload = parse_json_body(decoded)
        if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
            raise BadRequest('post {"text": "..."}: a JSON object with a "text" string')
        decoded = payload["text"]
    if not decoded.strip():
        raise BadRequest("the text is empty")
    # A text of more words than a lookup compares is refused at its first word past the limit, before the
    # lookup tokenizes it whole (~90 ms and ~10 MB for a 1 MiB text). A text of at most 2 * MAX_QUERY_WORDS
    # characters cannot have that many words (a word and a separator each), so it is not counted twice.
    if len(decoded) > 2 * MAX_QUERY_WORDS:
        words = TOKEN_RE.finditer(decoded.casefold())
        if next(itertools.islice(words, MAX_QUERY_WORDS, None), None) is not None:
            raise BadRequest(
                f"the text has more than {MAX_QUERY_WORDS:,} words; a lookup compares at most "
                f"{MAX_QUERY_WORDS:,} (send a part of it)",
                422,
            )
    return decoded


def _fetch_state(outcome: Any) -> dict[str, Any]:
    state = "refused" if outcome.refused_reason else "fetch_error"
    return {
        "state": state,
        "reason": outcome.refused_reason or outcome.error,
        "http_status": outcome.status,
        "final_url": outcome.final_url,
    }


class LookupHandlers:
    """The service's endpoints over one catalog, as a Starlette app (``starlette_app``): the lookups by URL
    (stored, or fetched through ``url_lookups``) and by text, the health report, the answers to refused input,
    and the lifespan that loads the catalog and keeps it fresh every ``refresh_seconds``."""

    def __init__(
        self,
        catalog: FingerprintCatalog,
        fetcher: WebFetcher | None = None,
        refresh_seconds: float = 10.0,
        load_on_start: bool = True,
        url_workers: int = DEFAULT_URL_WORKERS,
        max_pending_urls: int = DEFAULT_MAX_PENDING_URLS,
        guard: ClientGuard | None = None,
    ) -> None:
        self.catalog = catalog
        self.guard = guard if guard is not None else ClientGuard()
        self.page_fetcher = fetcher if fetcher is not None else WebFetcher(max_body_bytes=MAX_FETCH_BYTES)
        self.url_lookups = UrlLookupQueue(url_workers, max_pending_urls)
        self.refresh_seconds = refresh_seconds
        self.load_on_start = load_on_start
        self._params = {
            "max_distance": (catalog.max_distance, 0, catalog.max_distance),
            "limit": (DEFAULT_LIMIT, 1, MAX_LIMIT),
        }

    def starlette_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/near-duplicates", self.near_duplicates_get, methods=["GET"]),
                Route("/near-duplicates", self.near_duplicates_post, methods=["POST"]),
                Route("/health", self.health, methods=["GET"]),
            ],
            exception_handlers={
                BadRequest: self.bad_request,
                FetchFailed: self.fetch_failed,
                ServiceBusy: self.busy,
                ClientsBusy: self.clients_busy,
                ClientGone: self.client_gone,
            },
            lifespan=self.lifespan,
        )

    # -- lookups ------------------------------------------------------------------------------------

    def options(self, request: Request) -> dict[str, Any]:
        """The lookup's keyword arguments from the query parameters."""
        return {
            "max_distance": _number_param(request, "max_distance", *self._params["max_distance"]),
            "min_similarity": _number_param(
                request, "min_similarity", DEFAULT_MIN_JACCARD, 0.0, 1.0, kind=float
            ),
            "min_containment": _number_param(
                request, "min_containment", DEFAULT_MIN_CONTAINMENT, 0.0, 1.0, kind=float
            ),
            "limit": _number_param(request, "limit", *self._params["limit"]),
        }

    def answer(self, query: dict[str, Any], value: int, matches: list[Match]) -> JSONResponse:
        return JSONResponse(
            {
                "query": {**query, "fingerprint": f"{value:016x}"},
                "stored_fingerprints": len(self.catalog),
                "matches": [match.as_json() for match in matches],
            }
        )

    def lookup_stored_url(self, url: str, lookup_options: dict[str, Any]) -> JSONResponse | None:
        """The answer for a URL the store knows (looked up by the stored text), None for an unknown URL."""
        catalog = self.catalog
        known = catalog.story_id_for_url(url)
        if known is None:
            return None
        text = catalog.story_text(known)
        value, matches = catalog.lookup(text, exclude=known, **lookup_options)
        return self.answer({"url": url, "source": "store", "stories_id": known}, value, matches)

    def fetch_and_look_up(
        self, url: str, lookup_options: dict[str, Any], cancelled: threading.Event
    ) -> JSONResponse:
        """In a URL lookup worker: fetch the page (its site's politeness waits included), extract, look up."""
        outcome = self.page_fetcher.fetch(url, cancel=cancelled)
        if not outcome.ok:
            raise FetchFailed(_fetch_state(outcome))
        story = extract_story(outcome.text or outcome.content or b"", outcome.final_url)
        if not story.text.strip():
            raise BadRequest(f"the page at {outcome.final_url} has no article text to compare", 422)
        value, matches = self.catalog.lookup(story.text, **lookup_options)
        source = {"url": url, "source": "fetched", "final_url": outcome.final_url, "title": story.title}
        return self.answer(source, value, matches)

    # -- endpoints ----------------------------------------------------------------------------------

    async def near_duplicates_get(self, request: Request) -> JSONResponse:
        url = (request.query_params.get("url") or "").strip()
        if not url:
            raise BadRequest("give the story's address as ?url=… (or POST a text)")
        if len(url) > MAX_URL_CHARS:
            raise BadRequest(f"url is longer than {MAX_URL_CHARS} characters")
        if not is_http_url(url):
            raise BadRequest(f"url must be an absolute http(s) URL, got {url[:200]!r}")
        lookup_options = self.options(request)
        stored = await run_in_threadpool(self.lookup_stored_url, url, lookup_options)
        if stored is not None:
            return stored
        # no network: an SSRF refusal of an address never waits in the queue
        refused = self.page_fetcher.refusal(url)
        if refused is not None:
            raise FetchFailed(_fetch_state(refused))
        lookup = self.url_lookups.submit(
            throttle_domain(url), functools.partial(self.fetch_and_look_up, url, lookup_options)
        )
        client_gone = asyncio.ensure_future(_until_disconnected(request))
        try:
            await asyncio.wait((lookup.future, client_gone), return_when=asyncio.FIRST_COMPLETED)
        finally:  # answered, the client went away, or the server cancelled this request at shutdown
            client_gone.cancel()
            if not lookup.future.done():
                self.url_lookups.cancel(lookup)
        if lookup.future.cancelled():
            # Never sent: the connection is closed (499, "client closed request", is what the access log shows).
            return Response(status_code=499)
        return lookup.future.result()

    def text_lookup(self, body: bytes, content_type: str, lookup_options: dict[str, Any]) -> JSONResponse:
        """In a thread: the posted text read from its body (decoded, parsed, its length checked), looked up."""
        text = text_of_body(body, content_type)
        value, matches = self.catalog.lookup(text, **lookup_options)
        return self.answer({"source": "text", "text_chars": len(text)}, value, matches)

    async def near_duplicates_post(self, request: Request) -> JSONResponse:
        lookup_options = self.options(request)
        content_type = posted_content_type(request)
        # the body counts against the budget until the lookup is answered: its decoded copies live that long
        async with self.guard.body_of(request) as body:
            return await run_in_threadpool(self.text_lookup, body, content_type, lookup_options)

    async def health(self, _request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "stored_fingerprints": len(self.catalog),
                "watermark": self.catalog.watermark,
                "refreshed_at": self.catalog.refreshed_at,
                "containment_index": {
                    "stories": len(self.catalog.containment),
                    "keys": self.catalog.containment.postings,
                    "bytes": self.catalog.containment.nbytes,
                },
                "url_lookups": self.url_lookups.counts(),
                "clients": self.guard.counts(),
            }
        )

    @staticmethod
    async def bad_request(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, BadRequest)
        return JSONResponse({"error": str(error)}, status_code=error.status)

    @staticmethod
    async def fetch_failed(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, FetchFailed)
        return JSONResponse(
            {"error": f"could not read the URL: {error}", "fetch": error.state}, status_code=502
        )

    @staticmethod
    async def busy(_request: Request, error: Exception) -> JSONResponse:
        return JSONResponse(
            {"error": str(error)}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        )

    @staticmethod
    async def clients_busy(_request: Request, error: Exception) -> JSONResponse:
        return JSONResponse(
            {"error": str(error)}, status_code=503, headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)}
        )

    @staticmethod
    async def client_gone(_request: Request, _error: Exception) -> Response:
        # Never sent: the connection is gone or cut (408 written by the protocol), as the access log shows.
        return Response(status_code=499)

    # -- lifespan -----------------------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self, _app: Starlette):  # noqa: ANN202 - Starlette's lifespan protocol
        if self.load_on_start:
            started = time.monotonic()
            count = await run_in_threadpool(
                self.catalog.refresh, lambda n: log.info("near-duplicate service: %d fingerprints loaded", n)
            )
            log.info("near-duplicate service: %d fingerprints in %.1f s", count, time.monotonic() - started)

        async def keep_fresh() -> None:
            while True:
                await asyncio.sleep(self.refresh_seconds)
                try:
                    added = await run_in_threadpool(self.catalog.refresh)
                    if added:
                        log.info(
                            "near-duplicate service: %d new fingerprints (%d in all)",
                            added,
                            len(self.catalog),
                        )
                except Exception:  # noqa: BLE001 - a failed refresh is retried at the next tick
                    log.warning("near-duplicate service: refresh failed", exc_info=True)

        task = asyncio.create_task(keep_fresh()) if self.refresh_seconds > 0 else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
            self.url_lookups.close()


def create_app(
    catalog: FingerprintCatalog,
    fetcher: WebFetcher | None = None,
    token: str | None = None,
    refresh_seconds: float = 10.0,
    load_on_start: bool = True,
    url_workers: int = DEFAULT_URL_WORKERS,
    max_pending_urls: int = DEFAULT_MAX_PENDING_URLS,
    limits: ClientLimits | None = None,
) -> LookupService:
    """The service's ASGI app. ``token``: every request must carry ``Authorization: Bearer <token>``.
    ``url_workers`` and ``max_pending_urls``: see :class:`UrlLookupQueue`; ``limits``: what clients may hold
    (:class:`ClientLimits`, its defaults when None)."""
    guard = ClientGuard(limits)
    handlers = LookupHandlers(
        catalog, fetcher, refresh_seconds, load_on_start, url_workers, max_pending_urls, guard
    )
    return LookupService(handlers.starlette_app(), handlers.url_lookups, guard, token)


class LookupService:
    """The service's ASGI app: the Starlette app with its URL lookup queue (``url_lookups``, which
    :class:`LookupServer` closes at shutdown) and its bounds on clients (``guard``, whose protocol
    :class:`LookupServer` serves it with). With a ``token``, every HTTP request must carry
    ``Authorization: Bearer <token>`` (compared in constant time); lifespan events pass through."""

    def __init__(
        self, app: Starlette, url_lookups: UrlLookupQueue, guard: ClientGuard, token: str | None = None
    ) -> None:
        self.app = app
        self.url_lookups = url_lookups
        self.guard = guard
        self._expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and self._expected is not None:
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                response = JSONResponse(
                    {"error": "missing or wrong bearer token"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class LookupServer(uvicorn.Server):
    """uvicorn's server for a :class:`LookupService`, as ``topicmap serve`` runs it.

    At shutdown (SIGTERM, SIGINT) uvicorn stops accepting connections and waits for the open requests to be
    answered before it stops the app; URL lookups can wait minutes for their sites' politeness slots, so they
    are answered first (503, the service is shutting down), and a request still open
    ``SHUTDOWN_GRACE_SECONDS`` later is cancelled.

    Its HTTP protocol is uvicorn's h11 one bounded by the service's ``guard`` (connections, read timeout:
    :class:`~topicmap.dedup.service_guard.GuardedH11Protocol`)."""

    def __init__(self, service: LookupService, host: str, port: int, log_level: str = "info") -> None:
        config = uvicorn.Config(
            service,
            host=host,
            port=port,
            log_level=log_level,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
            http=service.guard.protocol_class(),
        )
        super().__init__(config)
        self.service = service

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.service.url_lookups.close()
        await super().shutdown(sockets)


def service_token(host: str, environ: dict[str, str]) -> str | None:
    """The bearer token the service requires: none on loopback, the environment's otherwise (or refuse)."""
    token = settings.SERVICE_TOKEN.value(environ).strip() or None
    if host not in LOOPBACK_HOSTS and token is None:
        raise SystemExit(
            f"refusing to serve on {host}: set {settings.SERVICE_TOKEN.name} to a secret bearer token first "
            "(off loopback, every request must carry 'Authorization: Bearer <token>')"
        )
    return token


__all__ = [
    "MAX_BODY_BYTES",
    "MAX_FETCH_BYTES",
    "LookupHandlers",
    "LookupServer",
    "LookupService",
    "create_app",
    "service_token",
]
