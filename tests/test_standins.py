"""The loopback stand-in of the Bit.ly v3 and Facebook Graph APIs (topicmap.demo.standins), spoken to over real HTTP."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
import requests

from topicmap.demo.standins import (
    CLICK_DAYS,
    StandinDataset,
    StandinFaults,
    run_standin_server,
)

URLS = [f"https://news.example.com/2024/story-{i}" for i in range(12)]
PUBLISHED = datetime(2024, 1, 10, 9, tzinfo=UTC)


def _dataset() -> StandinDataset:
    return StandinDataset.from_urls(
        URLS, seed=3, publish_date=PUBLISHED, bitlink_counts={URLS[0]: 3, URLS[1]: 0}
    )


def test_dataset_is_deterministic_and_seed_dependent() -> None:
    assert StandinDataset.from_urls(URLS, seed=3) == StandinDataset.from_urls(URLS, seed=3)
    assert StandinDataset.from_urls(URLS, seed=3) != StandinDataset.from_urls(URLS, seed=4)
    counts = {len(s.distinct_bitlinks()) for s in StandinDataset.from_urls(URLS * 1, seed=3).stories.values()}
    assert counts <= {0, 1, 2, 3} and len(counts) > 1
    with pytest.raises(ValueError, match="http"):
        StandinDataset.from_urls(["ftp://example.com/x"])


def test_story_has_variants_sharing_bitlinks_and_clicks_decaying_over_40_days() -> None:
    story = _dataset().stories[URLS[0]]
    variants = story.variants()
    assert len(variants) == 4 and len(story.distinct_bitlinks()) == 3
    assert (
        story.bitlinks[variants[-1]] == story.bitlinks[URLS[0]]
    )  # the alias variant shares the first bitlink
    for days in story.clicks.values():
        ordered = [days[d] for d in sorted(days)]
        assert len(ordered) == CLICK_DAYS and min(days) == PUBLISHED.date()
        assert ordered == sorted(ordered, reverse=True) and ordered[0] > ordered[-1]
    assert _dataset().stories[URLS[1]].bitlinks == {}


def test_bitly_lookup_and_clicks_answers_have_the_documented_shapes() -> None:
    dataset = _dataset()
    story = dataset.stories[URLS[0]]
    with run_standin_server(dataset) as server:
        assert server.base_url_bitly.startswith("http://127.0.0.1:") and server.port > 0
        lookup = requests.get(
            server.base_url_bitly + "/v3/link/lookup",
            params=[("url", URLS[0]), ("url", URLS[1]), ("access_token", dataset.bitly_token)],
            timeout=5,
        ).json()
        assert lookup["status_code"] == 200 and lookup["status_txt"] == "OK"
        assert lookup["data"]["link_lookup"] == [
            {"url": URLS[0], "aggregate_link": story.bitlinks[URLS[0]]},
            {"url": URLS[1], "error": "NOT_FOUND"},
        ]
        reference = int(datetime(2024, 1, 12, 15, tzinfo=UTC).timestamp())
        clicks = requests.get(
            server.base_url_bitly + "/v3/link/clicks",
            params={
                "link": story.bitlinks[URLS[0]],
                "unit": "day",
                "units": "5",
                "unit_reference_ts": str(reference),
                "rollup": "false",
                "limit": "1000",
                "timezone": "Etc/GMT",
                "access_token": dataset.bitly_token,
            },
            timeout=5,
        ).json()["data"]["link_clicks"]
        days = [datetime.fromtimestamp(e["dt"], tz=UTC) for e in clicks]
        assert [d.date() for d in days] == [date(2024, 1, 12) - timedelta(days=i) for i in range(5)]
        assert all(d.hour == 0 for d in days)
        expected = story.clicks[story.bitlinks[URLS[0]]]
        assert [e["clicks"] for e in clicks] == [expected.get(d.date(), 0) for d in days]
        too_many = requests.get(
            server.base_url_bitly + "/v3/link/lookup",
            params=[("url", u) for u in URLS + URLS[:4]] + [("access_token", dataset.bitly_token)],
            timeout=5,
        ).json()
        assert too_many["status_code"] == 500


def test_wrong_credentials_are_refused_and_never_logged() -> None:
    dataset = _dataset()
    with run_standin_server(dataset) as server:
        bitly = requests.get(
            server.base_url_bitly + "/v3/link/lookup",
            params={"url": URLS[0], "access_token": "nope"},
            timeout=5,
        )
        assert bitly.status_code == 401 and bitly.json()["status_txt"] == "INVALID_ACCESS_TOKEN"
        graph = requests.get(
            server.base_url_facebook + "/",
            params={"id": URLS[0], "fields": "engagement", "access_token": "app|wrong"},
            timeout=5,
        )
        assert graph.status_code == 400 and graph.json()["error"]["code"] == 190
        assert [r.outcome for r in server.request_log] == ["auth", "auth"]
        assert all(r.params["access_token"] == ["***"] for r in server.request_log)


def test_facebook_answers_engagement_numeric_page_ids_and_missing_stats() -> None:
    dataset = StandinDataset.from_urls(URLS + ["https://www.facebook.com/somepage"], seed=3)
    token = dataset.facebook_access_token
    with run_standin_server(dataset) as server:

        def ask(url: str) -> dict:
            return requests.get(
                server.base_url_facebook + "/",
                params={"id": url, "fields": "engagement", "access_token": token},
                timeout=5,
            ).json()

        with_stats = next(u for u in URLS if dataset.stories[u].facebook)
        share, comment, reaction = dataset.stories[with_stats].facebook
        answer = ask(with_stats)
        assert answer["id"] == with_stats
        assert answer["engagement"]["share_count"] == share
        assert answer["engagement"]["comment_count"] == comment
        assert answer["engagement"]["reaction_count"] == reaction
        assert ask("https://www.facebook.com/somepage")["id"].isdigit()
        unseen = ask("https://unknown.example.org/x")
        assert unseen["engagement"] == {"reaction_count": 0, "comment_count": 0, "share_count": 0}


def test_faults_rate_limit_every_nth_retry_after_slow_and_something_went_wrong() -> None:
    dataset = _dataset()
    faults = StandinFaults(rate_limit_every=2, retry_after_seconds=7)
    with run_standin_server(dataset, faults) as server:
        params = {"url": URLS[0], "access_token": dataset.bitly_token}
        answers = [
            requests.get(server.base_url_bitly + "/v3/link/lookup", params=params, timeout=5)
            for _ in range(4)
        ]
        assert [a.status_code for a in answers] == [200, 429, 200, 429]
        assert answers[1].headers["Retry-After"] == "7"
        server.faults = StandinFaults(rate_limit_every=1, bitly_rate_limit_style="status403")
        body = requests.get(server.base_url_bitly + "/v3/link/lookup", params=params, timeout=5).json()
        assert (body["status_code"], body["status_txt"]) == (403, "RATE_LIMIT_EXCEEDED")

        server.faults = StandinFaults(something_went_wrong_requests=1, delay_seconds=0.3, delay_requests=1)
        fb_params = {"id": URLS[0], "fields": "engagement", "access_token": dataset.facebook_access_token}
        html = requests.get(server.base_url_facebook + "/", params=fb_params, timeout=5)
        assert html.status_code == 500 and "something went wrong" in html.text.lower()
        assert server.request_log[-1].delayed
        with pytest.raises(requests.Timeout):
            server.faults.delay_requests = 1
            requests.get(server.base_url_facebook + "/", params=fb_params, timeout=0.1)
        fine = requests.get(server.base_url_facebook + "/", params=fb_params, timeout=5)
        assert fine.status_code == 200 and fine.json()["id"] == URLS[0]


def test_server_stops_listening_after_the_with_block() -> None:
    with run_standin_server(_dataset()) as server:
        url = server.base_url_bitly + "/v3/link/lookup"
    with pytest.raises(requests.ConnectionError):
        requests.get(url, timeout=2)
