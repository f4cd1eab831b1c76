"""The store's names, free of heavy imports: where the store lives and its error.

The Dagster layer names these when the code location loads (resources default to ``TOPICMAP_HOME``, assets
catch ``StoreError``), long before a run opens the store (which pulls in SQLAlchemy and its dialects).
``topicmap.store.topic_store`` re-exports them, so code that opens the store imports everything from there.
"""

from __future__ import annotations

from pathlib import Path

from topicmap import settings

DEFAULT_HOME = ".topicmap"


class StoreError(RuntimeError):
    """The store cannot do what was asked (bad data, a duplicate-media cycle, an unknown topic)."""


def topicmap_home() -> Path:
    return Path(settings.HOME.value() or DEFAULT_HOME).resolve()


def normalize_database_url(url: str) -> str:
    """SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg 3, which is not installed: pin psycopg2."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url


def default_database_url(home: Path | None = None) -> str:
    url = settings.DATABASE_URL.value()
    if url:
        return normalize_database_url(url)
    home = home or topicmap_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'topicmap.sqlite3'}"
