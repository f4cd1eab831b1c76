"""STAND-IN servers for the Bit.ly v3 and Facebook Graph APIs, on loopback, for the demo and the tests.

These are *not* the real services and never talk to them: a :class:`StandinServer` is a small
``ThreadingHTTPServer`` on ``127.0.0.1`` (a free port) that answers with the documented response shapes (see the
docstrings of :mod:`topicmap.social.bitly` and :mod:`topicmap.social.facebook`) from a deterministic :class:`StandinDataset`.
Faults can be switched on at any time through :class:`StandinFaults` (rate limits every Nth request, slow answers,
Graph API error codes, the "something went wrong" page, repeated click days), and every request is recorded in
:attr:`StandinServer.request_log` with credentials masked.

    dataset = StandinDataset.from_urls(["https://example.com/a"], seed=7)
    with run_standin_server(dataset) as server:
        bitly = BitlyClient(dataset.bitly_token, base_url=server.base_url_bitly)
        facebook = FacebookClient(dataset.facebook_app_id, dataset.facebook_app_secret,
                                  base_url=server.base_url_facebook)

Run ``python -m topicmap.demo.standins URL...`` to serve a dataset until interrupted.
"""

from __future__ import annotations

import hashlib
import json
import math
import string
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

STANDIN_BITLY_TOKEN = "standin-bitly-token"
STANDIN_FACEBOOK_APP_ID = "standin-app-id"
STANDIN_FACEBOOK_APP_SECRET = "standin-app-secret"
DEFAULT_PUBLISH_DATE = datetime(2024, 1, 1, tzinfo=UTC)
CLICK_DAYS = 40
"""Clicks decay over this many days from the publish day, then stop."""
MAX_LOOKUP_URLS = 15
_BASE62 = string.digits + string.ascii_letters


def _hash_int(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def _base62(number: int, length: int = 7) -> str:
    chars = []
    for _ in range(length):
        number, rest = divmod(number, 62)
        chars.append(_BASE62[rest])
    return "".join(chars)


def _bare_bitlink(link: str) -> str:
    """``http://bit.ly/abc`` / ``https://bit.ly/abc`` / ``bit.ly/abc`` → ``bit.ly/abc``."""
    text = link.strip()
    for prefix in ("https://", "http://"):
        if text.lower().startswith(prefix):
            text = text[len(prefix) :]
    host, _, path = text.partition("/")
    return f"{host.lower()}/{path}"


def _with_query(url: str, param: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{param}"


def _swap_scheme(url: str) -> str:
    if url.startswith("https://"):
        return "http://" + url[len("https://") :]
    if url.startswith("http://"):
        return "https://" + url[len("http://") :]
    return url


@dataclass
class StandinStory:
    """What the stand-in services know about one story URL."""

    url: str
    publish_date: datetime
    bitlinks: dict[str, str] = field(default_factory=dict)
    """Variant URL → aggregate bitlink (``http://bit.ly/<id>``); several variants may share one bitlink."""
    clicks: dict[str, dict[date, int]] = field(default_factory=dict)
    """Bitlink → day → clicks."""
    facebook: tuple[int, int, int] | None = None
    """(share, comment, reaction) counts, or None when the Graph API has no statistics for the URL."""

    def variants(self) -> list[str]:
        return list(self.bitlinks)

    def distinct_bitlinks(self) -> list[str]:
        return sorted(set(self.bitlinks.values()))

    def expected_daily(self, start: datetime, end: datetime) -> dict[date, int]:
        """Test oracle: day → clicks summed over the story's distinct bitlinks, for every day of [start, end]
        (UTC; a day without clicks is 0, as Bit.ly answers it). Empty when the story has no bitlink."""
        first, last = start.astimezone(UTC).date(), end.astimezone(UTC).date()
        links = self.distinct_bitlinks()
        if not links:
            return {}
        span = [first + timedelta(days=i) for i in range((last - first).days + 1)]
        return {day: sum(self.clicks.get(link, {}).get(day, 0) for link in links) for day in span}


@dataclass
class StandinDataset:
    """Deterministic answers for the stand-in APIs, plus the credentials they accept."""

    stories: dict[str, StandinStory] = field(default_factory=dict)
    bitly_token: str = STANDIN_BITLY_TOKEN
    facebook_app_id: str = STANDIN_FACEBOOK_APP_ID
    facebook_app_secret: str = STANDIN_FACEBOOK_APP_SECRET

    @classmethod
    def from_urls(
        cls,
        urls: Iterable[str],
        seed: int = 0,
        publish_date: datetime | Mapping[str, datetime] | None = None,
        bitlink_counts: Mapping[str, int] | None = None,
    ) -> StandinDataset:
        """Generate a story per URL, deterministically from (seed, URL).

        Per story: 0–3 bitlinks (``bitlink_counts`` overrides), reached through different URL variants — the URL,
        its other scheme, the URL with ``utm_source=standin`` — plus an alias variant (``utm_medium=standin-alias``)
        sharing the first bitlink, as Bit.ly's aggregate links do; daily clicks decaying over 40 days from the
        publish date (default 2024-01-01, or per URL); Facebook counts, absent for about one URL in eight.
        """
        dataset = cls()
        for url in urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"stand-in story URLs must be http(s) URLs, got {url!r}")
            if isinstance(publish_date, Mapping):
                published = publish_date.get(url, DEFAULT_PUBLISH_DATE)
            else:
                published = publish_date or DEFAULT_PUBLISH_DATE
            if published.tzinfo is None:
                published = published.replace(tzinfo=UTC)
            count = _hash_int(seed, url, "bitlinks") % 4
            if bitlink_counts is not None and url in bitlink_counts:
                count = bitlink_counts[url]
            if not 0 <= count <= 3:
                raise ValueError(f"a stand-in story has 0 to 3 bitlinks, got {count} for {url}")
            dataset.stories[url] = _generate_story(url, seed, published.astimezone(UTC), count)
        return dataset

    # -- lookups used by the server ----------------------------------------------------------------------------
    def bitlink_for(self, variant: str) -> str | None:
        for story in self.stories.values():
            if variant in story.bitlinks:
                return story.bitlinks[variant]
        return None

    def clicks_for(self, bitlink: str) -> dict[date, int] | None:
        bare = _bare_bitlink(bitlink)
        for story in self.stories.values():
            for link, days in story.clicks.items():
                if _bare_bitlink(link) == bare:
                    return days
        return None

    def story_for(self, url: str) -> StandinStory | None:
        return self.stories.get(url)

    @property
    def facebook_access_token(self) -> str:
        return f"{self.facebook_app_id}|{self.facebook_app_secret}"


def _generate_story(url: str, seed: int, published: datetime, count: int) -> StandinStory:
    candidates = [url, _swap_scheme(url), _with_query(url, "utm_source=standin")]
    story = StandinStory(url=url, publish_date=published)
    first_day = published.date()
    for index in range(count):
        link = "http://bit.ly/" + _base62(_hash_int(seed, url, "link", index))
        story.bitlinks[candidates[index]] = link
        peak = 20 + _hash_int(seed, url, "peak", index) % 480
        half_life = 2 + _hash_int(seed, url, "decay", index) % 6
        story.clicks[link] = {
            first_day + timedelta(days=offset): int(peak * math.exp(-offset * math.log(2) / half_life))
            for offset in range(CLICK_DAYS)
        }
    if count:
        story.bitlinks[_with_query(url, "utm_medium=standin-alias")] = story.bitlinks[url]
    facebook_hash = _hash_int(seed, url, "facebook")
    if facebook_hash % 8 != 0:
        story.facebook = (facebook_hash % 5000, (facebook_hash >> 16) % 800, (facebook_hash >> 32) % 20000)
    return story


@dataclass
class StandinFaults:
    """Fault switches; change them on ``server.faults`` between (or during) client calls."""

    rate_limit_every: int = 0
    """Every Nth request to each API (counted separately, retries included) is rate-limited; 0 = never."""
    bitly_rate_limit_style: str = "http429"
    """``"http429"``: HTTP 429; ``"status403"``: HTTP 200 with ``status_code`` 403 ``RATE_LIMIT_EXCEEDED``."""
    retry_after_seconds: float | None = None
    """``Retry-After`` header sent with Bit.ly rate-limit answers."""
    facebook_rate_limit_code: int = 4
    delay_seconds: float = 0.0
    delay_requests: int = 0
    """The next N requests (either API) wait ``delay_seconds`` before answering; -1 = every request."""
    facebook_error_code: int | None = None
    facebook_error_requests: int = 0
    """The next N Facebook requests answer ``facebook_error_code``; -1 = every request."""
    facebook_url_errors: dict[str, int] = field(default_factory=dict)
    """URL → Graph API error code answered for it, always."""
    something_went_wrong_requests: int = 0
    """The next N Facebook requests answer the "Sorry, something went wrong" HTML page (HTTP 500)."""
    duplicate_click_days: bool = False
    """Every clicks entry is sent twice, as overlapping Bit.ly answers repeat days."""
    facebook_id_overrides: dict[str, str] = field(default_factory=dict)
    """URL → the ``id`` the Graph API answers instead of the URL (an answer for another URL)."""


@dataclass(frozen=True)
class RequestRecord:
    """One request the stand-in received (credentials masked)."""

    api: str
    path: str
    params: dict[str, list[str]]
    status: int
    outcome: str
    delayed: bool
    at: float


_FACEBOOK_MESSAGES = {
    2: ("OAuthException", "An unexpected error has occurred. Please retry your request later."),
    4: ("OAuthException", "(#4) Application request limit reached"),
    17: ("OAuthException", "(#17) User request limit reached"),
    32: ("OAuthException", "(#32) Page request limit reached"),
    100: ("OAuthException", "(#100) Invalid parameter"),
    102: ("OAuthException", "Session key invalid or no longer valid"),
    190: ("OAuthException", "Invalid OAuth access token - Cannot parse access token"),
    341: ("OAuthException", "(#341) Application limit reached"),
    613: ("OAuthException", "(#613) Calls to this api have exceeded the rate limit."),
}
_SOMETHING_WENT_WRONG_HTML = (
    "<!DOCTYPE html><html><head><title>Error</title></head><body>"
    "<h1>Sorry, something went wrong.</h1><p>We're working on it and we'll get it fixed as soon as we can.</p>"
    "</body></html>"
)


class StandinServer:
    """The loopback stand-in; use :func:`run_standin_server` or ``with StandinServer(...)``."""

    def __init__(self, dataset: StandinDataset, faults: StandinFaults | None = None, host: str = "127.0.0.1"):
        self.dataset = dataset
        self.faults = faults or StandinFaults()
        self._lock = threading.Lock()
        self._log: list[RequestRecord] = []
        self._counts = {"bitly": 0, "facebook": 0}
        self._httpd = ThreadingHTTPServer((host, 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.standin = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url_bitly(self) -> str:
        return f"{self.base_url}/bitly"

    @property
    def base_url_facebook(self) -> str:
        return f"{self.base_url}/facebook/v12.0"

    def start(self) -> StandinServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, args=(0.05,), name="standin-api", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> StandinServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- request log -------------------------------------------------------------------------------------------
    @property
    def request_log(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._log)

    def requests_for(self, api: str, path_suffix: str = "") -> list[RequestRecord]:
        return [r for r in self.request_log if r.api == api and r.path.endswith(path_suffix)]

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    # -- answering ---------------------------------------------------------------------------------------------
    def _take(self, counter_name: str) -> bool:
        """Consume one unit of a "next N requests" fault counter (caller holds the lock)."""
        remaining = getattr(self.faults, counter_name)
        if remaining == 0:
            return False
        if remaining > 0:
            setattr(self.faults, counter_name, remaining - 1)
        return True

    def answer(self, raw_path: str) -> tuple[int, dict[str, str], bytes, float]:
        """(status, headers, body, delay) for one GET; records the request."""
        parts = urlsplit(raw_path)
        params = parse_qs(parts.query, keep_blank_values=True)
        if parts.path.startswith("/bitly/"):
            api, sub_path = "bitly", parts.path[len("/bitly") :]
        elif parts.path.startswith("/facebook/"):
            api, sub_path = "facebook", parts.path
        else:
            api, sub_path = "unknown", parts.path
        with self._lock:
            delay = self.faults.delay_seconds if self._take("delay_requests") else 0.0
            if api == "bitly":
                self._counts[api] += 1
                status, headers, payload, outcome = self._bitly(sub_path, params, self._counts[api])
            elif api == "facebook":
                self._counts[api] += 1
                status, headers, payload, outcome = self._facebook(sub_path, params, self._counts[api])
            else:
                status, headers, payload, outcome = 404, {}, {"error": "unknown stand-in path"}, "not_found"
            masked = {
                key: ["***"] if key == "access_token" else list(values) for key, values in params.items()
            }
            self._log.append(
                RequestRecord(api, parts.path, masked, status, outcome, delay > 0, time.monotonic())
            )
        if isinstance(payload, str):
            headers.setdefault("Content-Type", "text/html; charset=utf-8")
            body = payload.encode("utf-8")
        else:
            headers.setdefault("Content-Type", "application/json")
            body = json.dumps(payload).encode("utf-8")
        return status, headers, body, delay

    # Bit.ly v3 ---------------------------------------------------------------------------------------------------
    def _bitly(
        self, path: str, params: dict[str, list[str]], request_number: int
    ) -> tuple[int, dict[str, str], Any, str]:
        faults = self.faults
        if params.get("access_token", [""])[0] != self.dataset.bitly_token:
            return 401, {}, {"status_code": 500, "status_txt": "INVALID_ACCESS_TOKEN", "data": None}, "auth"
        if faults.rate_limit_every and request_number % faults.rate_limit_every == 0:
            headers = {}
            if faults.retry_after_seconds is not None:
                headers["Retry-After"] = f"{faults.retry_after_seconds:g}"
            body = {"status_code": 403, "status_txt": "RATE_LIMIT_EXCEEDED", "data": None}
            return (429 if faults.bitly_rate_limit_style == "http429" else 200), headers, body, "rate_limited"
        if path == "/v3/link/lookup":
            return self._bitly_lookup(params)
        if path == "/v3/link/clicks":
            return self._bitly_clicks(params)
        return 404, {}, {"status_code": 404, "status_txt": "NOT_FOUND", "data": None}, "not_found"

    @staticmethod
    def _v3_error(status_code: int, status_txt: str) -> tuple[int, dict[str, str], Any, str]:
        return 200, {}, {"status_code": status_code, "status_txt": status_txt, "data": None}, "error"

    def _bitly_lookup(self, params: dict[str, list[str]]) -> tuple[int, dict[str, str], Any, str]:
        urls = params.get("url", [])
        if not urls:
            return self._v3_error(500, "MISSING_ARG_URL")
        if len(urls) > MAX_LOOKUP_URLS:
            return self._v3_error(500, "INVALID_ARG_URL")
        entries = []
        for url in urls:
            link = self.dataset.bitlink_for(url)
            entries.append(
                {"url": url, "aggregate_link": link} if link else {"url": url, "error": "NOT_FOUND"}
            )
        return 200, {}, {"status_code": 200, "status_txt": "OK", "data": {"link_lookup": entries}}, "ok"

    def _bitly_clicks(self, params: dict[str, list[str]]) -> tuple[int, dict[str, str], Any, str]:
        def first(name: str, default: str) -> str:
            return params.get(name, [default])[0]

        link = first("link", "")
        if not link:
            return self._v3_error(500, "MISSING_ARG_LINK")
        if first("unit", "day") != "day":
            return self._v3_error(500, "INVALID_ARG_UNIT")  # the stand-in only knows days
        if first("timezone", "Etc/GMT") not in ("Etc/GMT", "GMT", "UTC", "0"):
            return self._v3_error(500, "INVALID_ARG_TIMEZONE")
        days = self.dataset.clicks_for(link)
        if days is None:
            return self._v3_error(404, "NOT_FOUND")
        try:
            units = int(first("units", "-1"))
            reference = first("unit_reference_ts", "now")
            reference_ts = time.time() if reference == "now" else int(reference)
            limit = int(first("limit", "1000"))
        except ValueError:
            return self._v3_error(500, "INVALID_ARG")
        if units == 0 or units < -1 or units > 1000:
            return self._v3_error(500, "INVALID_ARG_UNITS")
        if not 1 <= limit <= 1000:
            return self._v3_error(500, "INVALID_ARG_LIMIT")
        last_day = datetime.fromtimestamp(reference_ts, tz=UTC).date()
        first_day = min(days, default=last_day) if units == -1 else last_day - timedelta(days=units - 1)
        span = [last_day - timedelta(days=i) for i in range((last_day - first_day).days + 1)][:limit]
        entries = [
            {"clicks": days.get(day, 0), "dt": int(datetime.combine(day, dtime.min, tzinfo=UTC).timestamp())}
            for day in span  # newest first, as Bit.ly answered
        ]
        if self.faults.duplicate_click_days:
            entries = [entry for entry in entries for _ in (0, 1)]
        data: dict[str, Any] = {
            "unit": "day",
            "units": units,
            "unit_reference_ts": reference_ts,
            "tz_offset": 0,
            "link_clicks": sum(e["clicks"] for e in entries)
            if first("rollup", "false") == "true"
            else entries,
        }
        return 200, {}, {"status_code": 200, "status_txt": "OK", "data": data}, "ok"

    # Facebook Graph API ----------------------------------------------------------------------------------------
    @staticmethod
    def _graph_error(code: int, http_status: int = 400) -> tuple[int, dict[str, str], Any, str]:
        error_type, message = _FACEBOOK_MESSAGES.get(code, ("OAuthException", f"(#{code}) Stand-in error"))
        body = {"error": {"message": message, "type": error_type, "code": code, "fbtrace_id": "STANDIN"}}
        outcome = "auth" if code in (102, 190) else "rate_limited" if code in (4, 17, 32, 613) else "error"
        return http_status, {}, body, outcome

    def _facebook(
        self, path: str, params: dict[str, list[str]], request_number: int
    ) -> tuple[int, dict[str, str], Any, str]:
        faults = self.faults
        if params.get("access_token", [""])[0] != self.dataset.facebook_access_token:
            return self._graph_error(190)
        if self._take("something_went_wrong_requests"):
            return 500, {}, _SOMETHING_WENT_WRONG_HTML, "something_went_wrong"
        if faults.rate_limit_every and request_number % faults.rate_limit_every == 0:
            return self._graph_error(faults.facebook_rate_limit_code, 403)
        if faults.facebook_error_code is not None and self._take("facebook_error_requests"):
            return self._graph_error(faults.facebook_error_code)
        url = params.get("id", [""])[0]
        if not url:
            return self._graph_error(100)
        if url in faults.facebook_url_errors:
            return self._graph_error(faults.facebook_url_errors[url])
        host = (urlsplit(url).hostname or "").lower()
        response_id: str = str(_hash_int(url, "page") % 10**15) if host.endswith("facebook.com") else url
        response_id = faults.facebook_id_overrides.get(url, response_id)
        story = self.dataset.story_for(url)
        if story is None:
            # The Graph API answers zeros for a URL it has never seen shared.
            engagement: dict[str, int] = {"reaction_count": 0, "comment_count": 0, "share_count": 0}
        elif story.facebook is None:
            engagement = {}
        else:
            share, comment, reaction = story.facebook
            engagement = {
                "reaction_count": reaction,
                "comment_count": comment,
                "share_count": share,
                "comment_plugin_count": 0,
            }
        body: dict[str, Any] = {"id": response_id}
        if "engagement" in params.get("fields", [""])[0].split(","):
            body["engagement"] = engagement
        return 200, {}, body, "ok"


class _Handler(BaseHTTPRequestHandler):
    server_version = "topicmap-standin/1"

    def do_GET(self) -> None:  # noqa: N802 (the http.server API name)
        standin: StandinServer = self.server.standin  # type: ignore[attr-defined]
        status, headers, body, delay = standin.answer(self.path)
        if delay:
            time.sleep(delay)
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout) while we were being slow on purpose

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silent: the default would print request lines, credentials included, to stderr."""


@contextmanager
def run_standin_server(
    dataset: StandinDataset, faults: StandinFaults | None = None
) -> Iterator[StandinServer]:
    """Serve ``dataset`` on a free loopback port for the duration of the ``with`` block."""
    server = StandinServer(dataset, faults)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in dataset for the given URLs until interrupted (manual demos)."""
    import argparse

    parser = argparse.ArgumentParser(description="Loopback stand-in of the Bit.ly v3 and Facebook Graph APIs")
    parser.add_argument("urls", nargs="+", help="story URLs the stand-in should know")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    dataset = StandinDataset.from_urls(args.urls, seed=args.seed)
    with run_standin_server(dataset) as server:
        print(f"Bit.ly stand-in:   {server.base_url_bitly}  (token {dataset.bitly_token})")
        print(
            f"Facebook stand-in: {server.base_url_facebook}  "
            f"(app id {dataset.facebook_app_id}, secret {dataset.facebook_app_secret})"
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
