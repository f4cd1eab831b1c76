"""The near-duplicate lookup service: GET by URL (stored or fetched), POST a text, bad input, the SSRF guard,
the bearer token off loopback, size caps, fingerprints refreshed as stories land, and cached shingles that
never change an answer."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import uvicorn
from sqlalchemy import update

from topicmap.dedup.service import MAX_BODY_BYTES, TOKEN_ENV, FingerprintCatalog, create_app, service_token
from topicmap.dedup.simhash import jaccard, shingle_set
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


@pytest.fixture
def stored(tmp_path) -> Iterator[TopicStore]:
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Running:
    """The service on a loopback port of its own, run by uvicorn in a thread (as `topicmap serve` does)."""

    def __init__(self, app: object) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.client: httpx.Client | None = None

    def __enter__(self) -> httpx.Client:
        self.thread.start()
        while not self.server.started:  # progress, not a deadline: uvicorn sets it once it listens
            if not self.thread.is_alive():
                raise RuntimeError("the service did not start")
            threading.Event().wait(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
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
        ({"method": "POST", "url": "/near-duplicates", "json": {"text": "word " * 20_001}}, 422, "the text has 20,001 words; a lookup compares at most 20,000"),
        ({"method": "POST", "url": "/near-duplicates?min_containment=1.5", "json": {"text": "x"}}, 400, "min_containment must be between"),
        ({"method": "POST", "url": "/near-duplicates", "content": b"x", "headers": {"Content-Type": "image/png"}}, 415, "text/plain"),
        ({"method": "POST", "url": "/near-duplicates", "content": b"\xff\xfe\xfa", "headers": {"Content-Type": "text/plain"}}, 400, "UTF-8"),
        ({"method": "POST", "url": "/near-duplicates", "content": b"a" * (MAX_BODY_BYTES + 1), "headers": {"Content-Type": "text/plain"}}, 413, "bytes"),
    ],
)  # fmt: skip
def test_bad_input_gets_a_4xx_with_a_message(
    stored: TopicStore, request_args: dict, status: int, message: str
) -> None:
    with client_for(stored) as client:
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
    with pytest.raises(SystemExit, match=TOKEN_ENV):
        service_token("0.0.0.0", {})
    assert service_token("0.0.0.0", {TOKEN_ENV: "abc"}) == "abc"


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
