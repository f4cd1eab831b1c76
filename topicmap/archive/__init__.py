"""The story archive: stories in from drops and crawls, topics out as WARC.

- ``drops``: CSV, Parquet and WARC/ARC drops streamed row by row into the store: a bad row is reported with its
  exact place and skipped, a broken file fails alone (``archive_files``: state, reason), nothing is cut or replaced.
  The formats are read by ``drop_csv``, ``drop_parquet`` and ``drop_warc``, the rows checked by ``drop_rows``;
  ``store`` records each file's outcome.
- ``warc``: reading WARC/ARC files (any crawl), bounded and with every problem reported; ``warc_stories``: the
  story-indexer layout (writer and reader); ``warc_replay``: offline replay of a crawl; ``warc_payload`` and
  ``warcio_internals`` serve the reader.
- ``warc_export``: a topic's stories written as story-indexer WARC files from the store, and read back.
"""
