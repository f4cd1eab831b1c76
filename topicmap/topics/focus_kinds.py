"""Kinds of focus (subtopic): how topics.yaml declares each, which of a topic's stories it holds, how it is named.

A focus kind is one class and one entry of ``FOCUS_KINDS``. The class says:

* ``kind``: the field of a focus in topics.yaml that declares it, and the kind's name in a snapshot's tables;
* ``declared(raw)``: the declared value, parsed and checked; a mistake raises ``FocusDeclarationError``, which the
  declarations report with the topic, the place and the focus;
* ``declaration()``: that value as the topic's declaration records it (``FocusDefinition``, the topic's config
  JSON and the snapshot's records of the focus; ``Kind(value)`` builds the kind from it again); ``describe()``:
  one line for tables and pictures;
* ``story_masks(selections, ...)``: which of a topic's stories each focus of the kind holds, for every focus of
  the kind at once (query foci share one pass over the stories' texts).

``topicmap.topics.declarations`` parses foci through this registry; ``topicmap.snapshots.foci`` asks it which
stories each focus holds. The kinds:

* ``query``: the topic's query language, applied to each story's title and text, as the topic's own query is
  when a story is judged relevant;
* ``media_tags``: the stories whose final medium has, in every tag set named, one of the tags listed:
  ``{media_type: [newspaper, wire]}`` is the stories of newspapers and wires, ``{media_type: [newspaper],
  partisanship: [left, center-left]}`` those of left-leaning newspapers.
"""

from __future__ import annotations

import reprlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from topicmap.store.tag_names import tag_problem, tag_set_problem
from topicmap.topics.query import QuerySyntaxError, TopicQuery, parse

if (
    TYPE_CHECKING
):  # numpy and pandas are imported where stories are selected: loading topics.yaml needs neither
    import numpy as np
    import pandas as pd


class FocusDeclarationError(ValueError):
    """A focus's declared value is wrong: ``where`` is the place below the kind's field ("" for the field
    itself, ``.media_type[1]`` for a tag), the message says what is wrong."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where


class StoryTextChunk(Protocol):
    """Some stories' titles and texts, in ascending ``stories_id`` order."""

    stories_id: np.ndarray
    title: list[str | None]
    text: list[str | None]


class StoryTextSource(Protocol):
    """Where the stories' texts are read (``topicmap.snapshots.foci.StoryTexts``)."""

    def chunks(self, stories_ids: np.ndarray) -> Iterator[StoryTextChunk]: ...


class FocusStories(Protocol):
    """The topic's stories as a focus kind selects among them (``topicmap.snapshots.foci.TopicStories``)."""

    story_ids: np.ndarray  # ascending
    story_media_ids: np.ndarray  # each story's final medium
    media_tags: pd.DataFrame | None  # media_id (final medium), tag_set, tag
    texts: StoryTextSource | None


class FocusSelection(ABC):
    """What one focus selects, of one kind: the base of every focus kind. A kind is built from its
    ``declaration()`` (``Kind(value)``), as the topic's ``FocusDefinition`` records it."""

    #: the field of a focus in topics.yaml that declares this kind, and the kind's name in the snapshot's tables
    kind: ClassVar[str]

    @classmethod
    @abstractmethod
    def declared(cls, raw: Any) -> FocusSelection:
        """The selection as topics.yaml declares it; raises ``FocusDeclarationError`` on a mistake."""

    @abstractmethod
    def declaration(self) -> Any:
        """The selection as the topic's declaration records it (JSON-ready; part of every snapshot key)."""

    @abstractmethod
    def describe(self) -> str:
        """One line for tables and pictures."""

    @classmethod
    @abstractmethod
    def story_masks(cls, selections: Sequence[Any], stories: FocusStories) -> list[np.ndarray]:
        """For each selection (all of this kind), a boolean mask over ``stories.story_ids``: in the focus or not."""


@dataclass(frozen=True)
class QuerySelection(FocusSelection):
    """The stories whose title and text the query matches (the topic's query language)."""

    kind: ClassVar[str] = "query"
    query: str

    @classmethod
    def declared(cls, raw: Any) -> QuerySelection:
        if not isinstance(raw, str) or not raw.strip():
            raise FocusDeclarationError("", f"expected a query string, got {_shown(raw)}")
        try:
            parse(raw)
        except QuerySyntaxError as exc:
            raise FocusDeclarationError("", f"at position {exc.position}: {exc}") from exc
        return cls(raw)

    @property
    def matcher(self) -> TopicQuery:
        return parse(self.query)

    def declaration(self) -> str:
        return self.query

    def describe(self) -> str:
        return self.query

    @classmethod
    def story_masks(cls, selections: Sequence[Any], stories: FocusStories) -> list[np.ndarray]:
        import numpy as np

        story_ids, texts = stories.story_ids, stories.texts
        masks = [np.zeros(len(story_ids), dtype=bool) for _ in selections]
        if not selections or not len(story_ids):
            return masks
        if texts is None:
            raise ValueError("query foci need the stories' texts")
        matchers = [selection.matcher for selection in selections]
        done = 0
        for chunk in texts.chunks(story_ids):
            n = len(chunk.stories_id)
            for mask, matcher in zip(masks, matchers, strict=True):
                mask[done : done + n] = [
                    matcher.matches_story(title, text)
                    for title, text in zip(chunk.title, chunk.text, strict=True)
                ]
            done += n
        if done != len(story_ids):
            raise ValueError(f"the text source gave {done} stories of {len(story_ids)}")
        return masks


@dataclass(frozen=True)
class MediaTagSelection(FocusSelection):
    """The stories whose final medium has, in every tag set named, one of the tags listed (tag set -> tags)."""

    kind: ClassVar[str] = "media_tags"
    tags: Mapping[str, Sequence[str]]

    def __post_init__(self) -> None:
        if not self.tags or not all(self.tags.values()):
            raise ValueError("media_tags must name a tag set and a tag at least")
        canonical = {tag_set: tuple(sorted(set(tags))) for tag_set, tags in sorted(self.tags.items())}
        object.__setattr__(self, "tags", canonical)

    @classmethod
    def declared(cls, raw: Any) -> MediaTagSelection:
        """``{tag_set: [tags]}``: a tag set's tags as a list or one tag; at least one tag set, one tag each."""
        if not isinstance(raw, dict) or not raw:
            raise FocusDeclarationError(
                "", "expected a mapping of tag set to tags, e.g. {media_type: [newspaper]}"
            )
        selection: dict[str, tuple[str, ...]] = {}
        for tag_set, tags in raw.items():
            problem = (
                tag_set_problem(tag_set)
                if isinstance(tag_set, str)
                else f"tag set {_shown(tag_set)} is not text"
            )
            if problem:
                raise FocusDeclarationError(f".{tag_set}", problem)
            values = tags if isinstance(tags, list) else [tags]
            if not values:
                raise FocusDeclarationError(f".{tag_set}", "lists no tag")
            for position, tag in enumerate(values):
                problem = (
                    tag_problem(tag.strip()) if isinstance(tag, str) else f"tag {_shown(tag)} is not text"
                )
                if problem:
                    raise FocusDeclarationError(f".{tag_set}[{position}]", problem)
            selection[tag_set] = tuple(sorted({tag.strip() for tag in values}))
        return cls(selection)

    def declaration(self) -> dict[str, tuple[str, ...]]:
        return dict(self.tags)  # canonical: tag sets and their tags sorted

    def describe(self) -> str:
        """``media_type: newspaper, wire; region: north``."""
        return "; ".join(f"{tag_set}: {', '.join(tags)}" for tag_set, tags in self.tags.items())

    @classmethod
    def story_masks(cls, selections: Sequence[Any], stories: FocusStories) -> list[np.ndarray]:
        import numpy as np

        return [
            np.isin(stories.story_media_ids, tagged_media(stories.media_tags, selection.tags))
            for selection in selections
        ]


def tagged_media(media_tags: pd.DataFrame | None, selection: Mapping[str, Sequence[str]]) -> np.ndarray:
    """The media (sorted ids) that have, in every tag set of ``selection``, one of its tags."""
    import numpy as np

    if media_tags is None or media_tags.empty:
        return np.zeros(0, dtype=np.int64)
    chosen: np.ndarray | None = None
    for tag_set, tags in selection.items():
        rows = media_tags[(media_tags["tag_set"] == tag_set) & media_tags["tag"].isin(list(tags))]
        media = np.unique(rows["media_id"].to_numpy(dtype=np.int64))
        chosen = media if chosen is None else np.intersect1d(chosen, media)
    return chosen if chosen is not None else np.zeros(0, dtype=np.int64)


#: every kind of focus, by the field of topics.yaml that declares it: a new kind is a class and an entry here
FOCUS_KINDS: dict[str, type[FocusSelection]] = {
    kind.kind: kind for kind in (QuerySelection, MediaTagSelection)
}


def _shown(value: Any) -> str:
    """A value in a message, shortened as the declarations shorten them."""
    shown = reprlib.Repr()
    shown.maxstring = shown.maxother = 80
    return shown.repr(value)
