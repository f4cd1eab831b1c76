"""Dedup applied to the store: media chains and cycles, story merges, near-duplicate groups; no link lost."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy import select, update

from topicmap.dedup.catalog import BadRequest
from topicmap.dedup.rules import MergeCycleError
from topicmap.dedup.store import (
    cross_media_link_count,
    declare_duplicate_media,
    find_near_duplicates,
    merge_duplicate_media,
    merge_duplicate_stories,
)
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig

ARTICLE = (
    "The regional council approved a new plan on Tuesday to cut carbon emissions from public buildings by "
    "forty percent before the end of the decade. The plan replaces oil boilers in schools with heat pumps, "
    "adds solar panels to the roofs of libraries, and retrofits the insulation of older town halls. Council "
    "members argued for hours about the cost, which officials put at two hundred million over eight years. "
    "Supporters said the savings on energy bills would repay most of it, while opponents warned that the "
    "region could not borrow more without raising taxes on households already struggling with prices. "
)


def day(d: int) -> datetime:
    return datetime(2026, 2, d, 9, tzinfo=UTC)


def build_topic(store: TopicStore) -> tuple[int, dict[str, int]]:
    """Media: old.test → mid.test → new.test (a chain), other.test. Stories and links between them."""
    topics_id = store.upsert_topic(
        TopicConfig(name="t", query="climate", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31))
    )
    stories = [
        NewStory(
            "https://old.test/2026/02/03/plan",
            "Council approves carbon plan for public buildings now",
            ARTICLE,
            day(3),
        ),
        NewStory(
            "https://old.test/2026/02/04/only-old",
            "A story only the old site had about the plan",
            ARTICLE[:200],
            day(4),
        ),
        NewStory(
            "https://new.test/2026/02/03/plan",
            "Council approves carbon plan for public buildings now",
            ARTICLE + " More.",
            day(3),
        ),
        NewStory(
            "https://new.test/2026/02/05/vote",
            "Council vote on the carbon plan set for next month",
            "Vote text.",
            day(5),
        ),
        NewStory(
            "https://new.test/2026/02/05/vote?utm_source=x",
            "Council vote on the carbon plan set for next month",
            "Vote.",
            day(5),
        ),
        NewStory(
            "https://other.test/2026/02/06/copy",
            "Syndicated: council approves plan",
            ARTICLE.replace("forty", "40"),
            day(6),
        ),
        NewStory(
            "https://other.test/2026/02/07/reply",
            "Opinion: the plan is too timid",
            "Critics say more is needed.",
            day(7),
        ),
        NewStory(
            "https://mid.test/2026/02/08/m",
            "Mid story on something else entirely here",
            "Other text.",
            day(8),
        ),
    ]
    ids = store.add_stories(stories, source="test").stories_ids
    names = ["old_plan", "old_only", "new_plan", "vote", "vote_utm", "copy", "reply", "mid"]
    by_name = dict(zip(names, ids, strict=True))
    now = now_utc()
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [
                {"topics_id": topics_id, "stories_id": i, "iteration": n, "added_at": now}
                for n, i in enumerate(ids)
            ],
            ["topics_id", "stories_id"],
        )
        links = [
            ("reply", "old_plan"),
            ("reply", "vote_utm"),
            ("copy", "old_only"),
            ("old_plan", "reply"),
            ("vote_utm", "reply"),
            ("vote", "reply"),
            ("old_plan", "new_plan"),
            ("mid", "copy"),
        ]
        store.insert_ignore(
            conn,
            s.topic_links,
            [
                {
                    "topics_id": topics_id,
                    "stories_id": by_name[a],
                    "url": f"https://x.test/{a}-{b}",
                    "ref_stories_id": by_name[b],
                }
                for a, b in links
            ],
            ["topics_id", "stories_id", "url"],
        )
    store.add_seed_urls(
        topics_id,
        [{"url": "https://old.test/2026/02/03/plan", "source": "t", "stories_id": by_name["old_plan"]}],
    )
    return topics_id, by_name


def topic_story_ids(store: TopicStore, topics_id: int) -> dict[int, int]:
    ts = s.topic_stories
    with store.engine.connect() as conn:
        return dict(
            conn.execute(select(ts.c.stories_id, ts.c.iteration).where(ts.c.topics_id == topics_id)).all()
        )


def test_media_chain_merges_or_moves_every_story_and_conserves_cross_media_links(store: TopicStore) -> None:
    topics_id, ids = build_topic(store)
    changed, problems = declare_duplicate_media(
        store,
        [
            ("http://old.test/", "http://mid.test/"),
            ("http://mid.test/", "http://new.test/"),
            ("http://nowhere.test/", "http://new.test/"),
        ],
    )
    assert changed == 2 and problems == [
        "unknown medium 'http://nowhere.test/' (no story of it in the store)"
    ]
    with store.engine.connect() as conn:
        before = cross_media_link_count(conn, topics_id)
    report = merge_duplicate_media(store, topics_id)
    # old_plan matches new_plan in the final medium by title and day: merged; old_only and mid are moved.
    assert report.merges == [
        {
            "source_stories_id": ids["old_plan"],
            "target_stories_id": ids["new_plan"],
            "reason": "duplicate medium",
        }
    ]
    assert {m["stories_id"] for m in report.moved} == {ids["old_only"], ids["mid"]}
    live = topic_story_ids(store, topics_id)
    assert (
        ids["old_plan"] not in live and live[ids["new_plan"]] == 0
    )  # the merged story keeps the smallest iteration
    # Counted between final media, the cross-media links are conserved by the merge: re-pointed, not lost
    # (old_plan -> new_plan was already within one final medium and never counted).
    assert report.cross_media_links_before == before == 7
    assert report.cross_media_links_after == before
    tl = s.topic_links
    with store.engine.connect() as conn:
        refs = conn.execute(
            select(tl.c.stories_id, tl.c.ref_stories_id).where(tl.c.topics_id == topics_id)
        ).all()
        seed = conn.execute(select(s.topic_seed_urls.c.stories_id)).scalar_one()
        mapped = conn.execute(
            select(
                s.topic_merged_stories_map.c.source_stories_id, s.topic_merged_stories_map.c.target_stories_id
            )
        ).all()
        moved_media = conn.execute(
            select(s.stories.c.media_id).where(s.stories.c.stories_id == ids["old_only"])
        ).scalar_one()
        new_media = conn.execute(
            select(s.stories.c.media_id).where(s.stories.c.stories_id == ids["new_plan"])
        ).scalar_one()
    assert (ids["reply"], ids["new_plan"]) in refs and (ids["new_plan"], ids["reply"]) in refs
    assert all(ids["old_plan"] not in pair for pair in refs)
    assert seed == ids["new_plan"] and mapped == [(ids["old_plan"], ids["new_plan"])]
    assert moved_media == new_media
    # A second run changes nothing.
    again = merge_duplicate_media(store, topics_id)
    assert again.merges == [] and again.moved == []


def test_a_duplicate_media_cycle_is_refused_and_named(store: TopicStore) -> None:
    topics_id, _ = build_topic(store)
    declare_duplicate_media(store, [("http://old.test/", "http://new.test/")])
    changed, problems = declare_duplicate_media(store, [("http://new.test/", "http://old.test/")])
    assert changed == 0 and "cycle" in problems[0]
    with store.engine.begin() as conn:  # a cycle written behind our back is still caught
        ids = dict(conn.execute(select(s.media.c.name, s.media.c.media_id)).all())
        conn.execute(
            update(s.media).where(s.media.c.media_id == ids["new.test"]).values(dup_media_id=ids["old.test"])
        )
    with pytest.raises(MergeCycleError, match=str(ids["old.test"])):
        merge_duplicate_media(store, topics_id)


def test_same_title_same_day_and_same_lossy_url_merge_within_a_medium(store: TopicStore) -> None:
    topics_id, ids = build_topic(store)
    with store.engine.connect() as conn:
        before = cross_media_link_count(conn, topics_id)
    report = merge_duplicate_stories(store, topics_id)
    merged = {(m["source_stories_id"], m["target_stories_id"]) for m in report.merges}
    assert merged == {(ids["vote_utm"], ids["vote"])}  # the longer text survives
    # vote_utm→reply and vote→reply were one link counted twice; now it is vote→reply, once. reply→vote_utm is
    # re-pointed to reply→vote. Mapped through the merge, no link between different stories is lost.
    assert report.cross_media_links_after == before - 1
    tl = s.topic_links
    with store.engine.connect() as conn:
        pairs = set(
            conn.execute(
                select(tl.c.stories_id, tl.c.ref_stories_id).where(tl.c.topics_id == topics_id)
            ).all()
        )
    assert {(ids["vote"], ids["reply"]), (ids["reply"], ids["vote"])} <= pairs
    live = topic_story_ids(store, topics_id)
    assert ids["vote_utm"] not in live and live[ids["vote"]] == 3
    assert merge_duplicate_stories(store, topics_id).merges == []


def test_syndicated_copies_across_media_form_a_near_duplicate_group(store: TopicStore) -> None:
    topics_id, ids = build_topic(store)
    report = find_near_duplicates(store, topics_id)
    groups = {frozenset(g["media"]): g for g in report.groups}
    plan_group = next(g for g in report.groups if g["size"] >= 3)
    assert set(plan_group["media"]) == {"old.test", "new.test", "other.test"}
    assert plan_group["representative"] == ids["old_plan"]  # the earliest copy
    assert groups
    # fingerprints are stored: a second run computes none
    assert find_near_duplicates(store, topics_id).fingerprinted == 0
    with store.engine.connect() as conn:
        rows = conn.execute(select(s.topic_near_dup_groups.c.stories_id)).scalars().all()
    assert {ids["old_plan"], ids["new_plan"], ids["copy"]} <= set(rows)


def test_near_dups_command_finds_the_copies_of_a_url_or_a_text(store: TopicStore, capsys) -> None:  # noqa: ANN001
    from topicmap.cli import near_dups

    topics_id, ids = build_topic(store)
    find_near_duplicates(store, topics_id)
    found = near_dups(store, url="https://other.test/2026/02/06/copy", text=None)
    assert {m["stories_id"] for m in found} >= {ids["old_plan"], ids["new_plan"]}
    assert all(m["distance"] <= 6 and m["jaccard"] >= 0.5 for m in found)
    by_text = near_dups(store, url=None, text=ARTICLE)
    assert by_text[0]["stories_id"] == ids["old_plan"] and by_text[0]["distance"] == 0
    unrelated = "An unrelated story about football: the club sold its stadium to the city and will play away all season."
    assert near_dups(store, url=None, text=unrelated) == []
    with pytest.raises(BadRequest, match="the text has 5 word"):  # too short to tell anything
        near_dups(store, url=None, text="An unrelated sentence about football.")
    with pytest.raises(SystemExit, match="no story in the store is known by the url"):
        near_dups(store, url="https://unknown.test/x", text=None)


def test_topic_stories_export_as_story_indexer_warc_and_read_back(store: TopicStore, tmp_path) -> None:  # noqa: ANN001
    from topicmap.archive.warc_export import export_topic_warc
    from topicmap.archive.warc_stories import read_story_archive

    topics_id, ids = build_topic(store)
    page = (
        b"<html><head><title>Council approves</title></head><body><p>The council approved.</p></body></html>"
    )
    store.add_stories(
        [
            NewStory(
                "https://paged.test/2026/02/09/p",
                "Council approves",
                "The council approved.",
                day(9),
                html=page,
            )
        ],
        source="test",
    )
    paged_id = store.add_stories(
        [NewStory("https://paged.test/2026/02/09/p", None, None, None)], source="t"
    ).stories_ids[0]
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [{"topics_id": topics_id, "stories_id": paged_id, "added_at": now_utc()}],
            ["topics_id", "stories_id"],
        )
    export = export_topic_warc(store, "t", tmp_path)
    assert export.stories_written == 1 and export.stories_without_page == len(ids)
    (path,) = export.files
    assert path.name.startswith("t-") and path.name.endswith(".warc.gz")
    (record,) = list(read_story_archive(path))
    assert record.url == "https://paged.test/2026/02/09/p" and record.html == page
    assert record.metadata["content_metadata"]["article_title"] == "Council approves"
