"""Subtopics (Media Cloud's foci): which of a topic's stories each focus holds, and where its texts come from.

A focus is either a **query** (the topic's query language, applied to each story's title and text, as the
topic's own query is when a story is judged relevant) or a **media-tag selection** (the stories whose final
medium has, in every tag set named, one of the tags listed: ``{media_type: [newspaper, wire]}`` is the stories
of newspapers and wires, ``{media_type: [newspaper], partisanship: [left, center-left]}`` those of left-leaning
newspapers). Foci are grouped in focal sets ("Subtopics", "Partisanship").

A snapshot computes every timespan of the whole topic again for each focus, on the focus's stories only: the
same tables, as if the topic held no other story (``topicmap.snapshots.compute``). A link from a story outside
the focus does not count in it. Media Cloud restricted each timespan's stories the same way (its "period
stories" intersected with the focus), but still let a focus story in through a link from outside the focus,
with no link to show for it; here a focus is its stories and the links among them.

This package does not parse queries (the topic declarations do): a query focus carries a ``matcher``, any
object with ``matches_story(title, text) -> bool`` (``topicmap.topics.query.TopicQuery``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

#: stories whose title and text are read at once (query foci, word counts)
TEXT_CHUNK = 2000


class StoryMatcher(Protocol):
    """What a query focus needs of a query: does it match a story with this title and text?"""

    def matches_story(self, title: str | None, text: str | None) -> bool: ...


def folder_name(name: str) -> str:
    """A focal set's or a focus's folder name: the name lower-cased, runs of other characters than a-z 0-9 made
    one '-' (topic declarations refuse names that give none, or the same one twice)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass(frozen=True)
class Focus:
    """One focus of a focal set: a query (with its ``matcher``) or a media-tag selection (tag set -> tags)."""

    focal_set: str
    name: str
    query: str | None = None
    matcher: StoryMatcher | None = field(default=None, compare=False, repr=False)
    media_tags: Mapping[str, Sequence[str]] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if (self.query is None) == (self.media_tags is None):
            raise ValueError(f"focus {self.name!r}: a focus is a query or media tags (exactly one)")
        if self.query is not None and self.matcher is None:
            raise ValueError(f"focus {self.name!r}: a query focus needs its matcher (the parsed query)")
        if self.media_tags is not None:
            if not self.media_tags or not all(self.media_tags.values()):
                raise ValueError(f"focus {self.name!r}: media_tags must name a tag set and a tag at least")
            canonical = {k: tuple(sorted(set(v))) for k, v in sorted(self.media_tags.items())}
            object.__setattr__(self, "media_tags", canonical)
        if not folder_name(self.focal_set) or not folder_name(self.name):
            raise ValueError(
                f"focus {self.focal_set!r} / {self.name!r}: each name needs a letter a-z or a digit"
            )

    @property
    def key(self) -> str:
        """``<focal set folder>/<focus folder>``: the focus's folder under ``foci/`` and its key in the tables."""
        return f"{folder_name(self.focal_set)}/{folder_name(self.name)}"

    @property
    def kind(self) -> str:
        return "query" if self.query is not None else "media_tags"

    def definition(self) -> dict[str, Any]:
        """What the focus is, as plain data (the snapshot key, provenance and the foci table record it)."""
        selection: dict[str, Any] = (
            {"query": self.query}
            if self.query is not None
            else {"media_tags": {k: list(v) for k, v in (self.media_tags or {}).items()}}
        )
        return {"focal_set": self.focal_set, "name": self.name, "description": self.description, **selection}

    def describe(self) -> str:
        """One line for tables and pictures: the query, or ``media_type: newspaper, wire``."""
        if self.query is not None:
            return self.query
        return "; ".join(f"{k}: {', '.join(v)}" for k, v in (self.media_tags or {}).items())


def check_foci(foci: Sequence[Focus]) -> None:
    """Raise ValueError when two foci have the same key (same folder) or a focus is not a ``Focus``."""
    seen: dict[str, Focus] = {}
    for focus in foci:
        if not isinstance(focus, Focus):
            raise ValueError(f"foci: expected Focus objects, got {type(focus).__name__}")
        if focus.key in seen:
            raise ValueError(
                f"foci {seen[focus.key].name!r} and {focus.name!r} have the same key {focus.key!r}"
            )
        seen[focus.key] = focus


# ----------------------------------------------------------------------------------------------- texts


@dataclass
class TextChunk:
    """The title, text and language of some stories, in ascending ``stories_id`` order."""

    stories_id: np.ndarray
    title: list[str | None]
    text: list[str | None]
    language: list[str | None]


class StoryTexts(Protocol):
    """Where a snapshot reads its stories' words: query foci read every story once, word counts a sample."""

    def chunks(self, stories_ids: np.ndarray) -> Iterator[TextChunk]:
        """The given stories (ascending ids, all of the topic) in ascending id order, a chunk at a time."""
        ...


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class FrameTexts:
    """Texts held in a stories DataFrame: ``title`` and, when present, ``text`` and ``language`` columns."""

    def __init__(self, stories: pd.DataFrame) -> None:
        ids = stories["stories_id"].to_numpy(dtype=np.int64)
        order = np.argsort(ids, kind="stable")  # the columns taken in id order, not the frame sorted whole

        def column(name: str) -> np.ndarray:
            if name not in stories.columns:
                return np.full(len(ids), None, dtype=object)
            return stories[name].to_numpy(dtype=object)[order]

        self.ids = ids[order]
        self.title, self.text, self.language = column("title"), column("text"), column("language")

    def chunks(self, stories_ids: np.ndarray) -> Iterator[TextChunk]:
        positions = np.searchsorted(self.ids, stories_ids)
        for start in range(0, len(positions), TEXT_CHUNK):
            at = positions[start : start + TEXT_CHUNK]
            yield TextChunk(
                stories_id=self.ids[at],
                title=[_text(v) for v in self.title[at]],
                text=[_text(v) for v in self.text[at]],
                language=[_text(v) for v in self.language[at]],
            )


# ----------------------------------------------------------------------------------------------- membership


def tagged_media(media_tags: pd.DataFrame | None, selection: Mapping[str, Sequence[str]]) -> np.ndarray:
    """The media (sorted ids) that have, in every tag set of ``selection``, one of its tags."""
    if media_tags is None or media_tags.empty:
        return np.zeros(0, dtype=np.int64)
    chosen: np.ndarray | None = None
    for tag_set, tags in selection.items():
        rows = media_tags[(media_tags["tag_set"] == tag_set) & media_tags["tag"].isin(list(tags))]
        media = np.unique(rows["media_id"].to_numpy(dtype=np.int64))
        chosen = media if chosen is None else np.intersect1d(chosen, media)
    return chosen if chosen is not None else np.zeros(0, dtype=np.int64)


def focus_story_masks(
    foci: Sequence[Focus],
    story_ids: np.ndarray,
    story_media_ids: np.ndarray,
    media_tags: pd.DataFrame | None,
    texts: StoryTexts | None,
) -> list[np.ndarray]:
    """For each focus, a boolean mask over the stories (``story_ids`` ascending, ``story_media_ids`` their final
    media): in the focus or not. Every query focus is tried on each story in one pass over the texts."""
    masks = [np.zeros(len(story_ids), dtype=bool) for _ in foci]
    queries = [(i, focus.matcher) for i, focus in enumerate(foci) if focus.matcher is not None]
    for i, focus in enumerate(foci):
        if focus.media_tags is not None:
            masks[i] = np.isin(story_media_ids, tagged_media(media_tags, focus.media_tags))
    if queries and len(story_ids):
        if texts is None:
            raise ValueError("query foci need the stories' texts")
        done = 0
        for chunk in texts.chunks(story_ids):
            n = len(chunk.stories_id)
            for i, matcher in queries:
                masks[i][done : done + n] = [
                    matcher.matches_story(title, text)
                    for title, text in zip(chunk.title, chunk.text, strict=True)
                ]
            done += n
        if done != len(story_ids):
            raise ValueError(f"the text source gave {done} stories of {len(story_ids)}")
    return masks
