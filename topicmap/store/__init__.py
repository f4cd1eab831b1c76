"""The topic store: Media Cloud's tables over SQLite (embedded) or PostgreSQL (production).

- ``schema``: every table and column with the schema version that introduced it; ``upgrade``: the in-place
  upgrade to a version.
- ``topic_store``: ``TopicStore`` (the engine, opening and upgrading, the writes every stage shares: stories,
  topics, seeds), the idempotent-write helpers (``insert_ignore``, ``upsert``) and page compression.
- ``media``: the medium of a story URL and the end of a duplicate-media chain (``TopicStore.media``).
- ``names``: where the store lives (``topicmap_home``) and its error (``StoreError``), free of SQLAlchemy.
- ``throttle``: the politeness intervals the fetchers share through the store.
- ``curated_files``: the digest of a file people curate (media tags, duplicate media), free of SQLAlchemy.

Each stage keeps its own reads and writes in its package (``topicmap.dedup.store``, ``topicmap.social.store``,
...), built on the helpers here. ``topicmap.store`` re-exports ``topic_store`` so ``from topicmap.store import
TopicStore`` keeps working; code inside the repository imports from ``topicmap.store.topic_store``.
"""

import importlib
from typing import Any

_SUBMODULES = frozenset({"curated_files", "media", "names", "schema", "throttle", "topic_store", "upgrade"})


def __getattr__(name: str) -> Any:
    """The stable public names, loaded on first use: importing a light submodule (``topicmap.store.names``)
    must not pull in SQLAlchemy for a code location that only declares the stages."""
    if name.startswith("_") or name in _SUBMODULES:
        # not loaded yet: ``from topicmap.store import schema`` then imports the submodule itself
        raise AttributeError(f"module 'topicmap.store' has no attribute {name!r}")
    topic_store = importlib.import_module("topicmap.store.topic_store")
    if not hasattr(topic_store, name):
        raise AttributeError(f"module 'topicmap.store' has no attribute {name!r}")
    return getattr(topic_store, name)
