"""The synthetic topic of ``synthetic_topic.py`` written to Parquet files a chunk at a time, for sizes whose inputs
would not fit in memory (10 million stories, 100 million links).

Same shape as ``synthetic_topic.synthetic_topic`` (about 300 media with Zipf-like sizes and popularity, 4 months,
1.5 % undated stories, 1.5 % dated outside the topic, 8 % same-medium links, 3 % duplicate links, 1 % links to
stories outside the topic, syndication groups of three, Facebook/Bit.ly statistics, a 30-word text per story,
one tag set of five tags over 80 % of the media), drawn in chunks: the per-story arrays (ids, media, dates) are
held whole (a few hundred MB at 10 million stories), the texts and links only a chunk at a time. Both snapshot
paths read these files, so they compute the same topic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from synthetic_topic import (
    PARTISANSHIP,
    TAG_SET,
    TOPIC_END,
    TOPIC_START,
    StoryPicker,
    synthetic_media,
    synthetic_texts,
)

from topicmap.snapshots.engine_input import INPUT_SCHEMAS

CHUNK = 1_000_000
INPUTS = ("stories", "media", "links", "story_stats", "near_dup_groups", "media_tags")


def write_topic_files(n_stories: int, n_links: int, folder: Path, n_media: int = 300, seed: int = 7) -> None:
    """``folder/<input>.parquet`` for every input of the topic (``INPUT_SCHEMAS`` columns)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    media_columns, output_share, popularity = synthetic_media(n_media)
    pq.write_table(pa.table(media_columns), folder / "media.parquet")
    media_ids = media_columns["media_id"]

    stories_id = rng.permutation(np.arange(1, 3 * n_stories, dtype=np.int64))[:n_stories]
    story_medium = rng.choice(n_media, size=n_stories, p=output_share)
    start_ns = pd.Timestamp(TOPIC_START, tz="UTC").value
    span_ns = pd.Timestamp(TOPIC_END, tz="UTC").value + 86_400 * 10**9 - start_ns
    dates = start_ns + rng.integers(0, span_ns, size=n_stories)
    dates[rng.random(n_stories) < 0.015] -= 120 * 86_400 * 10**9
    undated = rng.random(n_stories) < 0.015

    with pq.ParquetWriter(folder / "stories.parquet", INPUT_SCHEMAS["stories"]) as writer:
        for at in range(0, n_stories, CHUNK):
            part = slice(at, min(at + CHUNK, n_stories))
            ids = stories_id[part]
            n = len(ids)
            writer.write_table(
                pa.table(
                    {
                        "stories_id": ids,
                        "media_id": media_ids[story_medium[part]],
                        "utc_ns": pa.array(dates[part], mask=undated[part]),
                        "offset_min": pa.nulls(n, pa.int64()),
                        "url": [f"https://news.example/s/{i}" for i in ids],
                        "title": [f"Story {i}" for i in ids],
                        "text": synthetic_texts(rng, n),
                        "language": pa.array(["en"] * n),
                        # dates found in the pages' HTML with a time of day, their zone unknown
                        "date_method": pa.array(["html"] * n),
                        "time_known": pa.array(np.ones(n, dtype=np.int64)),
                        "zone_known": pa.nulls(n, pa.int64()),
                    },
                    schema=INPUT_SCHEMAS["stories"],
                )
            )

    picker = StoryPicker(story_medium, popularity, rng)
    with pq.ParquetWriter(folder / "links.parquet", INPUT_SCHEMAS["links"]) as writer:
        for at in range(0, n_links, 10 * CHUNK):
            m = min(10 * CHUNK, n_links - at)
            n_same, n_dup, n_out = int(0.08 * m), int(0.03 * m), int(0.01 * m)
            n_cross = m - n_same - n_dup - n_out
            source = rng.integers(0, n_stories, size=n_cross)
            ref = picker.popular_stories(n_cross)
            same_source = rng.integers(0, n_stories, size=n_same)
            out_source = rng.integers(0, n_stories, size=n_out)
            sources = np.concatenate([stories_id[source], stories_id[same_source], stories_id[out_source]])
            refs = np.concatenate(
                [
                    stories_id[ref],
                    stories_id[picker.story_in(story_medium[same_source])],
                    3 * n_stories + rng.integers(0, n_stories, size=n_out),
                ]
            )
            again = rng.integers(0, len(sources), size=n_dup)
            order = rng.permutation(len(sources) + n_dup)
            writer.write_table(
                pa.table(
                    {
                        "stories_id": np.concatenate([sources, sources[again]])[order],
                        "ref_stories_id": np.concatenate([refs, refs[again]])[order],
                    }
                )
            )

    def counts(share_known: float, scale: float) -> pa.Array:
        values = np.rint(rng.lognormal(mean=scale, sigma=1.5, size=n_stories)).astype(np.int64)
        return pa.array(values, mask=rng.random(n_stories) >= share_known)

    pq.write_table(
        pa.table(
            {
                "stories_id": stories_id,
                "facebook_share_count": counts(0.8, 2.0),
                "bitly_clicks_3d": counts(0.5, 1.0),
                "bitly_clicks_30d": counts(0.5, 1.5),
            }
        ),
        folder / "story_stats.parquet",
    )
    grouped = rng.permutation(n_stories)[: int(0.12 * n_stories)]
    pq.write_table(
        pa.table(
            {"stories_id": stories_id[grouped], "group_id": np.arange(len(grouped), dtype=np.int64) // 3}
        ),
        folder / "near_dup_groups.parquet",
    )
    tagged = np.sort(rng.choice(media_ids, size=int(0.8 * n_media), replace=False))
    pq.write_table(
        pa.table(
            {
                "media_id": tagged,
                "tag_set": [TAG_SET] * len(tagged),
                "tag": [PARTISANSHIP[i % len(PARTISANSHIP)] for i in range(len(tagged))],
            }
        ),
        folder / "media_tags.parquet",
    )


def topic_frames(folder: Path) -> dict[str, pd.DataFrame]:
    """The files as the in-memory path's DataFrames (``compute_snapshot``'s arguments)."""
    tables = {name: pq.read_table(folder / f"{name}.parquet") for name in INPUTS}
    stories = tables["stories"]
    dates = stories.column("utc_ns").cast(pa.timestamp("ns", tz="UTC"))
    tables["stories"] = stories.drop_columns(["utc_ns", "offset_min"]).append_column("publish_date", dates)
    frames = {name: table.to_pandas() for name, table in tables.items()}
    for column in ("facebook_share_count", "bitly_clicks_3d", "bitly_clicks_30d"):
        frames["story_stats"][column] = frames["story_stats"][column].astype("Int64")
    return frames
