"""The medium (site) a story URL belongs to, as Media Cloud guesses it for spidered stories (guess_medium)."""

from __future__ import annotations

import re

from topicmap.web.urls import MAX_URL_LENGTH, normalize_url_lossy


def medium_url_and_name(story_url: str | None) -> tuple[str, str] | None:
    """(medium URL, medium name) for a story URL: ``("http://nytimes.com/", "nytimes.com")``.

    As generate_medium_url_and_name_from_url: the lossy form of the URL (so ``www.``, ``m.`` and similar
    prefixes are gone and the scheme is http), cut to 1024 chars, reduced to ``scheme://host/``; the name
    is the host. The port is left out: a medium is a site, not one of its servers. None when the URL has
    no http(s) host.
    """
    lossy = normalize_url_lossy(story_url)
    if not lossy:
        return None
    lossy = lossy[:MAX_URL_LENGTH]
    scheme, separator, rest = lossy.partition("://")
    if not separator:
        return None
    host = rest.split("/", 1)[0].split("?", 1)[0]
    if host.startswith("["):  # IPv6 literal: keep the brackets, drop a port
        host = host[: host.find("]") + 1] if "]" in host else host
    else:
        host = host.rsplit(":", 1)[0] if ":" in host else host
    if not host:
        return None
    return f"{scheme}://{host}/", host


_DOMAIN_NAME_RE = re.compile(r"(?:[\w-]+\.)+[a-z]{2,}\.?", re.I)


def host_like(name: str | None, host: str | None = None) -> bool:
    """Is a medium's name only a host name (``riversidegazette.test``, ``www.herald.test``, ``http://x.test/``),
    as the spider names a site it knows nothing else about? A site's own name ("Riverside Gazette", "BBC
    News") is not; neither is an empty one."""
    if not name or not name.strip():
        return False
    name = name.strip().lower().removesuffix("/")
    for scheme in ("http://", "https://"):
        name = name.removeprefix(scheme)
    if host and name.removeprefix("www.") == host.lower().removeprefix("www."):
        return True
    return _DOMAIN_NAME_RE.fullmatch(name) is not None
