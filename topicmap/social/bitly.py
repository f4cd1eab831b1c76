"""Bit.ly client: find a story's bitlinks from its URL variants and fetch their daily clicks.

Media Cloud (its Bit.ly processing) used Bit.ly's **v3** API, because only v3 can look bitlinks up from a long
URL (v4 has no reverse lookup). Bit.ly retired v3 in 2020; the shapes below are v3's documented ones, which is what
this client speaks and what :mod:`topicmap.demo.standins` answers. To use a real service, point ``base_url`` at an
endpoint that speaks them; the token goes in ``access_token`` as v3 documented.

Lookup — ``GET {base}/v3/link/lookup?url=U1&url=U2...&access_token=T`` (at most 15 ``url`` per request)::

    {"status_code": 200, "status_txt": "OK",
     "data": {"link_lookup": [{"url": "U1", "aggregate_link": "http://bit.ly/2V6CFi"},
                              {"url": "U2", "error": "NOT_FOUND"}]}}

  Entries come in request order; they are matched to the request by position (Bit.ly may echo a URL respelled).

Clicks — ``GET {base}/v3/link/clicks?link=http://bit.ly/2V6CFi&unit=day&units=N&unit_reference_ts=E
&rollup=false&limit=1000&timezone=Etc/GMT&access_token=T`` (the N days ending with the day containing epoch E)::

    {"status_code": 200, "status_txt": "OK",
     "data": {"link_clicks": [{"clicks": 12, "dt": 1704153600}, ...], "unit": "day", "units": N,
              "unit_reference_ts": E, "tz_offset": 0}}

Errors: v3 answers HTTP 200 with the error in the body (``status_code``/``status_txt``). Rate limiting is HTTP 429
or ``{"status_code": 403, "status_txt": "RATE_LIMIT_EXCEEDED"}``: the client waits (``Retry-After`` honoured, else
exponential backoff from ``backoff_seconds``) and retries up to ``max_retries`` times, as it does for timeouts,
connection failures and 5xx/``TEMPORARILY_UNAVAILABLE`` answers. A bad token (HTTP 401 or ``INVALID_ACCESS_TOKEN``)
raises :class:`BitlyAuthError`; any other error raises :class:`BitlyError` carrying the status.

Every successful answer is kept in a :class:`~topicmap.social.rawstore.RawResponseStore` (kind ``"bitly"``) under a key
made from the request without the token, so :func:`recompute_from_raw` rebuilds a story's figures offline.
A story's URL variants (URL, redirect, normalized forms, canonical link) come from
:func:`topicmap.web.urls.url_variants`; add alternative URLs (merged stories) as needed.

Fixed Media Cloud bugs: its error messages included the request URL, token and all (here every message and the
urllib3 debug log are masked, see :mod:`topicmap.social.http`); it asked for ``units`` = days between the window's
first and last day, one day short of the window (here the count includes both ends); and it mapped lookup answers
by the echoed URL (here by position).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from topicmap.social.clicks import (
    as_utc,
    canonical_bitlink,
    clicks_until,
    merge_day_counts,
    parse_click_entries,
    sum_day_maps,
)
from topicmap.social.http import SecretMasker, protect_secrets_in_logs, retry_after_seconds
from topicmap.social.rawstore import RawResponseStore

# requests loads with the first client or call, not with a code location that only names the settings
if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api-ssl.bitly.com"
LOOKUP_PATH = "/v3/link/lookup"
CLICKS_PATH = "/v3/link/clicks"
MAX_URLS_PER_LOOKUP = 15
MAX_UNITS = 1000
RAW_KIND = "bitly"
MAX_BACKOFF_SECONDS = 600.0
"""Upper bound of one wait, whatever Retry-After or the exponential backoff says."""

RATE_LIMIT_STATUS_TXT = "RATE_LIMIT_EXCEEDED"
AUTH_STATUS_TXTS = frozenset({"INVALID_ACCESS_TOKEN", "MISSING_ARG_ACCESS_TOKEN", "INVALID_LOGIN"})
TRANSIENT_STATUS_CODES = frozenset({500, 502, 503, 504})  # at the HTTP level; body 503 too, see _interpret
TRANSIENT_STATUS_TXTS = frozenset({"TEMPORARILY_UNAVAILABLE", "UNKNOWN_ERROR"})

GetJson = Callable[[str, list[tuple[str, str]]], dict[str, Any]]
"""(path, params without token) → the answer's JSON object; the seam between HTTP and the raw store."""


class BitlyError(Exception):
    """A Bit.ly answer we cannot use. Never contains the token."""

    def __init__(
        self,
        message: str,
        *,
        http_status: int | None = None,
        status_code: int | None = None,
        status_txt: str | None = None,
    ) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.status_code = status_code
        self.status_txt = status_txt


class BitlyAuthError(BitlyError):
    """The token was refused (HTTP 401 / INVALID_ACCESS_TOKEN): nothing will work until it is fixed."""


class BitlyRateLimitError(BitlyError):
    """Still rate-limited after every retry."""


@dataclass(frozen=True)
class StoryClicks:
    """A story's bitlinks and clicks over one window."""

    url_variants: tuple[str, ...]
    variant_bitlinks: dict[str, str | None]
    """Each looked-up variant → its aggregate bitlink, or None when Bit.ly knows none."""
    per_bitlink: dict[str, dict[date, int]]
    """Bitlink → day → clicks (a repeated day counted once)."""
    daily: dict[date, int]
    """Day → clicks summed across the bitlinks."""
    window: tuple[datetime, datetime]
    fetched_at: datetime = field(compare=False)

    @property
    def bitlinks(self) -> list[str]:
        """Distinct bitlinks found (several variants may share one aggregate bitlink: counted once)."""
        return sorted(self.per_bitlink)

    @property
    def total(self) -> int:
        return sum(self.daily.values())

    def clicks_until(self, cutoff: datetime) -> int:
        """Clicks on the days that began before ``cutoff`` (see :func:`topicmap.social.clicks.clicks_until`)."""
        return clicks_until(self.daily, cutoff)


def request_key(path: str, params: Sequence[tuple[str, str]]) -> str:
    """Raw-store key of a request: its path and parameters, never the token."""
    return f"GET {path}?{urlencode([(k, v) for k, v in params if k != 'access_token'])}"


def _unique(urls: Iterable[str], what: str) -> list[str]:
    seen: dict[str, None] = {}
    for url in urls:
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"{what} must be non-empty strings, got {url!r}")
        seen.setdefault(url, None)
    return list(seen)


def clicks_params(bitlink: str, start: datetime, end: datetime) -> list[tuple[str, str]]:
    """v3 clicks parameters covering every day from ``start``'s day to ``end``'s day (UTC), both included."""
    start_utc, end_utc = as_utc(start, "start"), as_utc(end, "end")
    if start_utc > end_utc:
        raise ValueError(
            f"clicks window start {start_utc.isoformat()} is after its end {end_utc.isoformat()}"
        )
    units = (end_utc.date() - start_utc.date()).days + 1
    if units > MAX_UNITS:
        raise ValueError(f"clicks window of {units} days exceeds Bit.ly's limit of {MAX_UNITS} days")
    return [
        ("link", canonical_bitlink(bitlink)),
        ("unit", "day"),
        ("units", str(units)),
        ("unit_reference_ts", str(int(end_utc.timestamp()))),
        ("rollup", "false"),
        ("limit", str(MAX_UNITS)),
        ("timezone", "Etc/GMT"),
    ]


def parse_lookup_answer(batch: Sequence[str], answer: dict[str, Any]) -> dict[str, str | None]:
    """Map each URL of a lookup request to its aggregate bitlink (or None), by position."""
    data = answer.get("data")
    entries = data.get("link_lookup") if isinstance(data, dict) else None
    if not isinstance(entries, list) or len(entries) != len(batch):
        raise BitlyError(
            f"lookup answer has {len(entries) if isinstance(entries, list) else 'no'} 'link_lookup' entries "
            f"for {len(batch)} URLs"
        )
    found: dict[str, str | None] = {}
    for url, entry in zip(batch, entries, strict=True):
        if not isinstance(entry, dict):
            raise BitlyError(f"lookup entry for {url} is not an object: {entry!r}")
        if entry.get("aggregate_link"):
            found[url] = canonical_bitlink(str(entry["aggregate_link"]))
        elif str(entry.get("error", "")).upper() == "NOT_FOUND":
            found[url] = None
        elif entry.get("error"):
            # One odd variant (e.g. INVALID_URI) should not sink the story: it simply has no bitlink.
            log.warning("Bit.ly lookup of %s answered %s; treating it as no bitlink", url, entry["error"])
            found[url] = None
        else:
            raise BitlyError(f"lookup entry for {url} has neither 'aggregate_link' nor 'error': {entry!r}")
    return found


def _lookup(get_json: GetJson, urls: Iterable[str]) -> dict[str, str | None]:
    unique = _unique(urls, "URLs to look up")
    found: dict[str, str | None] = {}
    for first in range(0, len(unique), MAX_URLS_PER_LOOKUP):
        batch = unique[first : first + MAX_URLS_PER_LOOKUP]
        found.update(parse_lookup_answer(batch, get_json(LOOKUP_PATH, [("url", url) for url in batch])))
    return found


def _clicks(get_json: GetJson, bitlink: str, start: datetime, end: datetime) -> dict[date, int]:
    params = clicks_params(bitlink, start, end)
    answer = get_json(CLICKS_PATH, params)
    try:
        entries = parse_click_entries(answer)
    except ValueError as exc:
        raise BitlyError(f"clicks answer for {params[0][1]} is malformed: {exc}") from None
    first_day, last_day = as_utc(start).date(), as_utc(end).date()
    day_map = merge_day_counts({}, ((d, c) for d, c in entries if first_day <= d <= last_day))
    return dict(sorted(day_map.items()))


def _story_clicks(
    get_json: GetJson, url_variants: Iterable[str], window: tuple[datetime, datetime]
) -> StoryClicks:
    start, end = as_utc(window[0], "window start"), as_utc(window[1], "window end")
    variants = _unique(url_variants, "URL variants")
    variant_bitlinks = _lookup(get_json, variants) if variants else {}
    bitlinks = sorted({link for link in variant_bitlinks.values() if link})
    per_bitlink = {link: _clicks(get_json, link, start, end) for link in bitlinks}
    return StoryClicks(
        url_variants=tuple(variants),
        variant_bitlinks=variant_bitlinks,
        per_bitlink=per_bitlink,
        daily=sum_day_maps(per_bitlink.values()),
        window=(start, end),
        fetched_at=datetime.now(UTC),
    )


class BitlyClient:
    """Bit.ly v3 client with rate-limit backoff, secret masking and a raw-answer store."""

    def __init__(
        self,
        token: str,
        base_url: str = DEFAULT_BASE_URL,
        raw_store: RawResponseStore | None = None,
        session: requests.Session | None = None,
        timeout: float = 30,
        max_retries: int = 6,
        backoff_seconds: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(token, str) or not token.strip():
            raise ValueError("Bit.ly access token is empty: set it (e.g. the BITLY_ACCESS_TOKEN env var)")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"Bit.ly base_url must be an http(s) URL, got {base_url!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if max_retries < 0 or backoff_seconds < 0:
            raise ValueError(
                f"max_retries and backoff_seconds must be >= 0, got {max_retries}, {backoff_seconds}"
            )
        self._token = token
        self._masker = SecretMasker(token)
        protect_secrets_in_logs(self._masker)
        self.base_url = base_url.rstrip("/")
        self.raw_store = raw_store
        if session is None:
            import requests

            session = requests.Session()
        self._session = session
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"BitlyClient(base_url={self.base_url!r}, token='***', raw_store={self.raw_store!r})"

    # -- public API --------------------------------------------------------------------------------------------
    def lookup_bitlinks(self, urls: list[str]) -> dict[str, str | None]:
        """Each URL → its aggregate bitlink (``http://bit.ly/<id>``) or None; 15 URLs per request."""
        return _lookup(self._get_json, urls)

    def fetch_clicks(self, bitlink: str, start: datetime, end: datetime) -> dict[date, int]:
        """Daily clicks of one bitlink for every day from ``start``'s to ``end``'s (UTC, both included)."""
        return _clicks(self._get_json, bitlink, start, end)

    def story_clicks(self, url_variants: list[str], window: tuple[datetime, datetime]) -> StoryClicks:
        """Look up every variant, then fetch and sum the daily clicks of each distinct bitlink over ``window``."""
        return _story_clicks(self._get_json, url_variants, window)

    # -- HTTP --------------------------------------------------------------------------------------------------
    def _backoff(self, retry_index: int, retry_after: float | None) -> float:
        wait = retry_after if retry_after is not None else self.backoff_seconds * (2**retry_index)
        return min(wait, MAX_BACKOFF_SECONDS)

    def _get_json(self, path: str, params: list[tuple[str, str]]) -> dict[str, Any]:
        import requests

        key = request_key(path, params)
        url = self.base_url + path
        last_problem = ""
        rate_limited = False
        for attempt in range(self.max_retries + 1):
            try:
                response = self._session.get(
                    url, params=[*params, ("access_token", self._token)], timeout=self.timeout
                )
            except requests.Timeout:
                outcome: tuple[str, Any, float | None] = ("retry", f"no answer within {self.timeout}s", None)
            except requests.ConnectionError as exc:
                outcome = ("retry", f"connection failed: {self._masker.mask(exc)}", None)
            except requests.RequestException as exc:
                outcome = ("fail", f"request failed: {self._masker.mask(exc)}", None)
            else:
                outcome = self._interpret(response, path)
            verdict, detail, retry_after = outcome
            if verdict == "ok":
                if self.raw_store is not None:
                    self.raw_store.put(RAW_KIND, key, detail)
                return detail
            if verdict == "fail":
                raise detail if isinstance(detail, BitlyError) else BitlyError(f"Bit.ly {path}: {detail}")
            rate_limited = verdict == "rate_limited"
            last_problem = detail
            if attempt < self.max_retries:
                wait = self._backoff(attempt, retry_after)
                log.warning(
                    "Bit.ly %s: %s; retry %d/%d in %.1fs", path, detail, attempt + 1, self.max_retries, wait
                )
                self._sleep(wait)
        error_class = BitlyRateLimitError if rate_limited else BitlyError
        raise error_class(
            f"Bit.ly {path}: gave up after {self.max_retries + 1} attempts; last: {last_problem}"
        )

    def _interpret(self, response: requests.Response, path: str) -> tuple[str, Any, float | None]:
        """("ok", json, None) | ("retry" or "rate_limited", problem, retry_after) | ("fail", BitlyError, None)."""
        http_status = response.status_code
        retry_after = retry_after_seconds(response.headers.get("Retry-After"))
        if http_status == 429:
            return "rate_limited", "rate limited (HTTP 429)", retry_after
        try:
            body = response.json()
        except ValueError:
            body = None
        status_code = body.get("status_code") if isinstance(body, dict) else None
        status_txt = str(body.get("status_txt", "")) if isinstance(body, dict) else ""
        if status_code == 403 and status_txt.upper() == RATE_LIMIT_STATUS_TXT:
            return "rate_limited", f"rate limited ({RATE_LIMIT_STATUS_TXT})", retry_after
        if http_status == 401 or status_txt.upper() in AUTH_STATUS_TXTS:
            error = BitlyAuthError(
                f"Bit.ly refused the access token (HTTP {http_status}, {status_txt or 'no status'}): "
                "check the configured token",
                http_status=http_status,
                status_code=status_code,
                status_txt=status_txt or None,
            )
            return "fail", error, None
        if http_status in TRANSIENT_STATUS_CODES or status_code == 503 or status_txt in TRANSIENT_STATUS_TXTS:
            return (
                "retry",
                f"temporary failure (HTTP {http_status}, {status_txt or 'no status'})",
                retry_after,
            )
        if not 200 <= http_status < 300 or not isinstance(body, dict) or status_code != 200:
            snippet = self._masker.mask(response.text[:200]) if body is None else status_txt
            error = BitlyError(
                f"Bit.ly {path} answered HTTP {http_status}, status_code {status_code}: {snippet}",
                http_status=http_status,
                status_code=status_code if isinstance(status_code, int) else None,
                status_txt=status_txt or None,
            )
            return "fail", error, None
        if not isinstance(body.get("data"), dict):
            return (
                "fail",
                BitlyError(f"Bit.ly {path} answer has no 'data' object", http_status=http_status),
                None,
            )
        return "ok", body, None


def recompute_from_raw(
    raw_store: RawResponseStore, url_variants: list[str], window: tuple[datetime, datetime]
) -> StoryClicks:
    """Rebuild :meth:`BitlyClient.story_clicks` for the same variants and window from stored answers only.

    Runs exactly the same lookup / clicks / aggregation code, with the HTTP call replaced by a raw-store read, so
    the result equals the original (``fetched_at`` aside). Raises :class:`BitlyError` naming the first request
    whose answer is missing from the store.
    """

    def read_stored(path: str, params: list[tuple[str, str]]) -> dict[str, Any]:
        key = request_key(path, params)
        answer = raw_store.get(RAW_KIND, key)
        if answer is None:
            raise BitlyError(f"no stored Bit.ly answer for {key!r} in {raw_store!r}")
        return answer

    return _story_clicks(read_stored, url_variants, window)
