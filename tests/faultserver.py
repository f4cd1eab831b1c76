"""A loopback HTTP server that misbehaves on purpose, for fetcher tests (reusable by any test).

    with FaultServer() as server:
        fetcher = WebFetcher(policy=AddressPolicy(allow=server.allow_list), ...)
        fetcher.fetch(server.url("/status/404"))

Routes (GET):

    /robots.txt              "Disallow: /private/" for every agent; HTTP 500 when the Host starts with
                             "robots-500.", 404 when it starts with "robots-404."; when it starts with
                             "robots-to-", 301 to the robots.txt of the rest of the Host (a renamed site:
                             robots-to-new.test -> http://new.test:<port>/robots.txt)
    /redirect-to?u=<url>     302 to <url> (cross-host redirects through host_overrides)
    /page, /landing          a small HTML page (200)
    /private/<x>             HTML, but disallowed by robots.txt
    /status/<code>           that status with a small HTML body
    /flaky/<key>             500 the first time each path is asked, then 200
    /ratelimited/<key>       429 with "Retry-After: 1" the first time, then 200
    /ratelimited-date/<key>  429 with Retry-After as an HTTP date 1 s ahead the first time, then 200
    /ratelimited-long        429 with "Retry-After: 3600", always
    /slow-headers            headers only after 3 s (read timeout)
    /trickle-headers         the status line, then one header byte every 0.1 s, forever (no read ever times out)
    /stall                   200, chunked, then 16 bytes every 0.1 s forever (a body that never ends)
    /loop/a, /loop/b         redirect to each other forever
    /chain/<n>               n redirects, then a page
    /redirect/other-port     302 to http://127.0.0.1:<other_port>/ (a second loopback server; it counts hits)
    /redirect/metadata       302 to http://169.254.169.254/latest/meta-data/
    /redirect/private        302 to /private/secret (robots applies to every hop)
    /big                     50 MB with Content-Length
    /big-chunked             50 MB, chunked, no Content-Length
    /wrong-charset           declares charset=utf-8, body is windows-1252
    /doc.pdf                 application/pdf, 5 MB
    /bomb                    gzip bomb: ~1 MB on the wire, 1 GiB inflated (Content-Encoding: gzip)
    /gzip-page               a valid gzip-encoded HTML page
    /meta-refresh            HTML meta refresh to /landing
    /no-type                 HTML without a Content-Type header (sniffed)
    /no-type-binary          PNG bytes without a Content-Type header
    /reset                   closes the connection without answering
    /cookie-check            sets a cookie and redirects to itself; 200 once the cookie comes back

Besides the HTTP server, ``blackhole_port`` is a listening socket whose accept queue is full, so a connect
to it times out (a "connect timeout" without leaving loopback).
"""

from __future__ import annotations

import email.utils
import gzip
import socket
import struct
import sys
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

BIG_BODY_BYTES = 50 * 1000 * 1000
BOMB_INFLATED_MIB = 1024
PDF_BYTES = 5 * 1000 * 1000
WRONG_CHARSET_TEXT = (
    "<html><head><title>Café crème — les prix</title></head><body><p>Le café coûte 2 € à Paris; "
    "la crème brûlée est « très » bonne. Déjà vu, naïve façade, garçon.</p></body></html>"
)
PAGE_HTML = b"<!doctype html><html><head><title>Fault server page</title></head><body><p>ok</p></body></html>"


class Hit(NamedTuple):
    """One request the fault server received."""

    at: float  # wall-clock arrival of the request's first packet (kernel timestamp where available)
    host: str  # Host header
    path: str  # path and query
    user_agent: str


_bomb_lock = threading.Lock()
_bomb_bytes: bytes | None = None


def gzip_bomb(inflated_mib: int = BOMB_INFLATED_MIB) -> bytes:
    """A valid gzip stream of ``inflated_mib`` MiB of zeros, ~1 KB per MiB, built in well under a second.

    Each MiB of zeros is deflated once with a full flush (byte-aligned, dictionary reset), so the same
    compressed block can be repeated instead of compressing a gigabyte.
    """
    global _bomb_bytes
    with _bomb_lock:
        if _bomb_bytes is not None and inflated_mib == BOMB_INFLATED_MIB:
            return _bomb_bytes
        block = bytes(1 << 20)
        compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        compressor.compress(block)
        compressor.flush(zlib.Z_FULL_FLUSH)
        repeated = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
        crc = 0
        for _ in range(inflated_mib):
            crc = zlib.crc32(block, crc)
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
        trailer = struct.pack("<II", crc, (inflated_mib << 20) & 0xFFFFFFFF)
        body = header + repeated * inflated_mib + compressor.flush() + trailer
        if inflated_mib == BOMB_INFLATED_MIB:
            _bomb_bytes = body
        return body


class ArrivalTimedHandler(BaseHTTPRequestHandler):
    """Stamps each request with the kernel's receive time of its first packet (``self.arrived_at``).

    A time taken in Python, after the handler thread has been scheduled and has parsed the request, varies
    by milliseconds to tens of milliseconds on a loaded machine: too coarse to check the spacing of
    requests against an interval. Linux's SO_TIMESTAMPNS gives the arrival time itself; elsewhere the
    handler falls back to time.time().
    """

    def setup(self) -> None:
        super().setup()
        if _SO_TIMESTAMPNS is not None:
            self.connection.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)

    def handle_one_request(self) -> None:
        self.arrived_at = self._peek_arrival()
        super().handle_one_request()

    def _peek_arrival(self) -> float:
        if _SO_TIMESTAMPNS is None:
            return time.time()
        try:
            # Peek one byte: it blocks until the next request arrives and leaves it for the parser.
            data, ancillary, _flags, _address = self.connection.recvmsg(
                1, socket.CMSG_SPACE(16), socket.MSG_PEEK
            )
        except (OSError, ValueError):
            return time.time()
        for level, kind, payload in ancillary:
            if data and level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= 16:
                seconds, nanoseconds = struct.unpack("qq", payload[:16])
                return seconds + nanoseconds / 1e9
        return time.time()


_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)


def stamp_arrivals(listening: socket.socket) -> None:
    """Ask the kernel to stamp every packet the server receives, for its whole life: a request arriving on a new
    connection before its handler has asked would otherwise be stamped when it is read, late."""
    if _SO_TIMESTAMPNS is not None:
        listening.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)


class _Handler(ArrivalTimedHandler):
    protocol_version = "HTTP/1.1"
    server: _FaultHTTPServer

    def log_message(self, format: str, *args) -> None:  # keep test output clean
        return

    def _send(
        self, status: int, body: bytes = b"", content_type: str | None = "text/html; charset=utf-8", **headers
    ) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str, status: int = 302) -> None:
        self._send(status, b"<html><body>moved</body></html>", Location=location)

    def _first_time(self) -> bool:
        with self.server.lock:
            seen = self.path in self.server.seen
            self.server.seen.add(self.path)
            return not seen

    def _stream(self, total: int, piece: bytes, delay: float = 0.0) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            while total < 0 or sent < total:
                if self.server.stopping.is_set():
                    return
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                sent += len(piece)
                if delay:
                    self.wfile.flush()
                    time.sleep(delay)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            return  # the client hung up, as it should

    def do_GET(self) -> None:
        self.server.hits.append(
            Hit(
                self.arrived_at,
                self.headers.get("Host") or "",
                self.path,
                self.headers.get("User-Agent") or "",
            )
        )
        path, _, query = self.path.partition("?")
        try:
            self._route(path, query)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _route(self, path: str, query: str) -> None:  # noqa: C901 - one branch per route reads best
        host = (self.headers.get("Host") or "").split(":")[0]
        if path == "/robots.txt" and host.startswith("robots-500."):
            self._send(500, b"robots are broken", "text/plain")
        elif path == "/robots.txt" and host.startswith("robots-404."):
            self._send(404, b"no robots here", "text/plain")
        elif path == "/robots.txt" and host.startswith("robots-to-"):
            port = (self.headers.get("Host") or "").partition(":")[2]
            self._redirect(
                f"http://{host.removeprefix('robots-to-')}{':' + port if port else ''}/robots.txt", 301
            )
        elif path == "/robots.txt":
            self._send(200, b"User-agent: *\nDisallow: /private/\n", "text/plain")
        elif path == "/redirect-to":
            self._redirect(urllib.parse.parse_qs(query)["u"][0])
        elif path in ("/page", "/landing", "/") or path.startswith("/private/"):
            self._send(200, PAGE_HTML)
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            self._send(code, f"<html><body>status {code}</body></html>".encode())
        elif path.startswith("/flaky/"):
            if self._first_time():
                self._send(500, b"<html><body>oops</body></html>")
            else:
                self._send(200, PAGE_HTML)
        elif path.startswith("/ratelimited/"):
            if self._first_time():
                self._send(429, b"slow down", "text/plain", Retry_After="1")
            else:
                self._send(200, PAGE_HTML)
        elif path.startswith("/ratelimited-date/"):
            if self._first_time():
                when = email.utils.formatdate(time.time() + 1.0, usegmt=True)
                self._send(429, b"slow down", "text/plain", Retry_After=when)
            else:
                self._send(200, PAGE_HTML)
        elif path == "/ratelimited-long":
            self._send(429, b"come back tomorrow", "text/plain", Retry_After="3600")
        elif path == "/slow-headers":
            time.sleep(3.0)
            self._send(200, PAGE_HTML)
        elif path == "/trickle-headers":
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Trickle: ")
                while not self.server.stopping.is_set():
                    self.wfile.write(b"a")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass  # the client hung up, as it should
            self.close_connection = True
        elif path == "/stall":
            self._stream(-1, b"<p>still here</p>"[:16], delay=0.1)
        elif path == "/loop/a":
            self._redirect("/loop/b")
        elif path == "/loop/b":
            self._redirect("/loop/a")
        elif path.startswith("/chain/"):
            left = int(path.rsplit("/", 1)[1])
            if left > 0:
                self._redirect(f"/chain/{left - 1}", 301 if left % 2 else 307)
            else:
                self._send(200, PAGE_HTML)
        elif path == "/redirect/other-port":
            self._redirect(f"http://127.0.0.1:{self.server.other_port}/")
        elif path == "/redirect/metadata":
            self._redirect("http://169.254.169.254/latest/meta-data/")
        elif path == "/redirect/private":
            self._redirect("/private/secret")
        elif path == "/big":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(BIG_BODY_BYTES))
            self.end_headers()
            chunk = b"<p>" + b"x" * (64 * 1024 - 7) + b"</p>\n"
            try:
                for _ in range(BIG_BODY_BYTES // len(chunk)):
                    self.wfile.write(chunk)
                self.wfile.write(b"x" * (BIG_BODY_BYTES % len(chunk)))
            except OSError:
                return
        elif path == "/big-chunked":
            self._stream(BIG_BODY_BYTES, b"<p>" + b"y" * (64 * 1024 - 7) + b"</p>\n")
        elif path == "/wrong-charset":
            self._send(200, WRONG_CHARSET_TEXT.encode("windows-1252"))
        elif path == "/doc.pdf":
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf")
            self.send_header("Content-Length", str(PDF_BYTES))
            self.end_headers()
            piece = b"%PDF-1.4\n" + b"0" * (64 * 1024 - 9)
            try:
                for _ in range(PDF_BYTES // len(piece)):
                    self.wfile.write(piece)
                self.wfile.write(b"0" * (PDF_BYTES % len(piece)))
            except OSError:
                return
        elif path == "/bomb":
            self._send(200, gzip_bomb(), "text/html; charset=utf-8", Content_Encoding="gzip")
        elif path == "/gzip-page":
            self._send(200, gzip.compress(PAGE_HTML), Content_Encoding="gzip")
        elif path == "/meta-refresh":
            body = b'<html><head><meta http-equiv="Refresh" content="0; URL=\'/landing\'"></head><body>go</body></html>'
            self._send(200, body)
        elif path == "/no-type":
            self._send(200, PAGE_HTML, content_type=None)
        elif path == "/no-type-binary":
            self._send(200, b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, content_type=None)
        elif path == "/reset":
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        elif path == "/cookie-check":
            if "visited=1" in (self.headers.get("Cookie") or ""):
                self._send(200, PAGE_HTML)
            else:
                self._send(302, b"", Location="/cookie-check", Set_Cookie="visited=1; Path=/")
        else:
            self._send(404, b"<html><body>no such route</body></html>")


class _FaultHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        stamp_arrivals(self.socket)
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        self.hits: list[Hit] = []
        self.other_port = 0
        self.stopping = threading.Event()

    def handle_error(self, request, client_address) -> None:
        """Clients hanging up mid-body is what the tests provoke: do not print tracebacks for it."""
        return


class _CountingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:
        return

    def do_GET(self) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        body = b"<html><body>internal service: you should not see this</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        return


class FaultServer:
    """The fault server, a second "internal" loopback server and a black-hole port; a context manager."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._server = _FaultHTTPServer((host, 0))
        self._other = _QuietServer((host, 0), _CountingHandler)
        self._other.hits = []  # type: ignore[attr-defined]
        self._server.other_port = self._other.server_address[1]
        self._blackhole = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._blackhole_fillers: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def other_port(self) -> int:
        return self._other.server_address[1]

    @property
    def blackhole_port(self) -> int:
        return self._blackhole.getsockname()[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def allow_list(self) -> list[str]:
        """Allow exactly this server's port and the black hole, nothing else on loopback."""
        return [f"{self.host}:{self.port}", f"{self.host}:{self.blackhole_port}"]

    @property
    def hits(self) -> list[Hit]:
        """Every request the fault server received, in arrival order."""
        return list(self._server.hits)

    @property
    def other_hits(self) -> list[str]:
        """Paths requested from the second loopback server (should stay empty: it is not allowed)."""
        return list(self._other.hits)  # type: ignore[attr-defined]

    def url(self, path: str) -> str:
        return self.base_url + path

    def blackhole_url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.blackhole_port}{path}"

    def start(self) -> FaultServer:
        self._blackhole.bind((self.host, 0))
        self._blackhole.listen(0)
        # Fill the (length 1) accept queue: later SYNs are dropped, so connects hang until they time out.
        filler = socket.create_connection((self.host, self.blackhole_port), timeout=1.0)
        self._blackhole_fillers.append(filler)
        for server in (self._server, self._other):
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._server.stopping.set()
        for server in (self._server, self._other):
            server.shutdown()
            server.server_close()
        for sock in [*self._blackhole_fillers, self._blackhole]:
            sock.close()

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
