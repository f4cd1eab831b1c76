"""Where the third-party test data lives (real news pages with their expected extraction, WARC files): it is not
part of the repository. TOPICMAP_SHARED_DATA names its folder; by default it is `shared/data` in the folder that
holds the checkout, as CI provides it. Tests skip cleanly when it is absent; the data is never copied in."""

import gzip
import os
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get("TOPICMAP_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
NEWS_HTML = SHARED_DATA / "news_html"
WARC_DIR = SHARED_DATA / "warc"


def news_pages() -> dict[str, bytes]:
    """The real news pages of NEWS_HTML (each ``*.html.gz``, decompressed) by path under it, in path order;
    empty when the corpus is absent."""
    files = sorted(NEWS_HTML.glob("**/*.html.gz")) if NEWS_HTML.is_dir() else []
    return {str(f.relative_to(NEWS_HTML)): gzip.decompress(f.read_bytes()) for f in files}
