"""Clusters of stories and how they mutate over time (the "story duplication and mutation" chapter's method).

- ``streaming``: ``StreamingKMeans``, Spark MLlib's streaming model re-created exactly (pure numpy).
- ``model``: hashed TF-IDF, random indexing, KMeans with k from the SSE curve (pure: no store).
- ``oneshot``: ``cluster_stories``, all of a topic's stories clustered at once, read in bounded batches.
- ``mutation``: the chapter's story mutation: re-predict the last batches, count stories that moved; GEXF.
- ``pictures``: stream graph, mutation graph and SSE curve drawn for people.
- ``store``: a topic's stories read from the store, clustered whole or week by week, written out as exports.

``topicmap.clusters`` re-exports ``model``, ``cluster_stories`` and ``StreamingKMeans`` so ``from topicmap.clusters import ...`` keeps
working; code inside the repository imports from the modules.
"""

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """The stable public names, loaded on first use: importing a submodule (``topicmap.clusters.names``) must
    not pull in scikit-learn for a code location that only declares the stage."""
    if name == "StreamingKMeans":
        from topicmap.clusters.streaming import StreamingKMeans

        return StreamingKMeans
    if name == "cluster_stories":
        from topicmap.clusters.oneshot import cluster_stories

        return cluster_stories
    model = importlib.import_module("topicmap.clusters.model")
    if name.startswith("_") or not hasattr(model, name):
        raise AttributeError(f"module 'topicmap.clusters' has no attribute {name!r}")
    return getattr(model, name)
