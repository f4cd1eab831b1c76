"""topicmap: the domain library of the topic mapper (pure Python, no dagster import).

The public API is the modules of its packages, imported by their full path (``from topicmap.web.extract import
extract_story``); each package's ``__init__`` says what its modules hold. Importing ``topicmap`` itself loads
nothing: every process of the Dagster deployment imports some of it, and the heavy libraries load only with the
modules that use them. The main entry points (``tests/test_layout.py`` checks that each imports):

- reading the web: ``topicmap.web.urls`` (normalize_url, normalize_url_lossy, url_variants, distinctive_domain),
  ``topicmap.web.extract`` (extract_story, decode_html, ExtractedStory), ``topicmap.web.links`` (extract_links,
  extract_story_and_links, is_ignored_url), ``topicmap.web.dates`` (guess_date), ``topicmap.web.fetch``
  (WebFetcher, FetchOutcome);
- the store: ``topicmap.store.topic_store`` (TopicStore, NewStory), ``topicmap.store.names`` (StoreError,
  topicmap_home);
- archives: ``topicmap.archive.warc`` (read_warc_pages), ``topicmap.archive.warc_stories`` (StoryArchiveWriter,
  read_story_archive), ``topicmap.archive.warc_replay`` (WarcReplay);
- topics: ``topicmap.topics.declarations`` (TopicConfig, TopicConfigError, load_topics), ``topicmap.topics.query``
  (parse, TopicQuery, QuerySyntaxError);
- the spider: ``topicmap.spider.iteration`` (Spider);
- dedup: ``topicmap.dedup.simhash`` (fingerprint, NearDuplicateIndex, verified_near_duplicate_pairs);
- social metrics: ``topicmap.social.clicks`` (clicks_until, story_timestamp);
- snapshots: ``topicmap.snapshots.compute`` (compute_snapshot);
- clusters: ``topicmap.clusters.oneshot`` (cluster_stories), ``topicmap.clusters.streaming`` (StreamingKMeans).

The ``topicmap`` command is :mod:`topicmap.cli`.
"""

import os

# pyarrow's allocator (mimalloc) returns freed pages to the operating system 10 ms after they are freed, and the
# out-of-core snapshot frees and refills gigabytes of Arrow buffers in every timespan: each page handed back is
# faulted in again (a fifth of the page faults of a 10M-story snapshot; 6 % of its time at 1M on a virtual machine,
# benchmarks/RESULTS.md). mimalloc reads this once, as pyarrow loads, so it is set here, as the package is first
# imported (``tests/test_layout.py`` checks that the code location, the snapshot CLI and the snapshot benchmark
# import topicmap before pyarrow). A value in the environment is kept.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "-1")
