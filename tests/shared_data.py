"""Where the third-party test data lives: ../shared/data beside the repository (as in CI's fresh clone), or
TOPICMAP_SHARED_DATA. Tests skip cleanly when it is absent; the data is never copied into the project."""

import os
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get("TOPICMAP_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
NEWS_HTML = SHARED_DATA / "news_html"
WARC_DIR = SHARED_DATA / "warc"
