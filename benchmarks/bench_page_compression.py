"""Compressing raw pages for ``downloads.content_gz``: CPU per page and size, zstd against gzip (the anchor).

Run: .venv/bin/python benchmarks/bench_page_compression.py [--repeat 3]

The pages are the REAL news pages of the corpus (tests/shared_data.py; about 170, mean ~150 KiB), as served. Each
codec compresses every page ``--repeat`` times; the time is this process's CPU time (the spider compresses on
its second core while the first extracts, so CPU, not wall, is what it takes from extraction), the best of
the repeats. Size is compressed bytes / raw bytes over the corpus. ``topicmap.store.topic_store.compress_page`` is timed
as the spider calls it; every zstd frame is checked to decompress to the page with ``decompress_page``.
"""

from __future__ import annotations

import argparse
import gzip
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.shared_data import NEWS_HTML, news_pages  # noqa: E402
from topicmap.store.topic_store import PAGE_ZSTD_LEVEL, compress_page, decompress_page  # noqa: E402


def best_cpu_ms(compress: Callable[[bytes], bytes], pages: list[bytes], repeat: int) -> tuple[float, int]:
    """Best CPU milliseconds per page over ``repeat`` passes, and the compressed size of one pass."""
    best = float("inf")
    size = 0
    for _ in range(repeat):
        start = time.process_time()
        size = sum(len(compress(page)) for page in pages)
        best = min(best, time.process_time() - start)
    return 1000 * best / len(pages), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pages = list(news_pages().values())
    if not pages:
        print(f"skipped: no news corpus (*.html.gz) under {NEWS_HTML} (set TOPICMAP_SHARED_DATA).")
        return
    raw = sum(map(len, pages))
    for page in pages:
        assert decompress_page(compress_page(page)) == page
    codecs: list[tuple[str, Callable[[bytes], bytes]]] = [
        ("gzip -6 (the anchor: what the store wrote before)", lambda page: gzip.compress(page, 6)),
        ("gzip -3", lambda page: gzip.compress(page, 3)),
        ("gzip -1", lambda page: gzip.compress(page, 1)),
        *((f"zstd -{level}", zstandard.ZstdCompressor(level=level).compress) for level in (1, 3, 6)),
        (f"`compress_page` (zstd -{PAGE_ZSTD_LEVEL}, what the store writes)", compress_page),
    ]
    print(f"# Page compression ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n")
    print(
        f"Machine: {platform.platform()}, Python {platform.python_version()}, zstandard "
        f"{zstandard.__version__}. Corpus: {len(pages)} pages under {NEWS_HTML}, mean "
        f"{raw / len(pages) / 1024:.0f} KiB. CPU time, best of {args.repeat} passes.\n"
    )
    print("| codec | CPU ms per page | vs anchor | compressed / raw |")
    print("|---|---:|---:|---:|")
    anchor_ms = None
    for name, compress in codecs:
        ms, size = best_cpu_ms(compress, pages, args.repeat)
        anchor_ms = anchor_ms or ms
        print(f"| {name} | {ms:.2f} | {ms / anchor_ms:.2f} | {size / raw:.3f} |")


if __name__ == "__main__":
    main()
