"""URL sharing in snapshots: post, author and channel counts per story, medium and timespan; ``mode:
url_sharing``; ``bot_policy``.

The hand-made topic of test_snapshot_assets, plus one generic-post source whose posts share its stories' URLs:

* alice (3 posts): p1 on 2026-01-06 (channel alice) shares stories 11, 21 and 50 (merged into 21: counted once
  for 21); p2 on 2026-01-20 (channel chan-x) shares 11; p3 on 2026-02-03 (channel alice) shares 31;
* botty (100 posts, 2026-01-13, channel botty) share story 22: 100 of the query's 103 posts, at least
  max(100, 1 %), so a bot by Media Cloud's rule;
* story 31's URL is a seed the spider fetched (its story is the fetched URL's); a post URL whose seed is not
  fetched yet counts nowhere.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from sqlalchemy import insert

from tests.snapshot_exports import check_snapshot_folder
from tests.test_snapshot_assets import TOPIC, TOPICS_YAML, A, B, C, build_topic
from topicmap.snapshots.key import SnapshotOptions
from topicmap.snapshots.store import build_snapshot
from topicmap.store import schema as s
from topicmap.store.post_rules import bot_threshold
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import load_topics
from topicmap.topics.topic_errors import TopicConfigError

POSTS = [
    ("p1", "alice", "alice", "2026-01-06", [11, 21, 50]),
    ("p2", "alice", "chan-x", "2026-01-20", [11]),
    ("p3", "alice", "alice", "2026-02-03", [31, 0]),  # 0: a URL the spider has not fetched yet
    *((f"b{i}", "botty", "botty", "2026-01-13", [22]) for i in range(100)),
]

#: no link map picture: no test here looks at one (each costs a drawing and a PNG encoding)
NO_PICTURES = SnapshotOptions(picture_periods=())


def _url(story: int) -> str:
    return f"https://shared.test/story/{story}"


def _stored_topic_with_posts(store: TopicStore, tmp_path: Path, settings: str = "") -> None:
    topics_file = tmp_path / "topics.yaml"
    topics_file.write_text(TOPICS_YAML + settings, encoding="utf-8")
    topics_id = build_topic(store, topics_file)
    with store.engine.begin() as conn:
        query_id = conn.execute(
            insert(s.topic_seed_queries).values(
                topics_id=topics_id, source="csv", platform="generic_post", query="posts.csv"
            )
        ).inserted_primary_key[0]
        for post_id, author, channel, day, stories in POSTS:
            topic_posts_id = conn.execute(
                insert(s.topic_posts).values(
                    topics_id=topics_id,
                    topic_seed_queries_id=query_id,
                    post_id=post_id,
                    content="climate",
                    publish_date=datetime.fromisoformat(day).replace(hour=9, tzinfo=UTC),
                    author=author,
                    channel=channel,
                    data="{}",
                )
            ).inserted_primary_key[0]
            conn.execute(
                insert(s.topic_post_urls),
                [{"topic_posts_id": topic_posts_id, "url": _url(story)} for story in stories],
            )
        conn.execute(
            insert(s.topic_seed_urls),
            [
                {
                    "topics_id": topics_id,
                    "url": _url(story),
                    "source": "generic_post:posts.csv",
                    # 31's seed is a page the spider fetched: its story is the fetched URL's
                    "stories_id": story if story not in (0, 31) else None,
                    "processed": bool(story),
                    "topic_seed_queries_id": query_id,
                }
                for story in (11, 21, 50, 31, 22, 0)
            ],
        )
        conn.execute(
            insert(s.topic_fetch_urls),
            [
                {
                    "topics_id": topics_id,
                    "url": _url(31),
                    "iteration": 0,
                    "state": "story added",
                    "stories_id": 31,
                },
                {
                    "topics_id": topics_id,
                    "url": _url(0),
                    "iteration": 0,
                    "state": "pending",
                    "stories_id": None,
                },
            ],
        )


def _counts(frame: pd.DataFrame, id_column: str) -> dict[int, tuple[int, int, int] | None]:
    out: dict[int, tuple[int, int, int] | None] = {}
    for row in frame.itertuples(index=False):
        values = (row.post_count, row.author_count, row.channel_count)
        out[int(getattr(row, id_column))] = None if pd.isna(values[0]) else tuple(int(v) for v in values)
    return out


def _only_known(counts: dict[int, tuple[int, int, int] | None]) -> dict[int, tuple[int, int, int]]:
    return {key: value for key, value in counts.items() if value is not None}


def test_bot_threshold_is_media_clouds_rule() -> None:
    assert bot_threshold(103) == 100 and bot_threshold(10_000) == 100 and bot_threshold(10_001) == 101
    assert bot_threshold(50_000) == 500


def test_web_topic_counts_posts_authors_and_channels_per_timespan(store: TopicStore, tmp_path: Path) -> None:
    _stored_topic_with_posts(store, tmp_path)
    built = build_snapshot(store, TOPIC, NO_PICTURES, home=tmp_path)
    assert not any(built.problems.values())
    check_snapshot_folder(built.folder)  # the new columns are described and the package validates
    overall = built.result["overall"]
    # every post counts in overall: 11 by p1 and p2 (one author, two channels); 21 by p1 (50 merged into it)
    assert _only_known(_counts(overall.story_link_counts, "stories_id")) == {
        11: (2, 1, 2),
        21: (1, 1, 1),
        22: (100, 1, 1),
        31: (1, 1, 1),
    }
    assert _counts(overall.story_link_counts, "stories_id")[12] is None  # no post shares it: empty
    # a medium's counts are its stories' sums; A's mirror and archive stories share nothing
    assert _counts(overall.medium_link_counts, "media_id") == {A: (2, 1, 2), B: (101, 2, 2), C: (1, 1, 1)}
    assert overall.counts.post_count == 103
    # January: p3 (February) is out; week of 19 January: p2 only, and story 11 is not in that week
    january = built.result["monthly_2026-01-01"]
    jan = _only_known(_counts(january.story_link_counts, "stories_id"))
    assert jan[11] == (2, 1, 2) and jan[21] == (1, 1, 1) and 31 not in jan
    assert january.counts.post_count == 2 + (100 if 22 in jan else 0)
    week = built.result["weekly_2026-01-19"]
    assert 11 not in set(week.story_link_counts["stories_id"]) and week.counts.post_count == 0
    # the files carry them, the timespans table too
    files = pq.read_table(built.folder / "overall" / "story_link_counts.parquet").to_pandas()
    assert _only_known(_counts(files, "stories_id"))[11] == (2, 1, 2)
    media = pd.read_csv(built.folder / "overall" / "media.csv")
    assert dict(zip(media["media_id"], media["post_count"], strict=True))[B] == 101
    stories = pq.read_table(built.folder / "overall" / "stories.parquet").to_pandas()
    assert _only_known(_counts(stories, "stories_id"))[22] == (100, 1, 1)
    timespans = pq.read_table(built.folder / "timespans.parquet").to_pandas()
    whole = timespans[timespans["focus"].isna()].set_index("key")
    assert whole.loc["overall", "post_count"] == 103
    provenance = json.loads((built.folder / "provenance.json").read_text())
    assert provenance["posts"]["bot_policy"] == "all" and provenance["posts"]["posts_dropped"] == 0
    assert provenance["posts"]["bots"] == [{"topic_seed_queries_id": 1, "author": "botty", "posts": 100}]


def test_url_sharing_timespans_hold_the_stories_of_their_posts_without_bots(
    store: TopicStore, tmp_path: Path
) -> None:
    _stored_topic_with_posts(store, tmp_path, "    mode: url_sharing\n    bot_policy: no_bots\n")
    built = build_snapshot(store, TOPIC, NO_PICTURES, home=tmp_path)
    assert not any(built.problems.values())
    check_snapshot_folder(built.folder)

    def stories(key: str) -> list[int]:
        return sorted(built.result[key].story_link_counts["stories_id"].tolist())

    # the shared stories plus the stories they link to (11 -> 21, 21 -> 11, 31 -> 41, 31 -> 21)
    assert stories("overall") == [11, 21, 31, 41]
    assert stories("weekly_2026-01-05") == [11, 21]  # p1
    assert (
        stories("weekly_2026-01-12") == []
    )  # only the bot posted that week (11, 21, 31 were published then)
    assert stories("weekly_2026-01-19") == [11, 21]  # p2 shares 11, which links to 21
    assert stories("monthly_2026-02-01") == [21, 31, 41]  # p3 shares 31
    week = built.result["weekly_2026-01-19"]
    assert _only_known(_counts(week.story_link_counts, "stories_id")) == {11: (1, 1, 1)}
    assert week.counts.post_count == 1
    overall = built.result["overall"]
    assert _only_known(_counts(overall.story_link_counts, "stories_id")) == {
        11: (2, 1, 2),
        21: (1, 1, 1),
        31: (1, 1, 1),
    }
    assert overall.counts.post_count == 3
    report = json.loads((built.folder / "provenance.json").read_text())["posts"]
    assert report["mode"] == "url_sharing" and report["bot_policy"] == "no_bots"
    assert report["posts_dropped"] == 100
    assert [bot["author"] for bot in report["bots"]] == ["botty"]


def test_only_bots_keeps_the_bots_posts(store: TopicStore, tmp_path: Path) -> None:
    _stored_topic_with_posts(store, tmp_path, "    bot_policy: only_bots\n")
    built = build_snapshot(store, TOPIC, NO_PICTURES, home=tmp_path)
    overall = built.result["overall"]
    assert _only_known(_counts(overall.story_link_counts, "stories_id")) == {22: (100, 1, 1)}
    assert json.loads((built.folder / "provenance.json").read_text())["posts"]["posts_dropped"] == 3


@pytest.mark.parametrize(
    ("setting", "field"),
    [("mode: sharing", "mode"), ("bot_policy: 'no bots'", "bot_policy"), ("mode: [web]", "mode")],
)
def test_mode_and_bot_policy_mistakes_name_topic_and_field(tmp_path: Path, setting: str, field: str) -> None:
    (tmp_path / "topics.yaml").write_text(TOPICS_YAML + f"    {setting}\n", encoding="utf-8")
    loaded = load_topics(tmp_path / "topics.yaml")
    assert not loaded.topics
    [error] = loaded.errors
    assert isinstance(error, TopicConfigError) and (error.topic, error.field) == (TOPIC, field)
    assert "expected one of" in str(error)


def test_the_demo_declares_its_topic_with_a_post_source_in_its_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestration.demo import _write_demo_topics
    from topicmap.demo.web import generate_demo_web

    monkeypatch.setenv("TOPICMAP_TOPICS_FILE", "")  # unset; restored after the test
    web = generate_demo_web()
    _write_demo_topics(web, tmp_path)
    topics_file = Path(os.environ["TOPICMAP_TOPICS_FILE"])
    assert topics_file == tmp_path / "topics.yaml"
    loaded = load_topics(topics_file)
    assert loaded.errors == []
    [source] = loaded.by_name()["climate-demo"].posts
    assert source.platform == "generic_post" and source.path.parent == tmp_path / "demo_posts"
    posts = pd.read_csv(source.path)
    assert len(posts) == 48 and posts["author"].nunique() == 5
    assert posts["content"].str.contains("climate").all()
    # a topics file named by the user is left as it is
    monkeypatch.setenv("TOPICMAP_TOPICS_FILE", str(tmp_path / "mine.yaml"))
    _write_demo_topics(web, tmp_path / "other")
    assert not (tmp_path / "other").exists()
