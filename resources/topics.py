"""The topics file as a Dagster resource."""

from __future__ import annotations

import dagster as dg

from topicmap.topics.declarations import TopicConfig, TopicsFile, load_topics


class TopicsFileResource(dg.ConfigurableResource):
    """Topic declarations (YAML). A broken topic is reported and skipped; the others load."""

    path: str = "topics.yaml"

    def load(self) -> TopicsFile:
        return load_topics(self.path)

    def topic(self, name: str) -> TopicConfig:
        topics = self.load()
        found = topics.by_name().get(name)
        if found is None:
            problems = [str(e) for e in topics.errors if e.topic == name]
            detail = f": {problems[0]}" if problems else " (not declared)"
            raise dg.Failure(f"topic {name!r} is not a valid topic in {self.path}{detail}")
        return found
