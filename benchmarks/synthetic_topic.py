"""The synthetic topic the snapshot benchmarks compute: a seeded topic shaped like a news link network.

About 300 media with Zipf-like sizes and popularity (a few big media publish more and get most links), 4 months,
1.5 % undated stories, 1.5 % dated outside the topic, 8 % same-medium links, 3 % duplicate links, 1 % links to
stories outside the topic, syndication groups, Facebook/Bit.ly statistics, a 30-word text per story drawn from a
5,000-word Zipf vocabulary with topical phrases, one tag set ``partisanship`` of five tags over 80 % of the media.
``synthetic_topic`` holds it in memory; ``synthetic_topic_files`` writes the same shape to Parquet a chunk at a
time.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import numpy as np
import pandas as pd

TOPIC_START, TOPIC_END = date(2026, 1, 1), date(2026, 4, 30)
CUSTOM = [("Primary season", "2026-02-01", "2026-03-15"), ("Debate week", "2026-03-02", "2026-03-08")]
TAG_SET = "partisanship"
PARTISANSHIP = ("left", "center-left", "center", "center-right", "right")
WORDS_PER_STORY = 30


def synthetic_media(n_media: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """The media's columns (media_id, name, url), and each medium's share of the stories and of the links."""
    media_ids = np.arange(1, n_media + 1, dtype=np.int64) * 10
    columns = {
        "media_id": media_ids,
        "name": [f"News Site {i:03d}" for i in range(1, n_media + 1)],
        "url": [f"https://news{i:03d}.example/" for i in range(1, n_media + 1)],
    }
    rank = np.arange(1, n_media + 1, dtype=float)
    output_share = rank**-0.8 / (rank**-0.8).sum()  # big media publish more
    popularity = rank**-1.1 / (rank**-1.1).sum()  # and are linked to far more
    return columns, output_share, popularity


class StoryPicker:
    """Stories grouped by medium, to draw "a random story of medium m" without a loop."""

    def __init__(self, story_medium: np.ndarray, popularity: np.ndarray, rng: np.random.Generator) -> None:
        n_media = len(popularity)
        self._rng = rng
        self._by_medium = np.argsort(story_medium, kind="stable")
        self._first_of = np.searchsorted(story_medium[self._by_medium], np.arange(n_media))
        self._size_of = np.bincount(story_medium, minlength=n_media)
        self._linkable = np.flatnonzero(self._size_of)
        self._link_pop = popularity[self._linkable] / popularity[self._linkable].sum()

    def story_in(self, medium: np.ndarray) -> np.ndarray:
        """A random story (its position) of each medium in ``medium``."""
        offset = (self._rng.random(len(medium)) * self._size_of[medium]).astype(np.int64)
        return self._by_medium[self._first_of[medium] + offset]

    def popular_stories(self, n: int) -> np.ndarray:
        """``n`` random stories of media drawn by popularity (media without stories are never drawn)."""
        linkable = self._linkable
        return self.story_in(linkable[self._rng.choice(len(linkable), size=n, p=self._link_pop)])


def synthetic_texts(rng: np.random.Generator, n_stories: int) -> list[str]:
    """A 30-word text per story: pseudo-words of a Zipf vocabulary, some with a topical phrase (about 12 %
    mention the climate or emissions, 5 % a carbon tax) and common English words (stop words to leave out)."""
    syllables = [
        "ka",
        "lo",
        "mi",
        "ne",
        "ru",
        "sa",
        "ti",
        "vo",
        "ber",
        "dan",
        "gor",
        "lin",
        "mar",
        "pel",
        "sto",
    ]
    vocabulary = np.array(
        [syllables[i % 15] + syllables[(i // 15) % 15] + syllables[(i // 225) % 15] for i in range(5000)]
        + ["the", "and", "of", "to", "in", "that", "was", "for"],
        dtype=object,
    )
    rank = np.arange(1, len(vocabulary) + 1, dtype=float)
    frequency = rank**-1.0 / (rank**-1.0).sum()
    texts: list[str] = []
    for start in range(0, n_stories, 100_000):
        size = min(100_000, n_stories - start)
        words = vocabulary[rng.choice(len(vocabulary), size=(size, WORDS_PER_STORY), p=frequency)]
        climate = rng.random(size) < 0.12
        words[climate, 3] = "climate"
        words[climate, 4] = "emissions"
        carbon = rng.random(size) < 0.05
        words[carbon, 10] = "carbon"
        words[carbon, 11] = "tax"
        texts += [" ".join(row) for row in words]
    return texts


def synthetic_topic(
    n_stories: int,
    n_links: int,
    n_media: int = 300,
    seed: int = 7,
    start: date = TOPIC_START,
    end: date = TOPIC_END,
) -> dict[str, pd.DataFrame]:
    """A seeded synthetic topic shaped like a news link network (a few big media get most links), its stories
    published uniformly over ``start``..``end`` (inclusive)."""
    rng = np.random.default_rng(seed)
    media_columns, output_share, popularity = synthetic_media(n_media)
    media = pd.DataFrame(media_columns)
    media_ids = media_columns["media_id"]

    stories_id = rng.choice(np.arange(1, 3 * n_stories, dtype=np.int64), size=n_stories, replace=False)
    story_medium = rng.choice(n_media, size=n_stories, p=output_share)
    span_ns = pd.Timestamp(end, tz="UTC").value + 86_400 * 10**9 - pd.Timestamp(start, tz="UTC").value
    offsets = rng.integers(0, span_ns, size=n_stories)
    dates = pd.Timestamp(start, tz="UTC").value + offsets
    outside = rng.random(n_stories) < 0.015
    dates[outside] -= 120 * 86_400 * 10**9  # pushed months before the topic
    publish = pd.to_datetime(dates, utc=True).astype("datetime64[ns, UTC]")
    publish = publish.where(rng.random(n_stories) >= 0.015)  # 1.5 % undated
    stories = pd.DataFrame(
        {
            "stories_id": stories_id,
            "media_id": media_ids[story_medium],
            "publish_date": publish,
            "url": [f"https://news.example/s/{i}" for i in stories_id],
            "title": [f"Story {i}" for i in stories_id],
        }
    )

    picker = StoryPicker(story_medium, popularity, rng)
    n_same, n_dup, n_out = int(0.08 * n_links), int(0.03 * n_links), int(0.01 * n_links)
    n_cross = n_links - n_same - n_dup - n_out
    source = rng.integers(0, n_stories, size=n_cross)
    ref = picker.popular_stories(n_cross)
    same_source = rng.integers(0, n_stories, size=n_same)
    same_ref = picker.story_in(story_medium[same_source])
    out_source = rng.integers(0, n_stories, size=n_out)
    links = pd.DataFrame(
        {
            "stories_id": np.concatenate(
                [stories_id[source], stories_id[same_source], stories_id[out_source]]
            ),
            "ref_stories_id": np.concatenate(
                [
                    stories_id[ref],
                    stories_id[same_ref],
                    3 * n_stories + rng.integers(0, n_stories, size=n_out),
                ]
            ),
        }
    )
    links = pd.concat([links, links.sample(n=n_dup, random_state=seed)], ignore_index=True)
    links = links.sample(frac=1.0, random_state=seed).reset_index(drop=True)

    def counts(share_known: float, scale: float) -> pd.arrays.IntegerArray:
        values = np.rint(rng.lognormal(mean=scale, sigma=1.5, size=n_stories)).astype(np.int64)
        return pd.arrays.IntegerArray(values, rng.random(n_stories) >= share_known)

    story_stats = pd.DataFrame(
        {
            "stories_id": stories_id,
            "facebook_share_count": counts(0.8, 2.0),
            "bitly_clicks_3d": counts(0.5, 1.0),
            "bitly_clicks_30d": counts(0.5, 1.5),
        }
    )
    grouped = rng.choice(n_stories, size=int(0.12 * n_stories), replace=False)
    near_dup_groups = pd.DataFrame(
        {"stories_id": stories_id[grouped], "group_id": np.arange(len(grouped)) // 3}
    )
    stories["text"] = synthetic_texts(rng, n_stories)
    stories["language"] = "en"
    tagged = np.sort(rng.choice(media_ids, size=int(0.8 * n_media), replace=False))
    media_tags = pd.DataFrame(
        {
            "media_id": tagged,
            "tag_set": TAG_SET,
            "tag": [PARTISANSHIP[i % len(PARTISANSHIP)] for i in range(len(tagged))],
        }
    )
    return {
        "stories": stories,
        "media": media,
        "links": links,
        "story_stats": story_stats,
        "near_dup_groups": near_dup_groups,
        "media_tags": media_tags,
    }
