"""Dedup: duplicate media, duplicate stories and near-duplicates across media.

- ``rules``: pure planning over plain records: dup-media chains, title keys, story groups, media merges.
- ``simhash``: 64-bit simhash fingerprints and exact near-duplicate search.
- ``tokens``: word tokens and their stable hashes; ``shingles``: word shingles, Jaccard and containment.
- ``store``: dedup applied to the topic store (reads a topic's stories, asks ``rules``/``simhash``, writes).
- ``service``: the near-duplicate lookup service (``topicmap serve``); ``catalog``: what a lookup searches, and
  the lookup; ``url_lookups``: the service's queue of lookups that fetch a page.
"""
