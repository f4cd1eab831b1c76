"""Dedup: duplicate media, duplicate stories and near-duplicates across media.

- ``rules``: pure planning over plain records: dup-media chains, title keys, story groups, media merges.
- ``simhash``: 64-bit simhash fingerprints and exact near-duplicate search.
- ``store``: dedup applied to the topic store (reads a topic's stories, asks ``rules``/``simhash``, writes).
"""
