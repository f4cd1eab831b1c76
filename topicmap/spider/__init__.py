"""The spider: grow a topic outward from its seeds, one resumable, idempotent iteration at a time.

- ``iteration``: ``Spider.run_iteration``: the iteration loop: claim the pending links, fetch them, write what
  became of them a batch at a time (Media Cloud's ``fetch_link``).
- ``judging``: what became of a URL, before and after its fetch, and whether its story is relevant (the query's
  prefilter on the raw page, then Media Cloud's story relevance test).
- ``rejudge``: a topic's stories judged again under a new version of its settings (``topicmap.topics.versions``).
- ``mining``: the links of topic stories become topic links and the next iteration's URLs
  (Media Cloud's ``extract_story_links``).
- ``store``: ``SpiderStore``, every SQL statement of the spider, by name (the claims excepted).
- ``claims``: a pending URL is claimed before it is fetched, so many workers fetch each URL once.
- ``plan``: what the spider sensor should do next for a topic (a pure decision, tested without Dagster).
- ``sources``: where pages come from: the live web through ``topicmap.web.fetch``, or a WARC crawl replayed.
"""
