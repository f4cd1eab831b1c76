"""The consistency checks' facts of an out-of-core timespan, taken from its rows as they stream to its files.

``topicmap.snapshots.checks`` tests an in-memory timespan's tables with the topic's ``IdIndex``: every story link
names two topic stories of different media, every counted story is a topic story (and, in a focus, one of the
focus's). A timespan computed out of core (``topicmap.snapshots.engine``) is never held, so the same tests run
here a record batch at a time on the very rows written to its files, and are summed into
``results.StreamedFacts``. A lookup per id (``IdIndex``: a gather when the ids are compact) is far cheaper than
joining each timespan's links to the topic's stories again in SQL (two hash tables of every story a timespan).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from topicmap.snapshots.ids import IdIndex
from topicmap.snapshots.results import StreamedFacts

#: a stream of record batches, read when called (``SnapshotFilesWriter.write_streamed`` reads its streams so)
Batches = Callable[[], Iterable[pa.RecordBatch]]


@dataclass
class LinkTally:
    """The story links seen: how many, how many name a story that is not a topic story, how many join two
    stories of one medium (``story_media``: each topic story's medium, by its position in ``topic``)."""

    topic: IdIndex
    story_media: np.ndarray
    rows: int = 0
    outside_topic: int = 0
    same_medium: int = 0

    def __call__(self, batch: pa.RecordBatch) -> None:
        source = self.topic.positions(batch.column("source_stories_id").to_numpy())
        ref = self.topic.positions(batch.column("ref_stories_id").to_numpy())
        known = (source >= 0) & (ref >= 0)
        self.rows += batch.num_rows
        self.outside_topic += batch.num_rows - int(np.count_nonzero(known))
        self.same_medium += int(
            np.count_nonzero(self.story_media[source[known]] == self.story_media[ref[known]])
        )


@dataclass
class StoryTally:
    """The counted stories seen: how many, how many are not topic stories, and (``focus``: a focus's stories)
    how many are not the focus's."""

    topic: IdIndex
    focus: IdIndex | None = None
    rows: int = 0
    outside_topic: int = 0
    outside_focus: int = 0

    def __call__(self, batch: pa.RecordBatch) -> None:
        ids = batch.column("stories_id").to_numpy()
        self.rows += batch.num_rows
        self.outside_topic += int(np.count_nonzero(self.topic.positions(ids) < 0))
        if self.focus is not None:
            self.outside_focus += int(np.count_nonzero(self.focus.positions(ids) < 0))


def tapped(batches: Batches, tally: Callable[[pa.RecordBatch], None]) -> Batches:
    """``batches``, each shown to ``tally`` as it passes on to the files."""

    def read() -> Iterator[pa.RecordBatch]:
        for batch in batches():
            tally(batch)
            yield batch

    return read


def streamed_facts(links: LinkTally, stories: StoryTally, medium_link_sum: int) -> StreamedFacts:
    """The checks' facts of a timespan whose streams have been read through ``links`` and ``stories``."""
    return StreamedFacts(
        story_links=links.rows,
        medium_link_sum=medium_link_sum,
        links_outside_topic=links.outside_topic,
        same_medium_links=links.same_medium,
        story_link_counts=stories.rows,
        counted_outside_topic=stories.outside_topic,
        counted_outside_focus=stories.outside_focus,
    )
