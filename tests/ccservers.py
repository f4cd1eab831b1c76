"""Loopback servers for the Common Crawl tests: pywb (in its own virtualenv), a Range-honouring data server,
a fault-injecting proxy in front of the index, and the WARC collection they serve (demo web + shared data).

pywb pins an old redis client (redis==2.10.6) that conflicts with this project's dependencies, so it lives in
its own virtualenv, built once under ``.topicmap/pywb-venv`` (or ``TOPICMAP_PYWB_VENV``) and reused.
"""

from __future__ import annotations

import fcntl
import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

REPO = Path(__file__).resolve().parent.parent
PYWB_VERSION = "2.10.0"


# --------------------------------------------------------------------------------------------- pywb venv


def pywb_venv_dir() -> Path:
    return Path(os.environ.get("TOPICMAP_PYWB_VENV") or REPO / ".topicmap" / "pywb-venv")


def ensure_pywb_venv() -> tuple[Path | None, str]:
    """(the venv, "") when pywb is installed there (building it once if needed), else (None, the reason)."""
    venv = pywb_venv_dir()
    venv.parent.mkdir(parents=True, exist_ok=True)
    # one builder at a time (test workers, a benchmark): the others wait here, then find it built
    with (venv.parent / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_pywb_venv(venv)


def _build_pywb_venv(venv: Path) -> tuple[Path | None, str]:
    marker = venv / f".pywb-{PYWB_VERSION}"
    if marker.exists() and (venv / "bin" / "wayback").exists():
        return venv, ""
    # Built in place; the marker is written last, so a build that was interrupted is redone next time.
    shutil.rmtree(venv, ignore_errors=True)
    # Without a pip of its own: this interpreter's pip installs into it (``--python``), where there is one (a
    # venv's ensurepip and a second pip's start cost 10 CPU seconds); nothing byte-compiled at install time
    # (pywb's processes compile the little they import, once: ``pywb_env``).
    own_pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", *(["--without-pip"] if own_pip else []), str(venv)],
            check=True,
            capture_output=True,
        )
        pip = (
            [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
            if own_pip
            else [str(venv / "bin" / "pip")]
        )
        subprocess.run(
            [*pip, "install", "-q", "--no-compile", f"pywb=={PYWB_VERSION}"],
            check=True,
            capture_output=True,
            timeout=1200,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"cannot build the pywb virtualenv in {venv}: {exc}: {detail[-500:]!r}"
    marker.touch()
    return venv, ""


def pywb_env(venv: Path) -> dict[str, str]:
    """The environment of pywb's commands: its venv first on PATH, its bytecode written (installed without)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PATH"] = f"{venv / 'bin'}:{os.environ.get('PATH', '')}"
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, process: subprocess.Popen | None = None, attempts: int = 600) -> None:
    """Poll until ``url`` answers (any HTTP status); fail at once if ``process`` died."""
    for _ in range(attempts):
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before answering {url}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


# --------------------------------------------------------------------------------------------- WARC input


def write_pages_warc(path: Path, pages: Iterable[tuple[str, int, str, bytes]], when: datetime) -> int:
    """Write (url, status, content type, body) as WARC response records, one gzip member each."""
    count = 0
    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for url, status, content_type, body in pages:
            reason = {200: "OK", 404: "Not Found", 301: "Moved Permanently"}.get(status, "Status")
            http = StatusAndHeaders(
                f"{status} {reason}",
                [("Content-Type", content_type), ("Content-Length", str(len(body)))],
                protocol="HTTP/1.1",
            )
            record = writer.create_warc_record(
                url,
                "response",
                payload=io.BytesIO(body),
                http_headers=http,
                warc_headers_dict={"WARC-Date": when.strftime("%Y-%m-%dT%H:%M:%SZ")},
            )
            writer.write_record(record)
            count += 1
    return count


def write_ccnews_month(
    root: Path,
    year: int,
    month: int,
    pages: list[tuple[str, int, str, bytes]],
    files_per_day: int = 2,
    pages_per_file: int = 3,
) -> dict[date, list[str]]:
    """CC-NEWS' layout of a month under ``root``: each day ``files_per_day`` WARC files named by crawl timestamp
    (``CC-NEWS-YYYYMMDDhhmmss-nnnnn.warc.gz``), each with the next ``pages_per_file`` pages of ``pages`` (taken in
    turn, from the start again once used up: later days capture pages seen before) plus a PDF and a 404 capture
    (rejected with their reasons); and ``warc.paths.gz`` listing them all. Returns each day's paths in order."""
    folder = root / "crawl-data" / "CC-NEWS" / f"{year:04d}" / f"{month:02d}"
    folder.mkdir(parents=True, exist_ok=True)
    host = urllib.parse.urlsplit(pages[0][0]).netloc
    by_day: dict[date, list[str]] = {}
    serial, taken = 0, 0
    day = date(year, month, 1)
    while day.month == month:
        for number in range(files_per_day):
            hour = number * 24 // files_per_day
            stamp = f"{day:%Y%m%d}{hour:02d}0000"
            name = f"CC-NEWS-{stamp}-{serial:05d}.warc.gz"
            chunk = [pages[(taken + i) % len(pages)] for i in range(pages_per_file)]
            taken += pages_per_file
            chunk += [
                (f"http://{host}/feed-{serial}.pdf", 200, "application/pdf", b"%PDF-1.4"),
                (f"http://{host}/gone-{serial}", 404, "text/html", b"<html>gone</html>"),
            ]
            when = datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
            write_pages_warc(folder / name, chunk, when)
            by_day.setdefault(day, []).append(f"crawl-data/CC-NEWS/{year:04d}/{month:02d}/{name}")
            serial += 1
        day += timedelta(days=1)
    listing = "".join(f"{path}\n" for paths in by_day.values() for path in paths)
    (folder / "warc.paths.gz").write_bytes(gzip.compress(listing.encode()))
    return by_day


def build_zipnum(cdxj: Path, out_dir: Path, lines_per_block: int) -> Path:
    """A ZipNum cluster index (Common Crawl's layout) from a sorted cdxj file: gzip blocks of
    ``lines_per_block`` lines in ``cdx-00000.gz``, the summary (first key of each block, part, offset,
    length, block number) and the .loc file naming where the part is. Returns the summary path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = [line for line in cdxj.read_bytes().splitlines(keepends=True) if line.strip()]
    part = out_dir / "cdx-00000.gz"
    summary_lines = []
    with part.open("wb") as handle:
        for number, start in enumerate(range(0, len(lines), lines_per_block)):
            block = b"".join(lines[start : start + lines_per_block])
            offset = handle.tell()
            handle.write(gzip.compress(block))
            key = b" ".join(block.split(b" ", 2)[:2]).decode()
            summary_lines.append(f"{key}\tcdx-00000\t{offset}\t{handle.tell() - offset}\t{number}\n")
    summary = out_dir / "cluster.summary"
    summary.write_text("".join(summary_lines))
    (out_dir / "cluster.loc").write_text(f"cdx-00000\t{part}\n")
    return summary


@dataclass
class PywbServer:
    """``wayback`` on loopback serving collection ``cc`` (plain cdxj) and ``cc-zip`` (ZipNum of the same)."""

    root: Path
    venv: Path
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def index_url(self) -> str:
        return self.base + "/{collection}/cdx"

    def build(self, warcs: list[Path], lines_per_block: int = 3) -> None:
        manager = str(self.venv / "bin" / "wb-manager")
        env = pywb_env(self.venv)
        subprocess.run([manager, "init", "cc"], cwd=self.root, check=True, capture_output=True, env=env)
        subprocess.run(
            [manager, "add", "cc", *map(str, warcs)], cwd=self.root, check=True, capture_output=True, env=env
        )
        summary = build_zipnum(
            self.root / "collections" / "cc" / "indexes" / "index.cdxj", self.root / "zipnum", lines_per_block
        )
        (self.root / "config.yaml").write_text(
            json.dumps({"collections": {"cc-zip": {"index_paths": str(summary)}}})  # JSON is YAML
        )

    @property
    def archive_dir(self) -> Path:
        return self.root / "collections" / "cc" / "archive"

    def start(self) -> None:
        self.port = free_port()
        log = (self.root / "wayback.log").open("wb")
        self.process = subprocess.Popen(
            [
                str(self.venv / "bin" / "wayback"),
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-d",
                str(self.root),
            ],
            cwd=self.root,
            env=pywb_env(self.venv),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_http(self.base + "/collinfo.json", self.process)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --------------------------------------------------------------------------------------------- Range server


@dataclass
class DataServer:
    """Serves files under ``root`` over loopback HTTP, honouring single ``Range: bytes=a-b`` requests.

    Faults: ``fail_next[path] = [503, 503]`` answers those statuses first (then serves); ``always[path] =
    404`` answers that status every time; ``delay`` slows every answer (for kill -9 tests)."""

    root: Path
    fail_next: dict[str, list[int]] = field(default_factory=dict)
    always: dict[str, int] = field(default_factory=dict)
    delay: float = 0.0
    requests: list[tuple[str, str | None, int]] = field(default_factory=list)
    honour_range: bool = True

    def __post_init__(self) -> None:
        server = self
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # noqa: ANN002 - quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0].lstrip("/")
                status = server._fault(path)
                rng = self.headers.get("Range")
                if server.delay:
                    time.sleep(server.delay)
                if status is None:
                    target = (server.root / path).resolve()
                    if not target.is_file() or server.root.resolve() not in target.parents:
                        status = 404
                if status is not None:
                    body = f"status {status}".encode()
                    self.send_response(status)
                    if status == 503:
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    server._note(path, rng, status)  # before the answer: a client that got it sees the note
                    self.wfile.write(body)
                    return
                size = target.stat().st_size
                start, end = 0, size - 1
                partial = False
                if rng and server.honour_range and rng.startswith("bytes="):
                    first, _, last = rng[6:].partition("-")
                    start = int(first)
                    end = min(int(last), size - 1) if last else size - 1
                    partial = True
                with target.open("rb") as handle:
                    handle.seek(start)
                    body = handle.read(end - start + 1)
                self.send_response(206 if partial else 200)
                if partial:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                server._note(path, rng, 206 if partial else 200)
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _fault(self, path: str) -> int | None:
        with self._lock:
            if path in self.always:
                return self.always[path]
            queued = self.fail_next.get(path)
            if queued:
                return queued.pop(0)
        return None

    def _note(self, path: str, rng: str | None, status: int) -> None:
        with self._lock:
            self.requests.append((path, rng, status))

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class IndexProxy:
    """Forwards CDX queries to ``upstream`` (pywb), answering ``fail_first`` queries with 503 first
    (Common Crawl's "slow down"), and counting the queries it forwarded."""

    upstream: str
    fail_first: int = 0
    queries: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # noqa: ANN002
                pass

            def do_GET(self) -> None:  # noqa: N802
                proxy.queries.append(self.path)
                if proxy.fail_first > 0:
                    proxy.fail_first -= 1
                    body = b"Please slow down"
                    self.send_response(503)
                    self.send_header("Retry-After", "0")
                else:
                    try:
                        with urllib.request.urlopen(proxy.upstream + self.path, timeout=30) as answer:
                            body, status = answer.read(), answer.status
                    except urllib.error.HTTPError as error:
                        body, status = error.read(), error.code
                    self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def capture_time() -> datetime:
    return datetime(2026, 2, 1, 12, 0, tzinfo=UTC)


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.ccservers ROOT``: a DataServer in its own process (benchmarks: off the loader's GIL).
    Prints the port, then serves until stdin closes."""
    root = Path((argv or sys.argv[1:])[0])
    server = DataServer(root)
    print(server.port, flush=True)
    sys.stdin.read()
    server.close()


if __name__ == "__main__":
    main()
