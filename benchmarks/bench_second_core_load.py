"""How much work on the OTHER core slows extraction on this one (what bench_spider_iteration's ratio rests on).

Run: .venv/bin/python benchmarks/bench_second_core_load.py [--rounds 10] [--pages 170]

``extract_story`` runs over the real news pages of the corpus (tests/shared_data.py) while another process keeps the
second core busy with: a syscall loop (``yes > /dev/null``), zlib compression (a C loop releasing the GIL,
like the spider's page compression), or a pure-Python loop (like the spider's fetch threads or a Python web
server). This machine's speed drifts by tens of percent within a minute, so each load is measured in pairs:
the load process stays up and is stopped (SIGSTOP) for one pass over a slice of the pages and running
(SIGCONT) for the next pass over the same slice, in alternating order, ``--rounds`` slices per load. The
ratio is the loaded time over the idle time of the same slices. On a machine whose cores are independent
every row reads about 1.00; each point above it is extraction time that work on the second core takes from
the first, which the spider's iteration pays for every millisecond it spends off its main thread.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.shared_data import NEWS_HTML, news_pages  # noqa: E402
from topicmap.web.extract import extract_story  # noqa: E402

SPIDER_PY = Path(__file__).resolve().parents[1] / "topicmap" / "spider.py"
LOADS: dict[str, list[str]] = {
    "syscalls: yes > /dev/null": ["sh", "-c", "exec yes > /dev/null"],
    "zlib compression (C, no GIL)": [
        sys.executable,
        "-c",
        f"import zlib\ndata = open({str(SPIDER_PY)!r}, 'rb').read() * 50\nwhile True: zlib.compress(data, 6)",
    ],
    "a pure-Python loop": [sys.executable, "-c", "n = 0\nwhile True: n += 1"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pages", type=int, default=170)
    args = parser.parse_args()
    bodies = list(news_pages().values())
    if not bodies:
        print(f"skipped: no news corpus (*.html.gz) under {NEWS_HTML} (set TOPICMAP_SHARED_DATA).")
        return
    pages = [(f"http://www.example.com/news/{i}", bodies[i % len(bodies)]) for i in range(args.pages)]

    extraction_seconds(pages)  # warm up imports and caches
    size = max(1, len(pages) // args.rounds)
    print(f"# Extraction while the second core works ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n")
    print(
        f"Machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
        f"{args.pages} pages (the {len(bodies)} news pages of {NEWS_HTML}, cycled) in {args.rounds} slices; "
        "each slice extracted with the load stopped and running, in alternating order.\n"
    )
    print("| on the other core | idle s | loaded s | loaded / idle | per slice (min … max) |")
    print("|---|---:|---:|---:|---|")
    for name, command in LOADS.items():
        load = subprocess.Popen(command, start_new_session=True)
        idle: list[float] = []
        loaded: list[float] = []
        try:
            for number, first in enumerate(range(0, len(pages), size)):
                chunk = pages[first : first + size]
                order = (False, True) if number % 2 == 0 else (True, False)
                for running in order:
                    os.killpg(load.pid, signal.SIGCONT if running else signal.SIGSTOP)
                    time.sleep(0.1)  # let the load reach (or leave) the other core
                    (loaded if running else idle).append(extraction_seconds(chunk))
        finally:
            os.killpg(load.pid, signal.SIGKILL)
            load.wait()
        ratios = [b / a for a, b in zip(idle, loaded, strict=True)]
        print(
            f"| {name} | {sum(idle):.2f} | {sum(loaded):.2f} | {sum(loaded) / sum(idle):.2f} | "
            f"{min(ratios):.2f} … {max(ratios):.2f} |"
        )


def extraction_seconds(pages: list[tuple[str, bytes]]) -> float:
    start = time.perf_counter()
    for url, body in pages:
        extract_story(body, url)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
