"""The topics file as a Dagster resource."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from topicmap.topics.declarations import TopicConfig, TopicsFile


class TopicsFileResource(dg.ConfigurableResource):
    """Topic declarations (YAML). A broken topic is reported and skipped; the others load."""

    path: str = "topics.yaml"

    def load(self) -> TopicsFile:
        # the declarations and the query parser load with the first tick or run that reads the file
        from topicmap.topics.declarations import load_topics

        return load_topics(self.path)

    def topic(self, name: str) -> TopicConfig:
        topics = self.load()
        found = topics.by_name().get(name)
        if found is None:
            problems = [str(e) for e in topics.errors if e.topic == name]
            detail = f": {problems[0]}" if problems else " (not declared)"
            raise dg.Failure(f"topic {name!r} is not a valid topic in {self.path}{detail}")
        return found
