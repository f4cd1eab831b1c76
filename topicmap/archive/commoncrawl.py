"""Common Crawl in: the CDX index client, the WARC record fetcher (HTTP Range) and a capture → story step.

Common Crawl publishes, per crawl ("collection", e.g. ``CC-MAIN-2026-05``), a CDX index served by pywb
(``https://index.commoncrawl.org/CC-MAIN-2026-05-index``) and the WARC files on a plain HTTP endpoint
(``https://data.commoncrawl.org/``). A capture's index line names the WARC file, the byte offset and the
length of its record; the record is one gzip member, fetched alone with ``Range: bytes=offset-(offset+length-1)``.

What a user loading Common Crawl at scale expects, and this module does:

* **Index queries** as pywb answers them: ``url=<domain>/*`` (every page of the host; pywb's SURT keys drop
  ``www.``), ``output=json`` (one JSON object per line), ``filter=`` lines (default: status 200 and text/html),
  and ZipNum pagination: ``showNumPages=true`` first, then ``page=0..N-1``. A plain (non-ZipNum) pywb index
  ignores both parameters and answers every query with the whole result; that answer is recognised (it is
  a capture line, not ``{"pages": N}``) and treated as one page.
* **Politeness**: at most one index request per ``index_min_interval`` seconds per process (Common Crawl asks
  for about one a second), retries on 429/5xx ("slow down") and connection errors with exponential backoff
  that honours ``Retry-After``. Errors name the collection, the domain and the page.
* **Safety**: every request goes through the project's SSRF guard (``topicmap.web.netguard``); loopback and
  private addresses are refused unless ``allow_networks`` admits them (tests allow their own ports only).
* **Records**: one record that cannot be fetched (404) or parsed (a corrupt gzip member, a revisit without
  payload, a payload over ``max_record_bytes``) is a :class:`CaptureError` naming the file and offset; the
  caller reports it and goes on with the next capture.
"""

from __future__ import annotations

import io
import json
import logging
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

import requests
from warcio.archiveiterator import ArchiveIterator

from topicmap.archive.cc_settings import DEFAULT_DATA_URL as DEFAULT_DATA_URL
from topicmap.archive.cc_settings import DEFAULT_FILTERS as DEFAULT_FILTERS
from topicmap.archive.cc_settings import DEFAULT_INDEX_URL as DEFAULT_INDEX_URL
from topicmap.archive.cc_settings import DEFAULT_USER_AGENT as DEFAULT_USER_AGENT
from topicmap.archive.cc_settings import CommonCrawlSettings as CommonCrawlSettings
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory

# re-exported (``X as X``): the loaders import Common Crawl's settings from this module
from topicmap.web.http_head import retry_after_seconds
from topicmap.web.media import medium_url_and_name
from topicmap.web.netguard import AddressPolicy, AddressRefused, GuardedHTTPAdapter
from topicmap.web.urls import is_http_url

log = logging.getLogger(__name__)

#: statuses worth retrying: Common Crawl's "slow down" is a 503 (sometimes 429); 5xx are transient
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
HTML_MIME_TYPES = frozenset({"text/html", "application/xhtml+xml"})


class CommonCrawlError(RuntimeError):
    """An index query that failed for good (after retries): names the collection, domain and page."""


class CaptureError(RuntimeError):
    """One capture that cannot become a page (fetch or parse failed): names the WARC file and offset.

    ``reason`` is a short category for counting (``http 404``, ``corrupt record`` ...)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Capture:
    """One line of a CDX index answer (the fields pywb and Common Crawl give with ``output=json``)."""

    collection: str
    url: str
    timestamp: str
    status: str
    mime: str
    filename: str
    offset: int
    length: int
    digest: str = ""
    urlkey: str = ""

    @property
    def captured_at(self) -> datetime | None:
        try:
            return datetime.strptime(self.timestamp[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
        except ValueError:
            return None

    @property
    def where(self) -> str:
        return f"{self.filename}@{self.offset}+{self.length}"


@dataclass(frozen=True)
class FetchedPage:
    """The HTTP response held in one WARC record."""

    url: str
    status: int | None
    content_type: str | None
    payload: bytes
    captured_at: datetime | None


class _Pacer:
    """At most one request per ``interval`` seconds from this process (thread-safe)."""

    def __init__(self, interval: float, sleep: Callable[[float], None]) -> None:
        self.interval = interval
        self._next = 0.0
        self._lock = threading.Lock()
        self._sleep = sleep

    def wait(self) -> None:
        if self.interval <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self._sleep(start - now)


def guarded_session(settings: CommonCrawlSettings, pool_size: int = 16) -> requests.Session:
    """A requests session whose every connection passes the SSRF guard (proxies from the env are ignored)."""
    session = requests.Session()
    session.trust_env = False
    adapter = GuardedHTTPAdapter(
        AddressPolicy(allow=list(settings.allow_networks)), pool_connections=4, pool_maxsize=pool_size
    )
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = settings.user_agent
    return session


class _Http:
    """GET with the retry policy shared by the index client and the record fetcher."""

    def __init__(
        self,
        settings: CommonCrawlSettings,
        session: requests.Session | None,
        sleep: Callable[[float], None],
    ) -> None:
        self.settings = settings
        self.session = session or guarded_session(settings)
        self._sleep = sleep
        self.retries = 0  # how many retries were needed (metadata: a sign the server asked us to slow down)

    def backoff(self, attempt: int, response: requests.Response | None) -> float:
        hinted = retry_after_seconds(response.headers.get("Retry-After")) if response is not None else None
        base = self.settings.backoff_seconds * (2**attempt)
        delay = hinted if hinted is not None else base * (0.5 + random.random() / 2)
        return min(delay, self.settings.max_backoff_seconds)

    def get(
        self,
        url: str,
        what: str,
        *,
        params: dict | list | None = None,
        headers: dict | None = None,
        stream: bool = False,
        pacer: _Pacer | None = None,
        ok: frozenset[int] = frozenset({200}),
    ) -> requests.Response:
        """GET until a status in ``ok`` (or a non-retryable one, returned as is); raises on exhaustion."""
        timeout = (self.settings.connect_timeout, self.settings.read_timeout)
        last = ""
        for attempt in range(self.settings.max_retries + 1):
            if pacer is not None:
                pacer.wait()
            response: requests.Response | None = None
            try:
                response = self.session.get(
                    url, params=params, headers=headers, timeout=timeout, stream=stream
                )
            except AddressRefused as exc:
                raise CommonCrawlError(f"{what}: refused by the SSRF guard: {exc}") from exc
            except requests.RequestException as exc:
                last = f"{exc.__class__.__name__}: {exc}"
            else:
                if response.status_code in ok or response.status_code not in RETRYABLE_STATUSES:
                    return response
                last = f"HTTP {response.status_code}"
                response.close()
            if attempt < self.settings.max_retries:
                delay = self.backoff(attempt, response)
                log.info("%s: %s, retry %d in %.1f s", what, last, attempt + 1, delay)
                self.retries += 1
                self._sleep(delay)
        raise CommonCrawlError(f"{what}: gave up after {self.settings.max_retries + 1} attempts ({last})")


class CdxClient:
    """Queries a pywb CDX server (Common Crawl's index) for the captures of a domain, page by page."""

    def __init__(
        self,
        settings: CommonCrawlSettings,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.http = _Http(settings, session, sleep)
        self.pacer = _Pacer(settings.index_min_interval, sleep)
        self.requests_made = 0

    def _params(self, domain: str, extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
        params = [("url", f"{domain}/*"), ("output", "json")]
        params += [("filter", f) for f in self.settings.filters]
        # pywb answers a query without a match with a "fuzzy" neighbour; an outlet query wants exact answers
        params.append(("allowFuzzy", "0"))
        return params + extra

    def _query(self, collection: str, domain: str, page: int | None, extra: list[tuple[str, str]]) -> str:
        what = f"CDX index {collection!r}, domain {domain!r}, " + (
            f"page {page}" if page is not None else "page count"
        )
        endpoint = self.settings.index_endpoint(collection)
        self.requests_made += 1
        try:
            response = self.http.get(endpoint, what, params=self._params(domain, extra), pacer=self.pacer)
        except CommonCrawlError:
            raise
        # Common Crawl answers "no captures" with 404 and a JSON message; pywb with 200 and an empty body.
        if response.status_code == 404:
            return ""
        if response.status_code != 200:
            raise CommonCrawlError(f"{what}: HTTP {response.status_code}: {response.text[:200]!r}")
        return response.text

    def num_pages(self, collection: str, domain: str) -> int:
        """Pages of the answer for ``domain`` (ZipNum's ``showNumPages``); 1 for a plain index or no match."""
        body = self._query(collection, domain, None, [("showNumPages", "true")])
        first = body.strip().split("\n", 1)[0] if body.strip() else ""
        if not first:
            return 0
        try:
            answer = json.loads(first)
        except ValueError as exc:
            raise CommonCrawlError(
                f"CDX index {collection!r}, domain {domain!r}, page count: not JSON: {first[:200]!r}"
            ) from exc
        if isinstance(answer, dict) and "pages" in answer:
            return int(answer["pages"])
        if isinstance(answer, int):  # the plain-text form of showNumPages
            return answer
        return 1  # a plain index ignores showNumPages and answers with the captures themselves

    def captures(self, collection: str, domain: str, page: int) -> list[Capture]:
        """The captures on one page of the answer, in index order (the order a resumed worker relies on)."""
        body = self._query(collection, domain, page, [("page", str(page))])
        found: list[Capture] = []
        for number, line in enumerate(body.splitlines(), start=1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise CommonCrawlError(
                    f"CDX index {collection!r}, domain {domain!r}, page {page}, line {number}: "
                    f"not JSON: {line[:200]!r}"
                ) from exc
            if not isinstance(row, dict) or row.get("is_fuzzy") in ("1", 1, True):
                continue
            found.append(_capture_from_row(collection, row))
        return found

    def iter_captures(self, collection: str, domain: str) -> Iterator[tuple[int, list[Capture]]]:
        for page in range(self.num_pages(collection, domain)):
            yield page, self.captures(collection, domain, page)


def _capture_from_row(collection: str, row: dict) -> Capture:
    def number(name: str) -> int:
        try:
            return int(row.get(name, -1))
        except (TypeError, ValueError):
            return -1

    return Capture(
        collection=collection,
        url=str(row.get("url", "")),
        timestamp=str(row.get("timestamp", "")),
        status=str(row.get("status", "")),
        mime=str(row.get("mime", "")),
        filename=str(row.get("filename", "")),
        offset=number("offset"),
        length=number("length"),
        digest=str(row.get("digest", "")),
        urlkey=str(row.get("urlkey", "")),
    )


class RecordFetcher:
    """Fetches one capture's WARC record by HTTP Range from the data endpoint and parses it with warcio."""

    def __init__(
        self,
        settings: CommonCrawlSettings,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.http = _Http(settings, session, sleep)

    def fetch(self, capture: Capture) -> FetchedPage:
        if not capture.filename or capture.offset < 0 or capture.length <= 0:
            raise CaptureError(
                f"{capture.url}: index line has no usable filename/offset/length ({capture.where})",
                "bad index line",
            )
        if capture.length > self.settings.max_record_bytes:
            raise CaptureError(
                f"{capture.where}: record of {capture.length} bytes is over the {self.settings.max_record_bytes} cap",
                "record too large",
            )
        last_byte = capture.offset + capture.length - 1
        try:
            response = self.http.get(
                self.settings.data_file_url(capture.filename),
                f"WARC record {capture.where} ({capture.collection})",
                headers={"Range": f"bytes={capture.offset}-{last_byte}"},
                ok=frozenset({206}),
            )
        except CommonCrawlError as exc:
            raise CaptureError(str(exc), "fetch failed") from exc
        if response.status_code == 200:
            # A server that ignores Range sends the whole file: refuse rather than download gigabytes.
            response.close()
            raise CaptureError(
                f"{capture.where}: the data endpoint ignored the Range header (HTTP 200)", "range ignored"
            )
        if response.status_code != 206:
            raise CaptureError(
                f"{capture.where}: HTTP {response.status_code} from the data endpoint",
                f"http {response.status_code}",
            )
        body = response.content
        if len(body) != capture.length:
            raise CaptureError(
                f"{capture.where}: got {len(body)} bytes, the index says {capture.length}", "short record"
            )
        return parse_record(body, capture.where, self.settings.max_record_bytes)


def parse_record(body: bytes, where: str, max_payload_bytes: int) -> FetchedPage:
    """The response in one (gzipped) WARC record; CaptureError if it is corrupt or holds no page."""
    if body[:2] == b"\x1f\x8b":
        body = _gunzip_member(body, where, max_payload_bytes)
    try:
        record = next(iter(ArchiveIterator(io.BytesIO(body))), None)
        if record is None:
            raise CaptureError(f"{where}: no WARC record in the range", "corrupt record")
        if record.rec_type != "response":
            raise CaptureError(
                f"{where}: a {record.rec_type} record holds no page", f"{record.rec_type} record"
            )
        page = page_from_record(record, max_payload_bytes)
    except CaptureError:
        raise
    except Exception as exc:  # noqa: BLE001 - warcio/zlib raise many types on damaged input
        raise CaptureError(
            f"{where}: corrupt record: {exc.__class__.__name__}: {exc}", "corrupt record"
        ) from exc
    if page is None:
        raise CaptureError(f"{where}: payload over {max_payload_bytes} bytes", "payload too large")
    return page


def _gunzip_member(body: bytes, where: str, max_bytes: int) -> bytes:
    """Inflate the record's gzip member, checking its CRC and size: warcio's streaming reader does not
    check the CRC, so damage inside a member would otherwise come out as garbage HTML instead of an error.
    The cap bounds memory against a member that inflates without end (a gzip bomb)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        # WARC headers and HTTP head come on top of the payload: allow them 1 MiB beyond the payload cap
        data = inflater.decompress(body, max_bytes + (1 << 20))
    except zlib.error as exc:
        raise CaptureError(f"{where}: corrupt record: {exc}", "corrupt record") from exc
    if inflater.unconsumed_tail:
        raise CaptureError(f"{where}: record inflates beyond {max_bytes} bytes", "payload too large")
    if not inflater.eof:
        raise CaptureError(f"{where}: corrupt record: the gzip member is cut short", "corrupt record")
    return data


def page_from_record(record, max_payload_bytes: int) -> FetchedPage | None:  # noqa: ANN001 - warcio record
    """A warcio response record as a page; None when its payload is over the cap (the rest is not read)."""
    http_headers = record.http_headers
    status = None
    content_type = None
    if http_headers is not None:
        try:
            status = int(http_headers.get_statuscode())
        except (TypeError, ValueError):
            status = None
        content_type = http_headers.get_header("Content-Type")
    payload = record.content_stream().read(max_payload_bytes + 1)
    if len(payload) > max_payload_bytes:
        return None
    date = record.rec_headers.get_header("WARC-Date") or ""
    try:
        captured = datetime.fromisoformat(date.replace("Z", "+00:00")) if date else None
    except ValueError:
        captured = None
    return FetchedPage(
        url=record.rec_headers.get_header("WARC-Target-URI") or "",
        status=status,
        content_type=content_type,
        payload=payload,
        captured_at=captured,
    )


@dataclass
class Rejections:
    """Why captures did not become stories: counts by reason plus the first few examples."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, str]] = field(default_factory=list)
    max_examples: int = 50

    def add(self, reason: str, where: str, message: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        if len(self.examples) < self.max_examples:
            self.examples.append({"reason": reason, "where": where, "message": message[:300]})

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def merge(self, other: Rejections) -> None:
        for reason, count in other.counts.items():
            self.counts[reason] = self.counts.get(reason, 0) + count
        room = self.max_examples - len(self.examples)
        self.examples.extend(other.examples[: max(room, 0)])


def _mime_and_charset(content_type: str | None) -> tuple[str | None, str | None]:
    if not content_type:
        return None, None
    parts = [p.strip() for p in content_type.split(";")]
    charset = None
    for part in parts[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip("\"'") or None
    return (parts[0].lower() or None), charset


class StoryRejected(ValueError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def story_from_page(page: FetchedPage, url: str | None = None) -> NewStory:
    """An archive story from a captured page, through the spider's extraction (title kept, text, date,
    language). Raises StoryRejected with a reason when the page is not a story."""
    url = url or page.url
    if not is_http_url(url) or medium_url_and_name(url) is None:
        raise StoryRejected("not an http(s) url", f"url {url!r} is not an absolute http(s) URL of a medium")
    if not s.url_fits(url):  # never cut: a cut URL is another URL
        raise StoryRejected(
            "url too long", f"url is {len(url)} characters, over {s.MAX_URL_LENGTH}: {url[:80]}..."
        )
    if page.status is not None and page.status != 200:
        raise StoryRejected(f"http {page.status}", f"{url}: captured with HTTP {page.status}")
    mime, charset = _mime_and_charset(page.content_type)
    if mime is not None and mime not in HTML_MIME_TYPES:
        raise StoryRejected("not html", f"{url}: content type {mime}")
    # trafilatura and friends load with the first page, not with whoever only reads the settings
    from topicmap.web.extract import decode_html, extract_story

    text = decode_html(page.payload, charset)
    extracted = extract_story(text, url)
    if not (extracted.title or "").strip() and not (extracted.text or "").strip():
        raise StoryRejected("no title or text", f"{url}: extraction found neither title nor text")
    return NewStory.from_extracted(
        url,
        extracted,
        collect_date=page.captured_at,
        html=page.payload,
        encoding=charset or "utf-8",
        http_status=page.status or 200,
    )


def host_matches(url: str, domains: frozenset[str]) -> bool:
    """Whether ``url``'s host is one of ``domains`` or a subdomain of one."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    while host:
        if host in domains:
            return True
        _, dot, host = host.partition(".")
        if not dot:
            return False
    return False


def normalize_domain(value: str) -> str:
    """``https://www.Example.com/news`` → ``www.example.com``: the host an outlet query is made for."""
    text = value.strip()
    if "://" in text:
        text = urlsplit(text).hostname or ""
    text = text.split("/", 1)[0].split(":", 1)[0].lower().rstrip(".")
    if not text or " " in text or "." not in text:
        raise ValueError(f"outlet {value!r} is not a domain name")
    return text
