"""Snapshots: a topic's cross-media link network per timespan, exported for analysis and as link maps.

- ``timespans``: the topic's overall, monthly, weekly and custom timespans.
- ``compute``: each timespan's link tables and counts from DataFrames (pure), into ``results``; ``ids`` holds the
  id lookups it joins with.
- ``engine``: the same tables out of core (DuckDB) for topics too big for memory, streamed to the same files;
  ``store_stream``: such a topic read from the store in bounded batches.
- ``foci``: subtopics, each one kind of focus; ``summaries`` and ``words``: what a timespan's summary shows.
- ``files``: a snapshot's Parquet/CSV files and manifest; ``checks``: its consistency checks.
- ``inputs``: the deduplicated topic read from the store; ``key``: the options and the key that name a snapshot;
  ``folder``: its folder, written once.
- ``store``: build a snapshot (read, key, write its folder once, record it) and find it again.
- ``linkmap``: a timespan's media link map as GEXF and a rendered PNG.
- ``cli``: print where a topic's snapshot files are (``topicmap snapshot NAME``).
"""
