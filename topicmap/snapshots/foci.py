"""Subtopics (Media Cloud's foci): a snapshot's foci, which of a topic's stories each holds, where its texts come from.

A focus is one kind of selection (``topicmap.topics.focus_kinds``: a **query** on each story's title and text,
or a **media-tag selection** of the stories' final media), named within a focal set ("Subtopics",
"Partisanship"). The kinds are declared, parsed and checked with the topic; this module takes them as the topic
declares them (``topic_foci``) and asks each kind which stories its foci hold (``focus_story_masks``).

A snapshot computes every timespan of the whole topic again for each focus, on the focus's stories only: the
same tables, as if the topic held no other story (``topicmap.snapshots.compute``). A link from a story outside
the focus does not count in it. Media Cloud restricted each timespan's stories the same way (its "period
stories" intersected with the focus), but still let a focus story in through a link from outside the focus,
with no link to show for it; here a focus is its stories and the links among them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

# Types only: the topic's foci are handed over, the topics package is not imported at run time.
if TYPE_CHECKING:
    from topicmap.topics.declarations import TopicConfig
    from topicmap.topics.focus_kinds import FocusSelection

#: stories whose title and text are read at once (query foci, word counts)
TEXT_CHUNK = 2000


def folder_name(name: str) -> str:
    """A focal set's or a focus's folder name: the name lower-cased, runs of other characters than a-z 0-9 made
    one '-' (topic declarations refuse names that give none, or the same one twice)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass(frozen=True)
class Focus:
    """One focus of a focal set: its names and what it selects (one kind of ``topicmap.topics.focus_kinds``)."""

    focal_set: str
    name: str
    selection: FocusSelection
    description: str = ""

    def __post_init__(self) -> None:
        if not callable(getattr(self.selection, "story_masks", None)):
            raise ValueError(
                f"focus {self.name!r}: the selection must be a focus kind (topicmap.topics.focus_kinds)"
            )
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
        return self.selection.kind

    def definition(self) -> dict[str, Any]:
        """What the focus is, as plain data (the snapshot key, provenance and the foci table record it)."""
        return {
            "focal_set": self.focal_set,
            "name": self.name,
            "description": self.description,
            self.kind: self.selection.declaration(),
        }

    def describe(self) -> str:
        """One line for tables and pictures: the query, or ``media_type: newspaper, wire``."""
        return self.selection.describe()


def topic_foci(topic: TopicConfig) -> list[Focus]:
    """The topic's declared foci as a snapshot computes them: every focus of every focal set, in declared order,
    described by the focal set when it has no description of its own."""
    return [
        Focus(
            focal_set=focal_set.name,
            name=focus.name,
            selection=focus.selection,
            description=focus.description or focal_set.description,
        )
        for focal_set in topic.focal_sets
        for focus in focal_set.foci
    ]


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


@dataclass(frozen=True)
class TopicStories:
    """The topic's stories as the focus kinds select among them (``topicmap.topics.focus_kinds.FocusStories``)."""

    story_ids: np.ndarray  # ascending
    story_media_ids: np.ndarray  # each story's final medium
    media_tags: pd.DataFrame | None  # media_id (final medium), tag_set, tag
    texts: StoryTexts | None


def focus_story_masks(
    foci: Sequence[Focus],
    story_ids: np.ndarray,
    story_media_ids: np.ndarray,
    media_tags: pd.DataFrame | None,
    texts: StoryTexts | None,
) -> list[np.ndarray]:
    """For each focus, a boolean mask over the stories (``story_ids`` ascending, ``story_media_ids`` their final
    media): in the focus or not. Each kind selects the stories of all its foci at once (every query focus is
    tried on each story in one pass over the texts)."""
    stories = TopicStories(story_ids, story_media_ids, media_tags, texts)
    masks: list[np.ndarray] = [np.zeros(0, dtype=bool)] * len(foci)
    by_kind: dict[type[FocusSelection], list[int]] = {}
    for i, focus in enumerate(foci):
        by_kind.setdefault(type(focus.selection), []).append(i)
    for kind, members in by_kind.items():
        found = kind.story_masks([foci[i].selection for i in members], stories)
        for i, mask in zip(members, found, strict=True):
            masks[i] = mask
    return masks
