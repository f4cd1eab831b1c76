"""FacebookClient end to end against the loopback stand-in of the Graph API (real HTTP)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest

from topicmap.demo.standins import StandinDataset, StandinFaults, StandinServer, run_standin_server
from topicmap.social.facebook import (
    FacebookAuthError,
    FacebookClient,
    FacebookError,
    FacebookRateLimitError,
    never_works_reason,
)

APP_ID = "1234567890"
SECRET = "fb-app-secret-abcdef987654"
URLS = [f"https://news.example.com/2024/01/story-{i}.html" for i in range(16)]


@pytest.fixture
def dataset() -> StandinDataset:
    data = StandinDataset.from_urls(URLS + ["https://www.facebook.com/somepage"], seed=5)
    data.facebook_app_id, data.facebook_app_secret = APP_ID, SECRET
    return data


@pytest.fixture
def server(dataset: StandinDataset) -> Iterator[StandinServer]:
    with run_standin_server(dataset) as running:
        yield running


class FakeSleep:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _client(server: StandinServer, **kwargs) -> FacebookClient:
    kwargs.setdefault("sleep", FakeSleep())
    secret = kwargs.pop("app_secret", SECRET)
    return FacebookClient(APP_ID, secret, base_url=server.base_url_facebook, **kwargs)


def _with_stats(dataset: StandinDataset) -> str:
    return next(url for url in URLS if dataset.stories[url].facebook)


def _without_stats(dataset: StandinDataset) -> str:
    return next(url for url in URLS if dataset.stories[url].facebook is None)


def test_engagement_counts_are_fetched_for_the_canonical_url(server, dataset) -> None:
    url = _with_stats(dataset)
    result = _client(server).fetch_engagement(url)
    share, comment, reaction = dataset.stories[url].facebook
    assert (result.share_count, result.comment_count, result.reaction_count) == (share, comment, reaction)
    assert result.ok and result.error is None and result.api_url == url
    assert result.collected_at.utcoffset() == timedelta(0)
    (request,) = server.request_log
    assert request.params["id"] == [url] and request.params["fields"] == ["engagement"]


def test_url_is_fixed_and_canonicalized_before_asking(server, dataset) -> None:
    url = _with_stats(dataset)
    result = _client(server).fetch_engagement(f"  {url}?utm_source=twitter  ")
    assert result.ok and result.api_url == url and result.url == f"  {url}?utm_source=twitter  "
    assert server.request_log[-1].params["id"] == [url]


@pytest.mark.parametrize(
    "bad", ["", "ftp://files.example.com/a.txt", "mailto:someone@example.com", "not a url"]
)
def test_non_http_url_is_a_soft_failure_without_a_request(server, bad) -> None:
    result = _client(server).fetch_engagement(bad)
    assert not result.ok and result.share_count is None
    assert "not set" in result.error or "not HTTP" in result.error
    assert server.request_log == []


@pytest.mark.parametrize(
    "url",
    [
        "https://www.google.com/search?q=climate",
        "https://google.com/search?q=climate",  # Media Cloud's pattern missed this one
        "https://www.google.co.uk/webhp?hl=en",
        "https://trends.google.com/trends/explore?q=x",
        "https://www.google.com/trends/explore?q=x",
        "https://www.facebook.com/nytimes/posts/10151234567890",
        "https://m.facebook.com/story.php?story_fbid=123&id=456",
    ],
)
def test_urls_known_never_to_work_are_skipped(server, url) -> None:
    assert never_works_reason(url)
    result = _client(server).fetch_engagement(url)
    assert not result.ok and result.error.startswith("skipped:")
    assert server.request_log == []


def test_ordinary_google_and_facebook_urls_are_not_skipped() -> None:
    assert never_works_reason("https://www.google.com/maps/place/x") is None
    assert never_works_reason("https://www.facebook.com/somepage") is None
    assert never_works_reason("https://news.example.com/search-for-meaning.html") is None


def test_all_counts_missing_is_a_soft_failure(server, dataset) -> None:
    result = _client(server).fetch_engagement(_without_stats(dataset))
    assert not result.ok and "no statistics" in result.error


def test_numeric_id_is_accepted_and_another_url_is_a_soft_failure(server, dataset) -> None:
    page_url = "https://www.facebook.com/somepage"  # the stand-in answers a numeric page id for it
    page = _client(server).fetch_engagement(page_url)
    assert page.ok and page.share_count == dataset.stories[page_url].facebook[0]
    url = _with_stats(dataset)
    server.faults = StandinFaults(facebook_id_overrides={url: "https://elsewhere.example.net/other"})
    result = _client(server).fetch_engagement(url)
    assert not result.ok and "another URL" in result.error


@pytest.mark.parametrize("code", [2, 4, 17, 32, 341, 613])
def test_temporary_errors_are_retried_after_the_configured_wait(server, dataset, code) -> None:
    server.faults = StandinFaults(facebook_error_code=code, facebook_error_requests=2)
    sleep = FakeSleep()
    result = _client(server, sleep=sleep, retry_wait_seconds=60).fetch_engagement(_with_stats(dataset))
    assert result.ok
    assert sleep.waits == [60, 60]
    assert len(server.request_log) == 3


def test_something_went_wrong_page_is_retried(server, dataset) -> None:
    server.faults = StandinFaults(something_went_wrong_requests=1)
    sleep = FakeSleep()
    assert _client(server, sleep=sleep, retry_wait_seconds=5).fetch_engagement(_with_stats(dataset)).ok
    assert sleep.waits == [5]


def test_rate_limit_every_nth_request_across_many_urls(server, dataset) -> None:
    server.faults = StandinFaults(rate_limit_every=3, facebook_rate_limit_code=613)
    sleep = FakeSleep()
    results = _client(server, sleep=sleep, retry_wait_seconds=1).fetch_engagements(URLS[:8])
    assert [r.url for r in results] == URLS[:8]
    assert all(r.ok or "no statistics" in r.error for r in results)
    assert len(sleep.waits) == sum(r.outcome == "rate_limited" for r in server.request_log) > 0


def test_running_out_of_attempts_is_a_hard_failure(server, dataset) -> None:
    server.faults = StandinFaults(facebook_error_code=17, facebook_error_requests=-1)
    sleep = FakeSleep()
    with pytest.raises(FacebookRateLimitError, match="after 3 attempts"):
        _client(server, sleep=sleep, max_attempts=3).fetch_engagement(_with_stats(dataset))
    assert sleep.waits == [60, 60] and len(server.request_log) == 3


def test_slow_answer_beyond_timeout_is_retried_and_within_timeout_waited_for(server, dataset) -> None:
    url = _with_stats(dataset)
    server.faults = StandinFaults(delay_seconds=0.6, delay_requests=1)
    sleep = FakeSleep()
    assert _client(server, sleep=sleep, timeout=0.15, retry_wait_seconds=2).fetch_engagement(url).ok
    assert sleep.waits == [2]
    server.faults = StandinFaults(delay_seconds=0.2, delay_requests=1)
    sleep = FakeSleep()
    assert _client(server, sleep=sleep, timeout=3).fetch_engagement(url).ok
    assert sleep.waits == []


def test_bad_url_error_is_soft_and_the_next_url_is_still_fetched(server, dataset) -> None:
    bad, good = [url for url in URLS if dataset.stories[url].facebook][:2]
    server.faults = StandinFaults(facebook_url_errors={bad: 100})
    results = _client(server).fetch_engagements([bad, good])
    assert not results[0].ok and "100" in results[0].error
    assert results[1].ok


def test_unknown_error_code_is_a_hard_failure(server, dataset) -> None:
    server.faults = StandinFaults(facebook_error_code=999, facebook_error_requests=1)
    with pytest.raises(FacebookError, match="999"):
        _client(server).fetch_engagement(_with_stats(dataset))


@pytest.mark.parametrize("how", ["wrong secret", "expired token"])
def test_bad_credentials_stop_with_a_clear_message_and_no_secret(server, dataset, caplog, how) -> None:
    caplog.set_level(logging.DEBUG)
    if how == "wrong secret":
        secret = "wrong-secret-must-not-leak-31337"
        client = _client(server, app_secret=secret)
    else:
        secret = SECRET
        server.faults = StandinFaults(facebook_error_code=190, facebook_error_requests=1)
        client = _client(server)
    with pytest.raises(FacebookAuthError, match="refused the app credentials") as caught:
        client.fetch_engagement(_with_stats(dataset))
    assert caught.value.code == 190
    assert secret not in str(caught.value) and secret not in repr(client)
    assert caplog.records and all(secret not in record.getMessage() for record in caplog.records)


def test_secret_not_in_connection_errors_or_logs(caplog) -> None:
    caplog.set_level(logging.DEBUG)
    client = FacebookClient(APP_ID, SECRET, base_url="http://127.0.0.1:9", max_attempts=2, sleep=FakeSleep())
    with pytest.raises(FacebookRateLimitError, match="connection failed") as caught:
        client.fetch_engagement(URLS[0])
    assert SECRET not in str(caught.value)
    assert all(SECRET not in record.getMessage() for record in caplog.records)


def test_missing_credentials_are_refused() -> None:
    with pytest.raises(ValueError, match="app secret is empty"):
        FacebookClient(APP_ID, "")
    with pytest.raises(ValueError, match="app ID is empty"):
        FacebookClient("", SECRET)
