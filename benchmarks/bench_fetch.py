"""Fetch layer benchmark: throughput against a plain requests thread pool, and politeness at 0.5 s/domain.

    .venv/bin/python benchmarks/bench_fetch.py [--pages 2000] [--domains 50] [--throttled-pages 1000]

A loopback server in its own process (so it does not share the client's GIL) serves HTML pages for
``www.site00.test`` .. ``www.site49.test`` with HTTP/1.1 keep-alive; ``host_overrides`` send ``*.test`` to it.
(Not ``dNN.bench.test``: those 50 hosts share ONE distinctive domain, bench.test, and would be throttled as
one site, as Media Cloud would.)

(a) zero interval: ``WebFetcher.fetch_many`` (SSRF guard, robots.txt, throttle bookkeeping, bounded body
    reading, charset decoding) against the anchor, a shared ``requests.Session`` driven by a 32-thread
    ``ThreadPoolExecutor`` that reads ``response.text`` for the same URLs (Host header set, same server).
(b) 0.5 s per domain: achieved pages/s over the ideal 50 / 0.5 = 100 pages/s, and the smallest gap the
    server saw between two requests to one domain (must be >= 0.5 s). Rows for the in-memory throttle and
    for the store-backed SqlThrottle (PostgreSQL when TOPICMAP_TEST_DATABASE_URL / the default answers,
    else SQLite).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests  # noqa: E402
from requests.adapters import HTTPAdapter  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from topicmap.store.throttle import SqlThrottle  # noqa: E402
from topicmap.web.fetch import WebFetcher  # noqa: E402
from topicmap.web.netguard import AddressPolicy  # noqa: E402
from topicmap.web.throttle import MemoryThrottle, throttle_domain  # noqa: E402

PAGE_FILLER = "<p>" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 120 + "</p>"


_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)


class _BenchHandler(BaseHTTPRequestHandler):
    """Stamps each request with the kernel receive time of its first packet (SO_TIMESTAMPNS, Linux), so the
    per-domain gaps measure the requests, not this server's thread scheduling (same as tests/faultserver)."""

    protocol_version = "HTTP/1.1"
    # Without these, headers and body leave in two small writes and Nagle + delayed ACK stall every
    # response by ~40 ms.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):
        return

    def setup(self) -> None:
        super().setup()
        if _SO_TIMESTAMPNS is not None:
            self.connection.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)

    def handle_one_request(self) -> None:
        self.arrived_at = time.time()
        if _SO_TIMESTAMPNS is not None:
            try:
                data, ancillary, _, _ = self.connection.recvmsg(1, socket.CMSG_SPACE(16), socket.MSG_PEEK)
                for level, kind, payload in ancillary:
                    if data and level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
                        seconds, nanoseconds = struct.unpack("qq", payload[:16])
                        self.arrived_at = seconds + nanoseconds / 1e9
            except OSError:
                pass
        super().handle_one_request()

    def do_GET(self) -> None:
        host = (self.headers.get("Host") or "").split(":")[0]
        if self.path == "/__log":
            with self.server.lock:  # type: ignore[attr-defined]
                records = list(self.server.records)  # type: ignore[attr-defined]
                self.server.records.clear()  # type: ignore[attr-defined]
            self._send(json.dumps(records).encode(), "application/json")
            return
        self.server.records.append((self.arrived_at, host, self.path))  # type: ignore[attr-defined]
        if self.path == "/robots.txt":
            self._send(b"User-agent: *\nDisallow: /private/\n", "text/plain")
            return
        body = (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{host}{self.path}</title></head>"
            f"<body><h1>Story {self.path}</h1>{PAGE_FILLER}</body></html>"
        ).encode()
        self._send(body, "text/html; charset=utf-8")

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self._headers_buffer.append(b"\r\n" + body)  # headers and body in one write
        self.flush_headers()


def _serve(port_queue) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BenchHandler)
    server.daemon_threads = True
    server.request_queue_size = 256
    server.records = []  # type: ignore[attr-defined]
    server.lock = threading.Lock()  # type: ignore[attr-defined]
    port_queue.put(server.server_address[1])
    server.serve_forever(poll_interval=0.2)


def server_log(port: int) -> list[tuple[float, str, str]]:
    return [tuple(record) for record in requests.get(f"http://127.0.0.1:{port}/__log", timeout=30).json()]


def make_urls(pages: int, domains: int) -> list[str]:
    # Interleaved across domains, as a spider's frontier usually is.
    return [f"http://www.site{n % domains:02d}.test/story/{n}" for n in range(pages)]


def run_anchor(port: int, urls: list[str]) -> tuple[float, int]:
    session = requests.Session()
    session.trust_env = False
    session.mount("http://", HTTPAdapter(pool_connections=64, pool_maxsize=32))

    def get(url: str) -> bool:
        host, _, path = url[len("http://") :].partition("/")
        response = session.get(f"http://127.0.0.1:{port}/{path}", headers={"Host": host}, timeout=30)
        return response.status_code == 200 and bool(response.text)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=32) as pool:
        ok = sum(pool.map(get, urls))
    return time.perf_counter() - started, ok


def make_fetcher(port: int, interval: float, throttle) -> WebFetcher:
    return WebFetcher(
        policy=AddressPolicy(allow=[f"127.0.0.1:{port}"]),
        host_overrides={"*.test": f"127.0.0.1:{port}"},
        interval_overrides={"*": interval},
        throttle=throttle,
    )


def run_fetcher(port: int, urls: list[str], interval: float, throttle, workers: int) -> tuple[float, int]:
    with make_fetcher(port, interval, throttle) as fetcher:
        started = time.perf_counter()
        ok = sum(1 for outcome in fetcher.fetch_many(urls, max_workers=workers) if outcome.ok)
        return time.perf_counter() - started, ok


def gaps_by_domain(records: list[tuple[float, str, str]]) -> dict[str, list[float]]:
    times = defaultdict(list)
    for at, host, path in records:
        if path.startswith("/story/"):
            times[host].append(at)
    gaps = {}
    for host, moments in times.items():
        moments.sort()
        gaps[host] = [b - a for a, b in zip(moments, moments[1:], strict=False)]
    return gaps


def store_throttle() -> tuple[SqlThrottle, str, callable]:
    """SqlThrottle on PostgreSQL (own schema, dropped after) if reachable, else on a temp SQLite file."""
    url = os.environ.get("TOPICMAP_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg2://" + url[len("postgresql://") :]
    try:
        schema = f"tm_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        admin = create_engine(url)
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        engine = create_engine(url, connect_args={"options": f"-csearch_path={schema}"})

        def cleanup() -> None:
            engine.dispose()
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()

        return SqlThrottle(engine), "SqlThrottle (PostgreSQL)", cleanup
    except Exception:  # noqa: BLE001 - no PostgreSQL here: fall back to SQLite
        folder = tempfile.mkdtemp()
        engine = create_engine(f"sqlite:///{folder}/bench.sqlite3")
        return SqlThrottle(engine), "SqlThrottle (SQLite)", engine.dispose


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--domains", type=int, default=50)
    parser.add_argument("--throttled-pages", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    context = multiprocessing.get_context("spawn")
    port_queue = context.Queue()
    server = context.Process(target=_serve, args=(port_queue,), daemon=True)
    server.start()
    port = port_queue.get(timeout=30)
    try:
        urls = make_urls(args.pages, args.domains)
        assert len({throttle_domain(url) for url in urls}) == args.domains, "hosts must be distinct sites"
        # Warm both code paths once (imports, first connections) before timing.
        run_anchor(port, urls[:100])
        run_fetcher(port, urls[:100], 0.0, MemoryThrottle(), 32)
        server_log(port)

        timings: dict[str, list[tuple[float, float]]] = {"anchor": [], "ours": []}  # (wall, client CPU)
        for _ in range(args.repeats):  # alternate, so background load hits both alike
            for name, run in (
                ("anchor", lambda: run_anchor(port, urls)),
                ("ours", lambda: run_fetcher(port, urls, 0.0, MemoryThrottle(), 32)),
            ):
                cpu = time.process_time()
                seconds, ok = run()
                timings[name].append((seconds, time.process_time() - cpu))
                assert ok == len(urls), f"{name} fetched {ok}/{len(urls)}"
        server_log(port)
        rates = {name: len(urls) / statistics.median(w for w, _ in runs) for name, runs in timings.items()}
        cpu_ms = {
            name: 1000 * statistics.median(c for _, c in runs) / len(urls) for name, runs in timings.items()
        }
        per_run = [a[0] / o[0] for a, o in zip(timings["anchor"], timings["ours"], strict=True)]

        print(
            f"## (a) zero interval: {len(urls)} pages over {args.domains} domains, median of {args.repeats}\n"
        )
        print("| implementation | pages/s | vs anchor | client CPU ms/page |")
        print("|---|---:|---:|---:|")
        print(
            "| anchor: requests.Session + 32-thread ThreadPoolExecutor | "
            f"{rates['anchor']:,.0f} | 1.00 | {cpu_ms['anchor']:.2f} |"
        )
        print(
            "| WebFetcher.fetch_many, 32 workers (guard, robots, throttle bookkeeping) | "
            f"{rates['ours']:,.0f} | {rates['ours'] / rates['anchor']:.2f} | {cpu_ms['ours']:.2f} |"
        )
        print(f"\nPer-run ratios (ours / anchor, paired runs): {', '.join(f'{r:.2f}' for r in per_run)}")

        throttled = make_urls(args.throttled_pages, args.domains)
        ideal_rate = args.domains / args.interval
        print(
            f"\n## (b) {args.interval} s per domain: {len(throttled)} pages over {args.domains} domains "
            f"(ideal {ideal_rate:.0f} pages/s)\n"
        )
        print(
            "| throttle | seconds | pages/s | achieved / ideal | steady-state gap / interval | smallest gap (s) |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        sql_throttle, sql_name, cleanup = store_throttle()
        try:
            for name, throttle in (("MemoryThrottle", MemoryThrottle()), (sql_name, sql_throttle)):
                seconds, ok = run_fetcher(port, throttled, args.interval, throttle, 8)
                assert ok == len(throttled), f"{name}: fetched {ok}/{len(throttled)}"
                gaps = gaps_by_domain(server_log(port))
                all_gaps = [gap for domain_gaps in gaps.values() for gap in domain_gaps]
                rate = len(throttled) / seconds
                print(
                    f"| {name} | {seconds:.2f} | {rate:.1f} | {rate / ideal_rate:.2f} | "
                    f"{statistics.mean(all_gaps) / args.interval:.3f} | {min(all_gaps):.4f} |"
                )
                assert min(all_gaps) >= args.interval, f"{name}: a domain saw a gap of {min(all_gaps):.4f} s"
        finally:
            cleanup()
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
