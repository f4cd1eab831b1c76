"""Serve a DemoWeb over loopback HTTP, dispatching on the Host header.

The spider connects to 127.0.0.1:<port> and sends `Host: dailyherald.test`; the server answers with that
host's page (200, 301 with Location, or 404), robots.txt included. It also accepts proxy-style requests
(`GET http://dailyherald.test/path HTTP/1.1`), so an HTTP client can use it as its proxy for the `.test` hosts:
`requests.get(url, proxies=server.proxies)`.

    with serve_demo_web(generate_demo_web()) as server:
        requests.get("http://127.0.0.1:%d/" % server.port, headers={"Host": "dailyherald.test"})

`python -m topicmap.demo.server [--port N] [--seed S]` serves the default demo web until interrupted.
"""

from __future__ import annotations

import argparse
import html
import sys
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from topicmap.demo.model import Page
from topicmap.demo.web import DemoWeb, generate_demo_web

_NOT_FOUND = (
    b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>"
    b"<body><h1>Not Found</h1><p>The page you requested does not exist.</p></body></html>\n"
)
_SERVER_ERROR = b"<!DOCTYPE html>\n<html><head><title>500</title></head><body>Internal error</body></html>\n"


class DemoServer:
    """A running demo web server; a context manager that shuts it down cleanly on exit."""

    def __init__(
        self, web: DemoWeb, host: str = "127.0.0.1", port: int = 0, fail_once: Iterable[str] = ()
    ) -> None:
        self.web = web
        self.request_log: list[tuple[float, str, str]] = []  # (time.monotonic(), host, path) per request
        self._lock = threading.Lock()
        self._fail_once = set(fail_once)  # membership only
        self._httpd = _DemoHTTPServer((host, port), _DemoHandler)
        self._httpd.demo = self
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="demo-web-server",
            daemon=True,
        )
        self._thread.start()
        self._closed = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def proxies(self) -> dict[str, str]:
        """`requests` proxies that send every http:// URL of the demo web to this server."""
        return {"http": self.base_url}

    def requests_for(self, host: str) -> list[tuple[float, str]]:
        """(time, path) of every request received for one host, in arrival order."""
        with self._lock:
            return [(t, path) for t, h, path in self.request_log if h == host]

    def close(self) -> None:
        """Stop serving, close the socket and wait for the serving thread; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> DemoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # called from handler threads
    def _record(self, host: str, path: str) -> bool:
        """Log the request; True when this URL should fail (500) this one time."""
        url = f"http://{host}{path}"
        with self._lock:
            self.request_log.append((time.monotonic(), host, path))
            if url in self._fail_once:
                self._fail_once.discard(url)
                return True
        return False


class _DemoHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # idle keep-alive connections must not hold up shutdown
    allow_reuse_address = True
    demo: DemoServer

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        # A client closing a keep-alive connection is normal for a crawler; only real errors are printed.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _DemoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a spider's connection pool reuses connections
    server_version = "topicmap-demo/1.0"
    timeout = 30  # an idle keep-alive connection is closed after this many seconds
    server: _DemoHTTPServer

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def log_message(self, format: str, *args: object) -> None:
        """Silence the per-request stderr line; requests are in DemoServer.request_log."""

    def _target(self) -> tuple[str, str] | None:
        """(host, path) from a proxy-style absolute target or from the Host header."""
        if self.path.startswith(("http://", "https://")):
            parts = urlsplit(self.path)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            return (parts.hostname or "").lower(), path
        host_header = self.headers.get("Host")
        if not host_header:
            return None
        host = host_header.strip().lower()
        # "[::1]:8080" keeps its brackets; "dailyherald.test:80" loses its port
        host = host.split("]", 1)[0] + "]" if host.startswith("[") else host.split(":", 1)[0]
        return host.rstrip("."), self.path or "/"

    def _answer(self, send_body: bool) -> None:
        demo = self.server.demo
        target = self._target()
        if target is None:
            self._send(400, {"Content-Type": "text/plain"}, b"missing Host header\n", send_body)
            return
        host, path = target
        if demo._record(host, path):
            self._send(500, {"Content-Type": "text/html; charset=utf-8"}, _SERVER_ERROR, send_body)
            return
        page = demo.web.lookup_path(host, path)
        if page is None and host in (demo.host, "localhost", "127.0.0.1") and path in ("/", "/index.html"):
            page = _index_page(demo)
        if page is None:
            self._send(404, {"Content-Type": "text/html; charset=utf-8"}, _NOT_FOUND, send_body)
            return
        self._send(page.status, page.headers, page.body, send_body)

    def _send(self, status: int, headers: dict[str, str], body: bytes, send_body: bool) -> None:
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away; nothing to answer


def _index_page(demo: DemoServer) -> Page:
    """What a person sees at http://127.0.0.1:<port>/: the hosts and how to ask for them."""
    items = "".join(f"<li><code>{html.escape(h)}</code></li>" for h in demo.web.hosts)
    example = demo.web.hosts[0] if demo.web.hosts else "dailyherald.test"
    body = (
        "<!DOCTYPE html>\n<html><head><title>topicmap demo web</title></head><body>"
        f"<h1>topicmap demo web (seed {demo.web.seed})</h1>"
        f"<p>{len(demo.web.stories)} stories on {len(demo.web.media)} media. Ask for a host with a Host header "
        f"or use this server as an HTTP proxy:</p><pre>curl -H 'Host: {example}' {demo.base_url}/\n"
        f"curl -x {demo.base_url} http://{example}/</pre><ul>{items}</ul></body></html>\n"
    )
    return Page(200, {"Content-Type": "text/html; charset=utf-8"}, body.encode(), "text/html")


def serve_demo_web(
    web: DemoWeb, host: str = "127.0.0.1", port: int = 0, flaky: bool = False, fail_once: Iterable[str] = ()
) -> DemoServer:
    """Start serving `web` in a background thread (port 0 = any free port) and return the running server.

    With `flaky=True` each URL of `web.truth.flaky_once` answers 500 the first time it is asked for and
    normally afterwards (a retry test); `fail_once` adds URLs of your own."""
    urls = list(fail_once) + (list(web.truth.flaky_once) if flaky else [])
    return DemoServer(web, host=host, port=port, fail_once=urls)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the topicmap demo news web on loopback HTTP.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--stories", type=int, default=3000)
    parser.add_argument("--flaky", action="store_true", help="answer 500 once for the web's flaky URLs")
    args = parser.parse_args(argv)
    web = generate_demo_web(seed=args.seed, n_stories=args.stories)
    with serve_demo_web(web, host=args.host, port=args.port, flaky=args.flaky) as server:
        example = web.media[0]["host"]
        print(f"demo web: {len(web.stories)} stories, {len(web.media)} media, {len(web.hosts)} hosts")
        print(f"serving on {server.base_url} (port {server.port}); try:")
        print(f"  curl -H 'Host: {example}' {server.base_url}/")
        print(f"  curl -x {server.base_url} http://{example}/robots.txt")
        print("Ctrl-C to stop.", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopped")


if __name__ == "__main__":
    main()
