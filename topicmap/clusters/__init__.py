"""Clusters of stories and how they mutate over time (seed 001, the story-mutation chapter).

- ``streaming``: ``StreamingKMeans``, Spark MLlib's streaming model re-created exactly (pure numpy).
- ``model``: hashed TF-IDF, random indexing, KMeans with k from the SSE curve (pure: no store).
- ``mutation``: the chapter's story mutation: re-predict the last batches, count stories that moved; GEXF.
- ``pictures``: stream graph, mutation graph and SSE curve drawn for people.
- ``store``: a topic's stories read from the store, clustered whole or week by week, written out as exports.

``topicmap.clusters`` re-exports ``model`` and ``StreamingKMeans`` so ``from topicmap.clusters import ...`` keeps
working; code inside the repository imports from the modules.
"""

from topicmap.clusters.model import *  # noqa: F403  (the stable public path)
from topicmap.clusters.streaming import StreamingKMeans  # noqa: F401  (topicmap.clusters.StreamingKMeans)
