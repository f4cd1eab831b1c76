"""The spider: grow a topic outward from its seeds, one resumable, idempotent iteration at a time.

- ``iteration``: ``Spider.run_iteration``: fetch the pending links, keep the relevant stories, mine their
  links for the next iteration (Media Cloud's ``fetch_link`` / ``extract_story_links``).
- ``plan``: what the spider sensor should do next for a topic (a pure decision, tested without Dagster).
- ``sources``: where pages come from: the live web through ``topicmap.web.fetch``, or a WARC crawl replayed.
"""
