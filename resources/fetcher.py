"""Where the spider's pages come from: the live web, the demo web on loopback, or a WARC replay."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

import dagster as dg
from pydantic import Field

from topicmap.web.fetch_limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_REDIRECTS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TOTAL_TIMEOUT,
)

if TYPE_CHECKING:
    from topicmap.spider.iteration import PageSource
    from topicmap.store.topic_store import TopicStore
    from topicmap.topics.declarations import TopicConfig
    from topicmap.web.fetch import WebFetcher


class PageSourceResource(dg.ConfigurableResource):
    """The spider's fetcher. ``live`` fetches the web (private addresses refused), ``warc`` replays files.

    ``allow_networks`` lists the only exceptions to the SSRF guard (CIDR or IP:PORT); ``host_overrides`` sends
    host patterns to a fixed address (the demo maps ``*.test`` to its loopback server). Throttling is shared
    through the topic store, so every run and process spidering against it keeps each domain's interval.

    Fetch limits (defaults a polite crawler picks): ``total_timeout`` bounds one URL's whole fetch (every
    hop, retry and back-off, and the wait for response headers that trickle in), ``max_retries`` retries on
    429/5xx/connection failures must fit in it, ``max_body_bytes`` caps a page (compressed and inflated),
    ``max_redirects`` caps HTTP and meta-refresh redirects. A bad combination fails the run with a message
    naming the settings.
    """

    mode: Literal["live", "warc"] = "live"
    user_agent: str = "topicmap/0.1 (research crawler; +https://github.com/topicmap/topicmap)"
    allow_networks: list[str] = []
    host_overrides: dict[str, str] = {}
    obey_robots: bool = True
    default_interval: float | None = None
    max_workers: int = 8
    connect_timeout: float = Field(default=10.0, description="seconds to wait for a connection")
    read_timeout: float = Field(default=30.0, description="seconds one read of the socket may wait")
    total_timeout: float = Field(
        default=DEFAULT_TOTAL_TIMEOUT, description="seconds for one URL's whole fetch, retries included"
    )
    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES,
        description="retries of a 429, 5xx or failed connection (1, 2, 4 s back-off)",
    )
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, description="largest page read, in bytes")
    max_redirects: int = Field(default=DEFAULT_MAX_REDIRECTS, description="redirects followed per URL")
    warc_paths: list[str] = []

    def web_fetcher(self, **extra) -> "WebFetcher":  # noqa: ANN003 - WebFetcher's keyword arguments
        """A WebFetcher with these settings (``extra``: throttle, interval overrides, obey_robots ...).
        Raises dg.Failure naming the settings when they do not fit together."""
        from topicmap.web.fetch import WebFetcher
        from topicmap.web.netguard import AddressPolicy

        settings = {
            "user_agent": self.user_agent,
            "connect_timeout": self.connect_timeout,
            "read_timeout": self.read_timeout,
            "total_timeout": self.total_timeout,
            "max_retries": self.max_retries,
            "max_body_bytes": self.max_body_bytes,
            "max_redirects": self.max_redirects,
            "obey_robots": self.obey_robots,
            "policy": AddressPolicy(allow=self.allow_networks),
            "host_overrides": self.host_overrides or None,
            **extra,
        }
        try:
            return WebFetcher(**settings)
        except ValueError as error:
            raise dg.Failure(f"page_source settings are not valid: {error}") from error

    @contextmanager
    def open(self, store: "TopicStore", topic: "TopicConfig") -> Iterator["PageSource"]:
        # the fetcher, its HTML extractors and the WARC reader load with the run that spiders, not with the code
        # location
        from topicmap.spider.sources import FetcherSource, WarcReplaySource
        from topicmap.store.throttle import shared_politeness

        if self.mode == "warc":
            if not self.warc_paths:
                raise dg.Failure("page_source mode 'warc' needs warc_paths")
            source = WarcReplaySource(self.warc_paths)
            yield source
            return
        intervals = dict(topic.fetch.domain_intervals)
        default = (
            topic.fetch.default_interval
            if topic.fetch.default_interval is not None
            else self.default_interval
        )
        if default is not None:
            intervals.setdefault("*", default)
        obey_robots = topic.fetch.obey_robots if topic.fetch.obey_robots is not None else self.obey_robots
        # every process spidering against the store shares each site's turns and robots.txt read
        fetcher = self.web_fetcher(obey_robots=obey_robots, **shared_politeness(store.engine))
        source = FetcherSource(fetcher, max_workers=self.max_workers, interval_overrides=intervals)
        try:
            yield source
        finally:
            source.close()
