"""What a media tag set and a tag may be called, free of heavy imports: the tags file (topicmap.store.media_tags)
and the media-tag foci of a topic declaration (topicmap.topics.declarations) are checked by the same rules."""

from __future__ import annotations

import re

#: a tag set's name: it names columns (GEXF attributes) and is written in topic declarations
TAG_SET_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.:\-]{0,63}")
MAX_TAG_CHARS = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def tag_set_problem(name: str) -> str | None:
    """Why ``name`` cannot name a tag set, or None."""
    if not TAG_SET_PATTERN.fullmatch(name):
        return (
            f"tag_set {name!r} must be lower-case letters, digits and _ - . : (at most 64, e.g. media_type)"
        )
    return None


def tag_problem(tag: str) -> str | None:
    """Why ``tag`` cannot be a tag, or None."""
    if not tag:
        return "tag is empty"
    if len(tag) > MAX_TAG_CHARS:
        return f"tag is {len(tag)} characters long, more than {MAX_TAG_CHARS}"
    if _CONTROL.search(tag):
        return f"tag {tag!r} holds a control character"
    return None
