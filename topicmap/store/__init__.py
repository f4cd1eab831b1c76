"""The topic store: Media Cloud's tables over SQLite (embedded) or PostgreSQL (production).

- ``schema``: every table and column with the schema version that introduced it, and the in-place upgrade.
- ``topic_store``: ``TopicStore`` (the engine, the upgrade, the writes every stage shares: media, stories,
  topics, seeds), the idempotent-write helpers (``insert_ignore``, ``upsert``) and page compression.

Each stage keeps its own reads and writes in its package (``topicmap.dedup.store``, ``topicmap.social.store``,
...), built on the helpers here. ``topicmap.store`` re-exports ``topic_store`` so ``from topicmap.store import
TopicStore`` keeps working; code inside the repository imports from ``topicmap.store.topic_store``.
"""

from topicmap.store.topic_store import *  # noqa: F403  (the stable public path)
