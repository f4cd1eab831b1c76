"""The near-duplicate lookup service: GET by URL (stored or fetched), POST a text, bad input, the SSRF guard,
the bearer token off loopback, size caps, fingerprints refreshed as stories land, cached shingles that
never change an answer, and a service that degrades under slow URL lookups, never wedges: abandoned lookups
dropped or their downloads cut, a bounded URL queue (503 with Retry-After), texts and refusals answered while
URL lookups wait, and SIGTERM obeyed while a fetch hangs. Its bounds on clients, each met for real on loopback: slow
requests cut off (408), deeply nested JSON refused (400), a body budget and a connection limit (503 with
Retry-After), and small lookups answered while slow uploaders hold the budget."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import update

from tests.conftest import copy_sqlite_store
from topicmap import settings
from topicmap.dedup.catalog import FingerprintCatalog
from topicmap.dedup.service import (
    MAX_BODY_BYTES,
    LookupServer,
    LookupService,
    create_app,
    service_token,
)
from topicmap.dedup.service_limits import MAX_JSON_DEPTH, MIB, ClientLimits
from topicmap.dedup.shingles import jaccard, shingle_set
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore
from topicmap.web.fetch import WebFetcher
from topicmap.web.netguard import AddressPolicy

ARTICLE = (
    "The regional council approved a new plan on Tuesday to cut carbon emissions from public buildings by "
    "forty percent before the end of the decade. The plan replaces oil boilers in schools with heat pumps, "
    "adds solar panels to the roofs of libraries, and retrofits the insulation of older town halls. Council "
    "members argued for hours about the cost, which officials put at two hundred million over eight years. "
    "Supporters said the savings on energy bills would repay most of it, while opponents warned that the "
    "region could not borrow more without raising taxes on households already struggling with prices. "
)
OTHER = (
    "The football club announced on Friday that its stadium will be rebuilt over the next three seasons, "
    "with the team playing home games at a ground across the river while the works go on. Fans were told "
    "that season tickets would keep their price, and that the new stands would hold eight thousand more "
    "people. The mayor welcomed the plan but asked the club to pay for new bus lines to the stadium. "
)
COPY = ARTICLE.replace("Tuesday", "Wednesday") + " This story first appeared in the Valley Herald."


def when(day: int) -> datetime:
    return datetime(2026, 2, day, 9, tzinfo=UTC)


def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.sqlite3'}"


#: the loopback sites' shutdown() waits for their serve_forever loop to look (every 0.5 s by default)
SITE_POLL = {"poll_interval": 0.05}


@pytest.fixture(scope="module")
def stored_template(sqlite_store_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An upgraded SQLite store holding the article, its copy and an unrelated story, built once per module."""
    path = tmp_path_factory.mktemp("near_dup_store") / "store.sqlite3"
    store = TopicStore.open(copy_sqlite_store(sqlite_store_template, path))
    store.add_stories(
        [
            NewStory(
                "https://herald.test/2026/02/03/carbon-plan", "Council approves carbon plan", ARTICLE, when(3)
            ),
            NewStory("https://gazette.test/news/carbon-plan-copy", "Carbon plan approved", COPY, when(4)),
            NewStory("https://sports.test/2026/02/05/stadium", "Stadium to be rebuilt", OTHER, when(5)),
        ],
        "archive:test",
    )
    store.dispose()
    return path


@pytest.fixture
def stored(tmp_path: Path, stored_template: Path) -> Iterator[TopicStore]:
    """A store of the test's own (at ``store_url(tmp_path)``) holding the three stories: a copy of the
    module's, so that what a test writes is never seen by another."""
    store = TopicStore.open(copy_sqlite_store(stored_template, tmp_path / "store.sqlite3"))
    yield store
    store.dispose()


class _Pages(BaseHTTPRequestHandler):
    pages: dict[str, bytes] = {}

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = self.pages.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[str]:
    """A loopback web server with one article page: a copy of ARTICLE that the store does not know."""
    _Pages.pages = {
        "/story.html": (
            "<html><head><title>Carbon plan | Valley Herald</title></head><body><article>"
            + "".join(f"<p>{sentence}.</p>" for sentence in COPY.split(". "))
            + "</article></body></html>"
        ).encode()
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, kwargs=SITE_POLL, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Running:
    """The service on a loopback port of its own, run by uvicorn in a thread (as `topicmap serve` does)."""

    def __init__(self, app: LookupService) -> None:
        self.server = LookupServer(app, "127.0.0.1", 0, log_level="warning")
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.client: httpx.Client | None = None

    def __enter__(self) -> httpx.Client:
        self.thread.start()
        while not self.server.started:  # progress, not a deadline: uvicorn sets it once it listens
            if not self.thread.is_alive():
                raise RuntimeError("the service did not start")
            threading.Event().wait(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        # plain HTTP on loopback: verify=False spares loading the CA bundle (a tenth of a second) per client
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60, verify=False)
        return self.client

    def __exit__(self, *exc_info: object) -> None:
        assert self.client is not None
        self.client.close()
        self.server.should_exit = True
        self.thread.join()


def client_for(store: TopicStore, fetcher: WebFetcher | None = None, token: str | None = None) -> _Running:
    return _Running(create_app(FingerprintCatalog(store), fetcher, token=token, refresh_seconds=0))


def loopback_fetcher(base: str) -> WebFetcher:
    port = base.rsplit(":", 1)[1]
    return WebFetcher(
        policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]), interval_overrides={"*": 0.0}, max_retries=0
    )


def test_get_a_stored_url_lists_its_copies_not_itself(stored: TopicStore) -> None:
    with client_for(stored) as client:
        response = client.get(
            "/near-duplicates", params={"url": "https://herald.test/2026/02/03/carbon-plan"}
        )
    assert response.status_code == 200
    body = response.json()
    assert body["query"]["source"] == "store"
    assert body["stored_fingerprints"] == 3
    assert [m["url"] for m in body["matches"]] == ["https://gazette.test/news/carbon-plan-copy"]
    match = body["matches"][0]
    assert set(match) == {
        "stories_id",
        "url",
        "title",
        "medium",
        "hamming_distance",
        "shingle_similarity",
        "containment",
    }
    assert match["title"] == "Carbon plan approved" and match["medium"]
    assert 0 <= match["hamming_distance"] <= 6 and match["shingle_similarity"] >= 0.7
    assert 0.9 <= match["containment"] < 1.0  # all of the story but the changed day


def test_post_a_text_as_json_or_plain_text(stored: TopicStore) -> None:
    with client_for(stored) as client:
        as_json = client.post("/near-duplicates", json={"text": ARTICLE})
        as_plain = client.post(
            "/near-duplicates", content=ARTICLE.encode(), headers={"Content-Type": "text/plain"}
        )
        unrelated = client.post(
            "/near-duplicates",
            json={
                "text": "A recipe for bread: mix flour, water and salt, knead the dough for ten minutes and bake."
            },
        )
    assert as_json.status_code == 200 and as_plain.status_code == 200
    urls = {m["url"] for m in as_json.json()["matches"]}
    assert urls == {
        "https://herald.test/2026/02/03/carbon-plan",
        "https://gazette.test/news/carbon-plan-copy",
    }
    assert as_plain.json()["matches"] == as_json.json()["matches"]
    assert unrelated.json()["matches"] == []


def test_an_unknown_url_is_fetched_and_compared(stored: TopicStore, web: str) -> None:
    with client_for(stored, loopback_fetcher(web)) as client:
        response = client.get("/near-duplicates", params={"url": f"{web}/story.html"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["query"]["source"] == "fetched"
    assert "https://herald.test/2026/02/03/carbon-plan" in {m["url"] for m in body["matches"]}


def test_unreachable_or_refused_urls_answer_502_with_the_fetch_state(stored: TopicStore, web: str) -> None:
    with client_for(stored, loopback_fetcher(web)) as client:
        missing = client.get("/near-duplicates", params={"url": f"{web}/no-such-page.html"})
    assert missing.status_code == 502
    assert missing.json()["fetch"]["state"] == "fetch_error" and missing.json()["fetch"]["http_status"] == 404
    # the default fetcher refuses loopback and private addresses (SSRF guard)
    with client_for(stored, WebFetcher(max_retries=0)) as client:
        refused = client.get("/near-duplicates", params={"url": f"{web}/story.html"})
    assert refused.status_code == 502
    assert refused.json()["fetch"]["state"] == "refused" and refused.json()["fetch"]["reason"].startswith(
        "ssrf"
    )
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    fetcher = WebFetcher(
        policy=AddressPolicy(allow=[f"127.0.0.1:{closed}"]), max_retries=0, obey_robots=False
    )
    with client_for(stored, fetcher) as client:
        down = client.get("/near-duplicates", params={"url": f"http://127.0.0.1:{closed}/x.html"})
    assert down.status_code == 502 and "connection" in down.json()["fetch"]["reason"]


@pytest.fixture(scope="module")
def reading_service(stored_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One service for the cases of a test whose requests write nothing (uvicorn's stop alone takes a fifth of a
    second, its loop's ticks, per case); its base URL. Each case connects anew: a connection the service closed
    after an answer is not reused for the next case's request."""
    path = tmp_path_factory.mktemp("reading_store") / "store.sqlite3"
    store = TopicStore.open(copy_sqlite_store(stored_template, path))
    with client_for(store) as client:
        yield str(client.base_url)
    store.dispose()


@pytest.mark.parametrize(
    ("request_args", "status", "message"),
    [
        ({"method": "GET", "url": "/near-duplicates"}, 400, "url"),
        ({"method": "GET", "url": "/near-duplicates?url=ftp://x.test/a"}, 400, "http(s)"),
        ({"method": "GET", "url": "/near-duplicates?url=https://x.test/a&max_distance=9"}, 400, "max_distance"),
        ({"method": "GET", "url": "/near-duplicates?url=https://x.test/a&limit=abc"}, 400, "limit must be an integer"),
        ({"method": "GET", "url": "/near-duplicates?url=https://x.test/a&min_similarity=x"}, 400, "min_similarity must be a number"),
        ({"method": "GET", "url": "/near-duplicates?url=https://x.test/a&min_similarity=2"}, 400, "min_similarity must be between"),
        ({"method": "POST", "url": "/near-duplicates", "content": b"{not json", "headers": {"Content-Type": "application/json"}}, 400, "JSON"),
        ({"method": "POST", "url": "/near-duplicates", "json": {"body": "x"}}, 400, "text"),
        ({"method": "POST", "url": "/near-duplicates", "json": {"text": "   "}}, 400, "empty"),
        ({"method": "POST", "url": "/near-duplicates", "json": {"text": "The council approved a plan."}}, 422, "the text has 5 word(s); a lookup needs at least 15"),
        ({"method": "POST", "url": "/near-duplicates", "json": {"text": "word " * 20_001}}, 422, "the text has more than 20,000 words; a lookup compares at most 20,000"),
        ({"method": "POST", "url": "/near-duplicates?min_containment=1.5", "json": {"text": "x"}}, 400, "min_containment must be between"),
        ({"method": "POST", "url": "/near-duplicates", "content": b"x", "headers": {"Content-Type": "image/png"}}, 415, "text/plain"),
        ({"method": "POST", "url": "/near-duplicates", "content": b"\xff\xfe\xfa", "headers": {"Content-Type": "text/plain"}}, 400, "UTF-8"),
        ({"method": "POST", "url": "/near-duplicates", "content": b"a" * (MAX_BODY_BYTES + 1), "headers": {"Content-Type": "text/plain"}}, 413, "bytes"),
    ],
)  # fmt: skip
def test_bad_input_gets_a_4xx_with_a_message(
    reading_service: str, request_args: dict, status: int, message: str
) -> None:
    with httpx.Client(base_url=reading_service, timeout=60, verify=False) as client:
        response = client.request(**request_args)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_bearer_token_is_required_when_configured(stored: TopicStore) -> None:
    with client_for(stored, token="s3cret") as client:
        assert client.get("/health").status_code == 401
        assert client.get("/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert (
            client.get("/health", headers={"Authorization": "Bearer s3cret"}).json()["stored_fingerprints"]
            == 3
        )


def test_off_loopback_the_service_needs_a_token_from_the_environment() -> None:
    assert service_token("127.0.0.1", {}) is None
    with pytest.raises(SystemExit, match=settings.SERVICE_TOKEN.name):
        service_token("0.0.0.0", {})
    assert service_token("0.0.0.0", {settings.SERVICE_TOKEN.name: "abc"}) == "abc"


def test_new_stories_are_fingerprinted_and_found_after_a_refresh(stored: TopicStore) -> None:
    catalog = FingerprintCatalog(stored)
    assert catalog.refresh() == 3
    assert catalog.refresh() == 0  # nothing new: nothing reloaded
    stored.add_stories(
        [
            NewStory(
                "https://tribune.test/2026/02/06/carbon", "Carbon plan passes", ARTICLE + " Updated.", when(6)
            )
        ],
        "spider",
    )
    _, before = catalog.lookup(ARTICLE)
    assert "https://tribune.test/2026/02/06/carbon" not in {m.url for m in before}
    assert catalog.refresh() == 1
    _, after = catalog.lookup(ARTICLE)
    assert "https://tribune.test/2026/02/06/carbon" in {m.url for m in after}


def fresh_similarity(query: str, stored_text: str) -> float:
    """The shingle similarity computed from scratch (Python sets), as the service computed it before."""
    return jaccard(shingle_set(query), shingle_set(stored_text))


def test_cached_shingles_never_outlive_the_text_they_came_from(stored: TopicStore) -> None:
    catalog = FingerprintCatalog(stored)
    catalog.refresh()
    copy_id = catalog.story_id_for_url("https://gazette.test/news/carbon-plan-copy")
    assert copy_id is not None
    _, first = catalog.lookup(ARTICLE)
    by_url = {m.url: m for m in first}
    assert by_url["https://gazette.test/news/carbon-plan-copy"].shingle_similarity == fresh_similarity(
        ARTICLE, COPY
    )
    assert catalog.lookup(ARTICLE)[1] == first and catalog.shingle_cache.hits >= 2  # served from the cache

    # The copy's text is rewritten in the store (its stored fingerprint stays): the cached shingles are
    # of the old text and must not be used.
    rewritten = COPY + " Readers wrote in about the heat pumps, the solar panels and the insulation."
    with stored.engine.begin() as conn:
        conn.execute(update(s.stories).where(s.stories.c.stories_id == copy_id).values(text=rewritten))
    _, second = catalog.lookup(ARTICLE)
    similarity = {m.url: m.shingle_similarity for m in second}["https://gazette.test/news/carbon-plan-copy"]
    assert similarity == fresh_similarity(ARTICLE, rewritten) != fresh_similarity(ARTICLE, COPY)

    # A story that lands later is shingled from its own text once refreshed.
    late = ARTICLE.replace("forty percent", "half") + " Updated at noon."
    stored.add_stories(
        [NewStory("https://tribune.test/carbon-late", "Carbon plan, late", late, when(7))], "spider"
    )
    catalog.refresh()
    _, third = catalog.lookup(ARTICLE)
    assert {m.url: m.shingle_similarity for m in third}["https://tribune.test/carbon-late"] == (
        fresh_similarity(ARTICLE, late)
    )


def test_a_small_shingle_cache_stays_within_its_bound_and_answers_the_same(stored: TopicStore) -> None:
    uncached = FingerprintCatalog(stored, shingle_cache_bytes=0)
    small = FingerprintCatalog(
        stored, shingle_cache_bytes=1500
    )  # room for one of these stories (~0.9-1.2 KB)
    answers = []
    for catalog in (uncached, small):
        catalog.refresh()
        answers.append([catalog.lookup(text) for text in (ARTICLE, COPY, OTHER, ARTICLE)])
    assert answers[0] == answers[1]
    assert len(uncached.shingle_cache) == 0
    assert 0 < small.shingle_cache.bytes <= 1500 and len(small.shingle_cache) == 1
    with pytest.raises(ValueError, match="max_bytes"):
        FingerprintCatalog(stored, shingle_cache_bytes=-1)


# ---------------------------------------------------------------------------------------------------
# Slow URL lookups: the service degrades, never wedges

STORY_PAGE = (
    "<html><head><title>Carbon plan | Valley Herald</title></head><body><article>"
    + "".join(f"<p>{sentence}.</p>" for sentence in COPY.split(". "))
    + "</article></body></html>"
).encode()


class _QuietHandler(BaseHTTPRequestHandler):
    """A test site's request handler: answers with ``_answer``, logs nothing."""

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a fetch that was given up closed its connection: nothing to report


class HeldSite:
    """A slow web site on loopback: robots.txt answers 404 at once (with ``hold_robots``, it is held as the pages
    are), every page request is held until ``release()`` and then answered with a copy of ARTICLE. ``pages``
    lists the page paths asked for, in order, ``robots`` counts the robots.txt requests."""

    def __init__(self, hold_robots: bool = False) -> None:
        self.released = threading.Event()
        self.pages: list[str] = []
        self.robots = 0
        site = self

        class Handler(_QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/robots.txt":
                    site.robots += 1
                    if hold_robots:
                        site.released.wait()
                    self._answer(404, b"")
                    return
                site.pages.append(self.path)
                site.released.wait()
                self._answer(200, STORY_PAGE)

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs=SITE_POLL, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        """The URL of ``path``: on the site's own address, or on a host name that a fetcher from ``fetcher``
        sends to the site (``site3.test``: each name is a site of its own for the politeness intervals)."""
        return f"http://{host}:{self.port}{path}" if host == "127.0.0.1" else f"http://{host}{path}"

    def fetcher(self, interval: float) -> WebFetcher:
        return WebFetcher(
            policy=AddressPolicy(allow=[f"127.0.0.1:{self.port}"]),
            host_overrides={"*.test": f"127.0.0.1:{self.port}"},
            interval_overrides={"*": interval},
            max_retries=0,
        )

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def held_site() -> Iterator[HeldSite]:
    site = HeldSite()
    yield site
    site.close()


class DripSite:
    """A loopback site whose page downloads never end: robots.txt answers 404 at once; ``/drip/…`` sends its
    headers, then 16 bytes of body every 0.05 s, for ever; ``/hold/…`` reads the request and answers nothing;
    ``/story.html`` is a copy of ARTICLE. ``under_way`` is set once a /drip page's first body bytes are out
    (or a /hold request is read), ``closed`` once the client has closed such a page's connection."""

    def __init__(self) -> None:
        self.under_way = threading.Event()
        self.closed = threading.Event()
        self.stopping = threading.Event()
        site = self

        class Handler(_QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/robots.txt":
                    self._answer(404, b"")
                elif self.path == "/story.html":
                    self._answer(200, STORY_PAGE)
                elif self.path.startswith("/drip/"):
                    self._drip()
                else:
                    self._hold()

            def _drip(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                piece = b"<p>a drop</p>\n"
                try:
                    while not site.stopping.is_set():
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                        site.under_way.set()
                        site.stopping.wait(0.05)
                except OSError:
                    site.closed.set()  # the client hung up
                self.close_connection = True

            def _hold(self) -> None:
                site.under_way.set()
                self.connection.settimeout(0.1)
                while not site.stopping.is_set():
                    try:
                        if not self.connection.recv(1024):
                            site.closed.set()  # the client hung up
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        site.closed.set()
                        break
                self.close_connection = True

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs=SITE_POLL, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def fetcher(self) -> WebFetcher:
        """Limits far beyond the tests' safety nets: only a cancel can end a download in time."""
        return WebFetcher(
            policy=AddressPolicy(allow=[f"127.0.0.1:{self.port}"]),
            interval_overrides={"*": 0.0},
            max_retries=0,
            connect_timeout=600.0,
            read_timeout=600.0,
            total_timeout=600.0,
        )

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def drip_site() -> Iterator[DripSite]:
    site = DripSite()
    yield site
    site.close()


class RawLookup:
    """``GET /near-duplicates?url=…`` on a connection of its own, left open until the client ``leave``s (closes
    it without reading) or reads the ``answer``."""

    def __init__(self, port: int, url: str) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port))
        self.socket.sendall(
            f"GET /near-duplicates?{urlencode({'url': url})} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Connection: close\r\n\r\n".encode()
        )

    def leave(self) -> None:
        self.socket.close()

    def answer(self) -> tuple[int, str]:
        """(HTTP status, body) once the service answers (a generous safety timeout, not a bound)."""
        self.socket.settimeout(60)
        received = b""
        while chunk := self.socket.recv(65536):
            received += chunk
        self.socket.close()
        head, _, body = received.partition(b"\r\n\r\n")
        return int(head.split()[1]), body.decode()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds (progress; the timeout is a safety net for a hung service)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        threading.Event().wait(0.02)


def url_lookups(client: httpx.Client) -> dict[str, int]:
    counts = client.get("/health").json()["url_lookups"]
    return {"queued": counts["queued"], "running": counts["running"]}


def test_lookups_whose_clients_leave_are_dropped_not_fetched_later(
    stored: TopicStore, held_site: HeldSite
) -> None:
    with client_for(stored, held_site.fetcher(interval=0)) as client:
        port = client.base_url.port
        first = RawLookup(port, held_site.url("/story/1.html"))
        wait_until(lambda: held_site.pages == ["/story/1.html"], "the first lookup's page request")
        # Two more lookups of the same site wait behind it (one lookup per site at a time); their clients leave.
        leaving = [RawLookup(port, held_site.url(f"/story/{n}.html")) for n in (2, 3)]
        wait_until(lambda: url_lookups(client) == {"queued": 2, "running": 1}, "two queued lookups")
        for lookup in leaving:
            lookup.leave()
        wait_until(
            lambda: url_lookups(client) == {"queued": 0, "running": 1}, "the abandoned lookups dropped"
        )
        held_site.release()
        assert first.answer()[0] == 200
        later = client.get("/near-duplicates", params={"url": held_site.url("/story/4.html")})
        assert later.status_code == 200, later.text
    # The abandoned lookups were never fetched: not before the first one was answered, nor after it.
    assert held_site.pages == ["/story/1.html", "/story/4.html"]


def test_a_lookup_waiting_for_its_sites_politeness_slot_ends_when_its_client_leaves(
    stored: TopicStore, held_site: HeldSite
) -> None:
    # robots.txt takes the site's first slot; the page's slot is 600 s later (far beyond the safety timeout).
    with client_for(stored, held_site.fetcher(interval=600)) as client:
        waiting = RawLookup(client.base_url.port, held_site.url("/story/1.html"))
        wait_until(lambda: held_site.robots == 1, "the lookup's robots.txt request")
        assert url_lookups(client) == {"queued": 0, "running": 1}
        waiting.leave()
        wait_until(lambda: url_lookups(client) == {"queued": 0, "running": 0}, "the abandoned lookup to end")
    assert held_site.pages == []


@pytest.mark.parametrize("download", ["drip", "hold"])
def test_a_lookup_whose_client_leaves_mid_download_closes_it_and_frees_its_worker(
    stored: TopicStore, drip_site: DripSite, download: str
) -> None:
    """A page whose body drips in for ever (or whose headers never come): once the client leaves, the download
    is cut (the site sees its connection closed) and the one worker is free for the next lookup, long before
    the fetcher's own limits would end it."""
    app = create_app(FingerprintCatalog(stored), drip_site.fetcher(), refresh_seconds=0, url_workers=1)
    with _Running(app) as client:
        leaving = RawLookup(client.base_url.port, drip_site.url(f"/{download}/story.html"))
        wait_until(drip_site.under_way.is_set, "the page's download to be under way")
        assert url_lookups(client) == {"queued": 0, "running": 1}
        leaving.leave()
        wait_until(drip_site.closed.is_set, "the site to see the abandoned download's connection closed")
        wait_until(lambda: url_lookups(client) == {"queued": 0, "running": 0}, "the worker to be free")
        after = client.get("/near-duplicates", params={"url": drip_site.url("/story.html")})
        assert after.status_code == 200, after.text
        assert after.json()["query"]["source"] == "fetched"


def test_a_full_url_queue_answers_503_with_retry_after(stored: TopicStore, held_site: HeldSite) -> None:
    app = create_app(
        FingerprintCatalog(stored),
        held_site.fetcher(interval=0),
        refresh_seconds=0,
        url_workers=1,
        max_pending_urls=2,
    )
    with _Running(app) as client:
        port = client.base_url.port
        pending = [RawLookup(port, held_site.url(f"/story/{n}.html", host=f"site{n}.test")) for n in (1, 2)]
        wait_until(lambda: url_lookups(client) == {"queued": 1, "running": 1}, "two pending lookups")
        full = client.get(
            "/near-duplicates", params={"url": held_site.url("/story/3.html", host="site3.test")}
        )
        assert full.status_code == 503
        assert int(full.headers["Retry-After"]) > 0
        assert "2 URL lookups are already pending" in full.json()["error"]
        assert "--max-pending-urls" in full.json()["error"]
        held_site.release()
        assert [lookup.answer()[0] for lookup in pending] == [200, 200]
        again = client.get(
            "/near-duplicates", params={"url": held_site.url("/story/3.html", host="site3.test")}
        )
        assert again.status_code == 200, again.text
    # the refused lookup was not queued: it ran only when asked again
    assert sorted(held_site.pages[:2]) == ["/story/1.html", "/story/2.html"]
    assert held_site.pages[2:] == ["/story/3.html"]


def test_texts_stored_urls_and_refusals_are_answered_while_many_url_lookups_wait(
    stored: TopicStore, held_site: HeldSite
) -> None:
    # 45 URL lookups of 5 slow sites: more than the 40 threads that answered every lookup, texts included.
    with client_for(stored, held_site.fetcher(interval=0)) as client:
        port = client.base_url.port
        waiting = [
            RawLookup(port, held_site.url(f"/story/{n}.html", host=f"site{n % 5}.test")) for n in range(45)
        ]
        wait_until(lambda: url_lookups(client) == {"queued": 40, "running": 5}, "45 pending lookups")
        text = client.post("/near-duplicates", json={"text": ARTICLE})
        assert text.status_code == 200 and len(text.json()["matches"]) == 2
        known = client.get("/near-duplicates", params={"url": "https://herald.test/2026/02/03/carbon-plan"})
        assert known.status_code == 200 and known.json()["query"]["source"] == "store"
        refused = client.get("/near-duplicates", params={"url": "http://10.20.30.40/story.html"})
        assert refused.status_code == 502
        assert refused.json()["fetch"]["state"] == "refused"
        assert refused.json()["fetch"]["reason"].startswith("ssrf")
        # ... all answered while every URL lookup still waited (one page request per site held).
        assert url_lookups(client) == {"queued": 40, "running": 5} and len(held_site.pages) == 5
        held_site.release()
        assert {lookup.answer()[0] for lookup in waiting} == {200}


@pytest.fixture
def held_robots_site() -> Iterator[HeldSite]:
    site = HeldSite(hold_robots=True)
    yield site
    site.close()


@pytest.mark.deployment
def test_sigterm_stops_the_service_with_url_lookups_pending(
    tmp_path: Path, stored: TopicStore, held_robots_site: HeldSite
) -> None:
    held_site = held_robots_site
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        service = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "topicmap"),
                "serve",
                "--port",
                "0",
                "--database-url",
                store_url(tmp_path),
                "--refresh-seconds",
                "0",
                "--allow-address",
                f"127.0.0.1:{held_site.port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        listening = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")
        wait_until(
            lambda: listening.search(log_path.read_bytes()) is not None or service.poll() is not None,
            "the service to listen",
        )
        found = listening.search(log_path.read_bytes())
        assert found is not None, log_path.read_text()
        port = int(found.group(1))
        # Lookups of one slow site: one has a request open there, the rest queue. The open request is its first,
        # robots.txt: a page would wait a politeness interval after it (10 s, which the service has no setting for).
        pending = [RawLookup(port, held_site.url(f"/story/{n}.html")) for n in range(20)]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            wait_until(lambda: url_lookups(client) == {"queued": 19, "running": 1}, "20 pending lookups")
        wait_until(lambda: held_site.robots == 1, "the running lookup's fetch to reach the site")
        assert service.poll() is None, f"the service ended before SIGTERM:\n{log_path.read_text()}"
        service.send_signal(signal.SIGTERM)
        # the site holds its one request until released, which it never is: a service that waited for its
        # lookups would never end (the timeout only keeps a broken service from hanging the suite)
        returncode = service.wait(timeout=300)
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    assert not held_site.released.is_set() and held_site.robots == 1 and held_site.pages == [], (
        held_site.robots,
        held_site.pages,
    )  # queued: never sent
    # uvicorn shuts down, then ends with the signal it was sent
    assert returncode == -signal.SIGTERM, f"exit code {returncode}:\n{log_path.read_text()}"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port)).close()
    answers = [lookup.answer() for lookup in pending]
    assert {status for status, _ in answers} == {503}
    assert all("shutting down" in body for _, body in answers)


# ---------------------------------------------------------------------------------------------------
# Bounds on clients: connections, the read timeout, the body budget, JSON depth


class RawClient:
    """A connection of its own to the service, sending what the test says when it says it: a request cut short
    stays open until the service answers or closes it."""

    def __init__(self, port: int, head: str = "", body: bytes = b"") -> None:
        self.socket = socket.create_connection(("127.0.0.1", port))
        self.socket.settimeout(60)  # a safety net for a hung service, not a bound
        if head or body:
            self.send(head.encode() + body)

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def answer(self) -> tuple[int, dict[str, str], str]:
        """(status, headers, body) of the service's answer, read until it closes the connection."""
        received = b""
        with self.socket:
            while chunk := self.socket.recv(65536):
                received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode().split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in header_lines)
        }
        return int(status_line.split()[1]), headers, body.decode()

    def leave(self) -> None:
        self.socket.close()


def post_head(length: int | None = None, content_type: str = "text/plain") -> str:
    """The head of a POST /near-duplicates, of a declared length or chunked; its connection closes once answered."""
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        "POST /near-duplicates HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Content-Type: {content_type}\r\n{framing}\r\n\r\n"
    )


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def clients(client: httpx.Client) -> dict:
    return client.get("/health").json()["clients"]


def bounded(store: TopicStore, **limits: float) -> _Running:
    return _Running(create_app(FingerprintCatalog(store), refresh_seconds=0, limits=ClientLimits(**limits)))


@pytest.mark.parametrize(
    ("what", "sent"),
    [
        ("headers", "POST /near-duplicates HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/pl"),
        ("body", post_head(length=5000) + "The regional council approved"),
        ("chunked body", post_head() + "1d\r\nThe regional council approved\r\n"),
    ],
)
def test_a_request_slower_than_the_read_timeout_is_cut_off_with_408(
    stored: TopicStore, what: str, sent: str
) -> None:
    with bounded(stored, read_timeout=1.0) as client:
        slow = RawClient(client.base_url.port, sent)  # ... and nothing more: a slow loris, a stalled upload
        status, headers, body = slow.answer()  # answered, then the connection closed
        assert status == 408, body
        assert headers["connection"] == "close"
        assert "within 1 s" in body and settings.SERVICE_READ_TIMEOUT.name in body
        counts = clients(client)
        assert counts["refused"]["read_timeout"] == 1
        # the stalled body's share of the budget is back, and its connection gone
        wait_until(lambda: clients(client)["body_bytes_held"] == 0, "the stalled body's bytes given back")
        wait_until(lambda: clients(client)["connections"] == 1, "only the test's own connection left")
        # a request that arrives whole in time is answered as ever
        assert client.post("/near-duplicates", json={"text": ARTICLE}).status_code == 200


def test_an_idle_connection_is_closed_at_the_read_timeout_without_an_answer(stored: TopicStore) -> None:
    with bounded(stored, read_timeout=1.0) as client:
        idle = RawClient(client.base_url.port)
        assert idle.socket.recv(1) == b""  # closed, nothing said: no request was begun
        assert clients(client)["refused"]["read_timeout"] == 0


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_json_nested_too_deep_is_refused_400_naming_the_limit(stored: TopicStore) -> None:
    with client_for(stored) as client:
        deepest = client.post(
            "/near-duplicates", content=b"[" * 300_000, headers={"Content-Type": "application/json"}
        )
        assert deepest.status_code == 400
        assert f"nested more than {MAX_JSON_DEPTH} levels deep" in deepest.json()["error"]
        assert "MAX_JSON_DEPTH" in deepest.json()["error"]
        # the limit exactly: the object itself is one level, its "extra" field the rest
        at_limit = client.post(
            "/near-duplicates", json={"text": ARTICLE, "extra": nested(MAX_JSON_DEPTH - 1)}
        )
        assert at_limit.status_code == 200, at_limit.text
        over = client.post("/near-duplicates", json={"text": ARTICLE, "extra": nested(MAX_JSON_DEPTH)})
        assert over.status_code == 400 and "MAX_JSON_DEPTH" in over.json()["error"]


def test_a_body_over_the_budget_is_refused_503_with_retry_after(stored: TopicStore) -> None:
    # 2 MiB of bodies at once; large ones (over 64 KiB, or chunked) 1.5 MiB of it.
    with bounded(stored, body_budget_bytes=2 * MIB) as client:
        port = client.base_url.port
        long_text = ((ARTICLE + " ") * 2000).encode()[:MIB]
        first = RawClient(port, post_head(length=MIB), long_text[:1000])
        wait_until(lambda: clients(client)["body_bytes_held"] == MIB, "the first body's declared length held")

        # Does not fit: refused as its headers arrive. Its client sends the whole body all the same, and reads
        # the answer, not a reset connection: the service reads and drops the rest before it closes.
        second = RawClient(port, post_head(length=MIB), long_text)
        status, headers, body = second.answer()
        assert status == 503 and int(headers["retry-after"]) > 0
        assert "at most 2 MiB" in body and settings.SERVICE_BODY_BUDGET_MB.name in body

        chunked = RawClient(port, post_head(), chunk(long_text[:300_000]) + chunk(long_text[300_000:600_000]))
        status, headers, body = chunked.answer()  # refused once its share would pass the large bodies' room
        assert status == 503 and int(headers["retry-after"]) > 0
        assert clients(client)["refused"]["body_budget"] == 2

        # a lookup of an article still fits: a quarter of the budget is kept for small bodies
        small = client.post("/near-duplicates", json={"text": ARTICLE})
        assert small.status_code == 200 and len(small.json()["matches"]) == 2

        first.send(long_text[1000:])
        status, _, body = first.answer()
        assert status == 422 and "more than 20,000 words" in body  # read whole, then looked at
        wait_until(lambda: clients(client)["body_bytes_held"] == 0, "the first body's bytes given back")
        again = RawClient(port, post_head(length=MIB), long_text)
        assert again.answer()[0] == 422  # room again: read and answered


def test_a_connection_beyond_the_limit_is_refused_503_with_retry_after(stored: TopicStore) -> None:
    with bounded(stored, max_connections=3) as client:  # the test's own connection is one of the 3
        port = client.base_url.port
        held = [RawClient(port, "GET /health HTTP/1.1\r\n") for _ in range(2)]
        wait_until(lambda: clients(client)["connections"] == 3, "3 connections open")
        status, headers, body = RawClient(port).answer()
        assert status == 503 and int(headers["retry-after"]) > 0
        assert "3 connections open" in body and settings.SERVICE_MAX_CONNECTIONS.name in body
        assert clients(client)["refused"]["connections"] == 1
        held[0].leave()
        wait_until(lambda: clients(client)["connections"] == 2, "a connection closed")
        status, _, body = RawClient(
            port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ).answer()
        assert status == 200, body


def test_a_small_lookup_is_answered_while_slow_uploaders_hold_the_budget(stored: TopicStore) -> None:
    """30 uploaders each send 64 KiB of a chunked body, then stall: 24 fill the large bodies' 1.5 MiB, 6 are
    refused; lookups are answered meanwhile, and the stalled bodies' bytes come back when they leave."""
    piece = (b"word " * 13_108)[: 64 * 1024]
    with bounded(stored, body_budget_bytes=2 * MIB, max_connections=100) as client:
        port = client.base_url.port
        uploaders = []
        for _ in range(30):  # one at a time, each taken in whole or refused before the next
            before = clients(client)
            uploaders.append(RawClient(port, post_head(), chunk(piece)))
            wait_until(
                lambda before=before: (
                    (now := clients(client))["body_bytes_held"] == before["body_bytes_held"] + len(piece)
                    or now["refused"]["body_budget"] == before["refused"]["body_budget"] + 1
                ),
                "the upload held or refused",
            )
        counts = clients(client)
        assert counts["refused"]["body_budget"] == 6 and counts["body_bytes_held"] == 24 * len(piece)
        wait_until(
            lambda: clients(client)["connections"] == 1 + 24, "the refused uploaders' connections closed"
        )
        text = client.post("/near-duplicates", json={"text": ARTICLE})
        assert text.status_code == 200 and len(text.json()["matches"]) == 2
        stored_url = client.get(
            "/near-duplicates", params={"url": "https://herald.test/2026/02/03/carbon-plan"}
        )
        assert stored_url.status_code == 200 and stored_url.json()["query"]["source"] == "store"
        for uploader in uploaders:
            uploader.leave()
        wait_until(lambda: clients(client)["body_bytes_held"] == 0, "the stalled bodies' bytes given back")
        wait_until(lambda: clients(client)["connections"] == 1, "the uploaders' connections gone")


def test_client_limits_come_from_the_settings_and_wrong_ones_are_named() -> None:
    assert ClientLimits.from_settings({}) == ClientLimits()
    limits = ClientLimits.from_settings(
        {
            settings.SERVICE_MAX_CONNECTIONS.name: "50",
            settings.SERVICE_BODY_BUDGET_MB.name: "8",
            settings.SERVICE_READ_TIMEOUT.name: "2.5",
        }
    )
    assert limits == ClientLimits(max_connections=50, body_budget_bytes=8 * MIB, read_timeout=2.5)
    for setting, value in (
        (settings.SERVICE_MAX_CONNECTIONS, "0"),
        (settings.SERVICE_MAX_CONNECTIONS, "many"),
        (settings.SERVICE_BODY_BUDGET_MB, "1"),
        (settings.SERVICE_READ_TIMEOUT, "-1"),
        (settings.SERVICE_READ_TIMEOUT, "soon"),
    ):
        with pytest.raises(ValueError, match=setting.name):
            ClientLimits.from_settings({setting.name: value})
