"""Clusters of stories and how they mutate over time (seed 001, the story-mutation chapter).

- ``model``: hashed TF-IDF, random indexing, KMeans and the weekly streaming pass (pure: no store).
- ``store``: a topic's stories read from the store, clustered, and written out as exports.

``topicmap.clusters`` re-exports ``model`` so ``from topicmap.clusters import ...`` keeps working; code inside
the repository imports from ``topicmap.clusters.model``.
"""

from topicmap.clusters.model import *  # noqa: F403  (the stable public path)
