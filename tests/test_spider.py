"""The spider on a small hand-made web (a dict-backed page source): states, iterations, links, bounds."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from topicmap.spider.iteration import Spider, SpiderError
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore
from topicmap.topics.declarations import TopicConfig
from topicmap.web.fetch import FetchOutcome


def page(title: str, body: str, links: Iterable[str] = (), day: str = "2026-02-10") -> bytes:
    anchors = " ".join(f'<a href="{u}">related story</a>' for u in links)
    return (
        f"<html><head><title>{title}</title>"
        f'<meta property="article:published_time" content="{day}T10:00:00Z"></head>'
        f"<body><nav><a href='/tag/news'>News</a></nav><article><h1>{title}</h1>"
        f"<p>{body} This paragraph is long enough to be the article body of a real news page.</p>"
        f"<p>More reporting follows here with several sentences. {anchors}</p></article>"
        f"<footer>Copyright</footer></body></html>"
    ).encode()


class DictSource:
    """Pages by URL; redirects as (status, location); anything else is a 404."""

    def __init__(self, pages: dict[str, bytes | tuple[int, str]]):
        self.pages = pages
        self.fetched: list[str] = []

    def fetch_many(self, urls: Iterable[str]) -> Iterator[FetchOutcome]:
        for url in urls:
            self.fetched.append(url)
            final = url
            target = self.pages.get(url)
            while isinstance(target, tuple):
                final = target[1]
                target = self.pages.get(final)
            if url.endswith(".pdf"):
                yield FetchOutcome(
                    url=url,
                    final_url=final,
                    status=200,
                    refused_reason="non-html content-type: application/pdf",
                )
            elif target is None:
                yield FetchOutcome(url=url, final_url=final, status=404)
            else:
                yield FetchOutcome(
                    url=url,
                    final_url=final,
                    status=200,
                    content=target,
                    text=target.decode(),
                    charset="utf-8",
                )


SEED_URL = "https://herald.test/2026/02/01/climate-summit"
WEB: dict[str, bytes | tuple[int, str]] = {
    "https://ledger.test/2026/02/03/carbon-tax": page(
        "Carbon tax debate",
        "Lawmakers debate the climate bill.",
        [
            "https://post.test/2026/02/05/emissions",
            "https://post.test/2026/02/06/football",
            "https://ledger.test/missing",
        ],
    ),
    "https://post.test/2026/02/05/emissions": page(
        "Emissions fall",
        "Emissions fell as the climate plan took hold.",
        ["https://deep.test/2026/02/07/climate-3"],
    ),
    "https://post.test/2026/02/06/football": page("Football final", "The match ended two to one."),
    "https://deep.test/2026/02/07/climate-3": page(
        "Climate three hops away",
        "A climate story three links from the seed.",
        ["https://deeper.test/2026/02/08/climate-4"],
    ),
    "https://deeper.test/2026/02/08/climate-4": page("Climate four hops away", "Climate again."),
    "https://short.test/abc": (301, "https://post.test/2026/02/05/emissions"),
}


def make_topic(store: TopicStore, max_iterations: int = 15, max_stories: int = 1000) -> TopicConfig:
    topic = TopicConfig(
        name="climate",
        query="climate OR emission*",
        start_date=date(2026, 1, 1),
        end_date=date(2026, 3, 31),
        max_iterations=max_iterations,
        max_stories=max_stories,
    )
    topics_id = store.upsert_topic(topic)
    seed = store.add_stories(
        [
            NewStory(
                url=SEED_URL,
                title="Climate summit opens",
                text="The climate summit opened today.",
                publish_date=datetime(2026, 2, 1, tzinfo=UTC),
                html=page(
                    "Climate summit opens",
                    "The climate summit opened today.",
                    [
                        "https://ledger.test/2026/02/03/carbon-tax",
                        "https://short.test/abc",
                        "https://www.addtoany.com/share#url=x",
                        "https://herald.test/2026/02/02/own-story",
                        "https://files.test/report.pdf",
                    ],
                ),
            )
        ],
        source="test",
    )
    store.add_seed_urls(
        topics_id, [{"url": SEED_URL, "source": "archive query", "stories_id": seed.stories_ids[0]}]
    )
    return topic


def run_to_end(spider: Spider, limit: int = 20) -> list:
    reports = []
    for _ in range(limit):
        report = spider.run_iteration()
        reports.append(report)
        if report.done:
            break
    return reports


def states(store: TopicStore) -> dict[str, str]:
    f = s.topic_fetch_urls
    with store.engine.connect() as conn:
        return dict(conn.execute(select(f.c.url, f.c.state)).all())


def test_spider_grows_the_topic_iteration_by_iteration(store: TopicStore) -> None:
    topic = make_topic(store)
    source = DictSource(WEB)
    spider = Spider(store, topic, source, log=lambda _: None)
    reports = run_to_end(spider)
    assert [r.iteration for r in reports] == [0, 1, 2, 3]  # climate-4 (iteration 3) links nowhere: done
    final = states(store)
    assert final["https://ledger.test/2026/02/03/carbon-tax"] == "story added"
    assert final["https://post.test/2026/02/06/football"] == "content match failed"
    assert final["https://ledger.test/missing"] == "request failed"
    assert final["https://files.test/report.pdf"] == "skipped"
    assert final["https://deeper.test/2026/02/08/climate-4"] == "story added"
    # the shortener redirects to a story found in the same iteration or matched afterwards
    assert final["https://short.test/abc"] in ("story added", "story match")
    # share buttons never become links
    assert not any("addtoany" in url for url in final)
    ts = s.topic_stories
    with store.engine.connect() as conn:
        iterations = dict(
            conn.execute(
                select(s.stories.c.url, ts.c.iteration).join(
                    s.stories, s.stories.c.stories_id == ts.c.stories_id
                )
            ).all()
        )
    assert iterations[SEED_URL] == 0
    assert iterations["https://ledger.test/2026/02/03/carbon-tax"] == 1
    assert (
        iterations["https://post.test/2026/02/05/emissions"] == 1
    )  # via the shortener or directly, the minimum wins
    assert iterations["https://deep.test/2026/02/07/climate-3"] == 2
    assert iterations["https://deeper.test/2026/02/08/climate-4"] == 3
    # every page the spider made a story of is kept as it was served (link mining again, WARC export)
    with store.engine.connect() as conn:
        ids = dict(conn.execute(select(s.stories.c.url, s.stories.c.stories_id)).all())
        for url in ("https://ledger.test/2026/02/03/carbon-tax", "https://deeper.test/2026/02/08/climate-4"):
            assert store.story_html(conn, ids[url]) == WEB[url]
    # links point at the stories they lead to
    tl = s.topic_links
    with store.engine.connect() as conn:
        resolved = conn.execute(select(tl.c.url).where(tl.c.ref_stories_id.is_not(None))).scalars().all()
    assert "https://ledger.test/2026/02/03/carbon-tax" in resolved


def test_rerunning_a_finished_topic_changes_nothing_and_fetches_nothing(store: TopicStore) -> None:
    topic = make_topic(store)
    run_to_end(Spider(store, topic, DictSource(WEB), log=lambda _: None))
    counts = {
        t.name: store.table_count(t) for t in (s.topic_fetch_urls, s.topic_stories, s.topic_links, s.stories)
    }
    source = DictSource(WEB)
    report = Spider(store, topic, source, log=lambda _: None).run_iteration()
    assert report.done and source.fetched == []
    assert counts == {
        t.name: store.table_count(t) for t in (s.topic_fetch_urls, s.topic_stories, s.topic_links, s.stories)
    }


def test_max_iterations_is_really_applied(store: TopicStore) -> None:
    topic = make_topic(store, max_iterations=2)
    reports = run_to_end(Spider(store, topic, DictSource(WEB), log=lambda _: None))
    assert max(r.iteration for r in reports) == 2
    final = states(store)
    assert "https://deep.test/2026/02/07/climate-3" in final  # found at iteration 2 ...
    assert "https://deeper.test/2026/02/08/climate-4" not in final  # ... but its links are never queued
    tl = s.topic_links
    with store.engine.connect() as conn:
        recorded = conn.execute(select(tl.c.url)).scalars().all()
    assert "https://deeper.test/2026/02/08/climate-4" in recorded  # the link itself is kept


def test_max_stories_stops_the_topic_with_a_clear_error(store: TopicStore) -> None:
    topic = make_topic(store, max_stories=1)
    spider = Spider(store, topic, DictSource(WEB), log=lambda _: None)
    spider.run_iteration()
    spider.run_iteration()
    with pytest.raises(SpiderError, match="more than max_stories=1"):
        spider.run_iteration()


def test_error_rate_above_two_percent_fails_with_top_messages(store: TopicStore) -> None:
    topic = make_topic(store)

    class Broken(DictSource):
        def fetch_many(self, urls):  # noqa: ANN001, ANN202
            for outcome in super().fetch_many(urls):
                outcome.content = object()  # extraction of a non-page raises inside the spider
                yield outcome

    spider = Spider(store, topic, Broken(WEB), log=lambda _: None)
    spider.run_iteration()
    with pytest.raises(SpiderError, match=r"error rate .* is above 2%: \d+× "):
        spider.run_iteration()


def _seed_linking_to(store: TopicStore, links: list[str], max_iterations: int = 1) -> TopicConfig:
    topic = TopicConfig(
        name="copies",
        query="climate",
        start_date=date(2026, 1, 1),
        end_date=date(2026, 3, 31),
        max_iterations=max_iterations,
    )
    topics_id = store.upsert_topic(topic)
    seed = store.add_stories(
        [
            NewStory(
                url="https://hub.test/2026/02/01/climate-roundup",
                title="Climate roundup",
                text="Links to the week's climate reporting.",
                publish_date=datetime(2026, 2, 1, tzinfo=UTC),
                html=page("Climate roundup", "Links to the week's climate reporting.", links),
            )
        ],
        source="test",
    )
    store.add_seed_urls(
        topics_id,
        [
            {
                "url": "https://hub.test/2026/02/01/climate-roundup",
                "source": "archive query",
                "stories_id": seed.stories_ids[0],
            }
        ],
    )
    return topic


def test_copies_written_in_one_batch_keep_the_first_as_the_story_that_owns_the_sentences(
    store: TopicStore,
) -> None:
    # Relevance by new sentences (Media Cloud's story relevance test): a medium's copy of a story it already ran that week adds
    # nothing new. The copies arrive in one write batch; the first fetched must own the sentences, as if
    # written one by one, and a copy on another medium is still new there.
    body = "Officials said the climate plan would cut coal use by half over ten years."
    copies = [
        "https://copies.test/2026/02/03/morning-report",
        "https://copies.test/2026/02/03/evening-report",
        "https://elsewhere.test/2026/02/03/report",
    ]
    web = {url: page("Morning report", body) for url in copies}
    topic = _seed_linking_to(store, copies)
    spider = Spider(store, topic, DictSource(web), log=lambda _: None)
    spider.run_iteration()  # iteration 0: the seed and its links
    report = spider.run_iteration()
    assert report.iteration == 1
    assert states(store)[copies[0]] == "story added"
    assert states(store)[copies[1]] == "content match failed"
    assert states(store)[copies[2]] == "story added"
    assert report.stories_added == 2
    f = s.topic_fetch_urls
    with store.engine.connect() as conn:
        message = conn.execute(select(f.c.message).where(f.c.url == copies[1])).scalar_one()
    assert "does not match the query" in message


def test_the_sentence_rule_holds_for_stories_that_joined_by_their_seed_or_their_title(
    store: TopicStore,
) -> None:
    # The seed (an archive story) and a story its title made relevant record their sentences too: a copy in the
    # same medium and calendar week whose title does not match adds no new sentence and stays out, while the
    # same copy a week later is new there.
    body = "Officials said the climate plan would cut coal use by half over ten years."
    links = [
        "https://hub.test/2026/01/30/weekly-digest",  # the seed's own sentence, same medium, same week
        "https://wire.test/2026/01/29/climate-plan-unveiled",  # relevant by its title
        "https://wire.test/2026/01/30/evening-bulletin",  # a copy of it, same medium and week
        "https://wire.test/2026/02/10/evening-bulletin",  # the same copy a week later
    ]
    web = {
        links[0]: page("Weekly digest", "Links to the week's climate reporting.", day="2026-01-30"),
        # the copies are found from the title-matched story, an iteration after it
        links[1]: page("Climate plan unveiled", body, links[2:], day="2026-01-29"),
        links[2]: page("Evening bulletin", body, day="2026-01-30"),
        links[3]: page("Evening bulletin", body, day="2026-02-10"),
    }
    topic = _seed_linking_to(store, links[:2], max_iterations=2)
    spider = Spider(store, topic, DictSource(web), log=lambda _: None)
    run_to_end(spider)
    by_url = states(store)
    assert [by_url[u] for u in links] == [
        "content match failed",
        "story added",
        "content match failed",
        "story added",
    ]


def test_a_url_whose_story_cannot_be_stored_ends_in_error_and_the_rest_of_its_batch_is_kept(
    store: TopicStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    urls = [f"https://site{n}.test/2026/02/03/climate-{n}" for n in range(4)]
    web = {url: page(f"Climate story {n}", "The climate plan was announced.") for n, url in enumerate(urls)}
    topic = _seed_linking_to(store, urls)
    medium_for_url = store.media.medium_for_url

    def failing_for_site2(conn, story_url, name=None, site_name=None):  # noqa: ANN001, ANN202
        if "site2.test" in story_url:
            raise RuntimeError("disk full while creating the medium of site2.test")
        return medium_for_url(conn, story_url, name, site_name)

    monkeypatch.setattr(store.media, "medium_for_url", failing_for_site2)
    spider = Spider(store, topic, DictSource(web), log=lambda _: None, max_error_rate=1.0)
    spider.run_iteration()
    report = spider.run_iteration()
    by_url = states(store)
    assert [by_url[u] for u in urls] == ["story added", "story added", "python error", "story added"]
    assert report.stories_added == 3
    f, ts = s.topic_fetch_urls, s.topic_stories
    with store.engine.connect() as conn:
        message = conn.execute(select(f.c.message).where(f.c.url == urls[2])).scalar_one()
        topic_stories = conn.execute(select(ts.c.stories_id)).scalars().all()
    assert message.startswith("RuntimeError: disk full while creating the medium of site2.test")
    assert len(topic_stories) == len(set(topic_stories)) == 4  # the seed and three stories, once each


def test_urls_longer_than_the_store_holds_are_never_cut(store: TopicStore) -> None:
    """A cut URL is another URL: an over-long link is left out (and said so), a redirect to an over-long URL
    keeps the URL that was asked for, and the store refuses to cut what it is given."""
    long_link = "https://post.test/2026/02/09/climate?" + "q=" + "x" * 1100
    long_target = "https://deep.test/2026/02/07/climate-3?" + "r=" + "y" * 1100
    web = dict(WEB)
    web["https://ledger.test/2026/02/03/carbon-tax"] = page(
        "Carbon tax debate",
        "Lawmakers debate the climate bill.",
        [long_link, "https://post.test/2026/02/05/emissions", "https://redirect.test/to-long"],
    )
    web["https://redirect.test/to-long"] = (301, long_target)
    web[long_target] = page("Climate far away", "A climate story behind a long redirect.")
    topic = make_topic(store, max_iterations=3)
    logged: list[str] = []
    run_to_end(Spider(store, topic, DictSource(web), log=logged.append))

    with store.engine.connect() as conn:
        url_columns = [
            (s.topic_fetch_urls, s.topic_fetch_urls.c.url),
            (s.topic_fetch_urls, s.topic_fetch_urls.c.redirect_url),
            (s.topic_links, s.topic_links.c.url),
            (s.stories, s.stories.c.url),
            (s.story_urls, s.story_urls.c.url),
        ]
        stored = {u for _, column in url_columns for u in conn.execute(select(column)).scalars() if u}
    assert not any(u.startswith((long_link[:200], long_target[:200])) for u in stored), "a cut URL was stored"
    assert any("1 link(s) longer than the store's 1024 characters left out" in line for line in logged)
    found = states(store)
    assert found["https://redirect.test/to-long"] == "story added"  # kept under the URL that was asked for
    assert "https://post.test/2026/02/05/emissions" in found

    with pytest.raises(ValueError, match="seed url is 1139 characters, longer than the store's 1024"):
        store.add_seed_urls(1, [{"url": long_link, "source": "test"}])
    with pytest.raises(ValueError, match="url is .* characters, longer than the store's 1024"):
        store.add_stories([NewStory(url=long_link, title="t", text="x", publish_date=None)], source="test")


def test_the_spiders_sql_is_written_in_its_store_module() -> None:
    # The loop, judging and mining read and write through SpiderStore (the claims build their own statements,
    # one per claim); from SQLAlchemy they take only the types of what the store hands them.
    spider = Path(__file__).resolve().parents[1] / "topicmap" / "spider"
    allowed = {"Connection", "Row"}
    found = {}
    for path in sorted(spider.glob("*.py")):
        if path.name in ("store.py", "claims.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlalchemy":
                names = {alias.name for alias in node.names} - allowed
                if names:
                    found[path.name] = sorted(names)
            elif isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "sqlalchemy" for a in node.names
            ):
                found[path.name] = ["sqlalchemy"]
    assert found == {}
