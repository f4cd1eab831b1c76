"""WebFetcher against a misbehaving loopback server: every fault ends in the right outcome with a useful
message, the SSRF guard holds on every hop, memory stays bounded, and fetch_many schedules across domains."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.faultserver import PDF_BYTES, FaultServer, gzip_bomb
from topicmap.web import fetch_scheduler
from topicmap.web import robots as robots_module
from topicmap.web.expiring_cache import ExpiringCache
from topicmap.web.fetch import DEFAULT_USER_AGENT, FetchOutcome, WebFetcher
from topicmap.web.fetch_state import CANCELLED, CANCELLED_IN_FLIGHT
from topicmap.web.http_head import meta_refresh_target, retry_after_seconds
from topicmap.web.netguard import AddressPolicy
from topicmap.web.throttle import Lease, MemoryThrottle

MEMORY_BOUND = 25 * 1000 * 1000  # the cap is 10 MiB; 50 MB or 1 GiB must never be held


@pytest.fixture(scope="module")
def fault() -> FaultServer:
    with FaultServer() as server:
        yield server


def make_fetcher(fault: FaultServer, **overrides) -> WebFetcher:
    options = dict(
        policy=AddressPolicy(allow=fault.allow_list),
        host_overrides={"*.test": f"127.0.0.1:{fault.port}"},
        connect_timeout=0.5,
        read_timeout=1.0,
        total_timeout=2.0,
        backoff_base=0.05,
        interval_overrides={"*": 0.0},
    )
    options.update(overrides)
    return WebFetcher(**options)


@pytest.fixture
def fetcher(fault: FaultServer) -> WebFetcher:
    with make_fetcher(fault) as web:
        yield web


def hits_for(fault: FaultServer, path: str) -> int:
    return sum(1 for hit in fault.hits if hit.path == path)


def fetch_traced(fetcher: WebFetcher, url: str) -> tuple[FetchOutcome, int]:
    tracemalloc.start()
    try:
        outcome = fetcher.fetch(url)
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------- plain outcomes


def test_html_page_is_fetched_with_text_and_metadata(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/page"))
    assert outcome.ok, outcome
    assert (outcome.status, outcome.content_type, outcome.charset) == (200, "text/html", "utf-8")
    assert "Fault server page" in outcome.text
    assert outcome.final_url == outcome.url == fault.url("/page")
    assert outcome.redirects == [] and outcome.attempts == 1
    page_hit = [hit for hit in fault.hits if hit.path == "/page"][-1]
    assert page_hit.user_agent == DEFAULT_USER_AGENT


def test_404_fails_at_once_with_the_http_reason(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/status/404"))
    assert (outcome.status, outcome.error, outcome.attempts) == (404, "HTTP 404 Not Found", 1)
    assert outcome.content is None and not outcome.ok


def test_500_then_200_is_retried(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/flaky/once"))
    assert outcome.ok and outcome.status == 200 and outcome.attempts == 2
    assert hits_for(fault, "/flaky/once") == 2


def test_persistent_503_gives_up_after_max_retries(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/status/503"))
    assert outcome.status == 503
    assert outcome.error == "HTTP 503 Service Unavailable (after 3 attempts)"  # max_retries=2 by default
    assert hits_for(fault, "/status/503") == 3


def test_429_waits_for_retry_after(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/ratelimited/a"))
    assert outcome.ok and outcome.attempts == 2
    times = [hit.at for hit in fault.hits if hit.path == "/ratelimited/a"]
    assert times[1] - times[0] >= 0.95  # Retry-After: 1, not the 0.05 s backoff


def test_retry_after_beyond_the_cap_is_not_retried(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/ratelimited-long"))
    assert outcome.status == 429 and outcome.attempts == 1
    assert "Retry-After 3600 s exceeds the 120 s cap" in outcome.error


def test_connect_timeout(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.blackhole_url("/"))
    assert outcome.status is None and "could not connect within" in outcome.error
    # ended by the 2 s total limit (with slack for a busy machine), not by the system's connect timeout
    assert outcome.elapsed < 10.0


def test_read_timeout(fault: FaultServer) -> None:
    with make_fetcher(fault, total_timeout=5.0, max_retries=0) as web:
        outcome = web.fetch(fault.url("/slow-headers"))
    assert outcome.status is None
    assert "no response within 1 s" in outcome.error
    assert outcome.elapsed < 4.5  # the 1 s read timeout ended it, not the 5 s total limit


def test_headers_that_trickle_forever_end_at_the_total_timeout(fault: FaultServer) -> None:
    """A byte every 0.1 s, forever: the total time limit ends the request even when the read timeout is longer
    (under urllib3 each byte reset the read timeout; libcurl's counts only body bytes)."""
    with make_fetcher(fault, total_timeout=1.5, read_timeout=5.0) as web:
        started = time.monotonic()
        outcome = web.fetch(fault.url("/trickle-headers"))
        took = time.monotonic() - started
    assert outcome.status is None and outcome.content is None
    assert outcome.error.startswith(
        "timeout: total time limit of 1.5 s reached while waiting for the response headers"
    )
    assert outcome.attempts == 1  # a spent budget is not retried
    assert 1.4 <= took < 4.5, took  # the 1.5 s total limit ended it, not the 5 s read timeout


def test_a_retry_that_would_pass_the_total_timeout_is_not_made(fault: FaultServer) -> None:
    # Retry-After: 1 on a fetch with 0.8 s in all: waiting would already pass the limit
    with make_fetcher(fault, total_timeout=0.8, max_retries=2) as web:
        outcome = web.fetch(fault.url("/ratelimited/budget"))
    assert outcome.status == 429 and outcome.attempts == 1
    assert "a retry in 1 s would pass the total time limit of 0.8 s; not retried" in outcome.error


def test_retries_that_cannot_fit_in_the_total_timeout_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match=r"max_retries=5 waits 31 s in back-off .* total_timeout=30 s"):
        WebFetcher(max_retries=5, backoff_base=1.0, total_timeout=30.0)
    WebFetcher(max_retries=4, backoff_base=1.0, total_timeout=30.0).close()  # 15 s of back-off fits


def test_body_that_never_ends_hits_the_total_timeout(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/stall"))
    assert outcome.status == 200 and outcome.content is None
    assert outcome.error.startswith("timeout: total time limit of 2 s exceeded while reading the body")
    assert 1.9 <= outcome.elapsed < 10.0  # the body never ends: only the total limit stops it


def test_connection_reset_is_retried_then_reported(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/reset"))
    assert outcome.attempts == 3
    assert outcome.error.startswith("connection error:") and "reset" in outcome.error.lower()


# ---------------------------------------------------------------- redirects and the SSRF guard


def test_redirect_loop_stops_at_the_bound(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/loop/a"))
    assert outcome.error.startswith("too many redirects: more than 7 (the chain loops)")
    assert len(outcome.redirects) == 8 and outcome.content is None


def test_redirect_bound_is_exact(fetcher: WebFetcher, fault: FaultServer) -> None:
    seven = fetcher.fetch(fault.url("/chain/7"))
    assert seven.ok and len(seven.redirects) == 7 and seven.final_url == fault.url("/chain/0")
    assert [hop.status for hop in seven.redirects[:2]] == [301, 307]
    eight = fetcher.fetch(fault.url("/chain/8"))
    assert eight.error.startswith("too many redirects: more than 7;")


def test_redirect_to_another_loopback_port_is_refused(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/redirect/other-port"))
    assert outcome.refused_reason == f"ssrf: 127.0.0.1: loopback address 127.0.0.1, port {fault.other_port}"
    assert outcome.final_url == f"http://127.0.0.1:{fault.other_port}/"
    assert fault.other_hits == []  # never connected


def test_redirect_to_cloud_metadata_is_refused(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/redirect/metadata"))
    assert outcome.refused_reason.startswith("ssrf: 169.254.169.254: link-local address")
    assert "cloud metadata" in outcome.refused_reason
    assert outcome.redirects[0].to_url == "http://169.254.169.254/latest/meta-data/"


def test_a_name_resolving_to_loopback_is_refused_at_connection(
    fetcher: WebFetcher, fault: FaultServer
) -> None:
    outcome = fetcher.fetch(f"http://localhost:{fault.other_port}/")
    assert outcome.refused_reason.startswith("ssrf: localhost resolves to loopback address")
    assert fault.other_hits == []


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f.1", "127.1", "017700000001", "[::ffff:127.0.0.1]", "[::1]", "LocalHost"]
)
def test_obfuscated_loopback_hosts_are_refused(fetcher: WebFetcher, fault: FaultServer, host: str) -> None:
    outcome = fetcher.fetch(f"http://{host}:{fault.other_port}/")
    assert outcome.refused_reason is not None and outcome.refused_reason.startswith("ssrf: "), outcome
    assert "loopback" in outcome.refused_reason
    assert fault.other_hits == []


def test_default_policy_refuses_loopback(fault: FaultServer) -> None:
    with WebFetcher(interval_overrides={"*": 0.0}) as strict:
        outcome = strict.fetch(fault.url("/page"))
    assert outcome.refused_reason.startswith("ssrf: 127.0.0.1: loopback address")
    assert outcome.attempts == 0  # refused before any connection


def test_every_redirect_hop_takes_a_slot_of_its_domain(fault: FaultServer) -> None:
    throttle = RecordingThrottle()
    with make_fetcher(fault, throttle=throttle, interval_overrides={"*": 0.01}) as web:
        same = web.fetch("http://www.alpha.test/redirect-to?u=http://alpha.test/page")
        # robots.txt of www.alpha.test, the page, robots.txt of alpha.test, the page it redirects to: four
        # requests to one domain, four turns (Media Cloud let a hop within the domain go at once)
        assert same.ok and throttle.domains == ["alpha.test"] * 4
        throttle.domains.clear()
        cross = web.fetch("http://alpha.test/redirect-to?u=http://beta.test/page")
        # alpha.test's robots.txt is cached now; beta.test's takes a slot before its page does
        assert cross.ok and throttle.domains == ["alpha.test", "beta.test", "beta.test"]
        assert cross.final_url == "http://beta.test/page"


def test_a_redirect_within_a_domain_keeps_the_interval(fault: FaultServer) -> None:
    interval = 0.3
    since = len(fault.hits)
    with make_fetcher(fault, interval_overrides={"*": interval}, obey_robots=False) as web:
        assert web.fetch("http://bare.test/redirect-to?u=http://www.bare.test/page").ok
    hits = _gaps_by_host(fault, {"bare.test", "www.bare.test"}, since)
    times = sorted(at for records in hits.values() for at, _ in records)
    assert len(times) == 2 and times[1] - times[0] >= interval


# ---------------------------------------------------------------- size, type, encoding


def test_50_mb_body_with_content_length_is_refused_unread(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome, peak = fetch_traced(fetcher, fault.url("/big"))
    assert outcome.refused_reason == "too-large: Content-Length 50000000 exceeds 10485760 bytes"
    assert peak < 2_000_000


def test_50_mb_streamed_body_stops_at_the_cap(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome, peak = fetch_traced(fetcher, fault.url("/big-chunked"))
    assert outcome.error == "body too large: more than 10485760 bytes"
    assert peak < MEMORY_BOUND


def test_gzip_bomb_is_refused_with_bounded_memory(fetcher: WebFetcher, fault: FaultServer) -> None:
    gzip_bomb()  # built (server side) before tracing: only the client's memory is measured
    outcome, peak = fetch_traced(fetcher, fault.url("/bomb"))
    assert outcome.error.startswith("decompression bomb: gzip body inflates to more than 10485760 bytes")
    assert peak < MEMORY_BOUND


def test_gzip_encoded_page_is_decoded(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/gzip-page"))
    assert outcome.ok and "Fault server page" in outcome.text


def test_pdf_is_refused_from_its_headers(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome, peak = fetch_traced(fetcher, fault.url("/doc.pdf"))
    assert outcome.refused_reason == "non-html content-type: application/pdf"
    assert outcome.content is None and peak < PDF_BYTES // 5


def test_missing_content_type_is_sniffed(fetcher: WebFetcher, fault: FaultServer) -> None:
    html = fetcher.fetch(fault.url("/no-type"))
    assert html.ok and html.content_type == "text/html"
    binary = fetcher.fetch(fault.url("/no-type-binary"))
    assert binary.refused_reason == "non-html content-type: none declared and the body is not HTML"


def test_wrong_declared_charset_is_not_decoded_as_mojibake(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/wrong-charset"))
    assert outcome.ok and outcome.charset == "utf-8"  # what the header declared
    assert "\ufffd" not in outcome.text  # not forced through UTF-8 with replacement characters
    assert "Café" in outcome.text and "Paris" in outcome.text and "€" in outcome.text


# ---------------------------------------------------------------- meta refresh, robots, cookies


def test_meta_refresh_is_followed(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/meta-refresh"))
    assert outcome.ok and outcome.final_url == fault.url("/landing")
    assert [(hop.kind, hop.status) for hop in outcome.redirects] == [("meta-refresh", 200)]


def test_robots_txt_is_obeyed_on_every_hop_and_fetched_once(fault: FaultServer) -> None:
    before = hits_for(fault, "/robots.txt")
    with make_fetcher(fault) as web:
        outcomes = list(web.fetch_many([fault.url(f"/page?n={n}") for n in range(6)], max_workers=4))
        assert all(outcome.ok for outcome in outcomes)
        direct = web.fetch(fault.url("/private/secret"))
        via_redirect = web.fetch(fault.url("/redirect/private"))
    assert hits_for(fault, "/robots.txt") - before == 1
    expected = f"robots: {fault.base_url}/robots.txt disallows /private/secret"
    assert direct.refused_reason == expected and via_redirect.refused_reason == expected
    assert hits_for(fault, "/private/secret") == 0
    with make_fetcher(fault, obey_robots=False) as rude:
        assert rude.fetch(fault.url("/private/secret")).ok


def test_robots_rules_are_kept_for_the_most_recently_used_sites_only(
    fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An iteration of a large topic meets tens of thousands of sites: the fetcher keeps the robots.txt rules of
    the MAX_CACHED_ROBOTS sites used last (2 here), and reads a dropped site's robots.txt again when it returns."""
    monkeypatch.setattr(robots_module, "MAX_CACHED_ROBOTS", 2)
    since = len(fault.hits)
    order = ["cache-a", "cache-b", "cache-a", "cache-c", "cache-a", "cache-b"]
    with make_fetcher(fault) as web:
        for n, site in enumerate(order):
            outcome = web.fetch(f"http://{site}.test/page?n={n}")
            assert outcome.ok, outcome
    robots = [hit.host.split(":")[0] for hit in fault.hits[since:] if hit.path == "/robots.txt"]
    # a, b read; a used again (so b is the oldest); c read and b dropped; a still kept; b read again
    assert robots == ["cache-a.test", "cache-b.test", "cache-c.test", "cache-b.test"]


def test_waits_are_kept_only_while_they_can_still_space_a_request(
    fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fetcher does not ask for a site's turn before an interval after its last request went out. A large
    crawl sends to tens of thousands of sites, most of them once: past MAX_KEPT_WAITS (4 here) the waits that
    have passed are dropped; those of sites still inside their interval are kept, and still space requests."""
    monkeypatch.setattr(fetch_scheduler, "MAX_KEPT_WAITS", 4)
    interval = 0.3
    with make_fetcher(fault, interval_overrides={"*": interval}) as web:
        early = [f"early-{n}.test" for n in range(6)]
        for outcome in web.fetch_many([f"http://{site}/page" for site in early]):
            assert outcome.ok, outcome
        assert set(early) <= set(web._waits.not_before)  # all inside their interval: none may go
        time.sleep(interval)  # the early sites' intervals pass
        late = [f"late-{n}.test" for n in range(6)]
        for outcome in web.fetch_many([f"http://{site}/page" for site in late]):
            assert outcome.ok, outcome
        assert set(web._waits.not_before) == set(late)
        since = len(fault.hits)
        assert web.fetch(f"http://{late[0]}/page?again").ok
    again = [hit for hit in fault.hits[since:] if hit.host.split(":")[0] == late[0]]
    last_before = max(hit.at for hit in fault.hits[:since] if hit.host.split(":")[0] == late[0])
    assert again and again[0].at - last_before >= interval


def test_expiring_cache_drops_expired_entries_and_the_least_recently_used() -> None:
    now = [0.0]
    cache: ExpiringCache[str, int] = ExpiringCache(2, clock=lambda: now[0])
    cache.put("a", 1, ttl=10.0)
    cache.put("b", 2, ttl=1.0)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3, ttl=10.0)
    assert (cache.get("b"), cache.get("a"), cache.get("c"), len(cache)) == (None, 1, 3, 2)
    now[0] = 10.0
    assert (cache.get("a"), cache.get("c"), len(cache)) == (None, None, 0)
    with pytest.raises(ValueError, match="max_entries"):
        ExpiringCache(0, clock=lambda: 0.0)


def _gaps_by_host(fault: FaultServer, hosts: set[str], since: int) -> dict[str, list[tuple[float, str]]]:
    by_host: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for hit in fault.hits[since:]:
        host = hit.host.split(":")[0]
        if host in hosts:
            by_host[host].append((hit.at, hit.path))
    return {host: sorted(hits) for host, hits in by_host.items()}


def test_robots_txt_takes_a_slot_and_the_page_waits_for_the_next(fault: FaultServer) -> None:
    interval = 0.3
    since = len(fault.hits)
    with make_fetcher(fault, interval_overrides={"*": interval}) as web:
        assert web.fetch("http://slotted.test/page").ok
    hits = _gaps_by_host(fault, {"slotted.test"}, since)["slotted.test"]
    assert [path for _, path in hits] == ["/robots.txt", "/page"]
    assert hits[1][0] - hits[0][0] >= interval


def test_robots_txt_redirected_to_another_domain_waits_for_that_domains_slot(fault: FaultServer) -> None:
    """A renamed site's robots.txt redirects to the new name, whose pages are being fetched at the same time:
    the robots.txt hop must keep the new domain's interval like any request to it."""
    interval = 0.3
    since = len(fault.hits)
    urls = ["http://robots-to-newsite.test/page?n=0"] + [
        f"http://newsite.test/page?n={n}" for n in range(1, 4)
    ]
    with make_fetcher(fault, interval_overrides={"*": interval}) as web:
        outcomes = list(web.fetch_many(urls, max_workers=4))
    assert all(outcome.ok for outcome in outcomes), [o.error or o.refused_reason for o in outcomes]
    hits = _gaps_by_host(fault, {"newsite.test", "robots-to-newsite.test"}, since)
    # newsite.test got its own robots.txt, the one robots-to-newsite.test redirected to, and three pages
    assert (
        sorted(path for _, path in hits["newsite.test"])
        == ["/page?n=1", "/page?n=2", "/page?n=3"] + ["/robots.txt"] * 2
    )
    for host, records in hits.items():
        gaps = [later[0] - earlier[0] for earlier, later in zip(records, records[1:], strict=False)]
        assert min(gaps) >= interval, (host, records)


def test_robots_server_error_disallows_and_missing_robots_allows(fetcher: WebFetcher) -> None:
    broken = fetcher.fetch("http://robots-500.test/page")
    assert broken.refused_reason.startswith("robots: http://robots-500.test/robots.txt answered HTTP 500")
    assert fetcher.fetch("http://robots-404.test/private/anything").ok


def test_cookies_set_during_redirects_are_sent_back(fetcher: WebFetcher, fault: FaultServer) -> None:
    outcome = fetcher.fetch(fault.url("/cookie-check"))
    assert outcome.ok and len(outcome.redirects) == 1


# ---------------------------------------------------------------- input checks and helpers


def test_bad_urls_and_options() -> None:
    with WebFetcher() as web:
        assert web.fetch("ftp://example.com/x").refused_reason == "unsupported scheme: ftp"
        assert web.fetch("http:///nohost").error.startswith("invalid URL: no host")
    with pytest.raises(ValueError, match="connect_timeout"):
        WebFetcher(connect_timeout=0)
    with pytest.raises(ValueError, match="interval override for 'x.com'"):
        WebFetcher(interval_overrides={"x.com": -1})


def test_retry_after_parsing() -> None:
    now = time.time()
    assert retry_after_seconds("120") == 120.0
    in_30_s = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))
    assert 28 <= retry_after_seconds(in_30_s, now) <= 31
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now) == 0.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_meta_refresh_parsing() -> None:
    base = "http://example.com/a/page"
    assert (
        meta_refresh_target('<meta http-equiv="refresh" content="0;url=/b">', base) == "http://example.com/b"
    )
    assert meta_refresh_target("<META HTTP-EQUIV=Refresh CONTENT='3; URL=next.html'>", base) == (
        "http://example.com/a/next.html"
    )
    assert meta_refresh_target('<meta content="0; url=&quot;/c&quot;" http-equiv="refresh">', base) == (
        "http://example.com/c"
    )
    assert meta_refresh_target('<meta http-equiv="refresh" content="300">', base) is None  # reload
    assert meta_refresh_target('<meta http-equiv="refresh" content="600; url=/home">', base) is None
    assert meta_refresh_target('<meta http-equiv="refresh" content="0; url=javascript:x()">', base) is None
    # text before the tag that is not ASCII, mixed case, spaces around "=": still found where it is
    accented = "<title>Ürün fiyatları – ΕΛΛΆΔΑ</title>\n<meta Http-Equiv = ' ReFresh' content='1;URL=/ü'>"
    assert meta_refresh_target(accented, base) == "http://example.com/ü"
    # "refresh" in a script is not a refresh tag
    assert meta_refresh_target("<script>refresh(); var httpEquiv='x'</script><p>Refresh</p>", base) is None


# ---------------------------------------------------------------- fetch_many scheduling


class RecordingThrottle(MemoryThrottle):
    """A MemoryThrottle that records the domain of each turn it gives."""

    def __init__(self) -> None:
        super().__init__()
        self.domains: list[str] = []

    def claim(self, domain: str, interval: float, hold: float) -> Lease | float:
        turn = super().claim(domain, interval, hold)
        if isinstance(turn, Lease):
            self.domains.append(domain)
        return turn


def test_fetch_many_fetches_other_domains_while_one_waits(fault: FaultServer) -> None:
    interval = 0.3
    urls = [f"http://{site}.test/page?n={n}" for n in range(4) for site in ("one", "two", "three")]
    with make_fetcher(fault, interval_overrides={"*": interval}, obey_robots=False) as web:
        started = time.monotonic()
        outcomes = list(web.fetch_many(urls, max_workers=4))
        elapsed = time.monotonic() - started
    assert sorted(outcome.url for outcome in outcomes) == sorted(urls)
    assert all(outcome.ok for outcome in outcomes)
    # Serial would take 11 intervals; in parallel across domains each domain needs 3.
    assert 3 * interval - 0.01 <= elapsed < 11 * interval
    arrivals = defaultdict(list)
    for hit in fault.hits:
        if hit.path.startswith("/page?n=") and hit.host.endswith(".test"):
            arrivals[hit.host].append(hit.at)
    for host in ("one.test", "two.test", "three.test"):
        times = sorted(arrivals[host])[-4:]
        gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
        assert min(gaps) >= interval, (host, gaps)
    # Each domain's 3 later URLs waited about one interval for their slot, not the time spent queued behind
    # the URLs before them (1, 2 and 3 intervals). A busy machine can shorten a wait (the URL was taken up
    # late) or lengthen it by a late wake-up, never by a whole interval.
    waits = sorted(outcome.throttle_wait_seconds for outcome in outcomes)[-9:]
    assert max(waits) < 2 * interval, waits


def test_fetch_many_retries_through_the_scheduler_and_keeps_input_urls(fault: FaultServer) -> None:
    throttle = RecordingThrottle()
    urls = [fault.url("/flaky/many"), fault.url("/status/404"), "ftp://nope/", fault.url("/page")]
    with make_fetcher(fault, throttle=throttle) as web:
        outcomes = {outcome.url: outcome for outcome in web.fetch_many(urls, max_workers=2)}
    assert set(outcomes) == set(urls)
    assert outcomes[fault.url("/flaky/many")].ok and outcomes[fault.url("/flaky/many")].attempts == 2
    assert outcomes[fault.url("/status/404")].error == "HTTP 404 Not Found"
    assert outcomes["ftp://nope/"].refused_reason == "unsupported scheme: ftp"


def test_one_fetcher_is_shared_by_threads(fault: FaultServer) -> None:
    with make_fetcher(fault) as web:
        results: list[FetchOutcome] = []
        lock = threading.Lock()

        def worker(n: int) -> None:
            for k in range(5):
                outcome = web.fetch(f"http://site{n % 3}.test/page?w={n}&k={k}")
                with lock:
                    results.append(outcome)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(results) == 30 and all(outcome.ok for outcome in results)
    robots = [hit for hit in fault.hits if hit.path == "/robots.txt" and hit.host.startswith("site")]
    assert sorted(hit.host for hit in robots) == ["site0.test", "site1.test", "site2.test"]


def test_an_international_host_name_and_spaces_go_out_encoded(
    fetcher: WebFetcher, fault: FaultServer
) -> None:
    outcome = fetcher.fetch("http://bücher.test/page?q=a b")
    assert outcome.ok, outcome
    assert any(hit.host == "xn--bcher-kva.test" and hit.path == "/page?q=a%20b" for hit in fault.hits)


def test_repeated_fetch_many_calls_keep_no_more_connections_open(fault: FaultServer) -> None:
    """Each fetch_many starts new threads; the connections of the last call's threads are reused by the next, so
    a long-lived fetcher (a Dagster run's many parts, the near-duplicate service) does not pile up sockets."""

    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to count open sockets")
    workers, sites = 4, 6
    before = open_files()
    with make_fetcher(fault) as web:
        for round_number in range(8):
            urls = [f"http://site{n % sites}.test/page?n={n}&round={round_number}" for n in range(24)]
            assert all(outcome.ok for outcome in web.fetch_many(urls, max_workers=workers))
        # at most one kept connection per site for each request that ran at once, both ends of each an open
        # file of this process (the fault server runs in it), and a libcurl handle's own wake-up socket pair
        # per such request; steady after the third round (a fetcher that kept each call's threads' connections
        # would add up to 2 * workers * sites more files with every call)
        assert open_files() - before <= 2 * workers * sites + 2 * workers, (before, open_files())


# ---------------------------------------------------------------- cancelling a fetch (the lookup service's)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds (progress; the deadline is a safety net for a hung fetch)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        threading.Event().wait(0.02)


def fetch_then_cancel(web: WebFetcher, url: str, under_way: Callable[[], bool]) -> FetchOutcome:
    """Fetch ``url`` in a thread and set its cancel event once ``under_way()`` holds. The fetcher's own limits
    are far beyond the safety net here: only the cancel can end the fetch in time."""
    cancel = threading.Event()
    outcomes: list[FetchOutcome] = []
    thread = threading.Thread(target=lambda: outcomes.append(web.fetch(url, cancel=cancel)), daemon=True)
    thread.start()
    wait_for(under_way, f"the request for {url} to be under way")
    assert thread.is_alive(), outcomes
    cancel.set()
    wait_for(lambda: not thread.is_alive(), "the cancelled fetch to end")
    return outcomes[0]


def _summary(outcome: FetchOutcome) -> tuple:
    error = re.sub(r"\(\d+ bytes so far\)", "(N bytes so far)", outcome.error or "")
    return (
        outcome.status,
        error,
        outcome.refused_reason,
        outcome.content,
        outcome.final_url,
        [(hop.to_url, hop.status, hop.kind) for hop in outcome.redirects],
        outcome.attempts,
    )


@pytest.mark.parametrize(
    "path",
    [
        "/page",
        "/chain/3",
        "/gzip-page",
        "/meta-refresh",
        "/cookie-check",
        "/no-type",
        "/status/404",
        "/status/503",
        "/reset",
        "/private/x",
        "/doc.pdf",
        "/big",
        "/big-chunked",
        "/bomb",
        "/stall",
        "/loop/a",
        "/redirect/metadata",
    ],
)
def test_a_fetch_given_a_cancel_event_never_set_ends_as_it_would_without(
    fault: FaultServer, path: str
) -> None:
    """A fetch with a cancel event runs its requests on a multi handle driven from Python: every outcome is
    the one the fetch without an event gets (size caps, timeouts, retries, redirects, robots.txt, the
    guard)."""
    with make_fetcher(fault) as plain, make_fetcher(fault) as watched:
        alone = plain.fetch(fault.url(path))
        with_event = watched.fetch(fault.url(path), cancel=threading.Event())
    assert _summary(with_event) == _summary(alone)


def test_a_connect_timeout_is_reported_alike_with_a_cancel_event(fault: FaultServer) -> None:
    with make_fetcher(fault, max_retries=0, obey_robots=False) as web:
        outcome = web.fetch(fault.blackhole_url("/"), cancel=threading.Event())
    assert outcome.status is None and outcome.attempts == 1
    assert outcome.error.startswith("timeout: could not connect within 0.5 s")


def test_a_cancel_set_before_the_fetch_sends_nothing(fault: FaultServer) -> None:
    cancel = threading.Event()
    cancel.set()
    since = len(fault.hits)
    with make_fetcher(fault) as web:
        outcome = web.fetch(fault.url("/page?cancelled-early"), cancel=cancel)
    assert outcome.error == CANCELLED and outcome.attempts == 0
    assert fault.hits[since:] == []


def test_a_cancel_ends_a_fetch_reading_a_body_that_never_ends(fault: FaultServer) -> None:
    url = fault.url("/stall?cancel-me")
    with make_fetcher(fault, obey_robots=False, read_timeout=600.0, total_timeout=600.0) as web:
        outcome = fetch_then_cancel(web, url, lambda: hits_for(fault, "/stall?cancel-me") == 1)
    # the caller gave up: said so, not retried, and nothing the site did wrong
    assert outcome.error == CANCELLED_IN_FLIGHT and outcome.error.startswith("cancelled:")
    assert outcome.attempts == 1 and outcome.content is None
    assert hits_for(fault, "/stall?cancel-me") == 1


def _syn_sent_to(port: int) -> int:
    """Sockets of this machine still connecting (SYN sent, no answer) to 127.0.0.1:``port``."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[2] == f"0100007F:{port:04X}" and fields[3] == "02":
            count += 1
    return count


def test_a_cancel_ends_a_fetch_that_is_still_connecting(fault: FaultServer) -> None:
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("needs /proc/net/tcp to see a connection being made")
    port = fault.blackhole_port
    limits = dict(connect_timeout=600.0, read_timeout=600.0, total_timeout=600.0)
    with make_fetcher(fault, obey_robots=False, **limits) as web:
        outcome = fetch_then_cancel(web, fault.blackhole_url("/"), lambda: _syn_sent_to(port) >= 1)
    assert outcome.error == CANCELLED_IN_FLIGHT and outcome.attempts == 1 and outcome.status is None
    wait_for(lambda: _syn_sent_to(port) == 0, "the abandoned connection attempt to be dropped")


# ---------------------------------------------------------------- TLS through the pinned connection


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """An HTTPS server on loopback with a self-signed certificate for secure.test (needs openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl command not available to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=secure.test",
            "-addext",
            "subjectAltName=DNS:secure.test",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TlsHandler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], str(cert)
    server.shutdown()
    server.server_close()


class _TlsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        return

    def do_GET(self):
        body = b"<html><head><title>over TLS</title></head><body>" + (self.headers.get("Host") or "").encode()
        if self.path == "/robots.txt":
            body = b"User-agent: *\nDisallow:\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_https_keeps_the_host_name_for_sni_and_verification(tls_server) -> None:
    port, ca_bundle = tls_server
    options = dict(
        policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
        host_overrides={"*.test": f"127.0.0.1:{port}"},
        interval_overrides={"*": 0.0},
        ca_bundle=ca_bundle,
        connect_timeout=2,
        read_timeout=2,
    )
    with WebFetcher(**options) as web:
        good = web.fetch("https://secure.test/page")
        assert good.ok and "over TLS" in good.text and "secure.test" in good.text
        # Same pinned address, but the certificate does not name this host: verification must refuse it.
        wrong = web.fetch("https://other.test/page")
    assert good.final_url == "https://secure.test/page"
    assert wrong.error.startswith("tls error:") and "other.test" in wrong.error


def test_a_cancel_ends_a_fetch_stuck_in_the_tls_handshake() -> None:
    """A server that accepts the connection and never answers the TLS hello: the cancel closes the connection
    (libcurl gives Python no say while it shakes hands, so the fetch must not run there unwatched)."""
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    hello_read, closed = threading.Event(), threading.Event()

    def serve() -> None:
        connection, _ = silent.accept()
        with connection:
            connection.settimeout(120)  # a safety net: the test's own waits end well before
            with contextlib.suppress(OSError):
                while connection.recv(4096):
                    hello_read.set()
                closed.set()  # the client closed its end

    threading.Thread(target=serve, daemon=True).start()
    options = dict(
        policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
        host_overrides={"*.test": f"127.0.0.1:{port}"},
        interval_overrides={"*": 0.0},
        obey_robots=False,
        connect_timeout=600.0,
        read_timeout=600.0,
        total_timeout=600.0,
    )
    try:
        with WebFetcher(**options) as web:
            outcome = fetch_then_cancel(web, "https://secure.test/page", hello_read.is_set)
        assert outcome.error == CANCELLED_IN_FLIGHT and outcome.attempts == 1
        wait_for(closed.is_set, "the server to see the connection closed")
    finally:
        silent.close()


def test_fetch_many_fetches_no_further_ahead_than_the_caller_reads(fault: FaultServer) -> None:
    # A caller slower than the web (a spider extracting each page) must not end up holding every page of
    # an iteration in memory: at most max_ready pages wait for it, plus those in flight.
    workers, max_ready, pages = 2, 3, 30
    urls = [fault.url(f"/page?backpressure={n}") for n in range(pages)]

    def fetched() -> int:
        return sum(1 for hit in fault.hits if hit.path.startswith("/page?backpressure="))

    with make_fetcher(fault) as web:
        consumed, furthest_ahead = 0, 0
        for outcome in web.fetch_many(urls, max_workers=workers, max_ready=max_ready):
            assert outcome.status == 200
            consumed += 1
            time.sleep(0.03)  # the caller's own work
            furthest_ahead = max(furthest_ahead, fetched() - consumed)
    assert consumed == pages
    assert fetched() == pages
    assert furthest_ahead <= max_ready + workers


class LatenessThrottle(MemoryThrottle):
    """A MemoryThrottle that records how late each polite turn was taken after the slot the fetcher planned it
    for (``planned``, filled by the test)."""

    def __init__(self) -> None:
        super().__init__()
        self.lateness: list[float] = []
        self.planned: dict[str, float] = {}

    def claim(self, domain: str, interval: float, hold: float) -> Lease | float:
        turn = super().claim(domain, interval, hold)
        if isinstance(turn, Lease) and domain in self.planned:
            self.lateness.append(time.time() - self.planned.pop(domain))
        return turn


def test_a_slow_caller_does_not_make_polite_slots_start_late(fault: FaultServer) -> None:
    # One site at 0.2 s per request and a caller that reads an outcome a second: each fetch waits for the
    # caller (a buffer of one page), but a slot is only set once the caller has caught up, so no request
    # starts long after its slot. (A slot set while the caller was behind would come due and wait for it,
    # leaving the site's turn unused meanwhile.)
    caller_seconds, pages = 1.0, 4
    throttle = LatenessThrottle()
    urls = [fault.url(f"/page?slow-caller={n}") for n in range(pages)]
    with make_fetcher(fault, throttle=throttle, interval_overrides={"*": 0.2}) as web:
        plan = web._reserve

        def planning(domain: str, interval: float, earliest: float = 0.0) -> float:
            throttle.planned[domain] = slot = plan(domain, interval, earliest)
            return slot

        web._reserve = planning  # type: ignore[method-assign]
        consumed = 0
        for outcome in web.fetch_many(urls, max_workers=2, max_ready=1):
            assert outcome.status == 200
            consumed += 1
            time.sleep(caller_seconds)  # the caller's own work, much longer than the site's interval
    assert consumed == pages
    assert len(throttle.lateness) >= pages  # robots.txt and every page
    assert max(throttle.lateness) < caller_seconds / 2, throttle.lateness


def test_fetch_many_refuses_a_buffer_of_no_pages(fault: FaultServer) -> None:
    with make_fetcher(fault) as web, pytest.raises(ValueError, match="max_ready must be >= 1"):
        list(web.fetch_many([fault.url("/page")], max_ready=0))


class _InFlightCountingHandler(BaseHTTPRequestHandler):
    """Answers after 20 ms and records how many requests were being answered at once."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        return

    def do_GET(self) -> None:
        server = self.server
        with server.lock:  # type: ignore[attr-defined]
            server.in_flight += 1  # type: ignore[attr-defined]
            server.concurrency.append(server.in_flight)  # type: ignore[attr-defined]
        time.sleep(0.02)
        with server.lock:  # type: ignore[attr-defined]
            server.in_flight -= 1  # type: ignore[attr-defined]
        body = b"<html><body><p>a page</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def counting_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _InFlightCountingHandler)
    server.daemon_threads = True
    server.lock, server.in_flight, server.concurrency = threading.Lock(), 0, []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


# 0.1 s a page: far slower than a loopback fetch even on a loaded machine, so the caller stays the bottleneck
@pytest.mark.parametrize("caller_seconds_per_page", [0.0, 0.1])
def test_fetch_many_runs_fewer_fetches_at_once_while_the_caller_is_the_bottleneck(
    counting_server, caller_seconds_per_page: float
) -> None:
    # Each fetch thread at work takes the GIL from a caller that extracts pages: when the caller cannot keep
    # up anyway, fewer fetches run at once; a caller that keeps up gets every worker.
    port = counting_server.server_address[1]
    web = WebFetcher(
        policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
        host_overrides={"*.test": f"127.0.0.1:{port}"},
        interval_overrides={"*": 0.0},
        obey_robots=False,
    )
    urls = [f"http://www.site{n % 20:02d}.test/page/{n}" for n in range(60)]
    with web:
        outcomes = []
        for outcome in web.fetch_many(urls, max_workers=4, max_ready=4):
            outcomes.append(outcome)
            time.sleep(caller_seconds_per_page)
    assert [o.status for o in outcomes] == [200] * len(urls)
    later = counting_server.concurrency[len(urls) // 2 :]
    if caller_seconds_per_page:
        assert max(later) <= 2, later
    else:
        assert max(counting_server.concurrency) == 4


# ---------------------------------------------------------------- the limits a user sets (PageSourceResource)


def test_page_source_settings_reach_the_fetcher_and_bad_ones_name_themselves(fault: FaultServer) -> None:
    import dagster as dg

    from resources.fetcher import PageSourceResource

    settings = PageSourceResource(
        allow_networks=fault.allow_list,
        host_overrides={"*.test": f"127.0.0.1:{fault.port}"},
        total_timeout=1.5,
        read_timeout=0.5,
        max_retries=1,
        max_body_bytes=2000,
        max_redirects=2,
    )
    with settings.web_fetcher(interval_overrides={"*": 0.0}, obey_robots=False) as web:
        started = time.monotonic()
        endless = web.fetch(fault.url("/stall"))
        assert endless.error.startswith("timeout: total time limit of 1.5 s exceeded while reading the body")
        assert time.monotonic() - started < 10.0  # the body never ends: only the total limit stops it
        assert web.fetch(fault.url("/big-chunked")).error == "body too large: more than 2000 bytes"
        assert web.fetch(fault.url("/chain/2")).ok
        assert web.fetch(fault.url("/chain/3")).error.startswith("too many redirects: more than 2")
        assert web.fetch(fault.url("/status/503")).error == "HTTP 503 Service Unavailable (after 2 attempts)"
    defaults = PageSourceResource()
    assert (defaults.total_timeout, defaults.max_retries, defaults.max_redirects) == (30.0, 2, 7)
    with pytest.raises(
        dg.Failure, match=r"page_source settings are not valid: max_retries=5 .*total_timeout=10 s"
    ):
        PageSourceResource(max_retries=5, total_timeout=10.0).web_fetcher()
    with pytest.raises(dg.Failure, match="total_timeout must be > 0"):
        PageSourceResource(total_timeout=0).web_fetcher()
