"""Reading the web: the bottom layer every stage stands on (imports nothing else of topicmap).

- ``urls``: URL validity, strict and lossy normalization, distinctive domains, URL variants of a story;
  ``shorteners``: the URL-shortener host list it uses.
- ``media``: the medium (site) a story URL belongs to.
- ``extract``: a page's title, article text, publication date and language (``article_text``,
  ``article_ledes`` and ``article_links`` read the article's text, its opening paragraph and its links;
  ``page`` and ``dates`` are shared with ``links``); ``links``: the links a story makes and Media Cloud's
  ignore list.
- ``fetch``: the polite, bounded, SSRF-guarded HTTP fetcher; ``fetch_scheduler`` (per-domain slots for many
  URLs at once), ``fetch_robots`` and ``robots`` (robots.txt read, kept and matched, RFC 9309), ``fetch_state``
  (a fetch between slots), ``http_head`` (what a response's head says), ``transport`` (one request through
  libcurl, to a pinned address), ``netguard`` (which addresses may be connected to) and ``throttle``
  (per-domain politeness intervals) serve it.
"""
