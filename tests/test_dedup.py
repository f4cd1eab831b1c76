"""topicmap.dedup.rules: dup-media chains, title keys, story dedup groups, media merge plans, link remapping."""

from __future__ import annotations

import pandas as pd
import pytest

from topicmap.dedup.rules import (
    REASON_TITLE,
    REASON_URL,
    DuplicateMediaCycleError,
    MergeCycleError,
    find_duplicate_stories,
    merged_iteration,
    normalized_title,
    plan_media_merges,
    remap_links,
    resolve_dup_media,
    resolve_merge_map,
)

LONG_TITLE = "Senate passes the sweeping infrastructure bill after a long night"


def story(stories_id: int, **fields: object) -> dict[str, object]:
    row: dict[str, object] = {
        "stories_id": stories_id,
        "media_id": 1,
        "url": f"https://example.com/2024/01/02/story-{stories_id}.html",
        "title": f"Unrelated story number {stories_id} about something else",
        "publish_date": "2024-01-02T12:00:00Z",
        "sentence_count": 10,
    }
    row.update(fields)
    return row


def merges(rows: list[dict[str, object]]) -> dict[int, tuple[int, str]]:
    result = find_duplicate_stories(pd.DataFrame(rows))
    return {int(r.stories_id): (int(r.keep_stories_id), r.reason) for r in result.itertuples()}


# ------------------------------------------------------------------------------------------ dup media


def test_dup_media_chains_resolve_to_the_final_medium() -> None:
    final = resolve_dup_media({1: 2, 2: 3, 3: None, 4: None, 5: 1, 6: 99})
    assert final == {1: 3, 2: 3, 3: 3, 4: 4, 5: 3, 6: 99, 99: 99}


@pytest.mark.parametrize(("mapping", "cycle"), [({1: 2, 2: 3, 3: 1, 4: 1}, [1, 2, 3]), ({7: 7}, [7])])
def test_dup_media_cycle_names_its_media(mapping: dict[int, int], cycle: list[int]) -> None:
    with pytest.raises(DuplicateMediaCycleError) as caught:
        resolve_dup_media(mapping)
    assert caught.value.media_ids == cycle
    assert " -> ".join(map(str, cycle)) in str(caught.value)


def test_merge_map_chains_and_cycles() -> None:
    assert resolve_merge_map({1: 2, 2: 3, 4: 3}) == {1: 3, 2: 3, 4: 3}
    with pytest.raises(MergeCycleError, match="1 -> 2 -> 1"):
        resolve_merge_map({1: 2, 2: 1})


# ----------------------------------------------------------------------------------------------- titles


@pytest.mark.parametrize(
    ("title", "medium", "key"),
    [
        # a leading section word (Media Cloud's title-part rules) and site-name suffix / prefix, by full name or
        # initials
        (
            "Opinion | Trump wins the big vote - The New York Times",
            "The New York Times",
            "trump wins the big vote",
        ),
        ("Trump wins the big vote - NYT", "The New York Times", "trump wins the big vote"),
        ("Washington Post: Senate passes sweeping bill", "Washington Post", "senate passes sweeping bill"),
        ("Senate passes sweeping bill – Washington Post", "Washington Post", "senate passes sweeping bill"),
        # Media Cloud's title key: the longest part when it has >= 32 characters
        (f"Politics: {LONG_TITLE} | Live", None, LONG_TITLE.lower()),
        # ... but a shorter longest part is not trusted alone: the parts stay together
        ("Politics: Senate passes bill - Evening", None, "politics senate passes bill evening"),
        # a key of < 3 words is too generic: the whole title
        ("Opinion | Trump wins", None, "opinion trump wins"),
        # medium-name guard: the medium's name is never the key
        (
            "Springfield Evening Chronicle Gazette - Home",
            "Springfield Evening Chronicle Gazette",
            "springfield evening chronicle gazette home",
        ),
        (
            "Springfield Evening Chronicle Gazette",
            "Springfield Evening Chronicle Gazette",
            "springfield evening chronicle gazette",
        ),
        # tags stripped, entities decoded (Media Cloud deleted "&eacute" and so the letter), casefolded
        ("<b>Caf&eacute; OWNERS</b> protest &amp; march", None, "café owners protest march"),
        # Unicode punctuation is removed; the letters p u n c t are not (Python [[:punct:]] bug)
        ("“Punctuation” — can’t stop… the “input”", None, "punctuation cant stop the input"),
        ("東京、大阪。「速報」 地震が発生", None, "東京大阪速報 地震が発生"),
        ("", None, ""),
    ],
)
def test_normalized_title(title: str, medium: str | None, key: str) -> None:
    assert normalized_title(title, medium) == key


def test_normalized_title_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        normalized_title(None)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------- story dedup


def test_same_title_same_day_same_medium_merges_into_the_story_with_most_text() -> None:
    rows = [
        story(1, title=f"{LONG_TITLE} - Example Times", medium_name="Example Times", sentence_count=10),
        story(
            2,
            title=f"Opinion | {LONG_TITLE}",
            medium_name="Example Times",
            sentence_count=30,
            publish_date="2024-01-02T23:00:00Z",
        ),
        story(3, title=LONG_TITLE, publish_date="2024-01-03T12:00:00Z"),  # next day
        story(4, title=LONG_TITLE, media_id=2),  # other medium
        story(5),
    ]
    assert merges(rows) == {1: (2, REASON_TITLE)}


@pytest.mark.parametrize(
    "other",
    [
        {"title": "(no title)"},
        {"title": ""},
        {"title": None},
        {"title": "Home - Example Times"},
        {"publish_date": None},
        {"url": "https://example.com/"},  # a home page (Media Cloud's title-part rules)
    ],
)
def test_title_matching_guards(other: dict[str, object]) -> None:
    title = str(other.get("title") or LONG_TITLE)
    rows = [story(1, title=title), story(2, **{"title": LONG_TITLE, **other})]
    assert merges(rows) == {}


def test_recurring_title_group_is_refused() -> None:
    daily = "Letters to the editor about our town today"
    # 26 stories over 13 days: a recurring title, even two on one day are not merged
    recurring = [story(i, title=daily, publish_date=f"2024-01-{1 + i // 2:02d}T08:00:00Z") for i in range(26)]
    assert merges(recurring) == {}
    # 25 stories are few enough: each same-day pair is one story
    fewer = recurring[:25]
    assert len(merges(fewer)) == 12
    # 26 stories within 6 days are also fine
    tight = [story(i, title=daily, publish_date=f"2024-01-{1 + i % 6:02d}T08:00:00Z") for i in range(26)]
    assert len(merges(tight)) == 26 - 6


def test_same_lossy_url_merges_and_large_url_groups_are_refused() -> None:
    rows = [
        story(1, url="https://www.example.com/2024/01/02/a.html?utm_source=feed", sentence_count=5),
        story(2, url="http://m.example.com/2024/01/02/a.html#top", sentence_count=9),
        story(3, url="https://example.com/2024/01/02/b.html"),
    ]
    assert merges(rows) == {1: (2, REASON_URL)}
    many = [
        story(i, url=f"https://{'www.' if i % 2 else 'm.'}example.com/2024/x.html?{'utm_a=1' * (i % 3)}")
        for i in range(6)
    ]
    assert merges(many) == {}  # 6 stories with one lossy URL: normalization collapsed different pages


def test_groups_are_transitive_and_keep_one_survivor() -> None:
    rows = [
        story(1, title=LONG_TITLE, sentence_count=10, publish_date="2024-01-02T09:00:00Z"),
        story(
            2,
            title=f"{LONG_TITLE}: updated",
            sentence_count=10,
            publish_date="2024-01-02T08:00:00Z",
            url="https://example.com/2024/01/02/c.html",
        ),
        story(
            3,
            title="A completely different headline for the same page",
            sentence_count=10,
            url="https://www.example.com/2024/01/02/c.html",
        ),
    ]
    # 1 ~ 2 by title (the ": updated" part is short, the long part is the key), 2 ~ 3 by URL: one group;
    # equal text, so the earliest published (2) survives.
    assert merges(rows) == {1: (2, REASON_TITLE), 3: (2, REASON_URL)}


def test_survivor_ties_go_to_the_lowest_id() -> None:
    rows = [story(7, title=LONG_TITLE), story(3, title=LONG_TITLE), story(5, title=LONG_TITLE)]
    assert merges(rows) == {5: (3, REASON_TITLE), 7: (3, REASON_TITLE)}


def test_story_dedup_input_errors() -> None:
    with pytest.raises(ValueError, match="missing columns: title"):
        find_duplicate_stories(pd.DataFrame([story(1)]).drop(columns=["title"]))
    with pytest.raises(ValueError, match="repeated stories_id"):
        find_duplicate_stories(pd.DataFrame([story(1), story(1)]))
    empty = find_duplicate_stories(
        pd.DataFrame(columns=["stories_id", "media_id", "url", "title", "publish_date"])
    )
    assert list(empty.columns) == ["stories_id", "keep_stories_id", "reason"] and empty.empty


# ----------------------------------------------------------------------------------------- media dedup


def test_media_merge_plan_matches_by_url_guid_title_or_moves() -> None:
    rows = [
        # final medium 3 (medium 1 -> 2 -> 3)
        story(10, media_id=3, url="https://www.final.com/2024/a.html", guid="final-a"),
        story(
            11,
            media_id=3,
            url="https://final.com/2024/b.html",
            guid="urn:b",
            title=LONG_TITLE,
            sentence_count=3,
        ),
        story(
            12,
            media_id=3,
            url="https://final.com/2024/c.html",
            guid="urn:c",
            title=LONG_TITLE,
            sentence_count=8,
        ),
        # stories in duplicate media
        story(20, media_id=1, url="http://final.com/2024/a.html", guid="x1"),  # lossy URL match
        story(21, media_id=2, url="https://old.com/p/1", guid="https://final.com/2024/b.html"),  # guid = url
        story(22, media_id=1, url="https://old.com/p/2", guid="y", title=LONG_TITLE),  # title and day
        story(23, media_id=2, url="https://old.com/p/3", guid="z"),  # nothing: moved
    ]
    plan = plan_media_merges(pd.DataFrame(rows), {1: 2, 2: 3, 3: None}).set_index("stories_id")
    assert plan.loc[20, ["action", "keep_stories_id", "match"]].tolist() == ["merge", 10, "url"]
    assert plan.loc[21, ["action", "keep_stories_id", "match"]].tolist() == ["merge", 11, "url"]
    # two title matches: the one with more text wins
    assert plan.loc[22, ["action", "keep_stories_id", "match"]].tolist() == ["merge", 12, "title and day"]
    assert plan.loc[23, "action"] == "move" and pd.isna(plan.loc[23, "keep_stories_id"])
    assert set(plan["final_media_id"]) == {3} and len(plan) == 4


def test_media_merge_plan_refuses_cycles() -> None:
    with pytest.raises(DuplicateMediaCycleError):
        plan_media_merges(pd.DataFrame([story(1)]), {1: 2, 2: 1})


# ------------------------------------------------------------------------------------- applying merges


def test_remap_links_conserves_cross_media_links() -> None:
    media = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c", 6: "d"}
    merge_map = {2: 1, 5: 4}  # within-medium duplicates
    links = pd.DataFrame(
        {
            "stories_id": [1, 2, 3, 3, 2, 6, 4, 6, 5],
            "ref_stories_id": [3, 3, 2, 1, 1, 5, 5, None, 4],
            "url": ["u3", "u3", "u2", "u1", "u1", "u5", "u5", "u9", "u4"],
        }
    )
    out = remap_links(links, merge_map)
    final = resolve_merge_map(merge_map)

    def cross_media_pairs(frame: pd.DataFrame, mapping: dict[int, int]) -> set[tuple[int, int]]:
        pairs = set()
        for s, r in zip(frame["stories_id"], frame["ref_stories_id"], strict=True):
            if pd.notna(r):
                s, r = mapping.get(s, s), mapping.get(int(r), int(r))
                if media[s] != media[r]:
                    pairs.add((s, r))
        return pairs

    assert cross_media_pairs(out, {}) == cross_media_pairs(links, final)
    assert cross_media_pairs(out, {}) == {(1, 3), (3, 1), (6, 4)}
    # 2 -> 1 and 4 <-> 5 became self-loops by the merge and are gone; the repeated 1 -> 3 (url u3) is kept once
    assert not ((out["stories_id"] == out["ref_stories_id"]) & out["ref_stories_id"].notna()).any()
    assert sorted(out.loc[out["stories_id"] == 1, "url"]) == ["u3"]
    # the unresolved link is kept as it was
    assert out["ref_stories_id"].isna().sum() == 1
    assert set(out["stories_id"]) <= {1, 3, 4, 6}


def test_remap_links_keeps_existing_self_loops_and_requires_columns() -> None:
    links = pd.DataFrame({"stories_id": [7], "ref_stories_id": [7], "url": ["self"]})
    assert len(remap_links(links, {8: 7})) == 1
    with pytest.raises(ValueError, match="ref_stories_id"):
        remap_links(pd.DataFrame({"stories_id": [1]}), {})


def test_merged_story_keeps_the_smallest_iteration() -> None:
    assert merged_iteration({1: 3, 2: 1, 3: 0, 4: 2}, {1: 2, 3: 2}) == {2: 0, 4: 2}
    # a survivor that was not yet in the topic takes the merged stories' iteration
    assert merged_iteration({5: 4}, {5: 9}) == {9: 4}


# ---------------------------------------------------------------------------------------------- title parts


def test_title_variants_merge_within_medium_and_day() -> None:
    # "Washington Post: Nunes Releases FISA Memo" is the same story as "Nunes Releases FISA Memo" (the example
    # of Media Cloud's topic-mining documentation)
    rows = [
        story(1, title="Washington Post: Nunes Releases FISA Memo", medium_name="washingtonpost.com"),
        story(2, title="Nunes Releases FISA Memo", medium_name="washingtonpost.com", sentence_count=20),
        story(3, title="Nunes Releases FISA Memo - The Washington Post", medium_name="washingtonpost.com"),
        story(4, title="Nunes Releases FISA Memo", media_id=2),  # another medium
        story(5, title="Nunes Releases FISA Memo", publish_date="2024-01-05T12:00:00Z"),  # another day
    ]
    assert merges(rows) == {1: (2, REASON_TITLE), 3: (2, REASON_TITLE)}


def test_title_part_rule_without_a_medium_name_uses_the_counted_site_parts() -> None:
    # The medium's name is unknown, but "The Daily Bugle" ends its titles on several days: a site part.
    site_titles = [
        story(10 + day, title=f"Story number {day} of the week in town | The Daily Bugle",
              publish_date=f"2024-01-{day:02d}T09:00:00Z")
        for day in range(3, 7)
    ]  # fmt: skip
    variants = [
        story(1, title="Mayor Opens The New Bridge | The Daily Bugle"),
        story(2, title="Breaking: Mayor Opens The New Bridge"),
        story(3, title="Mayor opens the new bridge to traffic after years of delay"),  # other words: kept
    ]
    assert merges(site_titles + variants) == {2: (1, REASON_TITLE)}


def test_a_part_shared_without_a_solo_title_does_not_merge() -> None:
    # Media Cloud's rule needs one story whose whole title is the part: two stories that merely share a
    # section-like part ("Live updates") on a day are different stories.
    rows = [
        story(1, title="Live updates: Storm hits the northern coast overnight"),
        story(2, title="Live updates: Markets fall as rates rise again"),
    ]
    assert merges(rows) == {}


def test_publisher_day_with_utc_offset_decides_the_same_day() -> None:
    # 23:30 and 00:30 in Tokyo on the 13th: the same day for the publisher (in UTC the 13th and the 12th);
    # 00:30 on the 14th in Tokyo is the next day (in UTC still the 13th). The earlier story survives.
    rows = [
        story(1, title=LONG_TITLE, publish_date="2024-01-13T14:30:00Z", publish_utc_offset=540),
        story(
            2, title=LONG_TITLE, publish_date="2024-01-12T15:30:00Z", publish_utc_offset=540
        ),  # 13th 00:30 JST
        story(
            3, title=LONG_TITLE, publish_date="2024-01-13T15:30:00Z", publish_utc_offset=540
        ),  # 14th 00:30 JST
    ]
    assert merges(rows) == {1: (2, REASON_TITLE)}
