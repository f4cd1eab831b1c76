"""Near-duplicate lookup service under load: text lookups and refusals while 100 URL lookups of slow sites are
pending, against the same lookups with no URL load in the same run; and the service's bounds on its clients (300
slow uploaders, 800 simultaneous 1 MiB posts, deeply nested JSON).

    .venv/bin/python benchmarks/bench_near_dup_service_load.py [--cases urls,clients] [--requests 300]
        [--pending 100] [--sites 10] [--rounds 3] [--delay 60] [--uploaders 300] [--upload-seconds 30]
        [--posts 800]

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

The clients cases (``--cases clients``) start a fresh service for each, with its default limits on clients:
1. ``--uploaders`` slow uploaders (each a connection of its own, a chunked text/plain body of 1 MiB, the most
   the service takes, sent at 100 KB/s; answered, cut off or refused, it connects again a second later), kept up
   for ``--upload-seconds``: the service's resident memory (sampled every 50 ms, and its VmHWM; before the load
   and its peak under it) and CPU time, and the latency of a small lookup (an edited article, a new connection
   each time) sent every 0.25 s meanwhile, against the same small lookup with no load (the anchor), and what the
   uploaders were answered;
2. ``--posts`` posts of a 1 MiB JSON body, all sent at once: the time to each answer's status line, the answers,
   the service's peak memory and CPU time;
3. a JSON body nested 300,000 deep: the answer.
Goal: under the uploads, a small lookup answered within 1 s throughout and the service's peak memory under
``CLIENT_LOAD_MEMORY_GOAL_MB``. To measure another checkout's service, point PYTHONPATH at it (the service runs
with this process's environment).
"""

from __future__ import annotations

import argparse
import asyncio
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
# The goal for the service's peak resident memory under the slow uploads (see docs/near-duplicates.md).
CLIENT_LOAD_MEMORY_GOAL_MB = 400
UPLOAD_BYTES = 1024 * 1024  # the most the service takes in one body
UPLOAD_CHUNK = 10_000  # every 0.1 s: 100 KB/s
POST_BYTES = 1024 * 1024
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
    database_url: str, log_path: Path, site: SlowSite | None = None, pending_urls: int | None = None
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
    ]
    if pending_urls is not None:
        command += ["--max-pending-urls", str(pending_urls)]
    for address in site.addresses if site is not None else []:
        command += ["--allow-address", f"{address}:{site.port}"]
    with log_path.open("wb") as log:
        service = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    listening = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")
    wait_for(lambda: listening.search(log_path.read_bytes()) or service.poll() is not None, "the service")
    found = listening.search(log_path.read_bytes())
    if found is None:
        raise SystemExit(f"the service did not start:\n{log_path.read_text()}")
    return service, int(found.group(1))


def url_load_cases(options: argparse.Namespace, queries: list[str], database_url: str, folder: Path) -> None:
    """Text lookups and refusals with and without slow URL lookups pending; SIGTERM with them pending."""
    site = SlowSite(options.sites, options.delay)
    rows: dict[str, list[float]] = {}
    pending_seen: list[int] = []
    service, port = start_service(database_url, folder / "serve.log", site, options.pending)
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
                rows.setdefault(f"refusal, {options.pending} slow URL lookups pending", []).extend(refusals)
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
        stop_service(service)
        site.close()

    print(f"{options.rounds} rounds of {options.requests} requests")
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


# ---------------------------------------------------------------------------------------------------
# The service's bounds on its clients


def stop_service(service: subprocess.Popen) -> None:
    if service.poll() is None:
        service.kill()
        service.wait()


def cpu_seconds(pid: int) -> float:
    """The CPU time the process has used so far (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resident_mb(pid: int, field: str = "VmRSS") -> float:
    """The process's resident memory (``VmRSS``) or its peak so far (``VmHWM``), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no {field} for process {pid}")


class MemorySampler:
    """The peak of a process's resident memory, sampled every 50 ms from a thread (``peak_mb``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(OSError, SystemExit):
                self.peak_mb = max(self.peak_mb, resident_mb(self.pid))

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


class SmallLookups:
    """Small lookups (an edited article, ~4 KB), each on a new connection: ``one`` now, or after ``start`` one
    every ``every`` seconds from a thread of its own, (seconds, HTTP status or the error's name) of each in
    ``answers``."""

    def __init__(self, port: int, text: str, every: float = 0.25) -> None:
        self.port = port
        self.body = json.dumps({"text": text}).encode()
        self.every = every
        self.answers: list[tuple[float, int | str]] = []
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=120, limits=httpx.Limits(max_keepalive_connections=0)
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def one(self) -> tuple[float, int | str]:
        began = time.perf_counter()
        try:
            response = self.client.post(
                "/near-duplicates", content=self.body, headers={"Content-Type": "application/json"}
            )
            status: int | str = response.status_code
        except httpx.HTTPError as error:
            status = type(error).__name__
        return time.perf_counter() - began, status

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.answers.append(self.one())

    def start(self) -> None:
        """Lookups every ``every`` seconds until the ``with`` block ends."""
        self._thread.start()

    def __enter__(self) -> SmallLookups:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.client.close()


async def _answer_status(reader: asyncio.StreamReader) -> int | str:
    """The status of the answer on ``reader`` once its status line is in (the client then closes the
    connection), "closed" when the service closed it without one, "reset" when it reset it."""
    try:
        head = await reader.readline()
    except ConnectionError:
        return "reset"
    return int(head.split()[1]) if head.startswith(b"HTTP/") else "closed"


async def slow_uploader(port: int, stop: asyncio.Event, answers: Counter) -> None:
    """Uploads of UPLOAD_BYTES of text at 100 KB/s (chunked, no length declared), one after another until
    ``stop``; an upload cut off or refused is followed by the next a second later."""
    piece = (b"word " * (UPLOAD_CHUNK // 5 + 1))[:UPLOAD_CHUNK]
    await asyncio.sleep(random.random() * 0.1)  # not all in step
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            answers["connect refused"] += 1
            await asyncio.sleep(1)
            continue
        answered = asyncio.ensure_future(_answer_status(reader))
        sent = 0
        try:
            writer.write(
                b"POST /near-duplicates HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            while sent < UPLOAD_BYTES and not answered.done() and not stop.is_set():
                size = min(UPLOAD_CHUNK, UPLOAD_BYTES - sent)
                writer.write(f"{size:x}\r\n".encode() + piece[:size] + b"\r\n")
                await writer.drain()
                sent += size
                await asyncio.sleep(0.1)
            if sent >= UPLOAD_BYTES and not answered.done():
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except ConnectionError:
            pass
        if stop.is_set() and not answered.done():
            answered.cancel()
            writer.close()
            return
        answers[await answered] += 1
        writer.close()
        await asyncio.sleep(1)


async def upload_load(port: int, uploaders: int, seconds: float, started: threading.Event) -> Counter:
    stop = asyncio.Event()
    answers: Counter = Counter()
    tasks = [asyncio.ensure_future(slow_uploader(port, stop, answers)) for _ in range(uploaders)]
    started.set()
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return answers


async def big_post(port: int, body: bytes) -> tuple[float, int | str]:
    """A JSON post of ``body``: (seconds to its answer, HTTP status, "closed" or "reset")."""
    began = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return time.perf_counter() - began, "connect refused"
    answered = asyncio.ensure_future(_answer_status(reader))
    try:
        writer.write(
            b"POST /near-duplicates HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        )
        view = memoryview(body)
        for start in range(0, len(body), 65536):  # the transport buffers no more than a piece per connection
            if answered.done():
                break
            writer.write(view[start : start + 65536])
            await writer.drain()
    except ConnectionError:
        pass
    status = await answered
    writer.close()
    return time.perf_counter() - began, status


async def simultaneous_posts(port: int, body: bytes, count: int) -> list[tuple[float, int | str]]:
    return await asyncio.gather(*(big_post(port, body) for _ in range(count)))


def post_body(text: str, size: int) -> bytes:
    """A JSON body of exactly ``size`` bytes: {"text": the text repeated}, padded with spaces."""
    escaped = json.dumps(text + " ")[1:-1].encode()
    body = b'{"text": "' + escaped * ((size - 12) // len(escaped)) + b'"}'
    return body.ljust(size, b" ")


def latency_row(name: str, answers: list[tuple[float, int | str]]) -> str:
    seconds = [elapsed for elapsed, _ in answers]
    statuses = dict(Counter(status for _, status in answers))
    return (
        f"| {name} | {percentile(seconds, 0.5):.1f} | {percentile(seconds, 0.99):.1f} | "
        f"{max(seconds) * 1000:.1f} | {len(answers)} | {statuses} |"
    )


def client_cases(options: argparse.Namespace, queries: list[str], database_url: str, folder: Path) -> None:
    """300 slow uploaders (memory, a small lookup's latency), 800 simultaneous 1 MiB posts, deep JSON."""
    small = queries[0]
    rows = []
    service, port = start_service(database_url, folder / "serve-uploads.log")
    try:
        with SmallLookups(port, small) as probe:
            for _ in range(10):  # warm-up
                probe.one()
            anchor = [probe.one() for _ in range(40)]
        before_mb = resident_mb(service.pid)
        cpu_before = cpu_seconds(service.pid)
        started = threading.Event()
        answers: Counter = Counter()
        with MemorySampler(service.pid) as memory:
            loader = threading.Thread(
                target=lambda: answers.update(
                    asyncio.run(upload_load(port, options.uploaders, options.upload_seconds, started))
                ),
                daemon=True,
            )
            loader.start()
            started.wait()
            time.sleep(2)  # the uploads under way
            with SmallLookups(port, small) as during:
                during.start()
                loader.join()
        upload_peak_mb = max(memory.peak_mb, resident_mb(service.pid, "VmHWM"))
        upload_cpu = cpu_seconds(service.pid) - cpu_before
    finally:
        stop_service(service)
    rows.append(latency_row("small lookup, no load (anchor)", anchor))
    rows.append(latency_row(f"small lookup, {options.uploaders} slow uploaders", during.answers))

    body = post_body(small, POST_BYTES)
    service, port = start_service(database_url, folder / "serve-posts.log")
    try:
        before_posts_mb = resident_mb(service.pid)
        cpu_before = cpu_seconds(service.pid)
        with MemorySampler(service.pid) as memory:
            posts = asyncio.run(simultaneous_posts(port, body, options.posts))
        posts_peak_mb = max(memory.peak_mb, resident_mb(service.pid, "VmHWM"))
        posts_cpu = cpu_seconds(service.pid) - cpu_before
        with SmallLookups(port, small) as probe:
            after_posts = probe.one()
        deep = httpx.post(
            f"http://127.0.0.1:{port}/near-duplicates",
            content=b"[" * 300_000,
            headers={"Content-Type": "application/json"},
            timeout=120,
        )
    finally:
        stop_service(service)
    rows.append(latency_row(f"{options.posts} simultaneous posts of 1 MiB", posts))

    print(
        f"{options.uploaders} slow uploaders (1 MiB each, chunked, 100 KB/s) for {options.upload_seconds:.0f} s: "
        f"their answers {dict(answers)}"
    )
    print(
        f"service memory: {before_mb:.0f} MB before the uploads, peak {upload_peak_mb:.0f} MB under them "
        f"(goal < {CLIENT_LOAD_MEMORY_GOAL_MB} MB); service CPU {upload_cpu:.1f} s"
    )
    print(
        f"{options.posts} simultaneous posts of 1 MiB: memory {before_posts_mb:.0f} MB before, peak "
        f"{posts_peak_mb:.0f} MB; service CPU {posts_cpu:.1f} s; a small lookup right after: {after_posts[1]} in "
        f"{after_posts[0] * 1000:.0f} ms"
    )
    print(f"JSON nested 300,000 deep: {deep.status_code} {deep.text[:160]}")
    print("| requests | p50 ms | p99 ms | max ms | answered | answers |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        print(row)
    worst = max(elapsed for elapsed, _ in during.answers)
    print(f"small lookup under the uploads: the slowest {worst:.2f} s (goal < 1 s)")


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--cases", default="urls,clients", help="urls, clients, or both (comma-separated)")
    arguments.add_argument("--requests", type=int, default=300, help="text lookups (and refusals) per window")
    arguments.add_argument("--pending", type=int, default=100, help="slow URL lookups kept pending")
    arguments.add_argument("--sites", type=int, default=10, help="slow sites (loopback addresses)")
    arguments.add_argument("--rounds", type=int, default=3)
    arguments.add_argument("--delay", type=float, default=60.0, help="seconds the slow site holds a page")
    arguments.add_argument("--uploaders", type=int, default=300, help="slow uploaders kept connected")
    arguments.add_argument("--upload-seconds", type=float, default=30.0, help="how long the uploads go on")
    arguments.add_argument("--posts", type=int, default=800, help="simultaneous posts of 1 MiB")
    options = arguments.parse_args(argv)
    cases = set(options.cases.split(","))
    if not cases <= {"urls", "clients"}:
        raise SystemExit(f"--cases takes urls and clients, got {options.cases!r}")
    articles = load_articles()
    if not articles:
        print(f"skipped: no articles at {NEWS_HTML}")
        return 0
    rng = random.Random(21)
    vocabulary = sorted({word for text in articles for word in text.split()})
    queries = [edited(text, rng, vocabulary) for text in articles]
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
        print(f"{len(articles)} articles and their copies stored")
        if "urls" in cases:
            url_load_cases(options, queries, database_url, Path(folder))
        if "clients" in cases:
            client_cases(options, queries, database_url, Path(folder))
    load = os.getloadavg()
    print(f"load average at the end (2 cores, shared): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    with contextlib.suppress(Exception):
        print(
            f"commit {subprocess.check_output(['git', 'rev-parse', '--short', 'HEAD'], cwd=REPO).decode().strip()}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
