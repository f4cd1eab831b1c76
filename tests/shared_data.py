"""Where the third-party test data lives (real news pages with their expected extraction, WARC files): it is not
part of the repository. TOPICMAP_SHARED_DATA names its folder; by default it is `shared/data` in the folder that
holds the checkout, as CI provides it. The data is never copied in.

A test reaches the data through `require_shared` (it needs the file) or `optional_shared` (it uses the file when
there): without the data a test skips, or runs without it, except under CI=true, where the data is provided and
its absence is a failure (a CI run never passes by silently testing less)."""

import gzip
import os
from pathlib import Path

import pytest

SHARED_DATA = Path(
    os.environ.get("TOPICMAP_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
NEWS_HTML = SHARED_DATA / "news_html"
WARC_DIR = SHARED_DATA / "warc"


def _fail_under_ci(path: Path) -> str:
    """The reason ``path`` is missing; a test failure under CI=true."""
    reason = f"shared test data not found: {path} (TOPICMAP_SHARED_DATA names its folder)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true requires the shared test data: {reason}")
    return reason


def require_shared(path: Path) -> Path:
    """``path`` (a file or folder under SHARED_DATA) for a test that needs it: skips without it, fails under CI."""
    if not path.exists():
        pytest.skip(_fail_under_ci(path))
    return path


def optional_shared(path: Path) -> Path | None:
    """``path`` for a test that also runs without it (None then); under CI=true its absence is a failure."""
    if not path.exists():
        _fail_under_ci(path)
        return None
    return path


def news_pages() -> dict[str, bytes]:
    """The real news pages of NEWS_HTML (each ``*.html.gz``, decompressed) by path under it, in path order;
    empty when the corpus is absent."""
    files = sorted(NEWS_HTML.glob("**/*.html.gz")) if NEWS_HTML.is_dir() else []
    return {str(f.relative_to(NEWS_HTML)): gzip.decompress(f.read_bytes()) for f in files}
