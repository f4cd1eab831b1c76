"""A small link web on loopback for spider tests: N story pages over a few hosts, each linking onward.

Page i lives at http://site{i % hosts}.web.test/story/{i}; it links to pages 2i+1 and 2i+2 (a binary tree,
so depth grows with log2 N) and, every third page, to an off-topic page. Every request is recorded with the
server-side time and the Host header, so tests can measure per-domain gaps.
"""

from __future__ import annotations

import threading
import time
from http.server import ThreadingHTTPServer

from tests.faultserver import ArrivalTimedHandler, stamp_arrivals


def page_url(i: int, hosts: int) -> str:
    return f"http://site{i % hosts}.web.test/story/{i}"


def page_html(i: int, n: int, hosts: int) -> bytes:
    links = [page_url(j, hosts) for j in (2 * i + 1, 2 * i + 2) if j < n]
    if i % 3 == 0:
        links.append(f"http://site{i % hosts}.web.test/offtopic/{i}")
    anchors = " ".join(f'<a href="{u}">more on this</a>' for u in links)
    return (
        f"<html><head><title>Climate story {i}</title>"
        f'<meta property="article:published_time" content="2026-02-{1 + i % 27:02d}T08:00:00Z"></head>'
        f"<body><article><h1>Climate story {i}</h1><p>Story {i} reports on the climate and on emissions, "
        f"with enough words to be an article body for the extractor to keep.</p>"
        f"<p>Further reporting on story {i}: officials spoke, experts answered. {anchors}</p></article></body></html>"
    ).encode()


class LinkWeb:
    def __init__(self, n: int = 60, hosts: int = 3, delay: float = 0.0) -> None:
        self.n, self.hosts, self.delay = n, hosts, delay
        self.hits: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()
        web = self

        class Handler(ArrivalTimedHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # noqa: ANN002
                return

            def do_GET(self) -> None:  # noqa: N802
                host = (self.headers.get("Host") or "").split(":")[0]
                with web._lock:
                    # the kernel's arrival time: a time taken here lags by tens of ms on a loaded machine
                    web.hits.append((self.arrived_at, host, self.path))
                if web.delay:
                    time.sleep(web.delay)
                body, status = b"not found", 404
                if self.path == "/robots.txt":
                    body, status = b"User-agent: *\nAllow: /\n", 200
                elif self.path.startswith("/story/"):
                    i = int(self.path.rsplit("/", 1)[1])
                    if i < web.n:
                        body, status = page_html(i, web.n, web.hosts), 200
                elif self.path.startswith("/offtopic/"):
                    body, status = (
                        b"<html><head><title>Cooking</title></head><body><p>A recipe for soup.</p></body></html>",
                        200,
                    )
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        stamp_arrivals(self.server.socket)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def page_source_settings(self) -> dict:
        return {
            "allow_networks": [f"127.0.0.1:{self.port}"],
            "host_overrides": {"*.web.test": f"127.0.0.1:{self.port}"},
        }

    def __enter__(self) -> LinkWeb:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.server.shutdown()
        self.server.server_close()

    def story_hits(self) -> list[tuple[float, str, str]]:
        with self._lock:
            return [h for h in self.hits if h[2] != "/robots.txt"]
