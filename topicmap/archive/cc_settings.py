"""Common Crawl's settings and public endpoints, free of heavy imports: the Dagster resource names them when the
code location loads, long before a run queries the index or reads a WARC record (which pulls in requests,
warcio and the store). ``topicmap.archive.commoncrawl`` and ``topicmap.archive.ccnews`` re-export them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

DEFAULT_INDEX_URL = "https://index.commoncrawl.org/{collection}-index"
DEFAULT_DATA_URL = "https://data.commoncrawl.org/"
DEFAULT_FILTERS = ("=status:200", "=mime:text/html")
DEFAULT_USER_AGENT = "topicmap/0.1 (research; Common Crawl loader; +https://github.com/topicmap/topicmap)"
#: CC-NEWS' first day
CCNEWS_START = date(2016, 8, 26)


@dataclass(frozen=True)
class CommonCrawlSettings:
    """Where the index and the data are, and how politely to use them. Endpoints are configuration."""

    #: index endpoint per collection; ``{collection}`` is replaced (pywb: ``http://host:port/{collection}/cdx``)
    index_url: str = DEFAULT_INDEX_URL
    #: prefix of WARC file names (``filename`` of a capture, ``crawl-data/...`` paths of CC-NEWS)
    data_url: str = DEFAULT_DATA_URL
    collections: tuple[str, ...] = ()
    filters: tuple[str, ...] = DEFAULT_FILTERS
    #: exceptions to the SSRF guard (CIDR or IP:PORT): only for an index or data mirror on a private network
    allow_networks: tuple[str, ...] = ()
    user_agent: str = DEFAULT_USER_AGENT
    index_min_interval: float = 1.0
    max_retries: int = 5
    backoff_seconds: float = 2.0
    max_backoff_seconds: float = 120.0
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    #: a record (compressed) or its payload above this is refused, not read: memory stays bounded
    max_record_bytes: int = 50 * 1024 * 1024

    def index_endpoint(self, collection: str) -> str:
        if "{collection}" not in self.index_url:
            raise ValueError(f"index_url {self.index_url!r} must contain '{{collection}}'")
        return self.index_url.replace("{collection}", collection)

    def data_file_url(self, filename: str) -> str:
        return self.data_url.rstrip("/") + "/" + filename.lstrip("/")
