"""The story archive: stories in from drops and crawls, topics out as WARC.

- ``drops``: CSV, Parquet and WARC/ARC drops read row by row (a bad row is reported with its line, skipped).
- ``warc``: WARC in and out: the story-indexer layout (writer and reader), generic crawls, offline replay.
- ``warc_export``: a topic's stories written as story-indexer WARC files from the store, and read back.
"""
