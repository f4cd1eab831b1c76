"""Common Crawl endpoints and loading policy: the CDX index, the WARC data endpoint, the outlets and crawls."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from topicmap.archive.cc_settings import (
    DEFAULT_DATA_URL,
    DEFAULT_FILTERS,
    DEFAULT_INDEX_URL,
    DEFAULT_USER_AGENT,
    CommonCrawlSettings,
)


class CommonCrawlResource(dg.ConfigurableResource):
    """Where Common Crawl is read from and how politely (every value comes from the environment in
    ``orchestration/commoncrawl.py``; the defaults are Common Crawl's public endpoints)."""

    index_url: str = Field(
        default=DEFAULT_INDEX_URL,
        description="CDX endpoint with {collection}, e.g. http://host:8080/{collection}/cdx for a pywb mirror",
    )
    data_url: str = Field(default=DEFAULT_DATA_URL, description="prefix of WARC file names (Range requests)")
    collections: list[str] = Field(default=[], description="crawls to query, e.g. CC-MAIN-2026-05")
    outlets: list[str] = Field(
        default=[], description="outlet domains for the queue (and the CC-NEWS filter)"
    )
    filter_ccnews_to_outlets: bool = Field(
        default=True, description="CC-NEWS keeps only pages of `outlets` (when any are configured)"
    )
    filters: list[str] = Field(default=list(DEFAULT_FILTERS), description="CDX filter= values")
    allow_networks: list[str] = Field(
        default=[], description="SSRF-guard exceptions (CIDR or IP:PORT), e.g. a mirror on a private network"
    )
    user_agent: str = DEFAULT_USER_AGENT
    index_min_interval: float = Field(default=1.0, description="seconds between index requests per process")
    max_retries: int = 5
    backoff_seconds: float = 2.0
    max_record_bytes: int = 50 * 1024 * 1024
    workers: int = Field(default=1, description="outlet-queue worker processes the asset runs")
    breadth: bool = Field(
        default=False,
        description="one index page per outlet in turn (every outlet's first page before any second), "
        "instead of draining each outlet",
    )
    fetch_threads: int = Field(default=4, description="Range fetches running ahead of extraction per worker")
    batch_size: int = Field(default=50, description="captures committed per transaction")
    lease_seconds: float = Field(
        default=900.0, description="a running outlet with no write for this long is taken over"
    )

    def settings(self) -> CommonCrawlSettings:
        return CommonCrawlSettings(
            index_url=self.index_url,
            data_url=self.data_url,
            collections=tuple(self.collections),
            filters=tuple(self.filters),
            allow_networks=tuple(self.allow_networks),
            user_agent=self.user_agent,
            index_min_interval=self.index_min_interval,
            max_retries=self.max_retries,
            backoff_seconds=self.backoff_seconds,
            max_record_bytes=self.max_record_bytes,
        )

    def ccnews_outlets(self) -> frozenset[str]:
        return (
            frozenset(o.strip().lower() for o in self.outlets if o.strip())
            if self.filter_ccnews_to_outlets
            else frozenset()
        )
