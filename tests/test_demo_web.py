"""The demo news web: deterministic, the planted truth holds, and the loopback server answers by Host."""

from __future__ import annotations

import csv
import difflib
import hashlib
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from datetime import date, datetime

import pyarrow.parquet as pq
import pytest
import requests

from topicmap.demo.server import serve_demo_web
from topicmap.demo.web import DEMO_SUBJECT, DemoWeb, generate_demo_web

SMALL = {"seed": 11, "n_media": 14, "n_stories": 400, "months": 2}
PARAGRAPH = re.compile(r"<p>(.*?)</p>", re.S)
HREF = re.compile(r'href="([^"]+)"')


@pytest.fixture(scope="module")
def web() -> DemoWeb:
    return generate_demo_web()


@pytest.fixture(scope="module")
def small_web() -> DemoWeb:
    return generate_demo_web(**SMALL)


def simple_query(query: str):
    """An independent evaluator for the query shape the demo uses: (t OR "a b" OR w*) [AND NOT x|(x OR y)]."""
    positive, _, negative = query.partition(" AND NOT ")

    def pattern(part: str) -> re.Pattern[str]:
        alternatives = []
        for term in part.strip().removeprefix("(").removesuffix(")").split(" OR "):
            term = term.strip()
            if term.startswith('"'):
                alternatives.append(r"\W+".join(map(re.escape, term.strip('"').split())) + r"\b")
            elif term.endswith("*"):
                alternatives.append(re.escape(term[:-1]))
            else:
                alternatives.append(re.escape(term) + r"\b")
        return re.compile(r"\b(?:" + "|".join(alternatives) + ")", re.IGNORECASE)

    include = pattern(positive)
    exclude = pattern(negative) if negative else None
    return lambda text: bool(include.search(text)) and not (exclude and exclude.search(text))


def article_part(web: DemoWeb, url: str) -> str:
    """The page up to the sidebar/footer: what holds the article's paragraphs."""
    return re.split(r"<aside|<footer", decoded(web, url), maxsplit=1)[0]


def decoded(web: DemoWeb, url: str) -> str:
    page = web.lookup(url)
    assert page is not None and page.status == 200, url
    charset = "windows-1252" if b"charset=windows-1252" in page.body[:400] else "utf-8"
    return page.body.decode(charset)


def article_links(web: DemoWeb, url: str) -> list[str]:
    """Links inside the article's paragraphs (not navigation, sidebar, share bar or footer)."""
    return [
        h.replace("&amp;", "&") for p in PARAGRAPH.findall(article_part(web, url)) for h in HREF.findall(p)
    ]


# --- determinism ------------------------------------------------------------------------------------------


def test_same_seed_gives_identical_web_and_other_seed_differs(small_web: DemoWeb) -> None:
    again = generate_demo_web(**SMALL)
    assert again.digest() == small_web.digest()
    assert list(again.pages) == list(small_web.pages)
    assert all(again.pages[u].body == small_web.pages[u].body for u in small_web.pages)
    assert again.archive_stories == small_web.archive_stories
    assert generate_demo_web(**{**SMALL, "seed": 12}).digest() != small_web.digest()


def test_subprocess_with_other_hash_seed_gives_same_digest(small_web: DemoWeb) -> None:
    code = (
        "from datetime import date\nfrom topicmap.demo.web import generate_demo_web\n"
        f"print(generate_demo_web(**{SMALL!r}).digest())"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == small_web.digest()


# --- size and shape ----------------------------------------------------------------------------------------


def test_counts_media_stories_months(web: DemoWeb) -> None:
    assert len(web.media) == 40
    assert all(m["host"].endswith(".test") and m["url"] == f"http://{m['host']}/" for m in web.media)
    assert len({m["name"] for m in web.media}) == 40
    assert len(web.stories) == 3000
    assert len({s.url for s in web.stories}) == 3000
    months = Counter(s.publish_date.strftime("%Y-%m") for s in web.stories)
    assert sorted(months) == ["2026-01", "2026-02", "2026-03", "2026-04"]
    assert min(months.values()) > 500
    assert web.start == date(2026, 1, 1) and web.end == date(2026, 4, 30)
    assert all(150 <= s.word_count <= 600 for s in web.stories)
    assert set(Counter(s.subject for s in web.stories)) == set(web.subjects)
    archived = sum(s.archived for s in web.stories)
    assert 0.45 * 3000 < archived < 0.65 * 3000
    assert {"og", "itemprop", "time", "jsonld", "dateline", "url", "none"} <= {
        s.date_form for s in web.stories
    }


def test_texts_are_distinct_sentence_prose(web: DemoWeb) -> None:
    originals = [s for s in web.stories if s.kind == "original"]
    rows = {r["url"]: r["text"] for r in web.archive_stories}
    bodies = [rows[s.url] for s in originals if s.url in rows]
    assert len(set(bodies)) == len(bodies)
    leads = Counter(b.split("\n\n")[0] for b in bodies)
    assert leads.most_common(1)[0][1] == 1  # a lead is filled with its story's own cast and numbers
    assert all(b.count("\n\n") >= 2 and b.rstrip().endswith((".", "\u201d")) for b in bodies)


def test_archive_rows_have_every_column(web: DemoWeb) -> None:
    media_names = {m["name"] for m in web.media}
    for row in web.archive_stories:
        assert set(row) == {"url", "title", "text", "publish_date", "medium", "medium_url", "html"}
        assert row["medium"] in media_names
        published = datetime.fromisoformat(row["publish_date"])
        assert published.utcoffset().total_seconds() == 0
        assert row["title"] and row["text"] and row["html"].startswith("<!DOCTYPE html>")
        assert web.lookup(row["url"]) is not None


# --- planted truth -----------------------------------------------------------------------------------------


def test_syndicated_copies_are_near_copies_in_other_media(web: DemoWeb) -> None:
    """Each copy differs from its original by exactly the recorded word swaps and added sentence."""
    groups = web.truth.syndication_groups
    members = sum(1 + len(g["copies"]) for g in groups)
    assert 0.03 * 3000 <= members <= 0.07 * 3000
    stories = {s.url: s for s in web.stories}
    titles_differ = []
    for group in groups:
        assert 1 <= len(group["copies"]) <= 3
        original_words = decoded_text(web, group["original"]).split()
        for copy in group["copies"]:
            assert copy["medium"] != group["medium"]
            assert copy["url"].split("/")[2] in web.hosts and web.lookup(copy["url"]).status == 200
            assert stories[copy["url"]].headline == stories[group["original"]].headline
            titles_differ.append(stories[copy["url"]].title != stories[group["original"]].title)
            copy_words = decoded_text(web, copy["url"]).split()
            matcher = difflib.SequenceMatcher(None, original_words, copy_words, autojunk=False)
            blocks = [op for op in matcher.get_opcodes() if op[0] != "equal"]
            removed = sum(i2 - i1 for _, i1, i2, _, _ in blocks)  # original words swapped out
            put_in = sum(j2 - j1 for _, _, _, j1, j2 in blocks)  # swapped-in words plus the added sentence
            added = len(copy["added_sentence"].split()) if copy["added_sentence"] else 0
            assert removed == copy["substituted_words"] and put_in == removed + added
            assert 1 <= copy["substituted_words"] <= 0.035 * len(original_words) + 1
    assert sum(titles_differ) >= 0.7 * len(titles_differ)  # another medium, another title suffix


def decoded_text(web: DemoWeb, url: str) -> str:
    """The article text of a story page, from its paragraphs (tags stripped)."""
    paragraphs = PARAGRAPH.findall(article_part(web, url))
    return " ".join(re.sub(r"<[^>]+>", "", p) for p in paragraphs)


def test_redirects_and_duplicate_media(web: DemoWeb) -> None:
    assert len(web.truth.redirects) > 100
    for source, target in web.truth.redirects.items():
        page = web.lookup(source)
        assert page.status == 301 and page.headers["Location"] == target
        assert web.lookup(target).status == 200
    names = {m["name"]: m for m in web.media}
    kinds = Counter(d["kind"] for d in web.truth.duplicate_media)
    assert kinds == {"mobile": 3, "renamed": 3, "bare_host": 1}
    for dup in web.truth.duplicate_media:
        assert names[dup["medium"]]["dup_of"] == dup["dup_of"] and names[dup["dup_of"]]["dup_of"] is None
        assert dup["host"] in names[dup["dup_of"]]["aliases"]
        assert dup["host"] in web.hosts
        page = web.lookup(f"http://{dup['host']}/robots.txt")
        if dup["kind"] == "mobile":
            assert page.status == 200
        else:  # every path of a renamed outlet's old host and of a bare host moves to the outlet's host
            assert page.status == 301 and page.headers["Location"].startswith(names[dup["dup_of"]]["url"])
    archived_media = Counter(r["medium"] for r in web.archive_stories)
    assert all(archived_media[d["medium"]] > 0 for d in web.truth.duplicate_media)


def test_duplicate_stories_within_one_medium(web: DemoWeb) -> None:
    by_url = {s.url: s for s in web.stories}
    kinds = Counter(d["kind"] for d in web.truth.duplicate_stories)
    assert kinds["tracking_url"] >= 30 and kinds["retitled"] >= 20 and kinds["archived_twice"] >= 20
    for dup in web.truth.duplicate_stories:
        if dup["kind"] == "tracking_url":
            clean, tracked = dup["urls"]
            assert "utm_source=" in tracked and web.lookup(tracked).body == web.lookup(clean).body
        elif dup["kind"] == "retitled":
            first, second = (by_url[u] for u in dup["urls"])
            assert first.medium == second.medium and first.headline != second.headline
            assert first.publish_date.date() == second.publish_date.date()
            assert decoded_text(web, first.url) in decoded_text(web, second.url)
    archived_urls = Counter(r["url"] for r in web.archive_stories)
    assert max(archived_urls.values()) == 1


def test_dead_binary_and_private_links(web: DemoWeb) -> None:
    assert web.truth.dead_urls and all(web.lookup(u) is None for u in web.truth.dead_urls)
    served = [web.truth.redirects.get(u, u) for u in web.truth.binary_urls]  # old-host links move on
    types = Counter(web.lookup(u).content_type for u in served)
    assert set(types) == {"application/pdf", "image/jpeg"}
    private = [web.truth.redirects.get(u, u) for u in web.truth.robots_disallowed]
    assert all("/private/" in u and web.lookup(u).status == 200 for u in private)
    assert web.lookup("http://dailyherald.test/robots.txt").body == b"User-agent: *\nDisallow: /private/\n"


def test_unarchived_stories_are_reached_hop_by_hop(web: DemoWeb) -> None:
    """Every story at hop depth d is linked from a same-subject story at depth d-1, and only deeper ones."""
    subject_stories = [s for s in web.stories if s.subject == DEMO_SUBJECT]
    depths = Counter(s.hop_depth for s in subject_stories)
    assert max(d for d in depths if d is not None) >= 4
    assert depths[0] == sum(s.archived for s in subject_stories)
    assert sum(v for d, v in depths.items() if d) > 150
    best: dict[str, int] = {}
    for story in subject_stories:
        if story.hop_depth is None:
            continue
        for link in article_links(web, story.url):
            target = web.story_for_url(link)
            if target is not None and target.subject == DEMO_SUBJECT:
                best[target.url] = min(best.get(target.url, 99), story.hop_depth + 1)
    for story in subject_stories:
        if story.hop_depth:
            assert best[story.url] == story.hop_depth, story.url
        elif story.hop_depth is None:
            assert story.url not in best


def test_flaky_urls_and_hosts(web: DemoWeb) -> None:
    assert len(web.truth.flaky_once) == 8
    assert "closedgazette.test" not in web.hosts
    assert all(h.endswith(".test") for h in web.hosts)
    assert all(u.split("/")[2] in web.hosts for u in web.pages)


# --- the topic query ---------------------------------------------------------------------------------------


def test_subject_queries_select_exactly_their_archive_stories(web: DemoWeb) -> None:
    assert web.topic_query_for("climate") == (
        '(climate OR "carbon tax" OR emission* OR "renewable energy" OR decarboni*) AND NOT sports'
    )
    for subject in web.subjects:
        matches = simple_query(web.topic_query_for(subject))
        for row in web.archive_stories:
            story = web.story_for_url(row["url"])
            assert matches(row["title"] + "\n" + row["text"]) == (story.subject == subject), (
                subject,
                row["url"],
            )
    with pytest.raises(ValueError, match="unknown demo subject 'weather'"):
        web.topic_query_for("weather")


def test_not_clause_is_needed_and_raw_pages_behave(web: DemoWeb) -> None:
    """Sports stories mention climate words (so NOT sports matters); irrelevant pages mostly fail raw match."""
    climate = simple_query(web.topic_query_for("climate"))
    positive_only = simple_query(web.topic_query_for("climate").split(" AND NOT ")[0])
    sports_rows = [r for r in web.archive_stories if web.story_for_url(r["url"]).subject == "sports"]
    assert any(positive_only(r["text"]) for r in sports_rows)
    climate_stories = [s for s in web.stories if s.subject == "climate"]
    assert all(climate(decoded(web, s.url)) for s in climate_stories)
    outcome = Counter()
    for story in climate_stories[:300]:
        for link in article_links(web, story.url):
            target = web.story_for_url(link)
            if target is not None and target.subject != "climate":
                outcome[climate(decoded(web, target.url))] += 1
    assert outcome[False] >= 40 and outcome[False] >= 0.8 * sum(outcome.values())


def test_topicmap_query_engine_agrees_when_available(web: DemoWeb) -> None:
    query_module = pytest.importorskip("topicmap.topics.query")
    for subject in web.subjects:
        parsed = query_module.parse(web.topic_query_for(subject))
        for row in web.archive_stories[::7]:
            story = web.story_for_url(row["url"])
            assert parsed.matches(row["title"] + "\n" + row["text"]) == (story.subject == subject)


# --- page realism ------------------------------------------------------------------------------------------


def test_pages_carry_title_dates_and_charsets(web: DemoWeb) -> None:
    markers = {
        "og": 'property="article:published_time"',
        "itemprop": 'itemprop="datePublished"',
        "time": "<time datetime=",
        "jsonld": '<script type="application/ld+json">',
        "dateline": 'class="dateline"',
    }
    seen_charsets = Counter()
    for story in web.stories[::5]:
        page = web.lookup(story.url)
        text = decoded(web, story.url)
        seen_charsets[page.headers["Content-Type"]] += 1
        assert f"<title>{story.title.replace('&', '&amp;')}</title>" in text
        assert 'class="share-facebook"' in text and "/tag/" in text and "/author/" in text
        for form, marker in markers.items():
            assert (marker in text) == (story.date_form == form), (story.url, form)
        day = story.publish_date.date()
        if story.date_form == "none":
            assert day.isoformat() not in text and f"{day:%Y/%m/%d}" not in story.url
    assert {"text/html; charset=utf-8", "text/html; charset=windows-1252", "text/html"} <= set(seen_charsets)


# --- the server --------------------------------------------------------------------------------------------


def test_server_answers_by_host_header(small_web: DemoWeb) -> None:
    story = next(s for s in small_web.stories if s.url.startswith("http://dailyherald.test/"))
    path = story.url.split("dailyherald.test", 1)[1]
    source, target = next(iter(small_web.truth.redirects.items()))
    with serve_demo_web(small_web, flaky=True) as server:
        base = server.base_url
        with requests.Session() as session:
            response = session.get(base + path, headers={"Host": "dailyherald.test"}, timeout=5)
            assert response.status_code == 200 and response.content == small_web.pages[story.url].body
            missing = session.get(base + "/no/such/page", headers={"Host": "dailyherald.test"}, timeout=5)
            assert missing.status_code == 404
            robots = session.get(base + "/robots.txt", headers={"Host": "dailyherald.test:80"}, timeout=5)
            assert robots.text == "User-agent: *\nDisallow: /private/\n"
            moved = session.get(source, proxies=server.proxies, allow_redirects=False, timeout=5)
            assert moved.status_code == 301 and moved.headers["Location"] == target
            followed = session.get(source, proxies=server.proxies, timeout=5)
            assert followed.status_code == 200 and followed.url == target
            head = session.head(base + path, headers={"Host": "dailyherald.test"}, timeout=5)
            assert head.status_code == 200 and int(head.headers["Content-Length"]) == len(response.content)
            unknown = session.get(base + "/", headers={"Host": "nowhere.test"}, timeout=5)
            assert unknown.status_code == 404
            flaky = small_web.truth.flaky_once[0]
            assert session.get(flaky, proxies=server.proxies, timeout=5).status_code == 500
            assert session.get(flaky, proxies=server.proxies, timeout=5).status_code == 200
        log_hosts = [host for _, host, _ in server.request_log]
        assert log_hosts[:3] == ["dailyherald.test"] * 3
        times = [t for t, _, _ in server.request_log]
        assert times == sorted(times)
        assert server.requests_for("dailyherald.test")[0][1] == path
    with pytest.raises(requests.ConnectionError):
        requests.get(base + "/", headers={"Host": "dailyherald.test"}, timeout=2)


def test_server_is_thread_safe_under_concurrent_clients(small_web: DemoWeb) -> None:
    urls = [s.url for s in small_web.stories[:120]]
    errors: list[str] = []
    with serve_demo_web(small_web) as server:

        def fetch(chunk: list[str]) -> None:
            with requests.Session() as session:
                for url in chunk:
                    body = session.get(url, proxies=server.proxies, timeout=10).content
                    if hashlib.sha256(body).digest() != hashlib.sha256(small_web.pages[url].body).digest():
                        errors.append(url)

        threads = [threading.Thread(target=fetch, args=(urls[i::8],)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert len(server.request_log) == len(urls)


# --- archive files -----------------------------------------------------------------------------------------


def test_archive_csv_and_parquet_round_trip(small_web: DemoWeb, tmp_path) -> None:
    expected = list(small_web.archive_rows())
    csv_path = small_web.write_archive_csv(tmp_path / "demo" / "archive.csv")
    with csv_path.open(encoding="utf-8", newline="") as handle:
        assert list(csv.DictReader(handle)) == expected
    parquet_path = small_web.write_archive_parquet(tmp_path / "archive.parquet")
    assert pq.read_table(parquet_path).to_pylist() == expected
    with_html = small_web.write_archive_parquet(tmp_path / "with_html.parquet", include_html=True)
    assert pq.read_table(with_html).column("html").to_pylist() == [
        r["html"] for r in small_web.archive_stories
    ]
    from topicmap.archive.drops import parse_drop

    for path in (csv_path, parquet_path):
        drop = parse_drop(path)
        assert not drop.errors and len(drop.stories) == len(expected)


def test_bad_arguments_are_rejected_clearly() -> None:
    with pytest.raises(ValueError, match="n_stories must be between"):
        generate_demo_web(n_stories=5)
    with pytest.raises(ValueError, match="n_media must be between"):
        generate_demo_web(n_media=1)
    with pytest.raises(ValueError, match="months must be between"):
        generate_demo_web(months=0)
