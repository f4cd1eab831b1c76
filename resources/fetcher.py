"""Where the spider's pages come from: the live web, the demo web on loopback, or a WARC replay."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

import dagster as dg

if TYPE_CHECKING:
    from topicmap.spider.iteration import PageSource
    from topicmap.store.topic_store import TopicStore
    from topicmap.topics.declarations import TopicConfig


class PageSourceResource(dg.ConfigurableResource):
    """The spider's fetcher. ``live`` fetches the web (private addresses refused), ``warc`` replays files.

    ``allow_networks`` lists the only exceptions to the SSRF guard (CIDR or IP:PORT); ``host_overrides`` sends
    host patterns to a fixed address (the demo maps ``*.test`` to its loopback server). Throttling is shared
    through the topic store, so every run and process spidering against it keeps each domain's interval.
    """

    mode: Literal["live", "warc"] = "live"
    user_agent: str = "topicmap/0.1 (research crawler; +https://github.com/topicmap/topicmap)"
    allow_networks: list[str] = []
    host_overrides: dict[str, str] = {}
    obey_robots: bool = True
    default_interval: float | None = None
    max_workers: int = 8
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    warc_paths: list[str] = []

    @contextmanager
    def open(self, store: "TopicStore", topic: "TopicConfig") -> Iterator["PageSource"]:
        # the fetcher, its HTML extractors and the WARC reader load with the run that spiders, not with the code
        # location
        from topicmap.spider.sources import FetcherSource, WarcReplaySource
        from topicmap.store.throttle import SqlThrottle
        from topicmap.web.fetch import WebFetcher
        from topicmap.web.netguard import AddressPolicy

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
        fetcher = WebFetcher(
            user_agent=self.user_agent,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            obey_robots=obey_robots,
            policy=AddressPolicy(allow=self.allow_networks),
            host_overrides=self.host_overrides or None,
            throttle=SqlThrottle(store.engine, create_table=False),
        )
        source = FetcherSource(fetcher, max_workers=self.max_workers, interval_overrides=intervals)
        try:
            yield source
        finally:
            source.close()
