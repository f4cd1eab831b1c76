"""Page sources for the spider: the web through ``WebFetcher``, or a WARC crawl replayed as if fetched."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from topicmap.archive.warc_replay import WarcReplay
from topicmap.web.extract import decode_html
from topicmap.web.fetch import FetchOutcome, WebFetcher
from topicmap.web.throttle import default_interval


class FetcherSource:
    """The live web (or the demo web on loopback): a ``WebFetcher`` with per-topic interval overrides."""

    def __init__(
        self, fetcher: WebFetcher, max_workers: int = 8, interval_overrides: Mapping[str, float] | None = None
    ):
        self.fetcher = fetcher
        self.max_workers = max_workers
        self.interval_overrides = dict(interval_overrides or {})

    @property
    def polite(self) -> bool:
        """Whether sites have a politeness interval (the default one is not 0): then workers sharing an
        iteration keep off the sites another one is fetching (topicmap.spider.claims, site affinity)."""
        return default_interval({**self.fetcher.interval_overrides, **self.interval_overrides}) > 0

    def fetch_many(self, urls: Iterable[str]) -> Iterator[FetchOutcome]:
        return self.fetcher.fetch_many(
            urls, max_workers=self.max_workers, interval_overrides=self.interval_overrides
        )

    def close(self) -> None:
        self.fetcher.close()


class WarcReplaySource:
    """Offline, reproducible re-spidering: every fetch is answered from recorded WARC captures."""

    def __init__(self, paths: Sequence[str | Path]):
        self.replay = WarcReplay([Path(p) for p in paths])

    def fetch_one(self, url: str) -> FetchOutcome:
        page = self.replay.get(url)
        if page is None:
            return FetchOutcome(url=url, final_url=url, error="not captured in the replayed WARC files")
        charset = page.charset
        is_html = page.is_html
        return FetchOutcome(
            url=url,
            final_url=page.url,
            status=page.status,
            content=page.body if is_html else None,
            text=decode_html(page.body, charset) if is_html else None,
            content_type=page.content_type,
            charset=charset,
            refused_reason=None if is_html else f"non-html content-type: {page.content_type}",
        )

    def fetch_many(self, urls: Iterable[str]) -> Iterator[FetchOutcome]:
        for url in urls:
            yield self.fetch_one(url)

    def close(self) -> None:
        return None
