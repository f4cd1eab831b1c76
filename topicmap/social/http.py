"""HTTP helpers shared by the social-metrics clients (:mod:`topicmap.social.bitly`, :mod:`topicmap.social.facebook`).

Both APIs take their credential in the query string (``access_token=``), as their documentation says, which puts
it in every request URL. URLs end up in three places where a secret must never appear: our own log lines and
exception messages (handled by :class:`SecretMasker`), and urllib3's DEBUG log lines (``"GET /v3/...?access_token=
... HTTP/1.1" 200``), handled by a logging filter installed on urllib3's loggers. Media Cloud's Bit.ly client put
the full request URL, token included, into its error messages; that is the bug this module exists to avoid.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import quote, quote_plus

MASK = "***"

# urllib3 logs request lines (with query strings) and retry notices at DEBUG level on these loggers.
_URLLIB3_LOGGERS = ("urllib3.connectionpool", "urllib3.connection", "urllib3.util.retry")


class SecretMasker:
    """Replaces known secrets (and their URL-encoded spellings) with ``***`` in any text."""

    def __init__(self, *secrets: str) -> None:
        spellings: set[str] = set()
        for secret in secrets:
            if secret:
                spellings.update({secret, quote(secret, safe=""), quote_plus(secret, safe="")})
        # Longest first, so that a secret containing another one is masked whole.
        self._spellings = sorted(spellings, key=len, reverse=True)

    def mask(self, text: object) -> str:
        masked = str(text)
        for spelling in self._spellings:
            masked = masked.replace(spelling, MASK)
        return masked

    def merged(self, other: SecretMasker) -> SecretMasker:
        """A masker for the secrets of both (spellings are already expanded, so they are copied as they are)."""
        combined = SecretMasker()
        combined._spellings = sorted(set(self._spellings) | set(other._spellings), key=len, reverse=True)
        return combined

    def __bool__(self) -> bool:
        return bool(self._spellings)

    def __repr__(self) -> str:
        return f"SecretMasker({len(self._spellings)} spellings)"


class _SecretLogFilter(logging.Filter):
    """Masks every registered secret in records passing through urllib3's loggers (process-wide, idempotent)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        # One masker over every distinct secret seen, so many clients with one token do not pile up.
        self._masker = SecretMasker()

    def add(self, masker: SecretMasker) -> None:
        with self._lock:
            self._masker = self._masker.merged(masker)

    def filter(self, record: logging.LogRecord) -> bool:
        masker = self._masker
        if not masker:
            return True
        message = record.getMessage()
        masked = masker.mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


_LOG_FILTER = _SecretLogFilter()
_install_lock = threading.Lock()
_installed = False


def protect_secrets_in_logs(masker: SecretMasker) -> None:
    """Register ``masker`` with the filter on urllib3's loggers (installing the filter on first use)."""
    global _installed
    with _install_lock:
        if not _installed:
            for name in _URLLIB3_LOGGERS:
                logging.getLogger(name).addFilter(_LOG_FILTER)
            _installed = True
    _LOG_FILTER.add(masker)


def retry_after_seconds(header_value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait according to a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent/bad."""
    if header_value is None:
        return None
    text = header_value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds)
