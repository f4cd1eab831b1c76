"""Reading the web: the bottom layer every stage stands on (imports nothing else of topicmap).

- ``urls``: URL validity, strict and lossy normalization, distinctive domains, URL variants of a story;
  ``shorteners``: the URL-shortener host list it uses.
- ``media``: the medium (site) a story URL belongs to.
- ``extract``: a page's title, article text, publication date and language; ``links``: the links a story
  makes and Media Cloud's ignore list.
- ``fetch``: the polite, bounded, SSRF-guarded HTTP fetcher; ``transport`` (one request through libcurl, to a
  pinned address), ``netguard`` (which addresses may be connected to), ``robots`` (robots.txt, RFC 9309) and
  ``throttle`` (per-domain politeness intervals) serve it.
"""
