"""Facebook Graph API engagement counts (shares, comments, reactions) for story URLs.

Follows Media Cloud's ``facebook_fetch_story_stats``:

* Request: ``GET {base_url}/?id=<canonical url>&fields=engagement&access_token=<app_id>|<app_secret>``; answer
  ``{"id": "<url>", "engagement": {"share_count": 1, "comment_count": 2, "reaction_count": 3, ...}}``, errors as
  ``{"error": {"message": ..., "type": "OAuthException", "code": 190, "fbtrace_id": ...}}`` (HTTP 4xx/5xx).
* The URL is fixed (:func:`topicmap.web.urls.fix_common_url_mistakes`) and made canonical
  (:func:`topicmap.web.urls.normalize_url`) first. A non-http URL, and URLs known never to work (Google search/webhp,
  Google Trends, Facebook ``/posts/`` and ``/story``), are *soft failures*: recorded in
  :attr:`EngagementResult.error`, and the caller moves on to the next story.
* Graph API errors 2, 4, 17, 32, 341, 613 (temporary / throttling) and the "Sorry, something went wrong" HTML page
  are retried, ``retry_wait_seconds`` apart, up to ``max_attempts`` attempts in all (Media Cloud: 22 attempts, 60 s).
  Timeouts and dropped connections are retried the same way. Running out of attempts is a hard failure
  (:class:`FacebookRateLimitError`): the API is unusable for now, not this URL.
* Errors 190 (invalid/expired token) and 102 (session) raise :class:`FacebookAuthError`, a hard failure with a clear
  message; the app secret never appears in messages, ``repr`` or logs (urllib3's debug log included).
* Error 100 (invalid parameter: a URL Facebook will not take), "Unsupported get request" and OAuth errors on
  facebook.com URLs are soft failures; any other error or an answer that is not Graph API JSON is a hard
  :class:`FacebookError` (most likely a wrong base URL or a changed API).
* The answer's ``id`` must be the URL (compared canonically) unless it is numeric (a Facebook page); all three counts
  missing is a soft failure (Facebook has never seen the URL).

Fixed Media Cloud bugs: it read the error *type* where it meant the error *message* (``error.get('type', ...)``
twice), so its "Unsupported get request" test could never match; its Google search pattern required a subdomain
(``https://google.com/search?q=`` slipped through); an answer for another URL stopped the whole worker, where here it
is a soft failure of that one story.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from topicmap.social.http import SecretMasker, protect_secrets_in_logs

# requests and the URL rules (tld, idna) load with the first client or call, not with a code location that only
# names the settings
if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://graph.facebook.com/v12.0"
RETRYABLE_ERROR_CODES = frozenset({2, 4, 17, 32, 341, 613})
AUTH_ERROR_CODES = frozenset({102, 190})
SOFT_ERROR_CODES = frozenset({100})
SOMETHING_WENT_WRONG = "something went wrong"

URL_PATTERNS_THAT_NEVER_WORK: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Google search", re.compile(r"^https?://(?:[^/?#]*\.)?google\.[a-z.]{2,7}/(?:search|webhp)", re.I)),
    (
        "Google Trends",
        re.compile(r"^https?://(?:(?:[^/?#]*\.)?google\.[a-z.]{2,7}/trends|trends\.google\.)", re.I),
    ),
    ("Facebook post", re.compile(r"^https?://(?:[^/?#]*\.)?facebook\.com/(?:[^?#]*/)?posts/", re.I)),
    (
        "Facebook story",
        re.compile(r"^https?://(?:[^/?#]*\.)?facebook\.com/(?:[^?#]*/)?story(?:\.php)?(?:[/?#]|$)", re.I),
    ),
)


class FacebookError(Exception):
    """A hard failure: stop fetching (configuration or an answer we do not understand). Never holds the secret."""

    def __init__(self, message: str, *, code: int | None = None, http_status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = http_status


class FacebookAuthError(FacebookError):
    """The app credentials were refused (error 190 / 102)."""


class FacebookRateLimitError(FacebookError):
    """Still failing with retryable errors after every attempt."""


@dataclass(frozen=True)
class EngagementResult:
    """Engagement counts of one URL, or the soft failure that prevented them (``error``)."""

    url: str
    share_count: int | None
    comment_count: int | None
    reaction_count: int | None
    error: str | None
    collected_at: datetime
    api_url: str | None = field(default=None)
    """The canonical URL actually sent to the API (None when the URL was rejected before any request)."""

    @property
    def ok(self) -> bool:
        return self.error is None


class _SoftFailure(Exception):
    """Internal: this URL cannot be measured; record why and continue."""


def never_works_reason(url: str) -> str | None:
    """Why the Graph API never answers usefully for ``url`` (a label), or None if it is worth asking."""
    for label, pattern in URL_PATTERNS_THAT_NEVER_WORK:
        if pattern.search(url):
            return label
    return None


def _same_url(left: str, right: str) -> bool:
    from topicmap.web.urls import normalize_url

    if left == right:
        return True
    canonical_left = normalize_url(left)
    return canonical_left is not None and canonical_left == normalize_url(right)


def _count(engagement: dict[str, Any], name: str) -> int | None:
    value = engagement.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FacebookError(f"Graph API answered a non-count {name}={value!r}")
    return value


class FacebookClient:
    """Graph API engagement client (see the module docstring for the rules)."""

    def __init__(
        self,
        app_id: str,
        app_secret: str,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 60,
        max_attempts: int = 22,
        retry_wait_seconds: float = 60,
        sleep: Callable[[float], None] = time.sleep,
        session: requests.Session | None = None,
    ) -> None:
        if not isinstance(app_id, str) or not app_id.strip():
            raise ValueError("Facebook app ID is empty: set it (e.g. the FACEBOOK_APP_ID env var)")
        if not isinstance(app_secret, str) or not app_secret.strip():
            raise ValueError("Facebook app secret is empty: set it (e.g. the FACEBOOK_APP_SECRET env var)")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"Facebook base_url must be an http(s) URL, got {base_url!r}")
        if timeout <= 0 or max_attempts < 1 or retry_wait_seconds < 0:
            raise ValueError(
                f"need timeout > 0, max_attempts >= 1, retry_wait_seconds >= 0; got {timeout}, {max_attempts}, "
                f"{retry_wait_seconds}"
            )
        self.app_id = app_id
        self._access_token = f"{app_id}|{app_secret}"
        self._masker = SecretMasker(self._access_token, app_secret)
        protect_secrets_in_logs(self._masker)
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.retry_wait_seconds = retry_wait_seconds
        self._sleep = sleep
        if session is None:
            import requests

            session = requests.Session()
        self._session = session

    def __repr__(self) -> str:
        return f"FacebookClient(base_url={self.base_url!r}, app_id={self.app_id!r}, app_secret='***')"

    # -- public API --------------------------------------------------------------------------------------------
    def fetch_engagement(self, url: str) -> EngagementResult:
        """Engagement counts for one story URL. Soft failures come back in ``error``; hard ones raise."""
        api_url: str | None = None
        try:
            api_url = self._api_url(url)
            counts = self._counts_for(api_url)
        except _SoftFailure as failure:
            log.info("Facebook: no engagement for %s: %s", url, failure)
            return EngagementResult(
                url=url,
                share_count=None,
                comment_count=None,
                reaction_count=None,
                error=str(failure),
                collected_at=datetime.now(UTC),
                api_url=api_url,
            )
        share, comment, reaction = counts
        return EngagementResult(
            url=url,
            share_count=share,
            comment_count=comment,
            reaction_count=reaction,
            error=None,
            collected_at=datetime.now(UTC),
            api_url=api_url,
        )

    def fetch_engagements(self, urls: Iterable[str]) -> list[EngagementResult]:
        """:meth:`fetch_engagement` for each URL in order; stops at the first hard failure."""
        return [self.fetch_engagement(url) for url in urls]

    # -- steps -------------------------------------------------------------------------------------------------
    @staticmethod
    def _api_url(url: str) -> str:
        from topicmap.web.urls import fix_common_url_mistakes, is_http_url, normalize_url

        if not isinstance(url, str) or not url.strip():
            raise _SoftFailure("URL is not set")
        fixed = fix_common_url_mistakes(url)
        if not fixed or not is_http_url(fixed):
            raise _SoftFailure(f"URL is not HTTP(s): {url!r}")
        canonical = normalize_url(fixed)  # total function: None when it cannot
        if not canonical or not is_http_url(canonical):
            raise _SoftFailure(f"URL cannot be made canonical: {url!r}")
        reason = never_works_reason(canonical)
        if reason:
            raise _SoftFailure(f"skipped: {reason} URLs never return engagement from the Graph API")
        return canonical

    def _counts_for(self, api_url: str) -> tuple[int | None, int | None, int | None]:
        data = self._request(api_url)
        response_id = data.get("id")
        if response_id is None:
            raise FacebookError(
                f"Graph API answer for {api_url} has no 'id': {self._masker.mask(data)[:200]}"
            )
        response_id = str(response_id)
        if not response_id.isdigit() and not _same_url(response_id, api_url):
            # Media Cloud stopped the worker here; it is one URL's oddity, so record it and go on.
            raise _SoftFailure(f"Graph API answered for another URL ({response_id})")
        engagement = data.get("engagement")
        if engagement is None:
            engagement = {}
        if not isinstance(engagement, dict):
            raise FacebookError(f"Graph API 'engagement' for {api_url} is not an object: {engagement!r}")
        counts = (
            _count(engagement, "share_count"),
            _count(engagement, "comment_count"),
            _count(engagement, "reaction_count"),
        )
        if all(count is None for count in counts):
            raise _SoftFailure("no statistics returned for URL")
        return counts

    def _request(self, api_url: str) -> dict[str, Any]:
        """The Graph API answer for ``api_url``, retrying temporary errors; raises on hard/soft failures."""
        import requests

        params = {"id": api_url, "fields": "engagement", "access_token": self._access_token}
        last_problem = ""
        for attempt in range(1, self.max_attempts + 1):
            fatal: str | None = None
            try:
                response = self._session.get(self.base_url + "/", params=params, timeout=self.timeout)
            except requests.Timeout:
                problem = f"no answer within {self.timeout}s"
            except requests.ConnectionError as exc:
                problem = f"connection failed: {self._masker.mask(exc)}"
            except requests.RequestException as exc:
                problem, fatal = "", f"Graph API request failed: {self._masker.mask(exc)}"
            else:
                retry_problem, data = self._interpret(response, api_url)
                if retry_problem is None:
                    return data
                problem = retry_problem
            if fatal is not None:
                # Raised outside the except block, so the masked message is the only trace of the request.
                raise FacebookError(fatal)
            last_problem = problem
            if attempt < self.max_attempts:
                log.warning(
                    "Facebook: %s for %s; attempt %d/%d, retrying in %.0fs",
                    problem,
                    api_url,
                    attempt,
                    self.max_attempts,
                    self.retry_wait_seconds,
                )
                self._sleep(self.retry_wait_seconds)
        raise FacebookRateLimitError(
            f"Graph API still failing after {self.max_attempts} attempts for {api_url}; last: {last_problem}"
        )

    def _interpret(self, response: requests.Response, api_url: str) -> tuple[str | None, dict[str, Any]]:
        """(None, data) on success; (problem, {}) when the request should be retried; raises otherwise."""
        text = response.text or ""
        if not text.strip():
            # Some URLs consistently get an empty answer (Media Cloud): give up on this one.
            raise _SoftFailure(f"empty answer (HTTP {response.status_code})")
        try:
            data = response.json()
        except ValueError:
            if SOMETHING_WENT_WRONG in text.lower():
                return f"'something went wrong' page (HTTP {response.status_code})", {}
            raise FacebookError(
                f"Graph API answered HTTP {response.status_code} with non-JSON for {api_url}: "
                f"{self._masker.mask(text[:120])!r}",
                http_status=response.status_code,
            ) from None
        if not isinstance(data, dict):
            raise FacebookError(
                f"Graph API answer for {api_url} is not a JSON object", http_status=response.status_code
            )
        error = data.get("error")
        if error is None and 200 <= response.status_code < 300:
            return None, data
        if not isinstance(error, dict):
            raise FacebookError(
                f"Graph API answered HTTP {response.status_code} without an 'error' object for {api_url}",
                http_status=response.status_code,
            )
        code = error.get("code")
        error_type = str(error.get("type", "unknown type"))
        message = self._masker.mask(error.get("message", "unknown message"))
        if code in RETRYABLE_ERROR_CODES:
            return f"error {code} ({error_type}: {message})", {}
        if code in AUTH_ERROR_CODES:
            raise FacebookAuthError(
                f"Facebook refused the app credentials (error {code}, {error_type}: {message}); check the app ID "
                "and app secret settings",
                code=code,
                http_status=response.status_code,
            )
        if (
            code in SOFT_ERROR_CODES
            or (error_type == "GraphMethodException" and "Unsupported get request" in message)
            or (error_type == "OAuthException" and "facebook.com" in (urlsplit(api_url).hostname or ""))
        ):
            raise _SoftFailure(f"Graph API error {code} ({error_type}): {message}")
        raise FacebookError(
            f"Graph API error {code} ({error_type}) for {api_url}: {message}",
            code=code if isinstance(code, int) else None,
            http_status=response.status_code,
        )
