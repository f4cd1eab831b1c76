"""A topic's post sources as ``topics.yaml`` declares them (``posts:``), validated field by field.

Each entry names a platform and a local file or folder of posts (no network)::

    posts:
      - {platform: generic_post, path: posts/shared.csv}   # Media Cloud's generic-post CSV
      - {platform: reddit, path: dumps/reddit/}            # Pushshift NDJSON: every .jsonl/.ndjson/.json file
      - {platform: twitter, path: dumps/tweets.jsonl, assume_match: true, match_query: false}

The posts are read, kept and turned into seeds by ``topicmap.topics.posts``; the file formats are in
``topicmap.topics.post_formats``. A mistake names the topic and the place (``posts[1].platform``); the topic is
then refused and the other topics load, as for every field of a topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topicmap.topics.topic_errors import TopicConfigError, checked_flag, reject_unknown, shown

#: the platforms whose dumps can be read, as Media Cloud names them (``topic_seed_queries.platform``)
POST_PLATFORMS = ("generic_post", "reddit", "twitter")
POST_SOURCE_FIELDS = {"platform", "path", "assume_match", "match_query"}
#: the URLs of posts are candidates, judged by the query when fetched (Media Cloud seeds them with assume_match
#: false); ``assume_match: true`` takes their stories as relevant, as a seed URL list does
DEFAULT_POST_ASSUME_MATCH = False
#: only posts whose content matches the topic's query are kept (Media Cloud's rule for every post source)
DEFAULT_POST_MATCH_QUERY = True
#: post sources of one topic, at most (each is read whole at every seeding)
MAX_POST_SOURCES = 100


@dataclass(frozen=True)
class PostSource:
    """Posts of one platform in a file, or in every file of a folder with the platform's file endings."""

    platform: str
    path: Path
    assume_match: bool = DEFAULT_POST_ASSUME_MATCH
    match_query: bool = DEFAULT_POST_MATCH_QUERY


def parse_post_sources(topic: str, raw: Any, base_dir: Path) -> tuple[PostSource, ...]:
    """``posts``: a list of ``{platform, path, assume_match?, match_query?}``; paths relative to the topics
    file."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise TopicConfigError(topic, "posts", "expected a list of {platform: ..., path: ...}")
    if len(raw) > MAX_POST_SOURCES:
        raise TopicConfigError(topic, "posts", f"{len(raw)} post sources, more than {MAX_POST_SOURCES}")
    sources = []
    for i, entry in enumerate(raw):
        where = f"posts[{i}]"
        if not isinstance(entry, dict):
            raise TopicConfigError(
                topic, where, f"expected a mapping {{platform: ..., path: ...}}, got {type(entry).__name__}"
            )
        reject_unknown(topic, where, entry, POST_SOURCE_FIELDS)
        platform = entry.get("platform")
        if platform not in POST_PLATFORMS:
            raise TopicConfigError(
                topic,
                f"{where}.platform",
                f"expected one of {list(POST_PLATFORMS)}, got {shown.repr(platform)}",
            )
        path = entry.get("path")
        if not isinstance(path, str) or not path.strip():
            raise TopicConfigError(
                topic, f"{where}.path", f"expected the path of a file or folder, got {shown.repr(path)}"
            )
        resolved = Path(path.strip())
        sources.append(
            PostSource(
                platform=platform,
                path=resolved if resolved.is_absolute() else base_dir / resolved,
                assume_match=checked_flag(
                    topic, f"{where}.assume_match", entry.get("assume_match", DEFAULT_POST_ASSUME_MATCH)
                ),
                match_query=checked_flag(
                    topic, f"{where}.match_query", entry.get("match_query", DEFAULT_POST_MATCH_QUERY)
                ),
            )
        )
    return tuple(sources)


def parse_choice(topic: str, field_name: str, raw: Any, choices: tuple[str, ...]) -> str:
    """``mode`` / ``bot_policy``: one of ``choices``; left out: the first."""
    if raw is None:
        return choices[0]
    if raw not in choices:
        raise TopicConfigError(topic, field_name, f"expected one of {list(choices)}, got {shown.repr(raw)}")
    return str(raw)
