"""BitlyClient end to end against the loopback stand-in (real HTTP), plus the raw store and recomputation."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest

from topicmap.demo.standins import StandinDataset, StandinFaults, StandinServer, run_standin_server
from topicmap.social.bitly import (
    BitlyAuthError,
    BitlyClient,
    BitlyError,
    BitlyRateLimitError,
    recompute_from_raw,
    request_key,
)
from topicmap.social.clicks import click_window
from topicmap.social.rawstore import RawResponseStore

SECRET = "s3cret-bitly-token-0123456789"
URLS = [f"https://news.example.com/2024/01/story-{i}.html" for i in range(20)]
PUBLISHED = datetime(2024, 1, 10, 9, tzinfo=UTC)
NOW = datetime(2024, 3, 1, tzinfo=UTC)
WINDOW = click_window("30d", PUBLISHED, NOW)  # 2024-01-08 09:00 .. 2024-02-09 09:00


@pytest.fixture
def dataset() -> StandinDataset:
    data = StandinDataset.from_urls(
        URLS, seed=11, publish_date=PUBLISHED, bitlink_counts={URLS[0]: 3, URLS[1]: 1, URLS[2]: 0}
    )
    data.bitly_token = SECRET
    return data


@pytest.fixture
def server(dataset: StandinDataset) -> Iterator[StandinServer]:
    with run_standin_server(dataset) as running:
        yield running


class FakeSleep:
    """Records the waits instead of sleeping; optionally runs an action after the n-th wait."""

    def __init__(self, after: int | None = None, action=None) -> None:
        self.waits: list[float] = []
        self.after, self.action = after, action

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.action is not None and len(self.waits) == self.after:
            self.action()


def _client(server: StandinServer, **kwargs) -> BitlyClient:
    kwargs.setdefault("sleep", FakeSleep())
    return BitlyClient(kwargs.pop("token", SECRET), base_url=server.base_url_bitly, **kwargs)


# -- lookups and clicks ------------------------------------------------------------------------------------------
def test_lookup_maps_every_variant_and_batches_15_urls_per_request(server, dataset) -> None:
    story = dataset.stories[URLS[0]]
    found = _client(server).lookup_bitlinks(story.variants() + URLS[1:20])
    for variant, bitlink in story.bitlinks.items():
        assert found[variant] == bitlink
    assert found[URLS[2]] is None
    assert len(found) == 4 + 19
    lookups = server.requests_for("bitly", "/v3/link/lookup")
    assert [len(r.params["url"]) for r in lookups] == [15, 8]


def test_story_clicks_sums_distinct_bitlinks_over_the_window(server, dataset) -> None:
    story = dataset.stories[URLS[0]]
    result = _client(server).story_clicks(story.variants(), WINDOW)
    assert result.bitlinks == story.distinct_bitlinks()  # 4 variants, 3 bitlinks (the alias is counted once)
    assert len(server.requests_for("bitly", "/v3/link/clicks")) == 3
    assert result.daily == story.expected_daily(*WINDOW)
    assert result.total == sum(story.expected_daily(*WINDOW).values()) > 0
    assert min(result.daily) == WINDOW[0].date() and max(result.daily) == WINDOW[1].date()
    assert result.daily[PUBLISHED.date() - timedelta(days=1)] == 0 < result.daily[PUBLISHED.date()]
    assert result.clicks_until(PUBLISHED + timedelta(days=3)) == sum(
        clicks for day, clicks in result.daily.items() if day <= date(2024, 1, 13)
    )
    nothing = _client(server).story_clicks([URLS[2]], WINDOW)
    assert nothing.bitlinks == [] and nothing.total == 0 and nothing.variant_bitlinks == {URLS[2]: None}


def test_repeated_click_days_in_answers_are_counted_once(server, dataset) -> None:
    story = dataset.stories[URLS[0]]
    plain = _client(server).story_clicks(story.variants(), WINDOW)
    server.faults = StandinFaults(duplicate_click_days=True)
    doubled = _client(server).story_clicks(story.variants(), WINDOW)
    assert doubled == plain
    assert doubled.total == sum(story.expected_daily(*WINDOW).values())


def test_fetch_clicks_asks_for_every_day_of_the_window_and_returns_only_those(server, dataset) -> None:
    bitlink = dataset.stories[URLS[1]].distinct_bitlinks()[0]
    start, end = datetime(2024, 1, 9, 23, tzinfo=UTC), datetime(2024, 1, 13, 1, tzinfo=UTC)
    days = _client(server).fetch_clicks(bitlink, start, end)
    assert list(days) == [date(2024, 1, 9) + timedelta(days=i) for i in range(5)]
    assert days[date(2024, 1, 9)] == 0 and days[date(2024, 1, 10)] > 0
    request = server.requests_for("bitly", "/v3/link/clicks")[-1]
    assert request.params["units"] == ["5"]  # both ends included (Media Cloud asked for 4)
    assert request.params["unit_reference_ts"] == [str(int(end.timestamp()))]
    assert request.params["timezone"] == ["Etc/GMT"] and request.params["rollup"] == ["false"]
    with pytest.raises(ValueError, match="1000"):
        _client(server).fetch_clicks(bitlink, start - timedelta(days=1000), end)
    with pytest.raises(ValueError, match="after its end"):
        _client(server).fetch_clicks(bitlink, end, start)


def test_unknown_bitlink_is_a_bitly_error_with_the_status(server) -> None:
    with pytest.raises(BitlyError) as caught:
        _client(server).fetch_clicks("http://bit.ly/doesnotexist", *WINDOW)
    assert caught.value.status_code == 404 and caught.value.status_txt == "NOT_FOUND"
    assert not isinstance(caught.value, BitlyAuthError)


# -- rate limits, timeouts ---------------------------------------------------------------------------------------
def test_http_429_backs_off_exponentially_and_retries(server, dataset) -> None:
    server.faults = StandinFaults(rate_limit_every=1)

    def lift() -> None:
        server.faults.rate_limit_every = 0

    sleep = FakeSleep(after=3, action=lift)
    found = _client(server, sleep=sleep, backoff_seconds=1.5).lookup_bitlinks([URLS[1]])
    assert found == {URLS[1]: dataset.stories[URLS[1]].bitlinks[URLS[1]]}
    assert sleep.waits == [1.5, 3.0, 6.0]
    assert [r.outcome for r in server.request_log] == ["rate_limited"] * 3 + ["ok"]


def test_rate_limit_exceeded_status_is_retried_and_retry_after_honoured(server, dataset) -> None:
    server.faults = StandinFaults(
        rate_limit_every=2, bitly_rate_limit_style="status403", retry_after_seconds=7
    )
    sleep = FakeSleep()
    story = dataset.stories[URLS[0]]
    result = _client(server, sleep=sleep).story_clicks(story.variants(), WINDOW)
    assert result.daily == story.expected_daily(*WINDOW)
    assert sleep.waits and set(sleep.waits) == {7.0}
    assert len(sleep.waits) == sum(r.outcome == "rate_limited" for r in server.request_log)


def test_still_rate_limited_after_all_retries_raises(server) -> None:
    server.faults = StandinFaults(rate_limit_every=1)
    sleep = FakeSleep()
    with pytest.raises(BitlyRateLimitError, match="gave up after 3 attempts"):
        _client(server, sleep=sleep, max_retries=2).lookup_bitlinks([URLS[0]])
    assert sleep.waits == [1.0, 2.0]
    assert len(server.request_log) == 3


def test_slow_answer_within_timeout_is_waited_for(server) -> None:
    server.faults = StandinFaults(delay_seconds=0.2, delay_requests=1)
    sleep = FakeSleep()
    assert _client(server, sleep=sleep, timeout=3).lookup_bitlinks([URLS[1]])[URLS[1]]
    assert sleep.waits == [] and len(server.request_log) == 1


def test_slow_answer_beyond_timeout_is_retried(server) -> None:
    server.faults = StandinFaults(delay_seconds=0.6, delay_requests=1)
    sleep = FakeSleep()
    assert _client(server, sleep=sleep, timeout=0.15).lookup_bitlinks([URLS[1]])[URLS[1]]
    assert sleep.waits == [1.0]
    assert [r.delayed for r in server.request_log] == [True, False]


# -- secrets -----------------------------------------------------------------------------------------------------
def test_bad_token_is_a_clear_error_without_the_token(server, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-token-that-must-not-leak-42"
    client = _client(server, token=wrong)
    with pytest.raises(BitlyAuthError, match="refused the access token") as caught:
        client.lookup_bitlinks([URLS[0]])
    assert wrong not in str(caught.value) and wrong not in repr(caught.value)
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert wrong not in repr(client) and "***" in repr(client)
    assert caplog.records  # urllib3 logged the request line at DEBUG ...
    assert all(wrong not in record.getMessage() for record in caplog.records)  # ... masked


def test_token_never_logged_on_success_retries_or_connection_failure(server, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    server.faults = StandinFaults(rate_limit_every=2)
    _client(server).story_clicks(URLS[:2], WINDOW)
    dead = BitlyClient(SECRET, base_url="http://127.0.0.1:9", max_retries=1, sleep=FakeSleep())
    with pytest.raises(BitlyError, match="connection failed") as caught:
        dead.lookup_bitlinks([URLS[0]])
    assert SECRET not in str(caught.value)
    assert any("retry" in record.getMessage() for record in caplog.records)
    assert all(SECRET not in record.getMessage() for record in caplog.records)


def test_empty_token_and_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="token is empty"):
        BitlyClient("")
    with pytest.raises(ValueError, match="base_url"):
        BitlyClient("t", base_url="api-ssl.bitly.com")


# -- raw store and recomputation ---------------------------------------------------------------------------------
def test_every_answer_is_stored_gzip_and_totals_recompute_without_refetching(tmp_path, dataset) -> None:
    store = RawResponseStore(tmp_path / "raw")
    story = dataset.stories[URLS[0]]
    with run_standin_server(dataset) as server:
        original = _client(server, raw_store=store).story_clicks(story.variants(), WINDOW)
        answered = len(server.request_log)
    files = sorted((tmp_path / "raw" / "bitly").rglob("*.json.gz"))
    assert len(files) == answered == 1 + 3  # one lookup, three clicks answers
    for path in files:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        assert SECRET not in text
        assert json.loads(text)["payload"]["status_code"] == 200
    assert all(key.startswith("GET /v3/link/") for key in store.keys("bitly"))
    # the server is gone: recomputation reads the store only, through the same code path
    recomputed = recompute_from_raw(store, story.variants(), WINDOW)
    assert recomputed == original
    assert recomputed.total == original.total > 0
    with pytest.raises(BitlyError, match="no stored Bit.ly answer"):
        recompute_from_raw(store, story.variants(), (WINDOW[0], WINDOW[1] - timedelta(days=1)))


def test_request_key_is_deterministic_and_excludes_the_token() -> None:
    params = [("url", "https://a.example/x"), ("access_token", SECRET)]
    assert request_key("/v3/link/lookup", params) == "GET /v3/link/lookup?url=https%3A%2F%2Fa.example%2Fx"
