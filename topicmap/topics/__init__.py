"""Topics: what a topic is about, and where its spidering starts.

- ``declarations``: ``topics.yaml`` read and validated topic by topic (``TopicConfig``, ``load_topics``).
- ``query``: the boolean query language (Lucene/Solr as Media Cloud users write it) and its matching.
- ``focus_kinds``: the kinds of focus (subtopic) a topic declares: each one class and one ``FOCUS_KINDS`` entry.
- ``seeding``: a topic's seeds: its query run over the story archive month by month, plus its seed URL lists.

``topicmap.topics`` re-exports ``declarations`` so ``from topicmap.topics import TopicConfig`` keeps working;
code inside the repository imports from ``topicmap.topics.declarations``.
"""

from topicmap.topics.declarations import *  # noqa: F403  (the stable public path)
