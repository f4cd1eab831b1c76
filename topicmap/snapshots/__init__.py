"""Snapshots: a topic's cross-media link network per timespan, exported for analysis and as link maps.

- ``compute``: timespans and link counts from DataFrames (pure).
- ``store``: read the deduplicated topic from the store, write the snapshot's folder once, record it.
- ``linkmap``: a timespan's media link map as GEXF and a rendered PNG.
- ``cli``: print where a topic's snapshot files are (``topicmap snapshot NAME``).
"""
