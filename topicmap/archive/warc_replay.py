"""Offline replay of a crawl: URL → latest capture in WARC/ARC files, following recorded redirects, so the
spider can re-run offline and reproducibly (``topicmap.spider.sources``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from topicmap.archive.warc import (
    DEFAULT_READ_LIMITS,
    REDIRECT_STATUSES,
    WARC_SUFFIXES,
    ReadLimits,
    RequestRecord,
    WarcPage,
    WarcReadError,
    existing_file,
    iter_items,
    read_page_at,
)

logger = logging.getLogger(__name__)

_EPOCH = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class _Capture:
    """Where a page is, plus what redirect following needs; the body stays on disk until asked for."""

    url: str
    date: datetime | None
    sequence: int
    status: int
    location: str | None
    warc_path: str
    offset: int
    offset_is_decompressed: bool

    @property
    def rank(self) -> tuple[datetime, int]:
        return (self.date or _EPOCH, self.sequence)


def replay_key(url: str) -> str:
    """The tolerant lookup key: no scheme (http = https), host lower-cased without a default port, no
    trailing slash, no fragment; the query is kept as is. ``www.`` is kept: it can be another site."""
    try:
        parts = urlsplit(url.strip().replace(" ", "%20"))
        host = (parts.hostname or "").rstrip(".")
    except ValueError:  # e.g. an unbalanced "[" read as a broken IPv6 host: no tolerance, just the text
        return url.strip().split("#", 1)[0].split("://", 1)[-1]
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, 80, 443) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return f"{netloc}{path}" + (f"?{parts.query}" if parts.query else "")


def _exact_key(url: str) -> str:
    return url.strip().replace(" ", "%20").split("#", 1)[0]


class WarcReplay:
    """Serve pages from one or more WARC/ARC files (or folders of them) as if fetched.

    The index maps each URL to its latest capture (by WARC-Date; on a tie the later file/record wins).
    Lookup tries the URL as given, then `replay_key` (http/https, trailing slash, host case). Responses
    whose request was not a GET (POST, HEAD: paired by WARC-Concurrent-To) are left out, since replaying a
    POST result for the spider's GET would be wrong. Bodies stay on disk; `get` reads one record.

    Files are indexed leniently: unreadable parts are skipped and listed in `errors` (``strict=True``
    raises the first instead).
    """

    def __init__(
        self,
        paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        *,
        strict: bool = False,
        max_redirects: int = 10,
        limits: ReadLimits = DEFAULT_READ_LIMITS,
    ) -> None:
        self.strict = strict
        self.limits = limits
        self.max_redirects = max_redirects
        self.errors: list[WarcReadError] = []
        self._exact: dict[str, _Capture] = {}
        self._loose: dict[str, list[_Capture]] = {}
        self._sequence = 0
        for file_path in _expand_paths(paths):
            self.add(file_path)

    def add(self, path: str | os.PathLike[str]) -> int:
        """Index one more file; returns how many captures it contributed."""
        file_path = existing_file(path)
        captures: list[tuple[_Capture, str | None, tuple[str, ...]]] = []
        methods: dict[str, str] = {}  # record id → request method, for both ends of WARC-Concurrent-To
        for item in iter_items(file_path, None if self.strict else self.errors, False, self.limits):
            if isinstance(item, WarcPage):
                self._sequence += 1
                capture = _Capture(
                    url=item.url,
                    date=item.date,
                    sequence=self._sequence,
                    status=item.status,
                    location=item.location if item.status in REDIRECT_STATUSES else None,
                    warc_path=item.warc_path,
                    offset=item.offset,
                    offset_is_decompressed=item.offset_is_decompressed,
                )
                captures.append((capture, item.record_id, item.concurrent_to))
            elif isinstance(item, RequestRecord):
                for record_id in (item.record_id, *item.concurrent_to):
                    if record_id:
                        methods[record_id] = item.method
        added = 0
        for capture, record_id, concurrent_to in captures:
            linked = [methods[key] for key in (record_id, *concurrent_to) if key and key in methods]
            if any(method != "GET" for method in linked):
                continue
            self._index(capture)
            added += 1
        return added

    def _index(self, capture: _Capture) -> None:
        exact = _exact_key(capture.url)
        current = self._exact.get(exact)
        if current is None or capture.rank >= current.rank:
            self._exact[exact] = capture
        self._loose.setdefault(replay_key(capture.url), []).append(capture)

    def __len__(self) -> int:
        """How many distinct URLs have a capture."""
        return len(self._exact)

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self._lookup(url, set()) is not None

    def urls(self) -> list[str]:
        return sorted(capture.url for capture in self._exact.values())

    def get(self, url: str, *, follow_redirects: bool = True) -> WarcPage | None:
        """The latest capture of `url`, after following recorded 3xx redirects (Location resolved against
        the capture's URL), or None when the URL, or a redirect target on the way, was not captured, or the
        redirects loop or exceed `max_redirects`. The final page's `url` is the final URL."""
        visited: set[int] = set()
        current = url
        for _hop in range(self.max_redirects + 1):
            capture = self._lookup(current, visited)
            if capture is None:
                return None
            visited.add(capture.sequence)
            if not follow_redirects or capture.location is None:
                return self._load(capture)
            current = capture.location
        logger.warning("replay: more than %d redirects from %s", self.max_redirects, url)
        return None

    def _lookup(self, url: str, visited: set[int]) -> _Capture | None:
        exact = self._exact.get(_exact_key(url))
        if exact is not None and exact.sequence not in visited:
            return exact
        candidates = [c for c in self._loose.get(replay_key(url), ()) if c.sequence not in visited]
        return max(candidates, key=lambda c: c.rank) if candidates else None

    def _load(self, capture: _Capture) -> WarcPage:
        return read_page_at(
            Path(capture.warc_path),
            capture.offset,
            decompressed=capture.offset_is_decompressed,
            url=capture.url,
            limits=self.limits,
        )


def _expand_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; folders become their WARC/ARC files (by suffix, sorted)."""
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    expanded: list[Path] = []
    for entry in given:
        entry_path = Path(entry)
        if entry_path.is_dir():
            expanded.extend(
                sorted(
                    p for p in entry_path.iterdir() if p.is_file() and p.name.lower().endswith(WARC_SUFFIXES)
                )
            )
        else:
            expanded.append(entry_path)
    return expanded
