"""Near-duplicate lookup service under slow URL lookups: text lookups and refusals while 100 URL lookups of slow
sites are pending, against the same lookups with no URL load in the same run.

    .venv/bin/python benchmarks/bench_near_dup_service_load.py [--requests 300] [--pending 100] [--sites 10]
        [--rounds 3] [--delay 60]

Setup: a SQLite store in a temporary folder holds the real articles of the news-page corpus (tests/shared_data.py,
expected.jsonl ``text``; skipped cleanly when absent) and an edited copy of each (3% of words substituted, a footer
added). ``topicmap serve`` runs as deployed, a process of its own (``.venv/bin/topicmap``), with
``--max-pending-urls`` set to ``--pending`` and ``--allow-address`` naming only the benchmark's slow site: loopback
HTTP servers of this script on 127.0.0.2, 127.0.0.3, ... (``--sites`` addresses, one port; each address is a site
of its own for the politeness intervals), which answer robots.txt at once (404) and hold every page for ``--delay``
seconds. With the default 60 s, past the fetcher's 30 s time limit, every slow URL lookup ends in a timeout
(502), and its client at once sends another, so ``--pending`` stay pending throughout.

Measured, in ``--rounds`` rounds (each: no URL load, then the load), from one client, one request at a time:
1. ``POST /near-duplicates`` of an edited copy of each article in turn (``--requests`` per window): p50/p99;
2. ``GET /near-duplicates?url=http://10.x.y.1/…``, refused by the SSRF guard (502): p50/p99;
the anchor is the same lookups with no URL load. Also recorded: that one URL lookup beyond the queue answers 503
with ``Retry-After``; when all the load's clients leave at once, how long until ``/health`` shows none queued (the
queued lookups dropped) and none running (a fetch waiting for a politeness slot ends at once, one in the middle of a
page transfer at the fetcher's time limit); and, at the end, with the load on, the time from SIGTERM to the
process's exit and what the pending lookups were answered.

Goal: text lookups and refusals under the load within 2x the anchor's p99; SIGTERM to exit < 5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from tests.shared_data import NEWS_HTML  # noqa: E402
from topicmap.store.topic_store import NewStory, TopicStore  # noqa: E402

FOOTER = " This story was first published by a partner newspaper and is republished with permission."
SLOW_PAGE = (
    b"<html><head><title>A slow page</title></head><body><article><p>Late.</p></article></body></html>"
)


def edited(text: str, rng: random.Random, vocabulary: list[str], rate: float = 0.03) -> str:
    words = text.split()
    for _ in range(max(1, int(len(words) * rate))):
        words[rng.randrange(len(words))] = rng.choice(vocabulary)
    return " ".join(words) + FOOTER


def load_articles() -> list[str]:
    expected = NEWS_HTML / "expected.jsonl"
    if not expected.exists():
        return []
    rows = [json.loads(line) for line in expected.read_text(encoding="utf-8").splitlines()]
    return [
        row["text"] for row in rows if isinstance(row.get("text"), str) and len(row["text"].split()) >= 80
    ]


class SlowSite:
    """Loopback servers on 127.0.0.2, 127.0.0.3, ... (one port): robots.txt answers 404 at once, a page after
    ``delay`` seconds (or at ``close``)."""

    def __init__(self, sites: int, delay: float) -> None:
        closing = self.closing = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path != "/robots.txt":
                    closing.wait(delay)
                body = b"" if self.path == "/robots.txt" else SLOW_PAGE
                self.send_response(404 if self.path == "/robots.txt" else 200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # the service gave up on the page (its time limit): the connection is gone

        first = Server(("127.0.0.2", 0), Handler)
        self.port = first.server_address[1]
        self.servers = [first] + [Server((f"127.0.0.{2 + k}", self.port), Handler) for k in range(1, sites)]
        self.addresses = [f"127.0.0.{2 + k}" for k in range(sites)]
        for server in self.servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.closing.set()
        for server in self.servers:
            server.shutdown()
            server.server_close()


class UrlLoad:
    """``count`` URL lookups of the slow site kept pending: each on a connection of its own; when one is
    answered, its client sends another. ``leave`` closes every connection at once (all clients go away)."""

    def __init__(self, port: int, site: SlowSite, count: int) -> None:
        self.port = port
        self.site = site
        self.count = count
        self.statuses: Counter[int] = Counter()
        self._serial = 0
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._service_gone = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _send(self) -> None:
        self._serial += 1
        address = self.site.addresses[self._serial % len(self.site.addresses)]
        url = f"http://{address}:{self.site.port}/story/{self._serial}.html"
        try:
            connection = socket.create_connection(("127.0.0.1", self.port))
        except ConnectionRefusedError:  # the service has stopped: nothing more to send
            self._service_gone = True
            return
        connection.sendall(
            f"GET /near-duplicates?{urlencode({'url': url})} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        connection.setblocking(False)
        self._selector.register(connection, selectors.EVENT_READ, bytearray())

    def __enter__(self) -> UrlLoad:
        for _ in range(self.count):
            self._send()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.1):
                received: bytearray = key.data
                try:
                    chunk = key.fileobj.recv(65536)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                except ConnectionError:
                    chunk = b""  # closed by the service: an answer all the same
                if chunk:
                    received += chunk
                    continue
                self._selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                status = received.split(b" ", 2)[1] if received.startswith(b"HTTP/") else b"0"
                self.statuses[int(status)] += 1
                if not self._stop.is_set() and not self._service_gone:
                    self._send()

    def leave(self) -> None:
        self._stop.set()
        self._thread.join()
        for key in list(self._selector.get_map().values()):
            self._selector.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]

    def __exit__(self, *exc_info: object) -> None:
        if not self._stop.is_set():
            self.leave()


def url_lookups(client: httpx.Client) -> dict[str, int]:
    return client.get("/health").json()["url_lookups"]


def pending(client: httpx.Client) -> int:
    counts = url_lookups(client)
    return counts["queued"] + counts["running"]


def wait_for(condition: Callable[[], object], what: str, safety: float = 120.0) -> float:
    """Seconds until ``condition()`` holds (polled every 10 ms)."""
    began = time.perf_counter()
    while not condition():
        if time.perf_counter() - began > safety:
            raise SystemExit(f"gave up waiting for {what} after {safety:.0f} s")
        time.sleep(0.01)
    return time.perf_counter() - began


def timed(call: Callable[[], httpx.Response]) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    response = call()
    elapsed = time.perf_counter() - began
    return elapsed, response


def window(
    client: httpx.Client, queries: list[str], requests: int, offset: int
) -> tuple[list[float], list[float]]:
    """Latencies (s) of ``requests`` text lookups and as many refused URL lookups, taken in turn."""
    texts, refusals = [], []
    for n in range(requests):
        elapsed, response = timed(
            lambda n=n: client.post("/near-duplicates", json={"text": queries[(offset + n) % len(queries)]})
        )
        if response.status_code != 200 or not response.json()["matches"]:
            raise SystemExit(f"a text lookup failed: {response.status_code} {response.text[:200]}")
        texts.append(elapsed)
        private = f"http://10.{n % 250}.{(offset + n) % 250}.1/story.html"
        elapsed, response = timed(lambda url=private: client.get("/near-duplicates", params={"url": url}))
        if response.status_code != 502 or response.json()["fetch"]["state"] != "refused":
            raise SystemExit(
                f"a private address was not refused: {response.status_code} {response.text[:200]}"
            )
        refusals.append(elapsed)
    return texts, refusals


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


def start_service(
    database_url: str, site: SlowSite, pending_urls: int, log_path: Path
) -> tuple[subprocess.Popen, int]:
    command = [
        str(Path(sys.executable).parent / "topicmap"),
        "serve",
        "--port",
        "0",
        "--database-url",
        database_url,
        "--refresh-seconds",
        "0",
        "--max-pending-urls",
        str(pending_urls),
    ]
    for address in site.addresses:
        command += ["--allow-address", f"{address}:{site.port}"]
    with log_path.open("wb") as log:
        service = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    listening = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")
    wait_for(lambda: listening.search(log_path.read_bytes()) or service.poll() is not None, "the service")
    found = listening.search(log_path.read_bytes())
    if found is None:
        raise SystemExit(f"the service did not start:\n{log_path.read_text()}")
    return service, int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--requests", type=int, default=300, help="text lookups (and refusals) per window")
    arguments.add_argument("--pending", type=int, default=100, help="slow URL lookups kept pending")
    arguments.add_argument("--sites", type=int, default=10, help="slow sites (loopback addresses)")
    arguments.add_argument("--rounds", type=int, default=3)
    arguments.add_argument("--delay", type=float, default=60.0, help="seconds the slow site holds a page")
    options = arguments.parse_args(argv)
    articles = load_articles()
    if not articles:
        print(f"skipped: no articles at {NEWS_HTML}")
        return 0
    rng = random.Random(21)
    vocabulary = sorted({word for text in articles for word in text.split()})
    queries = [edited(text, rng, vocabulary) for text in articles]
    site = SlowSite(options.sites, options.delay)
    rows: dict[str, list[float]] = {}
    pending_seen: list[int] = []
    with tempfile.TemporaryDirectory() as folder:
        database_url = f"sqlite:///{Path(folder) / 'store.sqlite3'}"
        store = TopicStore.open(database_url)
        store.add_stories(
            [
                NewStory(f"https://site{i % 7}.test/story/{i}", f"Story {i}", text, None)
                for i, text in enumerate(articles)
            ]
            + [
                NewStory(f"https://copies.test/story/{i}", f"Copy {i}", edited(text, rng, vocabulary), None)
                for i, text in enumerate(articles)
            ],
            "archive:bench",
        )
        store.dispose()
        service, port = start_service(database_url, site, options.pending, Path(folder) / "serve.log")
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
                window(client, queries, 20, 0)  # warm-up: the extractor, the shingle cache, the connection
                dropped_seconds, ended_seconds = [], []
                beyond = None
                for round_number in range(options.rounds):
                    offset = round_number * options.requests
                    texts, refusals = window(client, queries, options.requests, offset)
                    rows.setdefault("text, no URL load (anchor)", []).extend(texts)
                    rows.setdefault("refusal, no URL load (anchor)", []).extend(refusals)
                    with UrlLoad(port, site, options.pending) as load:
                        wait_for(lambda: pending(client) == options.pending, "the URL lookups to be pending")
                        if beyond is None:
                            beyond = client.get(
                                "/near-duplicates",
                                params={"url": f"http://{site.addresses[0]}:{site.port}/one-more.html"},
                            )
                        pending_seen.append(pending(client))
                        texts, refusals = window(client, queries, options.requests, offset)
                        pending_seen.append(pending(client))
                        load.leave()
                        left = time.perf_counter()
                        wait_for(lambda: url_lookups(client)["queued"] == 0, "the abandoned lookups dropped")
                        dropped_seconds.append(time.perf_counter() - left)
                        wait_for(lambda: url_lookups(client)["running"] == 0, "the abandoned fetches to end")
                        ended_seconds.append(time.perf_counter() - left)
                    rows.setdefault(f"text, {options.pending} slow URL lookups pending", []).extend(texts)
                    rows.setdefault(f"refusal, {options.pending} slow URL lookups pending", []).extend(
                        refusals
                    )
                with UrlLoad(port, site, options.pending) as load:
                    wait_for(lambda: pending(client) == options.pending, "the URL lookups to be pending")
                    load.statuses.clear()
                    signalled = time.perf_counter()
                    service.send_signal(signal.SIGTERM)
                    service.wait(timeout=120)
                    sigterm_seconds = time.perf_counter() - signalled
                    wait_for(lambda: load.statuses.total() == options.pending, "the pending lookups' answers")
                    at_sigterm = dict(load.statuses)
        finally:
            if service.poll() is None:
                service.kill()
                service.wait()
            site.close()

    load = os.getloadavg()
    print(f"load average while measuring (2 cores, shared): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(
        f"{len(articles)} articles and their copies stored; {options.rounds} rounds of {options.requests} requests"
    )
    print(f"URL lookups pending during the loaded windows: {min(pending_seen)}..{max(pending_seen)}")
    assert beyond is not None
    print(
        f"one URL lookup beyond the queue: {beyond.status_code}, Retry-After {beyond.headers.get('Retry-After')}"
    )
    print(
        f"all {options.pending} clients leave: the queued lookups dropped in {max(dropped_seconds):.2f} s at most; "
        f"the fetches in the middle of a page transfer ended in {min(ended_seconds):.1f}-{max(ended_seconds):.1f} s "
        "(at the fetcher's 30 s time limit)"
    )
    print(f"SIGTERM to exit with {options.pending} URL lookups pending: {sigterm_seconds:.2f} s (goal < 5 s)")
    print(f"their answers by HTTP status: {at_sigterm}")
    print("| lookup | p50 ms | p99 ms | requests |")
    print("|---|---:|---:|---:|")
    for name, samples in rows.items():
        print(
            f"| {name} | {percentile(samples, 0.5):.1f} | {percentile(samples, 0.99):.1f} | {len(samples)} |"
        )
    for kind in ("text", "refusal"):
        anchor = percentile(rows[f"{kind}, no URL load (anchor)"], 0.99)
        loaded = percentile(rows[f"{kind}, {options.pending} slow URL lookups pending"], 0.99)
        print(f"{kind}: p99 under the load / anchor p99 = {loaded / anchor:.2f} (goal <= 2)")
    with contextlib.suppress(Exception):
        print(
            f"commit {subprocess.check_output(['git', 'rev-parse', '--short', 'HEAD'], cwd=REPO).decode().strip()}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
