"""The topic store as a Dagster resource: one ``TopicStore`` per process, opened and upgraded lazily."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from topicmap.store.topic_store import TopicStore


@cache
def _open_store(database_url: str | None, schema: str | None) -> TopicStore:
    # SQLAlchemy loads with the first run or tick that opens the store, not with the code location
    from topicmap.store.topic_store import TopicStore

    return TopicStore.open(database_url or None, schema=schema or None)


class TopicStoreResource(dg.ConfigurableResource):
    """Where topics, stories and links live. Empty URL: the SQLite file under TOPICMAP_HOME."""

    database_url: str = ""
    schema_name: str = ""

    def open(self) -> TopicStore:
        return _open_store(self.database_url, self.schema_name)
