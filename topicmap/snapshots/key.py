"""A snapshot's identity: the options that change its files, and its key, a sha256 over everything it is built
from (same inputs, same key, same folder), with the provenance that records what went into it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import matplotlib
import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa

from topicmap.snapshots.inputs import SnapshotInputs
from topicmap.snapshots.names import DEFAULT_PICTURE_PERIODS, PERIODS
from topicmap.snapshots.words import DEFAULT_WORD_SAMPLE
from topicmap.store.tag_names import tag_set_problem

#: Bumped whenever this code would write different files from the same inputs: part of every snapshot key.
# 2: no files for empty timespans, delta-encoded Parquet integers; 3: timespans by the publisher's calendar day;
# 4: story exports name their dates (publish_date_utc with its zone, publish_day_local) instead of publish_date;
# 5: foci, summary tables (top words, stories per day, top media and stories), attention charts, media tags
# 6: a data dictionary (datapackage.json, schemas/, README.md, Parquet field descriptions), stories tables in
#    Parquet with date method, language and why each story is in the timespan, the parts of story_count,
#    top words ranked by stories; 7: post_count, author_count, channel_count per story, medium and timespan
#    (URL sharing), url_sharing mode, bot_policy; 8: timespans say whether they are partial and their days
SNAPSHOT_CODE_VERSION = 8


# ----------------------------------------------------------------------------------------------- options


@dataclass(frozen=True)
class SnapshotOptions:
    """Choices that change a snapshot's files, hence part of its key."""

    #: count links from the copies of one near-duplicate (syndicated) story to the same story once
    count_syndicated_once: bool = False
    #: periods whose timespans get a PNG link map (every timespan gets a GEXF)
    picture_periods: tuple[str, ...] = DEFAULT_PICTURE_PERIODS
    #: media named on each picture (the ones linked from the most other media)
    top_labels: int = 15
    #: stories per timespan whose words are counted (Media Cloud's default sample; 0: every story)
    word_sample: int = DEFAULT_WORD_SAMPLE
    #: the tag set whose tags colour the media of the link maps (None: link communities)
    link_map_tag_set: str | None = None
    #: draw each focus's pictures too (for its timespans of ``picture_periods``): about a second each
    focus_pictures: bool = False

    def __post_init__(self) -> None:
        periods = tuple(self.picture_periods)
        unknown = [p for p in periods if p not in PERIODS]
        if unknown:
            raise ValueError(
                f"picture_periods: unknown period(s) {unknown}; expected some of {list(PERIODS)}"
            )
        if isinstance(self.top_labels, bool) or not isinstance(self.top_labels, int) or self.top_labels < 0:
            raise ValueError(f"top_labels must be a whole number >= 0, got {self.top_labels!r}")
        # canonical order, so ("monthly", "overall") and ("overall", "monthly") give the same key
        object.__setattr__(self, "picture_periods", tuple(p for p in PERIODS if p in periods))
        if (
            isinstance(self.word_sample, bool)
            or not isinstance(self.word_sample, int)
            or self.word_sample < 0
        ):
            raise ValueError(
                f"word_sample must be a whole number >= 0 (0: every story), got {self.word_sample!r}"
            )
        tag_set = (self.link_map_tag_set or "").strip() or None
        if tag_set is not None and (problem := tag_set_problem(tag_set)):
            raise ValueError(f"link_map_tag_set: {problem}")
        object.__setattr__(self, "link_map_tag_set", tag_set)

    def as_dict(self) -> dict[str, Any]:
        return {
            "count_syndicated_once": bool(self.count_syndicated_once),
            "picture_periods": list(self.picture_periods),
            "top_labels": self.top_labels,
            "word_sample": self.word_sample,
            "link_map_tag_set": self.link_map_tag_set,
            "focus_pictures": bool(self.focus_pictures),
        }


def code_versions() -> dict[str, Any]:
    """What shapes the bytes besides the data: Parquet files name the pyarrow version that wrote them, and
    the pictures depend on matplotlib and networkx's layout. A new version means a new key, a new folder."""
    return {
        "snapshot_code": SNAPSHOT_CODE_VERSION,
        "pyarrow": pa.__version__,
        "matplotlib": matplotlib.__version__,
        "networkx": nx.__version__,
    }


# ----------------------------------------------------------------------------------------------- key


def _column_bytes(series: pd.Series) -> bytes:
    """Canonical bytes of a column: little-endian int64 (+ null mask) for numbers and dates, JSON for text."""
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        series = series.dt.tz_convert(None)  # naive UTC
    if pd.api.types.is_datetime64_dtype(series.dtype):
        return series.to_numpy(dtype="datetime64[ns]").view(np.int64).astype("<i8").tobytes()
    if pd.api.types.is_integer_dtype(series.dtype):
        array = pd.array(series, dtype="Int64")
        data = array.to_numpy(dtype=np.int64, na_value=0).astype("<i8").tobytes()
        return data + np.asarray(array.isna(), dtype=np.uint8).tobytes()
    values = [None if pd.isna(v) else str(v) for v in series.tolist()]
    return json.dumps(values, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def snapshot_key(inputs: SnapshotInputs, options: SnapshotOptions) -> str:
    """sha256 over everything a snapshot is built from: the topic's config and version, the iteration and dedup
    state, the input frames (sorted by their ids; the media tags and the posts sharing stories among them), the bot
    report, the foci, the stories' texts (whose words are counted and which query foci match), the options and
    the code versions. Same inputs, same key."""
    digest = hashlib.sha256()

    def part(label: str, payload: bytes) -> None:
        # length-prefixed, so no two different sequences of parts can serialize to the same bytes
        head = label.encode("utf-8")
        digest.update(len(head).to_bytes(8, "little") + head + len(payload).to_bytes(8, "little"))
        digest.update(payload)

    def canonical(value: Any) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")

    part("format", b"topicmap-snapshot-key/1")
    part("code", canonical(code_versions()))
    part("topic", canonical({"name": inputs.topic_name, "config": json.loads(inputs.config_json)}))
    part("options", canonical(options.as_dict()))
    part("iteration", canonical(inputs.iteration))
    if inputs.topic_version not in (None, 1):
        # a topic's first version holds the settings and stories it had before versions were recorded: a topic
        # from an older store, snapshotted before its first seeding records that version, keeps its key then
        part("topic_version", canonical(inputs.topic_version))
    part("dedup", canonical(inputs.dedup_state))
    for name, frame in inputs.frames():
        part(f"frame:{name}", canonical(list(frame.columns)))
        for column in frame.columns:
            part(f"{name}.{column}", _column_bytes(frame[column]))
    part("foci", canonical([focus.definition() for focus in inputs.foci]))
    part("posts", canonical({"mode": inputs.mode, **inputs.posts.bot_report}))
    if inputs.source is not None:  # read in batches (too big to read whole): the batches, texts included
        from topicmap.snapshots.store_stream import source_digest

        part("source", source_digest(inputs.source).encode("ascii"))
    if inputs.texts is not None:
        part("texts", inputs.texts.digest().encode("ascii"))
    return digest.hexdigest()


def snapshot_provenance(inputs: SnapshotInputs, options: SnapshotOptions, key: str) -> dict[str, Any]:
    """What the snapshot was built from. Everything here is part of the key, so the file is reproducible."""
    return {
        "format": "topicmap-snapshot-provenance/1",
        "snapshot_key": key,
        "topic": {
            "name": inputs.topic_name,
            "start_date": inputs.start_date.isoformat(),
            "end_date": inputs.end_date.isoformat(),
            "config": json.loads(inputs.config_json),
        },
        "topic_version": inputs.topic_version,
        "iteration": inputs.iteration,
        "dedup": dict(inputs.dedup_state),
        "input_rows": inputs.row_counts(),
        "foci": [focus.definition() for focus in inputs.foci],
        "posts": {"mode": inputs.mode, **inputs.posts.bot_report},
        "texts_sha256": inputs.texts.digest() if inputs.texts is not None else None,
        "options": options.as_dict(),
        "code": code_versions(),
    }
