"""URL sharing in snapshots: which posts shared which topic story, counted per timespan (Media Cloud's
``snapshot_topic_post_stories`` and the post columns of ``story_link_counts`` / ``medium_link_counts``).

``read_post_shares`` reads, in bounded batches of posts, every (post, story) pair of a topic: a post shares a
story when one of its URLs (``topic_post_urls``) is a seed URL of the topic naming that story
(``topic_seed_urls``: an archive story's URL) or a URL the spider fetched into it (``topic_fetch_urls``), merged
stories mapped to their survivors. The topic's ``bot_policy`` then applies Media
Cloud's rule: an author with at least max(100, 1 % of the query's posts) posts in one post source (seed query) is
a bot; ``all`` keeps every post, ``no_bots`` drops the bots' posts, ``only_bots`` keeps only theirs.
``PostShares.bot_report`` says what was dropped.

Per timespan, a post counts when it was published in the timespan (the overall timespan: every post):

* a story's ``post_count`` / ``author_count`` / ``channel_count`` are the distinct posts, authors and channels
  of the timespan's posts sharing it (null when none did, as Media Cloud left them);
* a medium's are the sums over its stories (null when none of its stories has posts);
* the timespan's ``post_count`` is the number of distinct such posts sharing one of its stories.

In ``mode: url_sharing`` a timespan's stories are those the posts published in it share
(``PostShares.timespan_stories``), in place of the stories published in it; the link rules are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from sqlalchemy import Connection, and_, func, select

from topicmap.snapshots.ids import positions
from topicmap.snapshots.results import SnapshotResult, TimespanSnapshot
from topicmap.snapshots.timespans import Timespan
from topicmap.store import schema as s
from topicmap.store.post_rules import BOT_MIN_POSTS, BOT_POLICIES, BOT_SHARE, TOPIC_MODES, bot_threshold
from topicmap.store.topic_store import utc

#: the per-story (and summed, per-medium) post columns, in file order
POST_COLUMNS: tuple[str, ...] = ("post_count", "author_count", "channel_count")
#: posts read per batch
POST_BATCH = 5000

_COLUMNS = ("topic_posts_id", "stories_id", "author", "channel", "publish_date")


@dataclass
class PostShares:
    """The (post, story) pairs a snapshot counts, after the bot policy, sorted by post then story."""

    #: topic_posts_id, stories_id, author, channel, publish_date (UTC)
    shares: pd.DataFrame = field(default_factory=lambda: _empty_shares())
    bot_policy: str = "all"
    #: what the bot policy found and dropped
    bot_report: dict[str, Any] = field(default_factory=dict)

    def _in(self, ts: Timespan) -> pd.DataFrame:
        if ts.period == "overall":
            return self.shares
        lo, hi = ts.window_ns()
        ns = self.shares["publish_date"].to_numpy(dtype="datetime64[ns]").view(np.int64)
        return self.shares[(ns >= lo) & (ns < hi)]

    def timespan_stories(self, timespans: Sequence[Timespan]) -> dict[str, np.ndarray]:
        """Per timespan key, the stories (ids, ascending) shared by posts published in it (``url_sharing``)."""
        return {ts.key: np.unique(self._in(ts)["stories_id"].to_numpy(dtype=np.int64)) for ts in timespans}

    def story_counts(self, ts: Timespan) -> pd.DataFrame:
        """stories_id (ascending) and POST_COLUMNS of the posts published in ``ts``."""
        found = self._in(ts)
        grouped = found.groupby("stories_id", sort=True)
        return pd.DataFrame(
            {
                "stories_id": np.asarray(grouped.size().index, dtype=np.int64),
                "post_count": grouped["topic_posts_id"].nunique().to_numpy(dtype=np.int64),
                "author_count": grouped["author"].nunique().to_numpy(dtype=np.int64),
                "channel_count": grouped["channel"].nunique().to_numpy(dtype=np.int64),
            }
        )


def _empty_shares() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "topic_posts_id": np.zeros(0, dtype=np.int64),
            "stories_id": np.zeros(0, dtype=np.int64),
            "author": pd.Series([], dtype=object),
            "channel": pd.Series([], dtype=object),
            "publish_date": pd.Series([], dtype="datetime64[ns, UTC]"),
        }
    )


def read_post_shares(
    conn: Connection,
    topics_id: int,
    story_ids: np.ndarray,
    merges: tuple[np.ndarray, np.ndarray],
    bot_policy: str = "all",
    batch: int = POST_BATCH,
) -> PostShares:
    """The topic's (post, story) pairs with ``bot_policy`` applied. ``story_ids``: the snapshot's stories
    (ascending); ``merges``: merged story -> its final survivor (``resolve_chains``). Posts are read ``batch`` at
    a time (by id), so memory holds the pairs kept, not the posts' texts."""
    if bot_policy not in BOT_POLICIES:
        raise ValueError(f"bot_policy must be one of {list(BOT_POLICIES)}, got {bot_policy!r}")
    tp, tpu, tsu, tfu = s.topic_posts, s.topic_post_urls, s.topic_seed_urls, s.topic_fetch_urls
    # Authors' posts per query, and the queries' totals: the bot rule counts every post of the query.
    per_author = conn.execute(
        select(tp.c.topic_seed_queries_id, tp.c.author, func.count())
        .where(tp.c.topics_id == topics_id)
        .group_by(tp.c.topic_seed_queries_id, tp.c.author)
    ).all()
    totals: dict[int, int] = {}
    for query_id, _author, n in per_author:
        totals[query_id] = totals.get(query_id, 0) + int(n)
    bots = sorted((int(q), str(a), int(n)) for q, a, n in per_author if int(n) >= bot_threshold(totals[q]))
    bot_keys = {(q, a) for q, a, _n in bots}

    frames: list[pd.DataFrame] = []
    after, dropped_posts = 0, 0
    while True:
        ids = conn.scalars(
            select(tp.c.topic_posts_id)
            .where(tp.c.topics_id == topics_id, tp.c.topic_posts_id > after)
            .order_by(tp.c.topic_posts_id)
            .limit(batch)
        ).all()
        if not ids:
            break
        first, after = int(ids[0]), int(ids[-1])
        posts = conn.execute(
            select(tp.c.topic_posts_id, tp.c.topic_seed_queries_id, tp.c.author).where(
                tp.c.topics_id == topics_id, tp.c.topic_posts_id.between(first, after)
            )
        ).all()
        is_bot = {int(p): (int(q), str(a)) in bot_keys for p, q, a in posts}
        n_bots = sum(is_bot.values())
        dropped_posts += (
            n_bots if bot_policy == "no_bots" else len(posts) - n_bots if bot_policy == "only_bots" else 0
        )
        # an archive seed names its story; a URL the spider fetched, the story it became (or matched)
        story = func.coalesce(tsu.c.stories_id, tfu.c.stories_id)
        rows = conn.execute(
            select(tp.c.topic_posts_id, story, tp.c.author, tp.c.channel, tp.c.publish_date)
            .select_from(
                tp.join(tpu, tpu.c.topic_posts_id == tp.c.topic_posts_id)
                .outerjoin(tsu, and_(tsu.c.topics_id == tp.c.topics_id, tsu.c.url == tpu.c.url))
                .outerjoin(tfu, and_(tfu.c.topics_id == tp.c.topics_id, tfu.c.url == tpu.c.url))
            )
            .where(
                tp.c.topics_id == topics_id,
                tp.c.topic_posts_id.between(first, after),
                story.is_not(None),
            )
        ).all()
        if bot_policy != "all":
            keep_bots = bot_policy == "only_bots"
            rows = [row for row in rows if is_bot[int(row[0])] == keep_bots]
        if rows:
            frames.append(_frame(rows))
    shares = pd.concat(frames, ignore_index=True) if frames else _empty_shares()
    shares = _to_topic_stories(shares, story_ids, merges)
    report = {
        "bot_policy": bot_policy,
        "bot_rule": f"an author with at least max({BOT_MIN_POSTS}, {BOT_SHARE:.0%} of the query's posts) posts",
        "bots": [{"topic_seed_queries_id": q, "author": a, "posts": n} for q, a, n in bots],
        "posts_dropped": int(dropped_posts),
    }
    return PostShares(shares=shares, bot_policy=bot_policy, bot_report=report)


def _frame(rows: list[Any]) -> pd.DataFrame:
    post_ids, stories, authors, channels, dates = zip(*rows, strict=True)
    return pd.DataFrame(
        {
            "topic_posts_id": np.asarray(post_ids, dtype=np.int64),
            "stories_id": np.asarray(stories, dtype=np.int64),
            "author": pd.Series(authors, dtype=object),
            "channel": pd.Series(channels, dtype=object),
            "publish_date": pd.Series(pd.to_datetime([utc(d) for d in dates], utc=True)).astype(
                "datetime64[ns, UTC]"
            ),
        }
    )


def _to_topic_stories(
    shares: pd.DataFrame, story_ids: np.ndarray, merges: tuple[np.ndarray, np.ndarray]
) -> pd.DataFrame:
    """Merged stories mapped to their survivors; pairs whose story is not in the snapshot dropped; one row per
    (post, story), sorted."""
    ids = shares["stories_id"].to_numpy(dtype=np.int64)
    sources, finals = merges
    if len(sources):
        pos = positions(sources, ids)
        ids = np.where(pos >= 0, finals[np.where(pos >= 0, pos, 0)], ids)
    shares = shares.assign(stories_id=ids)
    shares = shares[positions(np.asarray(story_ids, dtype=np.int64), ids) >= 0]
    shares = shares.drop_duplicates(["topic_posts_id", "stories_id"])
    return shares.sort_values(["topic_posts_id", "stories_id"], kind="mergesort").reset_index(drop=True)[
        list(_COLUMNS)
    ]


def _add_no_post_counts(snap: TimespanSnapshot) -> None:
    """``add_post_counts`` of a snapshot without posts: null counts, the timespan's post_count 0."""

    def nulls(n: int) -> pd.arrays.IntegerArray:
        return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))

    for name in ("story_link_counts", "medium_link_counts"):
        frame = getattr(snap, name)
        setattr(snap, name, frame.assign(**{c: nulls(len(frame)) for c in POST_COLUMNS}))
    snap.counts = replace(snap.counts, post_count=0)


def add_post_counts(snap: TimespanSnapshot, posts: PostShares | None) -> None:
    """Give ``snap``'s story_link_counts and medium_link_counts their POST_COLUMNS and its counts the timespan's
    post_count (once: a timespan that has them already is left alone)."""
    if "post_count" in snap.story_link_counts.columns:
        return
    if posts is None or posts.shares.empty:  # no post shares a story (no posts): every count is null
        _add_no_post_counts(snap)
        return
    counts = posts.story_counts(snap.timespan)
    stories = snap.story_link_counts
    story_ids = stories["stories_id"].to_numpy(dtype=np.int64)
    at = positions(counts["stories_id"].to_numpy(dtype=np.int64), story_ids)
    known = at >= 0
    safe = np.where(known, at, 0)
    values = {
        c: np.where(known, counts[c].to_numpy(dtype=np.int64)[safe] if len(counts) else 0, 0)
        for c in POST_COLUMNS
    }
    snap.story_link_counts = stories.assign(
        **{c: pd.arrays.IntegerArray(values[c].astype(np.int64), ~known) for c in POST_COLUMNS}
    )
    media = snap.medium_link_counts
    media_ids = media["media_id"].to_numpy(dtype=np.int64)
    code = np.searchsorted(media_ids, stories["media_id"].to_numpy(dtype=np.int64))
    n = len(media_ids)
    has = np.bincount(code, weights=known.astype(np.int64), minlength=n) > 0 if n else np.zeros(0, dtype=bool)
    snap.medium_link_counts = media.assign(
        **{
            c: pd.arrays.IntegerArray(
                np.rint(np.bincount(code, weights=values[c], minlength=n)).astype(np.int64)
                if n
                else np.zeros(0, dtype=np.int64),
                ~has,
            )
            for c in POST_COLUMNS
        }
    )
    in_timespan = posts._in(snap.timespan)
    shared = in_timespan["topic_posts_id"].to_numpy(dtype=np.int64)[
        positions(story_ids, in_timespan["stories_id"].to_numpy(dtype=np.int64)) >= 0
    ]
    snap.counts = replace(snap.counts, post_count=int(len(np.unique(shared))))


def add_all_post_counts(result: SnapshotResult, posts: PostShares | None) -> None:
    """``add_post_counts`` on every timespan of the result (whole topic and foci)."""
    for _focus, snap in result.all_timespans():
        add_post_counts(snap, posts)


def selection_for(
    mode: str, posts: PostShares, timespans: Sequence[Timespan]
) -> Mapping[str, np.ndarray] | None:
    """The stories of each timespan ``compute_snapshot`` takes in place of the published ones: ``url_sharing``'s
    (the stories of the posts published in it); None for ``web``."""
    if mode not in TOPIC_MODES:
        raise ValueError(f"mode must be one of {list(TOPIC_MODES)}, got {mode!r}")
    return posts.timespan_stories(timespans) if mode == "url_sharing" else None


def sharing_summary(folder: Path) -> str:
    """One line on a written snapshot's overall URL sharing: posts, stories and media shared, the most shared
    story (from its ``timespans.parquet`` and ``overall/stories.parquet``)."""
    timespans = pq.read_table(
        folder / "timespans.parquet", columns=["focus", "key", "post_count"]
    ).to_pylist()
    posts = next(
        (row["post_count"] for row in timespans if row["focus"] is None and row["key"] == "overall"), 0
    )
    stories_file = folder / "overall" / "stories.parquet"
    if not posts or not stories_file.exists():
        return "URL sharing (overall): no post shares a story of the topic"
    columns = ["stories_id", "title", "media_id", *POST_COLUMNS]
    shared = [row for row in pq.read_table(stories_file, columns=columns).to_pylist() if row["post_count"]]
    top = max(shared, key=lambda row: (row["post_count"], row["author_count"], -row["stories_id"]))
    return (
        f"URL sharing (overall): {posts} posts share {len(shared)} stories of "
        f"{len({row['media_id'] for row in shared})} media; most shared: {top['title']!r} "
        f"({top['post_count']} posts, {top['author_count']} authors, {top['channel_count']} channels)"
    )
