"""The story archive: stories in from drops and crawls, topics out as WARC.

- ``drops``: CSV, Parquet and WARC/ARC drops streamed row by row into the store: a bad row is reported with its
  exact place and skipped, a broken file fails alone (``archive_files``: state, reason), nothing is cut or replaced.
- ``warc``: WARC in and out: the story-indexer layout (writer and reader), generic crawls, offline replay.
- ``warc_export``: a topic's stories written as story-indexer WARC files from the store, and read back.
"""
