"""Topics: what a topic is about, and where its spidering starts.

- ``declarations``: ``topics.yaml`` read and validated topic by topic (``TopicConfig``, ``load_topics``).
  ``topics_yaml`` reads the file's YAML within bounds; ``topic_errors`` is the error that names topic and field.
- ``query``: the boolean query language (Lucene/Solr as Media Cloud users write it) and its matching.
  ``query_parser``, ``query_tree``, ``query_text`` and ``query_prefilter`` are its parts.
- ``focus_kinds``: the kinds of focus (subtopic) a topic declares: each one class and one ``FOCUS_KINDS`` entry.
- ``seeding``: a topic's seeds: its query run over the story archive month by month, plus its seed URL lists.
- ``versions``: a topic's versions (its query, dates and seed lists from one change to the next).

``topicmap.topics`` re-exports ``declarations`` so ``from topicmap.topics import TopicConfig`` keeps working;
code inside the repository imports from ``topicmap.topics.declarations``.
"""

from topicmap.topics.declarations import *  # noqa: F403  (the stable public path)
